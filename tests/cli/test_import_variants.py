"""Variants of the shipped formats: a failed Harbor trial, inconsistent main-line and ablation
files, a missing registry."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLES, Cli

TRIAL = (
    EXAMPLES / "public/benchflow-ai/skillsbench-trajectories/claude-opus-4-5-0126-wenbo/"
    "claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920"
)
MAINLINE = (
    EXAMPLES / "public/benchflow-ai/benchflow/tests/fixtures/"
    "branch_tree_claude/claude-continue/hello-world-task__0000abcd"
)
ABLATE_OUT = EXAMPLES / "pr-layout" / "ablate-2026-11-02__10-15-00"


def facts(run_cli: Cli, kind: str) -> list[dict[str, Any]]:
    rows = (json.loads(line) for line in run_cli("log", "--format", "jsonl").stdout.splitlines())
    return [row["fact"] for row in rows if row["type"] == kind]


def edit_json(path: Path, change: Any) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document, indent=2))


def test_a_harbor_trial_that_raised_is_recorded_as_failed(run_cli: Cli, tmp_path: Path) -> None:
    trial = tmp_path / "job" / "trial__1"
    shutil.copytree(TRIAL, trial)
    (trial / "verifier" / "ctrf.json").unlink()
    edit_json(
        trial / "result.json",
        lambda r: r.update(
            verifier_result=None,
            exception_info={
                "exception_type": "AgentTimeoutError",
                "exception_message": "Agent execution timed out after 900 seconds",
            },
        ),
    )
    run_cli("import", str(trial))
    assert facts(run_cli, "run.scored") == []
    [failed] = facts(run_cli, "run.failed")
    assert (failed["run"], failed["error"], failed["category"]) == (
        "job/trial__1",
        "Agent execution timed out after 900 seconds",
        "AgentTimeoutError",
    )
    assert facts(run_cli, "run.finished")[0]["status"] == "failed"


def test_a_mainline_observation_that_disagrees_with_the_tree_is_refused(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = tmp_path / "claude-continue" / MAINLINE.name
    shutil.copytree(MAINLINE, run)
    edit_json(
        run / "branches/00000000000000000000000000000002/children/n9/observation.json",
        lambda o: o.update(reward=1.0),
    )
    result = run_cli("import", str(run), ok=False)
    assert result.exit_code == 1
    assert (
        "n9/observation.json: field reward: expected 0.0, the "
        "reward tree.json records for node 'n9', found 1.0" in result.stderr
    )
    assert run_cli("log", "--format", "jsonl").stdout == ""


def test_an_ablation_copy_of_the_stage_entry_must_equal_the_registry(
    run_cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / ABLATE_OUT.name
    shutil.copytree(ABLATE_OUT, out)
    edit_json(out / "ablation.json", lambda a: a["stage_snapshot"].update(exchanges_completed=7))
    result = run_cli("import", str(out), ok=False)
    assert result.exit_code == 1
    assert "ablation.json: field stage_snapshot: expected an exact copy of" in result.stderr
    assert "stage_snapshots.json: field stages.env-ready" in result.stderr


def test_without_a_registry_stages_come_from_ablation_json_and_the_tree(
    run_cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / ABLATE_OUT.name
    shutil.copytree(ABLATE_OUT, out)
    (out / "ablation" / "csv-dedupe" / "stage_snapshots.json").unlink()
    run_cli("import", str(out))
    marks = {m["stage"]: m for m in facts(run_cli, "stage.marked")}
    assert (marks["env-ready"]["node"], marks["env-ready"]["sandbox_ref"]) == (
        "root",
        "bf-snap-csv-dedupe-a41c07e95b2d",
    )
    assert (marks["pre-verify"]["node"], marks["pre-verify"]["exchanges_completed"]) == ("n1", None)
    assert [e["ref"] for e in facts(run_cli, "snapshot.exported")] == [
        "bf-snap-csv-dedupe-a41c07e95b2d"
    ]


def test_a_tree_stage_missing_from_the_registry_is_refused(run_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / ABLATE_OUT.name
    shutil.copytree(ABLATE_OUT, out)
    edit_json(
        out / "ablation" / "csv-dedupe" / "stage_snapshots.json",
        lambda r: r["stages"].pop("pre-verify"),
    )
    result = run_cli("import", str(out), ok=False)
    assert (
        "tree.json: field nodes[1].stage: expected a stage recorded in stage_snapshots.json"
        in result.stderr
    )

"""Hostile run directories: each is refused with an error naming the file, field and reason, and the
log is unchanged."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from rollout_lineage.adapters import rundir
from tests.conftest import EXAMPLES, Cli

NIGHTLY = EXAMPLES / "pr-layout" / "jobs" / "nightly" / "csv-dedupe__7c1f2a90"
HARBOR = EXAMPLES / "public" / "benchflow-ai" / "skillsbench-trajectories"


def edit_json(path: Path, change: Callable[[dict], None]) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document, indent=2))


def malformed_tree(run: Path) -> None:
    (run / "tree.json").write_text(
        '{\n  "schema_version": 1,\n  "nodes": [\n    {"id": "root", "parent": null,\n'
    )


def node_without_id(run: Path) -> None:
    edit_json(run / "tree.json", lambda tree: tree["nodes"][1].pop("id"))


def unknown_schema_version(run: Path) -> None:
    edit_json(run / "stage_snapshots.json", lambda registry: registry.update(schema_version=2))


def provenance_links_out(run: Path) -> None:
    outside = run.parent.parent.parent / "elsewhere.json"
    outside.write_text((run / "branches/n2/children/n3/provenance.json").read_text())
    (run / "branches/n2/children/n3/provenance.json").unlink()
    os.symlink(outside, run / "branches/n2/children/n3/provenance.json")


def reward_for_an_unknown_node(run: Path) -> None:
    (run / "branches/n2/children/n9").mkdir()
    (run / "branches/n2/children/n9/reward.json").write_text('{"reward": 1.0}\n')


def reward_that_disagrees(run: Path) -> None:
    (run / "branches/n2/children/n3/reward.json").write_text('{"reward": 0.25}\n')


def value_that_is_not_the_mean(run: Path) -> None:
    edit_json(run / "tree.json", lambda tree: tree["nodes"][2].update(value=0.75))


HOSTILE = {
    "malformed JSON": (
        malformed_tree,
        r"csv-dedupe__7c1f2a90/tree\.json, line 5, column 1: expected valid JSON",
    ),
    "missing required field": (
        node_without_id,
        r"tree\.json: field nodes\[1\]\.id: expected this field \(it is required\)",
    ),
    "unknown schema_version": (
        unknown_schema_version,
        r"stage_snapshots\.json: field schema_version: expected 1, found 2",
    ),
    "link out of the run": (
        provenance_links_out,
        r"n3/provenance\.json: expected a file inside .*csv-dedupe__7c1f2a90, found a link that "
        r"resolves to .*elsewhere\.json outside it",
    ),
    "reward for an unknown node": (
        reward_for_an_unknown_node,
        r"children/n9/reward\.json: expected a reward for a branch child of node 'n2' in "
        r".*tree\.json, found one for node 'n9', which that tree does not have",
    ),
    "reward that disagrees": (
        reward_that_disagrees,
        r"n3/reward\.json: field reward: expected the reward .*tree\.json records for node 'n3' "
        r"\(1\.0\), found 0\.25",
    ),
    "value that is not the mean": (
        value_that_is_not_the_mean,
        r"tree\.json: field nodes\[2\]\.value: expected 0\.5, the mean",
    ),
}


@pytest.fixture
def seeded(run_cli: Cli) -> str:
    """A log that already holds a run, so 'unchanged' is about a real head."""
    run_cli("import", str(HARBOR))
    return run_cli("head").stdout


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_run_is_refused_whole_and_the_log_is_unchanged(
    run_cli: Cli, seeded: str, tmp_path: Path, case: str
) -> None:
    corrupt, expected = HOSTILE[case]
    run = tmp_path / "jobs" / "nightly" / NIGHTLY.name
    shutil.copytree(NIGHTLY, run)
    corrupt(run)
    result = run_cli("import", str(run), ok=False)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1].startswith("Error: ") and re.search(
        expected, result.stderr
    ), result.stderr
    assert "nothing was appended for this run" in result.stderr
    assert run_cli("head").stdout == seeded


def test_a_file_above_the_size_cap_is_refused(
    run_cli: Cli, seeded: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "jobs" / "nightly" / NIGHTLY.name
    shutil.copytree(NIGHTLY, run)
    monkeypatch.setattr(rundir, "MAX_JSON_BYTES", 1024)
    result = run_cli("import", str(run), ok=False)
    assert result.exit_code == 1
    # result.json is read first: whether it is one JSON object decides what the folder is
    assert (
        "result.json: expected a JSON file of at most 1024 bytes, found 3002 bytes" in result.stderr
    )
    assert run_cli("head").stdout == seeded


def test_keep_going_imports_the_other_runs_and_exits_1_with_a_summary(
    run_cli: Cli, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    bad = jobs / "nightly" / "a-bad-run"
    shutil.copytree(NIGHTLY, bad)
    malformed_tree(bad)
    shutil.copytree(NIGHTLY, jobs / "nightly" / NIGHTLY.name)
    # sorts after the bad run, so a plain import stops before it
    shutil.copytree(HARBOR, jobs / "zz-harbor")

    stopped = run_cli("import", str(jobs), ok=False)
    assert (
        stopped.exit_code == 1
        and "Error: " in stopped.stderr
        and "a-bad-run/tree.json, line 5" in stopped.stderr
    )
    assert (
        "0 runs, 0 forks, 0 children, 0 events appended "
        "(0 runs new, 0 with new facts, 0 already known), 1 runs rejected" in stopped.stderr
    )
    assert run_cli("log", "--format", "jsonl").stdout == ""

    going = run_cli("import", "--keep-going", str(jobs), ok=False)
    assert going.exit_code == 1
    assert (
        "rejected: " in going.stderr
        and "a-bad-run/tree.json, line 5, column 1: expected valid JSON" in going.stderr
    )
    assert "2 runs, 1 forks, 2 children" in going.stderr and "1 runs rejected" in going.stderr
    runs = {
        json.loads(line)["fact"]["run"]
        for line in run_cli("log", "--format", "jsonl").stdout.splitlines()
        if json.loads(line)["type"] == "run.registered"
    }
    assert runs == {
        "nightly/csv-dedupe__7c1f2a90",
        "claude-opus-4-5-0126-wenbo/claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920",
    }


def test_a_contradiction_with_the_log_rejects_the_run_and_names_it(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = tmp_path / "jobs" / "nightly" / NIGHTLY.name
    shutil.copytree(NIGHTLY, run)
    run_cli("import", str(run))
    head = run_cli("head").stdout
    edit_json(run / "result.json", lambda result: result["rewards"].update(reward=0.5))
    result = run_cli("import", str(run), ok=False)
    assert result.exit_code == 1
    assert (
        "run 'nightly/csv-dedupe__7c1f2a90'" in result.stderr
        and "reward: recorded 0.0, now 0.5" in result.stderr
    )
    assert run_cli("head").stdout == head


def test_a_result_json_linked_out_of_an_unreadable_run_is_refused_not_read(
    run_cli: Cli, tmp_path: Path
) -> None:
    """A run directory discovery cannot classify (a file does not parse) may be one still being
    written; deciding that read its result.json through a link out of the directory (an attack
    review's find). Now the link is refused as it is everywhere else, and nothing is appended."""
    source = next(
        (EXAMPLES / "public").rglob("claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-*")
    )
    run = tmp_path / "run"
    shutil.copytree(source, run)
    (run / "config.json").write_text('{"broken')
    outside = tmp_path / "outside.json"
    # Not JSON: read through the link, it made the run look half-written (left out, exit 0).
    outside.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (run / "result.json").unlink()
    (run / "result.json").symlink_to(outside)
    head = run_cli("head", ok=False).stdout
    result = run_cli("import", str(run), ok=False)
    assert result.exit_code == 1 and "found a link that resolves to" in result.stderr
    assert "may still be" not in result.stderr + result.stdout
    assert run_cli("head", ok=False).stdout == head

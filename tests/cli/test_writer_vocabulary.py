"""Rule 5: benchflow's own words for skill modes, trajectory sources, request-global errors and a
branch aggregate.

Each run directory is built the way `_build_rollout_result` (benchflow rollout/_results.py) writes
result.json, called from `Rollout._build_result` (rollout/__init__.py), and imported through the CLI
into a real SQLite store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.writer_runs import benchflow_run

RUN = "nightly/csv-dedupe__5e0d1c2b"


def run_row(run_cli: Cli, *columns: str) -> dict[str, Any]:
    [row] = json.loads(
        run_cli(
            "sql", f"SELECT {', '.join(columns)} FROM runs WHERE run = '{RUN}'", "--format", "json"
        ).stdout
    )
    return row


def audit(run_cli: Cli) -> dict[str, Any]:
    result = run_cli("audit", "--format", "json", ok=False)
    assert result.exit_code in (0, 10, 11), result.output
    return json.loads(result.stdout)


def run_reasons(report: dict[str, Any]) -> list[str]:
    return [finding["message"] for finding in report["findings"] if finding.get("run") == RUN]


def test_a_self_gen_run_keeps_its_skill_mode(run_cli: Cli, tmp_path: Path) -> None:
    # `_build_rollout_result` records `RolloutConfig.recorded_skill_mode`, which is "self-gen"
    # (skill_policy.SKILL_MODE_SELF_GEN) when a creator agent wrote the skills first.
    run_cli("import", str(benchflow_run(tmp_path, skill_mode="self-gen")))
    assert run_row(run_cli, "skill_mode")["skill_mode"] == "self-gen"


@pytest.mark.parametrize("source", ["acp", "partial_acp", "scraped", "hosted_env"])
def test_every_trajectory_source_benchflow_writes_is_kept(
    run_cli: Cli, tmp_path: Path, source: str
) -> None:
    # `Rollout._trajectory_source`: "acp", "partial_acp" (`_capture_partial_acp_trajectory`),
    # "scraped" (logs scraped after the session), "hosted_env" (hosted_env.py evidence).
    run_cli("import", str(benchflow_run(tmp_path, trajectory_source=source)))
    assert run_row(run_cli, "trajectory")["trajectory"] == source


def test_an_unknown_trajectory_source_is_refused_with_the_words_benchflow_uses(
    run_cli: Cli, tmp_path: Path
) -> None:
    result = run_cli(
        "import", str(benchflow_run(tmp_path, trajectory_source="telepathy")), ok=False
    )
    assert result.exit_code == 1
    assert (
        "result.json: field trajectory_source: expected one of ['acp', 'scraped', 'partial_acp', "
        "'hosted_env'] or null, found 'telepathy'" in result.stderr
    )


def test_a_request_global_error_category_is_a_request_global_failure(
    run_cli: Cli, tmp_path: Path
) -> None:
    # `_build_rollout_result` writes `error_category = classify_error(error)`; a request-global
    # configuration error (e.g. an unsupported reasoning effort) classifies as "request_global".
    error = "unsupported reasoning effort 'max' for model gemini-3.1-flash-lite-preview"
    run_cli(
        "import",
        str(benchflow_run(tmp_path, rewards=None, error=error, error_category="request_global")),
    )
    row = run_row(run_cli, "outcome", "error_category", "request_global")
    assert row == {"outcome": "failed", "error_category": "request_global", "request_global": True}
    assert f"request-global configuration error: {error}" in " ".join(run_reasons(audit(run_cli)))


def test_a_branch_aggregate_parent_was_never_verified_itself(run_cli: Cli, tmp_path: Path) -> None:
    # `Rollout._build_result` in phase "branched" with no linear rewards reports the cursor's V as
    # rewards = {"reward": V, "source": "branch_aggregate"}: the children verified, the parent did
    # not.
    run_cli(
        "import",
        str(benchflow_run(tmp_path, rewards={"reward": 0.5, "source": "branch_aggregate"})),
    )
    row = run_row(run_cli, "outcome", "reward", "branch_value")
    assert row == {"outcome": "branch_aggregate", "reward": None, "branch_value": 0.5}
    report = audit(run_cli)
    assert report["verdict"] != "publishable"
    assert any(
        "not verified itself: its result reports the branch aggregate V=0.5" in message
        for message in run_reasons(report)
    )
    [scored] = [
        json.loads(line)["fact"]
        for line in run_cli("log", "--format", "jsonl").stdout.splitlines()
        if json.loads(line)["type"] == "run.scored"
    ]
    assert scored["basis"] == "branch_aggregate" and scored["rewards"] == {
        "reward": 0.5,
        "source": "branch_aggregate",
    }


def test_a_run_scored_by_its_own_verifier_is_healthy(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("import", str(benchflow_run(tmp_path)))
    assert run_row(run_cli, "outcome", "reward", "branch_value") == {
        "outcome": "scored",
        "reward": 1.0,
        "branch_value": None,
    }
    # The run mirrors only what the verdict needs; the release gate's evidence files are another
    # test's business.
    gate_evidence = ("missing required artifact", "token usage", "tool usage")
    assert [
        r for r in run_reasons(audit(run_cli)) if not any(part in r for part in gate_evidence)
    ] == []


def test_history_says_what_the_writer_meant(run_cli: Cli, tmp_path: Path) -> None:
    run_cli(
        "import",
        str(
            benchflow_run(
                tmp_path,
                rewards={"reward": 0.5, "source": "branch_aggregate"},
                error="bad effort",
                error_category="request_global",
            )
        ),
    )
    lines = run_cli("history", RUN).stdout
    assert "run reports the branch aggregate V=0.5, not verified itself" in lines
    assert "run failed (request_global, request-global): bad effort" in lines

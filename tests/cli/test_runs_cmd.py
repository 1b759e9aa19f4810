"""`lineage runs`: every run with its task, agent, model, outcome, reward, forks and registration
time, filtered."""

from __future__ import annotations

import json

from tests.conftest import EXAMPLES, Cli


def runs(run_cli: Cli, *args: str) -> list[dict]:
    return json.loads(run_cli("runs", *args, "--format", "json").stdout)


def test_runs_lists_and_filters_the_imported_runs(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES))
    every = runs(run_cli)
    assert len(every) == 10 and {row["outcome"] for row in every} == {"scored"}
    ablate = next(row for row in every if row["run"].startswith("ablate-"))
    assert (ablate["task"], ablate["agent"], ablate["forks"], ablate["reward"]) == (
        "csv-dedupe",
        "claude-agent-acp",
        1,
        0.0,
    )
    assert {row["task"] for row in runs(run_cli, "--task", "csv-dedupe")} == {"csv-dedupe"}
    assert [row["agent"] for row in runs(run_cli, "--agent", "claude-code")] == ["claude-code"]
    assert runs(run_cli, "--since", "2030-01-01T00:00:00Z") == []
    assert len(runs(run_cli, "--since", "2026-11-03T00:00:00Z")) == 7  # the publishable batch too
    assert runs(run_cli, "--outcome", "failed") == []


def test_a_run_not_yet_scored_is_pending(run_cli: Cli) -> None:
    run_cli(
        "ingest",
        "-",
        input=json.dumps({"type": "run.registered", "run": "j/t__1", "task": "t"}) + "\n",
    )
    [row] = runs(run_cli)
    assert (row["run"], row["outcome"], row["forks"]) == ("j/t__1", "pending", 0)


def test_runs_refuses_a_time_it_cannot_read(run_cli: Cli) -> None:
    result = run_cli("runs", "--since", "yesterday", ok=False)
    assert result.exit_code == 1 and "--since" in result.stderr

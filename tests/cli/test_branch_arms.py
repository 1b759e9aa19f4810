"""Retries are no arms, and cost stands beside reward: today's benchflow trials (written as its
writers write them, tests/branch_writer.py) through `lineage arms`, `--stats`, `tree`, `history`,
`export ablation`, `report` and `lineage serve`'s run page and branch route."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from rollout_lineage.adapters.web.app import build_app
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.serve_cmds import ChainChecks, allowed_hosts
from rollout_lineage.projections.reports.served_reads import ServedReads
from rollout_lineage.settings import Settings
from tests.branch_writer import BranchTrial, Child, Fork, native_usage
from tests.conftest import Cli

JOB = "2026-12-01__10-00-00"


def retried_trial(jobs: Path, trial_id: str = "a1b2c3d4", *, usd: bool = True) -> BranchTrial:
    """An ablation-like fork (two named arms, each child's USD known or not), then a checkpoint
    retry of the failed trial."""
    trial = BranchTrial(jobs, JOB, "fix-bug", trial_id)
    trial.execute(2)
    trial.after_prompt(1)
    trial.execute(2)
    trial.branch(
        Fork(
            [
                Child("baseline", reward=0.0, usage=native_usage(4000, 0.5 if usd else None)),
                Child("hint", reward=1.0, usage=native_usage(6000, 0.25)),
            ]
        )
    )
    trial.finalize(0.0)
    trial.retry(Child(reward=1.0, usage=native_usage(5000), seconds=80.0))
    return trial


def rows(run_cli: Cli, *args: str) -> list[dict[str, Any]]:
    return json.loads(run_cli(*args, "--format", "json").stdout)


def test_a_retry_is_never_an_arm_and_each_arm_shows_its_cost(run_cli: Cli, tmp_path: Path) -> None:
    trial = retried_trial(tmp_path / "jobs", usd=False)
    run_cli("import", str(trial.dir))
    run = f"{JOB}/{trial.name}"
    table = rows(run_cli, "arms", run)
    assert [row["arm"] for row in table] == ["parent", "baseline", "hint"]  # no "retry"
    parent, baseline, hint = table
    assert (baseline["tokens"], baseline["usd"], baseline["sandbox_seconds"]) == (4000, None, 60.0)
    assert (hint["tokens"], hint["usd"], hint["sandbox_seconds"]) == (6000, 0.25, 60.0)
    assert parent["tokens"] is None
    [retry] = [
        f["fork"] for f in rows(run_cli, "sql", "SELECT fork FROM forks WHERE kind = 'retry'")
    ]
    text = run_cli("arms", run, "--format", "table").stdout
    assert "unknown" in text and f"arms): {retry}" in text  # the legend: retries (not arms)
    refused = run_cli("arms", f"{run}:{retry}", ok=False)
    assert refused.exit_code == 1 and "checkpoint retry" in refused.stderr
    refused = run_cli("export", "ablation", f"{run}:{retry}", ok=False)
    assert refused.exit_code == 1 and "no arms to ablate" in refused.stderr


def test_arm_statistics_pool_cost_and_leave_retries_out(run_cli: Cli, tmp_path: Path) -> None:
    for n, usd in enumerate((True, False, True)):
        run_cli("import", str(retried_trial(tmp_path / "jobs", f"a1b2c3d{n}", usd=usd).dir))
    stats = {
        row["arm"]: row for row in rows(run_cli, "arms", f"{JOB}/fix-bug__a1b2c3d0", "--stats")
    }
    assert set(stats) == {"baseline", "hint"}
    assert (stats["hint"]["trials"], stats["hint"]["tokens"]) == (3, 18000)
    assert stats["hint"]["usd"] == 0.75 and stats["hint"]["sandbox_seconds"] == 180.0
    assert stats["baseline"]["usd"] is None  # one run's provider reported no price: unknown, not 0
    table = run_cli("arms", f"{JOB}/fix-bug__a1b2c3d0", "--stats", "--format", "table").stdout
    assert "unknown" in table
    charted = run_cli(
        "sql", "SELECT DISTINCT fork_kind FROM children ORDER BY 1", "--format", "csv"
    )
    assert charted.stdout.split() == ["fork_kind", "fork", "retry"]


def test_tree_history_and_report_show_the_retry_as_a_retry(run_cli: Cli, tmp_path: Path) -> None:
    trial = retried_trial(tmp_path / "jobs")
    run_cli("import", str(trial.dir))
    run = f"{JOB}/{trial.name}"
    tree = run_cli("tree", run).stdout
    assert "retry (failure) from prompt:1: " in tree and "not an arm" in tree
    assert "5000 tokens · USD unknown · 80.0 sandbox-s" in tree
    child = rows(run_cli, "sql", "SELECT node FROM children WHERE fork_kind = 'retry'")[0]["node"]
    history = run_cli("history", f"{run}:{child}").stdout
    assert "from checkpoint prompt:1" in history and "not an arm" in history
    assert "retry completed (reward 1.0, beside the trial's own)" in history
    run_cli("report", run, "--to", str(tmp_path / "report.html"))
    page = (tmp_path / "report.html").read_text()
    assert "retry (failure) from prompt:1" in page
    assert "completed: reward 1.0 (the trial&#x27;s own reward stands)" in page


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, Cli, str]]:
    home = tmp_path / "home"
    cli = Cli(home)
    cli("init")
    trial = retried_trial(tmp_path / "jobs", usd=False)
    nested = BranchTrial(tmp_path / "jobs", JOB, "task", "abc00000")
    nested.execute(4)
    nested.branch(
        Fork(
            [
                Child(
                    "hint",
                    reward=0.0,
                    forks=[Fork([Child("fix"), Child("leave", reward=0.0)], isolated=True)],
                    snapshot_start={
                        "agent": "reused",
                        "verifier_baseline": "recaptured",
                        "setup_commands": "skipped",
                    },
                ),
                Child("baseline"),
            ],
            isolated=True,
            concurrency=2,
        )
    )
    nested.finalize(1.0)
    cli("import", str(tmp_path / "jobs"))
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab"), may_create=False) as store:
        reads = ServedReads(store, ChainChecks(store))
        app = build_app(reads, token=None, allowed_hosts=allowed_hosts("127.0.0.1"))
        try:
            with TestClient(app, base_url="http://127.0.0.1:8321") as client:
                yield client, cli, f"{JOB}/{trial.name}"
        finally:
            reads.close()


def test_serve_answers_the_branch_view_at_the_route_benchflow_suggests(
    served: tuple[TestClient, Cli, str],
) -> None:
    client, cli, run = served
    for name in (run, f"{JOB}/task__abc00000"):
        answer = client.get(f"/api/runs/{name}/branches")
        assert answer.status_code == 200
        assert answer.json() == json.loads(cli("export", "branch-view", name).stdout)
    assert client.get(f"/api/runs/{run}").json()["run"]["run"] == run  # the run's own route stays
    missing = client.get("/api/runs/no-such-run/branches")
    assert missing.status_code == 404 and "no-such-run" in missing.json()["error"]


def test_the_run_page_shows_forks_by_depth_retries_apart_and_costs(
    served: tuple[TestClient, Cli, str],
) -> None:
    client, _cli, run = served
    page = client.get(f"/runs/{run}").text
    assert "Retries (re-runs of the finished trial, not arms)" in page
    assert "Retry (failure) from prompt:1" in page
    assert "Retry from prompt:1 (failure): completed, reward 1.0; trial reward 0.0" in page
    assert "5000 tokens · USD unknown · 80.0 sandbox-s" in page  # the retry fork's cost
    assert "4000" in page and "<td>unknown</td>" in page  # an arm's tokens, its USD unknown
    nested = client.get(f"/runs/{JOB}/task__abc00000").text
    assert "Forks at depth 1" in nested and "Forks at depth 2" in nested
    assert "forked from hint" in nested
    assert "recaptured: tampering before the fork is not undone" in nested
    arms = client.get(f"/arms/{run}").text
    assert ">retry<" not in arms and "<th>usd</th>" in arms
    charts = client.get("/api/charts").json()
    assert "retry" not in {arm["arm"] for arm in charts["arms"]}
    assert "retry" not in charts["grid"]["arms"]

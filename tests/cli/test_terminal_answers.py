"""Every answer at the terminal right, round four (issue #37): names, outcomes, counts,
continuations, snapshots and docs, each through the CLI on real files. The findings that need a
real process (pipes, terminals, Ctrl-C, a fresh virtual environment) are in
`test_terminal_processes.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.settings import Settings
from tests.conftest import EXAMPLES, Cli

ABLATE = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
SOURCE = "nightly/csv-dedupe__7c1f2a90"
CONTINUED = "nightly/csv-dedupe__7c1f2a90__continued"


def opened(cli: Cli) -> Lineage:
    """The store `cli` writes, opened as `lineage serve` opens it."""
    return Lineage(Settings.from_env({}, home=cli.home, actor="tester@lab"), may_create=False)


@pytest.fixture
def examples(run_cli: Cli) -> Cli:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    return run_cli


# --- names: one resolver, exact names before prefixes -----------------------------------------


def test_an_exact_last_path_part_names_its_run_though_another_starts_with_it(
    examples: Cli,
) -> None:
    """`…__continued` starts with `csv-dedupe__7c1f2a90`, which is still one run's exact last
    path part: it names that run, in every command."""
    tree = examples("tree", "csv-dedupe__7c1f2a90", "--format", "json").stdout
    assert json.loads(tree)["run"] == SOURCE
    cut = examples("cut-point", "csv-dedupe__7c1f2a90", "--format", "json").stdout
    assert json.loads(cut)["run"] == SOURCE
    history = examples("history", "csv-dedupe__7c1f2a90:n1", "--format", "json").stdout
    assert SOURCE in history
    # a prefix of both is still refused, with the runs it could mean
    both = examples("tree", "csv-dedupe__7c1f", ok=False)
    assert both.exit_code == 1 and SOURCE in both.stderr and CONTINUED in both.stderr


def test_bundle_write_and_snapshots_take_the_names_every_command_takes(
    examples: Cli, tmp_path: Path
) -> None:
    written = examples("bundle", "write", "ablate", "--to", str(tmp_path / "b"))
    assert written.exit_code == 0, written.stderr
    assert json.loads((tmp_path / "b").read_text())["runs"] == [ABLATE]
    examples("bundle", "csv-dedupe__7c1f2a90", "--to", str(tmp_path / "c"))
    assert json.loads((tmp_path / "c").read_text())["runs"] == [SOURCE]
    listed = examples("snapshots", "list", "--run", "ablate", "--format", "json").stdout
    assert {row["run"] for row in json.loads(listed)} == {ABLATE}
    unknown = examples("snapshots", "list", "--run", "no-such-run", ok=False)
    assert unknown.exit_code == 1 and "lineage runs" in unknown.stderr


def test_serve_resolves_a_run_as_the_commands_do(examples: Cli) -> None:
    from tests.cli.test_serve import client_for

    with opened(examples) as lineage, client_for(lineage) as client:
        for name in ("csv-dedupe__7c1f2a90", "ablate"):
            answer = client.get(f"/api/runs/{name}")
            assert answer.status_code == 200, answer.text
            assert answer.json()["run"]["run"] == {"ablate": ABLATE}.get(name, SOURCE)
        arms = client.get("/api/arms/csv-dedupe__7c1f2a90")
        assert arms.status_code == 200 and arms.json()["run"] == SOURCE, arms.text


# --- outcomes: one vocabulary for runs, filters and serve --------------------------------------


def test_runs_shows_the_glossary_status_and_runs_status_means_it(examples: Cli) -> None:
    from rollout_lineage.projections.read_models.outcome_words import STATUS_WORDS

    rows = json.loads(examples("runs", "--format", "json").stdout)
    status = {row["run"]: row["status"] for row in rows}
    assert status[ABLATE] == "fail" and status[CONTINUED] == "pass", status
    assert {row["outcome"] for row in rows} == {"scored"}
    words = examples("sql", "SELECT DISTINCT status FROM runs", "--format", "csv").stdout
    assert set(words.split()[1:]) <= set(STATUS_WORDS), words  # never "completed"
    finished = examples("sql", "SELECT finish_status FROM runs", "--format", "csv").stdout
    assert "completed" in finished
    passed = json.loads(examples("runs", "--status", "pass", "--format", "json").stdout)
    assert {row["run"] for row in passed} == {r for r, s in status.items() if s == "pass"}


@pytest.mark.parametrize(
    ("option", "typed", "said"),
    [
        ("--outcome", "scord", "did you mean 'scored'?"),
        ("--status", "passed", "did you mean 'pass'?"),
        ("--outcome", "pass", "filter on status"),
    ],
)
def test_an_unknown_outcome_or_status_is_refused_with_the_valid_ones(
    examples: Cli, option: str, typed: str, said: str
) -> None:
    result = examples("runs", option, typed, ok=False)
    assert result.exit_code == 1, result.output
    assert "scored, branch_aggregate, unscored, failed, pending" in result.stderr or (
        "pass, fail, error, skipped, pending" in result.stderr
    )
    assert said in result.stderr and result.stdout == ""


def test_serve_filters_on_the_same_words_and_refuses_others(examples: Cli) -> None:
    from tests.cli.test_serve import client_for

    with opened(examples) as lineage, client_for(lineage) as client:
        passed = client.get("/api/runs", params={"status": "pass"}).json()["runs"]
        assert {row["run"] for row in passed} == {CONTINUED}
        assert {row["status"] for row in passed} == {"pass"}
        typo = client.get("/api/runs", params={"outcome": "scord"})
        assert typo.status_code == 400 and "scored, branch_aggregate" in typo.text
        assert "status" in client.get("/runs").text


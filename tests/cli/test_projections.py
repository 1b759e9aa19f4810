"""Read models behind the CLI on real files: catch-up before reads, rebuilds, read-only SQL, lineage
macros, the read-model file lock (the in-memory catch-up and paging tests:
tests/unit/test_projections.py)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from rollout_lineage.adapters.duckdb_store import ReadModelDB
from rollout_lineage.adapters.importers.ctrf import parse_ctrf
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.main import cli
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.engine import runner
from rollout_lineage.projections.read_models.base import Projection
from rollout_lineage.projections.read_models.registry import PROJECTIONS
from rollout_lineage.settings import Settings
from tests.conftest import Cli
from tests.scenarios import ABLATE_RUN, ablate_run_facts, nightly_run_facts


@pytest.mark.slow
def test_runs_with_large_test_reports_are_read_under_a_small_memory_cap(tmp_path: Path) -> None:
    """Twenty runs scored with 10,000 tests each, their outcomes read from a CTRF report as
    benchflow's verifier writes it (`results.tests`, parsed by the importer's `parse_ctrf`). DuckDB
    parses a vector's facts together: read as one page, the 20 facts (about 6 MB of JSON) needed
    more than a 64 MB cap. Pages are now cut by the bytes they hold
    (`paging.READ_SHARE_OF_MEMORY`)."""
    report = {
        "results": {
            "tests": [
                {
                    "name": f"tests/test_suite.py::test_{i:05d}",
                    "status": "passed" if i % 3 else "failed",
                }
                for i in range(10_000)
            ]
        }
    }
    tests = parse_ctrf(report, "ctrf.json")
    home = tmp_path / "home"
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer:
        for i in range(20):
            run = f"ctrf/run-{i}"
            writer.record(
                [f.RunRegistered(run=run, task="t"), f.RunScored(run=run, reward=1.0, tests=tests)]
            )
    result = CliRunner().invoke(
        cli,
        [
            "--home",
            str(home),
            "sql",
            "SELECT count(*) AS n, count(DISTINCT run) AS runs FROM test_outcomes",
            "--format",
            "json",
        ],
        env={"LINEAGE_DUCKDB_MEMORY": "64MB"},
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert json.loads(result.stdout) == [{"n": 200_000, "runs": 20}]


def test_reads_catch_up_first_and_rebuild_changes_nothing(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    assert json.loads(
        run_cli("sql", "SELECT count(*) AS n FROM children", "--format", "json").stdout
    ) == [{"n": 4}]
    lineage.record([f.RunRegistered(run="late/run", task="t")])
    assert json.loads(
        run_cli("sql", "SELECT count(*) AS n FROM runs", "--format", "json").stdout
    ) == [{"n": 2}]
    before = run_cli("sql", "SELECT * FROM children ORDER BY ALL", "--format", "csv").stdout
    assert "rebuilt the read models" in run_cli("rebuild").stderr
    assert run_cli("sql", "SELECT * FROM children ORDER BY ALL", "--format", "csv").stdout == before


def test_a_projection_whose_version_changed_rebuilds_itself(
    lineage: Lineage, monkeypatch: pytest.MonkeyPatch
) -> None:
    lineage.record(ablate_run_facts())
    with lineage.read_models() as models:
        models.db.execute("DELETE FROM fork_children")  # damage that only a rebuild repairs
    bumped = tuple(
        Projection(**{**p.__dict__, "version": p.version + 1}) if p.name == "forks" else p
        for p in PROJECTIONS
    )
    monkeypatch.setattr(runner, "PROJECTIONS", bumped)
    with lineage.read_models() as models:
        assert models.db.scalar("SELECT count(*) FROM fork_children") == 4


def test_sql_refuses_writes_and_file_access(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    for statement in (
        "DELETE FROM events",
        "CREATE TABLE x (a INT)",
        "SELECT 1; DROP TABLE events",
        "COPY (SELECT 1) TO 'out.csv'",
        "ATTACH 'other.duckdb'",
    ):
        result = run_cli("sql", statement, ok=False)
        assert result.exit_code == 1 and "expected read-only statements" in result.stderr, statement
    result = run_cli("sql", "SELECT * FROM read_csv('/etc/passwd')", ok=False)
    assert result.exit_code == 1 and "refused" in result.stderr
    assert run_cli("sql", "SELECT nonsense FROM", ok=False).exit_code == 1


def test_output_formats(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    query = "SELECT arm, status, reward FROM children ORDER BY child_index"
    assert run_cli("sql", query, "--format", "csv").stdout.splitlines()[:2] == [
        "arm,status,reward",
        "with-skill,pass,1.0",
    ]
    assert json.loads(run_cli("sql", query, "--format", "jsonl").stdout.splitlines()[2]) == {
        "arm": "inject:prompts/hint.md",
        "status": "error",
        "reward": None,
    }
    assert run_cli("sql", query, "--format", "markdown").stdout.splitlines()[1] == "|---|---|---|"
    assert "no-skill" in run_cli("sql", query).stdout


def test_lineage_macros_walk_the_tree(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(nightly_run_facts())
    run = "nightly/csv-dedupe__7c1f2a90"

    def nodes(sql: str) -> list[str]:
        return [row["node"] for row in json.loads(run_cli("sql", sql, "--format", "json").stdout)]

    assert nodes(f"SELECT node FROM ancestors('{run}', 'n3') ORDER BY depth") == [
        "n3",
        "n2",
        "n1",
        "root",
    ]
    assert nodes(f"SELECT node FROM descendants('{run}', 'n1') ORDER BY depth, node") == [
        "n1",
        "n2",
        "n3",
        "n4",
    ]
    assert nodes(f"SELECT node FROM lineage_path('{run}', 'n3', 'n4')") == ["n3", "n2", "n4"]


def test_tables_documents_every_read_model(run_cli: Cli) -> None:
    listed = json.loads(run_cli("tables", "--format", "json").stdout)
    names = {row["name"] for row in listed}
    # Views are made on a connection when a statement names them; a catalog query names none and
    # gets them all.
    assert all(row["columns"] for row in listed if row["kind"] != "macro")
    assert {
        "runs",
        "stages",
        "snapshots",
        "forks",
        "children",
        "tests",
        "custody",
        "cut_points",
        "divergences",
        "events",
        "ancestors(run, node)",
        "descendants(run, node)",
        "lineage_path(run, a, b)",
    } <= names


def test_as_of_accepts_a_time_and_rejects_nonsense(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    early = json.loads(
        run_cli(
            "sql",
            "SELECT count(*) AS n FROM events",
            "--as-of",
            "2000-01-01T00:00:00Z",
            "--format",
            "json",
        ).stdout
    )
    assert early == [{"n": 0}]
    assert run_cli("sql", "SELECT 1", "--as-of", "yesterday", ok=False).exit_code == 1
    assert json.loads(
        run_cli("export", "tree", ABLATE_RUN, "--as-of", "2999-01-01T00:00:00+00:00").stdout
    )["nodes"]


@contextmanager
def lock_held(path: Path) -> Iterator[int]:
    """Another process holding `path` read-write (DuckDB then locks every other process out); yields
    its PID."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(path)!r}); "
            f"print('ready', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_a_locked_read_model_file_waits_then_names_the_holder(lineage: Lineage, tmp_path) -> None:
    from rollout_lineage.domain.errors import StoreUnavailable

    path = tmp_path / "locked.duckdb"
    with (
        lock_held(path) as pid,
        pytest.raises(
            StoreUnavailable,
            match=rf"locked by another process \(.*PID {pid}\); waited 0.5 s",
        ),
    ):
        ReadModelDB.open(path, timeout=0.5)
    ReadModelDB.open(path, timeout=5).close()


@pytest.mark.slow
def test_a_command_waiting_for_the_lock_says_so_at_once_naming_the_holder(
    run_cli: Cli, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the CLI: the notice comes before the wait ends (here, in the timeout's error), with
    the PID."""
    run_cli("init")
    run_cli("project")
    path = home / "projections.duckdb"
    monkeypatch.setenv("LINEAGE_LOCK_TIMEOUT", "1")
    with lock_held(path) as pid:
        result = run_cli("runs", ok=False)
    assert result.exit_code == 4
    first, *_, last = result.stderr.strip().splitlines()
    assert first.startswith(f"waiting for the read models at {path}: locked by ")
    assert f"PID {pid}" in first and first.endswith("(up to 1 s)")
    assert "waited 1 s" in last


def count_opens(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every read-model open from now on, as its `read_only` flag."""
    opened: list[bool] = []
    original = ReadModelDB.open.__func__  # type: ignore[attr-defined]

    def counted(cls: type[ReadModelDB], *args: object, **kwargs: object) -> ReadModelDB:
        opened.append(bool(kwargs.get("read_only")))
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(ReadModelDB, "open", classmethod(counted))
    return opened


def test_a_query_opens_the_read_models_once_when_current_and_twice_after_a_write(
    lineage: Lineage, run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    lineage.record(nightly_run_facts())
    run_cli("sql", "SELECT 1")
    opened = count_opens(monkeypatch)
    run_cli("sql", "SELECT count(*) FROM runs")
    assert opened == [True]  # current: one read-only open
    lineage.record(ablate_run_facts())
    opened.clear()
    assert run_cli("sql", "SELECT count(*) AS n FROM runs", "--format", "csv").stdout == "n\n2\n"
    assert opened == [False, True]  # written since: straight to the catch-up, no probe first
    run_cli("verify")  # writes the Merkle tree into the log's file, but no event
    opened.clear()
    run_cli("sql", "SELECT 1")
    run_cli("sql", "SELECT 1")
    assert opened == [False, True, True]


def test_a_read_model_file_dated_in_the_future_is_still_caught_up(
    lineage: Lineage, run_cli: Cli
) -> None:
    """The open-path guess compares file times; a clock set back (or a copied file) makes it wrong,
    never the answer."""
    lineage.record(nightly_run_facts())
    run_cli("sql", "SELECT 1")
    models = run_cli.home / "projections.duckdb"
    ahead = time.time() + 3600
    os.utime(models, (ahead, ahead))
    lineage.record(ablate_run_facts())
    assert run_cli("sql", "SELECT count(*) AS n FROM runs", "--format", "csv").stdout == "n\n2\n"

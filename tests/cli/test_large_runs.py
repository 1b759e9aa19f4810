"""Runs of the size users have: one Harbor trial whose CTRF lists 200,000 tests, under the default
memory cap.

Per-test read models used to expand the test map once per test (quadratic): 2,000 tests exhausted
the cap and 200,000 failed even with 8 GB. The CTRF here is the shape pytest-json-ctrf writes
(`results.tests[]` entries with name, status, duration, start, stop), copied around the public
Harbor trial.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.main import cli
from rollout_lineage.domain.facts import RunRegistered, RunScored
from rollout_lineage.settings import Settings
from tests.conftest import EXAMPLES, Cli

#: Every test here reads or writes runs of 100k-200k test outcomes, or fills a memory cap on
#: purpose.
pytestmark = pytest.mark.slow

TRIAL = (
    EXAMPLES / "public" / "benchflow-ai" / "skillsbench-trajectories" / "claude-opus-4-5-0126-wenbo"
)
RUN = "claude-opus-4-5-0126-wenbo/claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920"
N_TESTS = 200_000


def trial_with_tests(tmp_path: Path, n: int, params: str = "") -> Path:
    jobs = tmp_path / "claude-opus-4-5-0126-wenbo"
    trial = RUN.split("/")[1]
    shutil.copytree(TRIAL / trial, jobs / trial)
    ctrf = jobs / trial / "verifier" / "ctrf.json"
    document = json.loads(ctrf.read_text())
    document["results"]["tests"] = [
        {
            "name": f"tests/test_outputs.py::TestCase{i // 1000}::test_case_{i}{params}",
            "status": "failed" if i % 7 == 0 else "passed",
            "duration": 0.0012,
            "start": 1769398357.2487,
            "stop": 1769398357.2499,
        }
        for i in range(n)
    ]
    document["results"]["summary"]["tests"] = n
    ctrf.write_text(json.dumps(document))
    return jobs


@pytest.mark.parametrize(
    "params", ["", "[" + "p" * 20 + "]"], ids=["short names", "parametrised names"]
)
def test_a_trial_with_200k_tests_imports_projects_exports_and_audits(
    run_cli: Cli, tmp_path: Path, params: str
) -> None:
    run_cli("import", str(trial_with_tests(tmp_path, N_TESTS, params)))
    counts = json.loads(
        run_cli(
            "sql",
            "SELECT status, count(*) AS n FROM tests GROUP BY ALL ORDER BY status",
            "--format",
            "json",
        ).stdout
    )
    assert counts == [
        {"status": "failed", "n": (N_TESTS + 6) // 7},
        {"status": "passed", "n": N_TESTS - (N_TESTS + 6) // 7},
    ]
    assert json.loads(run_cli("export", "tree", RUN).stdout)["nodes"][0]["id"] == "root"
    assert run_cli("audit", ok=False).exit_code in (0, 10, 11)
    assert "rebuilt" in run_cli("rebuild").stderr
    assert "match a rebuild" in run_cli("verify", "--read-models").stdout


def record_scored_runs(home: Path, runs: int, tests: int) -> None:
    """Runs scored with `tests` outcomes each, as `RunScored` carries a verifier's CTRF report."""
    outcomes = {f"tests/test_outputs.py::test_case_{i}": "passed" for i in range(tests)}
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer:
        for i in range(runs):
            run = f"jobs/run-{i}"
            writer.record(
                [RunRegistered(run=run, task="t"), RunScored(run=run, reward=1.0, tests=outcomes)]
            )


def count_runs(home: Path, cap: str) -> Result:
    return CliRunner().invoke(
        cli,
        ["--home", str(home), "sql", "SELECT count(*) AS n FROM runs", "--format", "json"],
        env={"LINEAGE_DUCKDB_MEMORY": cap},
    )


def test_a_checkpoint_that_does_not_fit_in_the_cap_says_to_raise_it_and_a_larger_cap_reads(
    tmp_path: Path,
) -> None:
    """DuckDB checkpoints a row group's column at once: 300 runs of 2,000 tests each do not fit in
    16 MB. That was a traceback (a FatalException, then a refused rollback), and a WAL the next run
    could not open."""
    home = tmp_path / "home"
    record_scored_runs(home, 300, 2_000)
    # the second run replays what the first committed, and stops at the same point
    for _ in range(2):
        refused = count_runs(home, "16MB")
        assert refused.exit_code == 4, refused.output + refused.stderr
        assert "could not be checkpointed within their memory cap" in refused.stderr
        assert "raise LINEAGE_DUCKDB_MEMORY" in refused.stderr
    read = count_runs(home, "256MB")
    assert read.exit_code == 0, read.stderr
    assert json.loads(read.stdout) == [{"n": 300}]


def test_a_write_ahead_log_larger_than_the_cap_says_to_raise_it(tmp_path: Path) -> None:
    """A reader with a larger cap killed mid-catch-up leaves its committed pages in the WAL,
    replayed into memory by the next open. It used to be exit 1, "DuckDB refused the read models'
    settings"."""
    home = tmp_path / "home"
    record_scored_runs(home, 2, 10)
    assert count_runs(home, "256MB").exit_code == 0
    models = next(home.glob("*.duckdb"))
    writer = duckdb.connect(str(models), config={"checkpoint_threshold": "1GB"})
    writer.execute(
        "CREATE TABLE left_in_the_wal AS SELECT repeat('x', 100000) || range AS s FROM range(300)"
    )
    writer.execute("PRAGMA disable_checkpoint_on_shutdown")  # as a kill -9 would leave it
    writer.close()
    refused = count_runs(home, "16MB")
    assert refused.exit_code == 4, refused.output + refused.stderr
    assert "write-ahead log does not fit in it" in refused.stderr
    assert "raise LINEAGE_DUCKDB_MEMORY" in refused.stderr


def test_read_models_a_cap_reads_are_compared_with_a_rebuild_under_that_cap(tmp_path: Path) -> None:
    """`verify --read-models` hashes every table; hashed whole, `run_outcomes` (each row a run's
    2,000-test map) needed far more than 32 MB in one vector: a traceback, then exit 4 for a store
    this cap reads."""
    home = tmp_path / "home"
    record_scored_runs(home, 200, 2_000)
    assert count_runs(home, "32MB").exit_code == 0
    checked = CliRunner().invoke(
        cli, ["--home", str(home), "verify", "--read-models"], env={"LINEAGE_DUCKDB_MEMORY": "32MB"}
    )
    assert checked.exit_code == 0, checked.output + checked.stderr
    assert "match a rebuild at position 400" in checked.stdout


def test_a_catch_up_stopped_by_the_cap_then_a_smaller_cap_says_the_log_does_not_fit(
    tmp_path: Path,
) -> None:
    """The stopped catch-up leaves its WAL (2 MB); at 4 MB DuckDB fails the replay's own commit, a
    TransactionException that was a traceback."""
    home = tmp_path / "home"
    record_scored_runs(home, 300, 2_000)
    assert count_runs(home, "8MB").exit_code == 4
    refused = count_runs(home, "4MB")
    assert refused.exit_code == 4, refused.output + refused.stderr
    assert "write-ahead log does not fit in it" in refused.stderr


def test_one_event_larger_than_the_cap_allows_is_exit_4_not_a_traceback(tmp_path: Path) -> None:
    """One run scored with 400,000 tests (a 7.5 MB state) is read alone, but staging it needs more
    than 16 MB; the appender ran outside the memory-limit mapping."""
    home = tmp_path / "home"
    record_scored_runs(home, 1, 400_000)
    refused = count_runs(home, "16MB")
    assert refused.exit_code == 4, refused.output + refused.stderr
    assert "needed more memory than their cap allows" in refused.stderr
    read = count_runs(home, "256MB")
    assert read.exit_code == 0, read.stderr
    assert json.loads(read.stdout) == [{"n": 1}]


@pytest.mark.parametrize("cap", ["400KB", "1.5MB", "2MB"])
def test_a_cap_too_small_for_even_a_few_runs_is_exit_4_naming_it(tmp_path: Path, cap: str) -> None:
    """Found by an attack review: the schema's catalog queries and commit, and a checkpoint whose
    failure the search-path reset then hid, were tracebacks at caps this small."""
    home = tmp_path / "home"
    record_scored_runs(home, 5, 10)
    refused = count_runs(home, cap)
    assert refused.exit_code == 4, refused.output + refused.stderr
    assert "LINEAGE_DUCKDB_MEMORY" in refused.stderr

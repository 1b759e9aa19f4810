"""Habits a terminal user expects (issue #27): "did you mean", hints that name `lineage runs`, dates
where times are taken, `-` for stdout, Ctrl-C at any moment, one exit code for a missing input file,
run-id prefixes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO, Cli

CSV_DEDUPE = "nightly/csv-dedupe__7c1f2a90"


@pytest.fixture
def examples(run_cli: Cli) -> Cli:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    return run_cli


def test_a_mistyped_command_or_option_suggests_what_was_meant(run_cli: Cli) -> None:
    for typed, meant in (
        (["tre", "x"], "Did you mean 'tree'?"),
        (["snap"], "Did you mean 'snapshots'?"),
        (["export", "tre"], "Did you mean 'tree'?"),
        (["runs", "--sinse", "x"], "Did you mean '--since'?"),
    ):
        result = run_cli(*typed, ok=False)
        assert result.exit_code == 2, result.output
        assert meant in result.stderr, (typed, result.stderr)
    nothing_close = run_cli("xyzzy", ok=False)
    assert nothing_close.exit_code == 2 and "Did you mean" not in nothing_close.stderr


def test_an_unknown_run_points_at_lineage_runs_not_at_sql(examples: Cli) -> None:
    for command in (
        ["tree", "no-such-run"],
        ["history", "no-such-run:root"],
        ["export", "tree", "no-such-run"],
        ["log", "--run", "no-such-run"],
    ):
        result = examples(*command, ok=False)
        assert result.exit_code == 1, (command, result.output)
        assert "`lineage runs` lists the recorded runs" in result.stderr, (command, result.stderr)
        assert "lineage sql" not in result.stderr


def test_a_date_is_taken_where_a_time_is_as_midnight_utc(examples: Cli) -> None:
    by_date = examples("runs", "--since", "2026-11-03", "--format", "csv").stdout
    by_time = examples("runs", "--since", "2026-11-03T00:00:00Z", "--format", "csv").stdout
    assert by_date == by_time
    assert CSV_DEDUPE in by_date and "ablate-2026-11-02" not in by_date
    before = examples("runs", "--occurred-before", "2026-11-03", "--format", "csv").stdout
    assert "ablate-2026-11-02" in before and CSV_DEDUPE not in before
    assert examples("runs", "--as-of", "2026-11-03").exit_code == 0
    # A day with a time but no offset is still refused: which zone would it be in?
    local = examples("runs", "--since", "2026-11-03T10:00", ok=False)
    assert local.exit_code == 1 and "UTC offset" in local.stderr and "a date" in local.stderr


def test_dash_means_stdout_for_to(
    examples: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report --to -` wrote a file named `-`."""
    monkeypatch.chdir(tmp_path)
    page = examples("report", CSV_DEDUPE, "--to", "-")
    assert page.stdout.startswith("<!DOCTYPE html>") and page.stdout.rstrip().endswith("</html>")
    bundle = examples("bundle", "write", CSV_DEDUPE, "--to", "-")
    assert json.loads(bundle.stdout)["runs"] == [CSV_DEDUPE]
    tree = examples("export", "tree", CSV_DEDUPE, "-o", "-")
    assert json.loads(tree.stdout)["schema_version"] == 1
    assert not (tmp_path / "-").exists()
    (tmp_path / "saved.bundle").write_text(bundle.stdout)
    assert examples("bundle", "verify", str(tmp_path / "saved.bundle")).exit_code == 0


def test_a_missing_input_file_or_folder_exits_1_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: exit 1 is refused input (an invalid file); a missing import folder was a usage error
    (2)."""
    monkeypatch.chdir(tmp_path)
    cli = Cli(tmp_path / "store")
    for command in (
        ["import", str(tmp_path / "no-such-folder")],
        ["ingest", str(tmp_path / "no-such-file.jsonl")],
    ):
        result = cli(*command, ok=False)
        assert result.exit_code == 1, (command, result.output)
        assert "no-such-" in result.stderr
    assert not (tmp_path / "store").exists()


def test_log_takes_a_run_id_prefix_like_other_commands(examples: Cli) -> None:
    run = "nightly/csv-dedupe__d4e5f6a7"
    whole = examples("log", "--run", run, "--format", "jsonl").stdout
    by_prefix = examples("log", "--run", "csv-dedupe__d4", "--format", "jsonl").stdout
    assert whole == by_prefix and len(whole.splitlines()) > 5
    forks = examples("log", "--fork", "csv-dedupe__d4:n1", "--format", "jsonl").stdout
    assert forks == examples("log", "--fork", f"{run}:n1", "--format", "jsonl").stdout
    assert forks and len(forks.splitlines()) < len(whole.splitlines())
    ambiguous = examples("log", "--run", "csv-dedupe__", ok=False)
    assert ambiguous.exit_code == 1 and "matching" in ambiguous.stderr


# Ctrl-C at any moment of a read, start-up included, sent at an exact Python call rather than
# after a delay: tests/cli/test_terminal_processes.py.


#: `lineage ARGS`, with a Ctrl-C sent at the first Python call DuckDB's engine makes while it loads
#: (nanobind builds its enums through `enum`): the moment a timed signal hit once in CI, at 100 ms.
CTRL_C_INSIDE_DUCKDB_LOAD = """
import os, runpy, signal, sys

def loading_duckdb(frame):
    while frame is not None:
        spec = frame.f_locals.get("spec") if frame.f_code.co_name == "_load_unlocked" else None
        if getattr(spec, "name", None) == "_duckdb":
            return True
        frame = frame.f_back
    return False

def trace(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.endswith("enum.py") and loading_duckdb(frame):
        sys.settrace(None)
        sys.stdout.write("sent\\n")
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGINT)

sys.argv = ["lineage", *sys.argv[1:]]
sys.settrace(trace)
runpy.run_module("rollout_lineage.cli", run_name="__main__", alter_sys=True)
"""


@pytest.mark.usefixtures("ctrl_c_delivered")
@pytest.mark.parametrize(
    "command",
    [("tree", CSV_DEDUPE), ("verify", "--read-models"), ("log", "--run", CSV_DEDUPE)],
    ids=["tree", "verify", "log"],
)
def test_ctrl_c_while_duckdb_loads_exits_130_not_a_nanobind_abort(
    examples: Cli, command: tuple[str, ...]
) -> None:
    """The CI failure of stop 31, made certain: a KeyboardInterrupt raised inside DuckDB's module
    initialisation was "Critical nanobind error" with a traceback and an abort (exit 134). The
    engine loads with the signal held, and it is raised after: while a command's module loads
    (`tree`) or later, while the command runs (`log`, `verify`, whose modules load no DuckDB)."""
    env = {**os.environ, "LINEAGE_HOME": str(examples.home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", CTRL_C_INSIDE_DUCKDB_LOAD, *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.startswith("sent\n"), "the signal was never sent inside DuckDB's load"
    assert "Traceback" not in done.stderr and "nanobind" not in done.stderr, done.stderr
    assert (done.returncode, done.stderr) == (130, "interrupted\n")

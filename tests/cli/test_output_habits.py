"""Output for pipes and people, as a user types it: TSV when piped, exact floats, one time format,
no `None`, `--no-headers`, global options after the subcommand, run ids by unique prefix, `sql -`
and `-p`, `diff --exit-code`, Ctrl-C."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli
from tests.interrupts import wait_until_inside_a_users_statement, wait_until_reading_stdin

ABLATE_RUN = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
NIGHTLY_RUN = "nightly/csv-dedupe__7c1f2a90"
WITH_SKILL = f"{ABLATE_RUN}:root/with-skill"
NO_SKILL = f"{ABLATE_RUN}:root/no-skill"


@pytest.fixture
def examples(run_cli: Cli) -> Cli:
    run_cli("import", str(EXAMPLES))
    return run_cli


def test_piped_output_is_tsv_with_a_header_and_a_table_only_when_asked(examples: Cli) -> None:
    # CliRunner's stdout is not a terminal, exactly like `lineage runs | cut -f1`.
    lines = examples("runs").stdout.splitlines()
    assert lines[0].split("\t") == [
        "run",
        "task",
        "agent",
        "model",
        "status",
        "outcome",
        "reward",
        "forks",
        "registered_at",
    ]
    assert ABLATE_RUN in [line.split("\t")[0] for line in lines[1:]]
    assert "┃" not in examples("runs").stdout
    assert "┃ run" in examples("runs", "--format", "table").stdout


def test_tsv_escapes_tabs_newlines_and_backslashes_so_every_line_is_one_row(examples: Cli) -> None:
    out = examples("sql", r"SELECT 'a' || chr(9) || 'b' AS t, 'x' || chr(10) || 'y\z' AS n").stdout
    assert out == "t\tn\n" + "a\\tb\tx\\ny\\\\z\n"


@pytest.mark.parametrize("fmt", ["tsv", "csv", "table", "markdown"])
def test_no_headers_leaves_out_the_header_row_in_every_headed_format(
    examples: Cli, fmt: str
) -> None:
    query = "SELECT 'only-value' AS only_column"
    with_header = examples("sql", query, "--format", fmt).stdout
    without = examples("sql", query, "--format", fmt, "--no-headers").stdout
    assert "only_column" in with_header
    assert "only_column" not in without and "only-value" in without


@pytest.mark.parametrize("fmt", ["tsv", "csv", "table", "markdown"])
def test_floats_print_exactly_in_every_text_format(examples: Cli, fmt: str) -> None:
    out = examples(
        "sql", "SELECT 0.123456789::DOUBLE AS f, 0.1::DOUBLE + 0.2 AS g", "--format", fmt
    ).stdout
    assert "0.123456789" in out and "0.30000000000000004" in out
    assert "0.123457" not in out


def test_decimals_are_json_numbers(examples: Cli) -> None:
    row = json.loads(examples("sql", "SELECT 0.1 + 0.2 AS d, 3.0 AS i", "--format", "jsonl").stdout)
    assert row == {"d": 0.3, "i": 3}


def test_times_print_in_one_iso_form_in_log_sql_and_runs(examples: Cli) -> None:
    """The same event's recording time from `log` (the stored text) and `sql` (a TIMESTAMPTZ) is the
    same string, in every format."""
    logged = json.loads(examples("log", "--limit", "1", "--format", "jsonl").stdout)
    for fmt in ("jsonl", "csv", "tsv"):
        out = examples(
            "sql", "SELECT recorded_at FROM events WHERE position = 1", "--format", fmt
        ).stdout
        assert logged["recorded_at"] in out, (fmt, out)
    assert logged["recorded_at"].endswith("Z") and "T" in logged["recorded_at"]
    registered = list(csv.DictReader(io.StringIO(examples("runs", "--format", "csv").stdout)))
    assert all(r["registered_at"].endswith("Z") for r in registered)


def test_text_output_never_shows_python_none(examples: Cli) -> None:
    runs = examples("sql", "SELECT run FROM runs", "--no-headers").stdout.split()
    assert len(runs) >= 5
    outputs = [examples("audit", ok=False).stdout, examples("diff", WITH_SKILL, NO_SKILL).stdout]
    for run in runs:
        outputs += [
            examples("tree", run).stdout,
            examples("history", run).stdout,
            examples("cut-point", run, ok=False).stdout,
        ]
    for fmt in ("tsv", "table", "markdown", "csv"):
        outputs.append(examples("log", "--format", fmt).stdout)
        outputs.append(examples("runs", "--format", fmt).stdout)
    assert not [out for out in outputs if "None" in out]


def test_global_options_work_after_the_subcommand(examples: Cli, tmp_path: Path) -> None:
    """`--home` (and `--store`, `--actor`) are accepted before or after the subcommand, as people
    type them."""
    from click.testing import CliRunner

    from rollout_lineage.cli.main import cli

    runner = CliRunner()
    after = runner.invoke(cli, ["runs", "--format", "csv", "--home", str(examples.home)])
    equals = runner.invoke(cli, ["runs", f"--home={examples.home}", "--format", "csv"])
    before = runner.invoke(cli, ["--home", str(examples.home), "runs", "--format", "csv"])
    assert after.exit_code == equals.exit_code == before.exit_code == 0
    assert after.stdout == equals.stdout == before.stdout
    assert ABLATE_RUN in after.stdout
    # After `--`, a word that looks like the option is a value, not an option.
    hoisted = runner.invoke(cli, ["--home", str(tmp_path / "none"), "sql", "--", "--home"])
    assert hoisted.exit_code == 1 and "no lineage store here" in hoisted.stderr


def test_runs_are_accepted_by_unique_prefix_of_their_id_trial_or_name(examples: Cli) -> None:
    full = examples("tree", NIGHTLY_RUN).stdout
    assert examples("tree", "nightly/csv-dedupe__7c1f2a90").stdout == full
    assert examples("tree", "ablate-2026").stdout == examples("tree", ABLATE_RUN).stdout
    by_last_part = examples("export", "tree", "csv-dedupe__d4").stdout
    assert by_last_part == examples("export", "tree", "nightly/csv-dedupe__d4e5f6a7").stdout
    assert (
        examples("history", "csv-dedupe__d4:root").stdout
        == examples("history", "nightly/csv-dedupe__d4e5f6a7:root").stdout
    )


def test_an_ambiguous_prefix_is_refused_with_the_runs_it_could_mean(examples: Cli) -> None:
    result = examples("tree", "nightly/csv-dedupe__7c", ok=False)
    assert result.exit_code == 1
    assert "matching 2 runs" in result.stderr
    assert NIGHTLY_RUN in result.stderr and f"{NIGHTLY_RUN}__continued" in result.stderr
    unknown = examples("tree", "no-such-run", ok=False)
    assert unknown.exit_code == 1 and "expected a recorded run 'no-such-run'" in unknown.stderr


def test_sql_reads_the_query_from_stdin_and_binds_parameters(examples: Cli) -> None:
    piped = examples(
        "sql",
        "-",
        "-p",
        "run",
        ABLATE_RUN,
        "--format",
        "csv",
        input="SELECT task FROM runs WHERE run = $run",
    )
    assert piped.stdout == "task\ncsv-dedupe\n"
    hostile = examples(
        "sql", "SELECT count(*) AS n FROM runs WHERE run = $r", "-p", "r", "x' OR '1'='1"
    )
    assert hostile.stdout == "n\n0\n"  # a value, never SQL
    cast = examples(
        "sql", "SELECT count(*) AS n FROM runs WHERE reward >= $min::DOUBLE", "-p", "min", "1"
    )
    assert int(cast.stdout.split()[1]) >= 1
    missing = examples("sql", "SELECT $nope AS x", ok=False)
    assert missing.exit_code == 1 and "nope" in missing.stderr


def test_diff_exit_code_says_whether_the_sides_differ(examples: Cli) -> None:
    assert examples("diff", WITH_SKILL, NO_SKILL).exit_code == 0
    differing = examples("diff", WITH_SKILL, NO_SKILL, "--exit-code", ok=False)
    assert differing.exit_code == 1 and "flipped" in differing.stdout
    assert examples("diff", WITH_SKILL, WITH_SKILL, "--exit-code").exit_code == 0


def test_help_lists_the_environment_variables_and_completion() -> None:
    from click.testing import CliRunner

    from rollout_lineage.cli.main import cli

    out = CliRunner().invoke(cli, ["--help"]).stdout
    for name in ("LINEAGE_STORE", "LINEAGE_HOME", "LINEAGE_ACTOR", "LINEAGE_DUCKDB_MEMORY"):
        assert name in out
    assert "_LINEAGE_COMPLETE" in out


def test_shell_completion_offers_commands_and_run_ids(examples: Cli) -> None:
    env = {
        **os.environ,
        "LINEAGE_HOME": str(examples.home),
        "_LINEAGE_COMPLETE": "bash_complete",
    }
    commands = subprocess.run(
        [sys.executable, "-m", "rollout_lineage.cli", "ru"],
        env={**env, "COMP_WORDS": "lineage ru", "COMP_CWORD": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "plain,runs" in commands.stdout.splitlines()
    runs = subprocess.run(
        [sys.executable, "-m", "rollout_lineage.cli"],
        env={**env, "COMP_WORDS": "lineage tree nightly/csv-dedupe__d", "COMP_CWORD": "2"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert runs.stdout.splitlines() == ["plain,nightly/csv-dedupe__d4e5f6a7"]


@pytest.mark.slow
@pytest.mark.usefixtures("ctrl_c_delivered")
def test_ctrl_c_exits_130_with_one_line_and_appends_nothing(tmp_path: Path) -> None:
    """`lineage ingest -` waiting on a terminal's stdin, interrupted: one line on stderr, no
    traceback."""
    env = {**os.environ, "LINEAGE_HOME": str(tmp_path / "store")}
    subprocess.run([sys.executable, "-m", "rollout_lineage.cli", "init"], env=env, check=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "rollout_lineage.cli", "ingest", "-"],
        env=env,
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_until_reading_stdin(process)  # interrupted while it waits for its input
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130
    assert stderr.strip().splitlines()[-1] == "interrupted"
    assert "Traceback" not in stderr
    position = subprocess.run(
        [sys.executable, "-m", "rollout_lineage.cli", "head"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert position.stdout.startswith("0:")


@pytest.mark.slow
@pytest.mark.usefixtures("ctrl_c_delivered")
def test_ctrl_c_during_a_long_query_exits_130_with_one_line(tmp_path: Path) -> None:
    """DuckDB stops a statement on SIGINT and raises its own "Query interrupted" (a RuntimeError),
    which was a traceback and exit 1."""
    env = {**os.environ, "LINEAGE_HOME": str(tmp_path / "store")}
    subprocess.run([sys.executable, "-m", "rollout_lineage.cli", "init"], env=env, check=True)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rollout_lineage.cli",
            "sql",
            "SELECT sum(hash(range)) FROM range(100000000000)",
        ],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    wait_until_inside_a_users_statement(process)  # DuckDB runs it: its own interrupt is tested
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted"
    assert "Traceback" not in stderr


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl", "json", "markdown"])
def test_every_row_format_streams_rows_as_they_come(
    fmt: str, capsys: pytest.CaptureFixture
) -> None:
    """Rows are written as the source yields them, never gathered first: a source that fails after
    five rows has already printed them (so a million rows need the memory of one batch)."""
    from rollout_lineage.cli.output import write_rows

    def source():
        for n in range(5):
            yield {"n": n, "name": f"row-{n}"}
        raise RuntimeError("the source broke after five rows")

    with pytest.raises(RuntimeError):
        write_rows(source(), ("n", "name"), fmt)
    printed = capsys.readouterr().out
    assert all(f"row-{n}" in printed for n in range(5))


def test_list_commands_stream_from_the_read_models(examples: Cli) -> None:
    """`runs` and `snapshots list` hand the printer DuckDB's cursor, a batch at a time, not a
    list."""
    import types

    from rollout_lineage.bootstrap import Lineage
    from rollout_lineage.projections.reports import run_list, snapshot_queries
    from rollout_lineage.settings import Settings

    lineage = Lineage(Settings.from_env({}, home=examples.home), may_create=False)
    models = lineage.read_models()
    try:
        assert isinstance(run_list.list_runs(models.db), types.GeneratorType)
        assert isinstance(snapshot_queries.lifetimes(models.db), types.GeneratorType)
    finally:
        models.close()
        lineage.close()
    many = examples("sql", "SELECT range AS n FROM range(200000)", "--format", "csv").stdout
    assert many.count("\n") == 200001


@pytest.mark.parametrize("fmt", ["tsv", "csv", "markdown"])
def test_booleans_print_as_json_and_sql_spell_them(examples: Cli, fmt: str) -> None:
    out = examples("sql", "SELECT true AS yes, false AS no", "--format", fmt, "--no-headers").stdout
    assert "true" in out and "false" in out and "True" not in out

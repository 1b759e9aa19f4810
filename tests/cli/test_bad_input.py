"""Bad input gets a clean refusal with the documented exit code, and appends nothing (issue #12,
items 6 and 7).

Each case is what an attacker or an unlucky harness sent: a repeated JSON key, `"reward": true`, a
negative wall clock, a year 1900, a FIFO or a bomb as an audit matrix, a 20-digit position, an id
carrying terminal escape sequences, a state stored as TEXT, an edited topic or version.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import Cli

RUN = {"type": "run.registered", "run": "jobs/t__1", "task": "t"}


def ingest_refused(run_cli: Cli, tmp_path: Path, text: str) -> str:
    source = tmp_path / "bad.jsonl"
    source.write_text(text)
    result = run_cli("ingest", str(source), ok=False)
    assert result.exit_code == 1, result.output
    assert run_cli("log", "--format", "jsonl").stdout == "", "a refused file appends nothing"
    return result.stderr


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '{"type": "run.registered", "run": "jobs/t__1", "task": "t", "task": "u"}',
            "the key 'task' appears more than once",
        ),
        ('{"type": "run.scored", "run": "jobs/t__1", "reward": true}', "field reward"),
        ('{"type": "run.scored", "run": "jobs/t__1", "reward": "1"}', "field reward"),
        (
            '{"type": "fork.child_scored", "run": "jobs/t__1", "fork": '
            '"root", "index": 0, "reward": 1, "wall_clock_sec": -3}',
            "field wall_clock_sec",
        ),
        (
            '{"type": "run.registered", "run": "jobs/t__1", '
            '"task": "t", "occurred_at": "1900-01-01T00:00:00Z"}',
            "between 1970 and 2200",
        ),
        (
            '{"type": "run.registered", "run": "jobs/t__1", '
            '"task": "t", "occurred_at": "2999-01-01T00:00:00Z"}',
            "between 1970 and 2200",
        ),
        (
            '{"type": "run.registered", "run": "jobs/t__1", "task": "t", "n": ' + "1" * 4301 + "}",
            "invalid JSON",
        ),
    ],
    ids=[
        "duplicate key",
        "reward true",
        "reward string",
        "negative wall clock",
        "year 1900",
        "year 2999",
        "4301 digits",
    ],
)
def test_ingest_refuses(run_cli: Cli, tmp_path: Path, line: str, expected: str) -> None:
    assert expected in ingest_refused(run_cli, tmp_path, json.dumps(RUN) + "\n" + line + "\n")


def test_an_integer_reward_is_still_a_reward(run_cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "ok.jsonl"
    source.write_text(
        json.dumps(RUN) + '\n{"type": "run.scored", "run": "jobs/t__1", "reward": 1}\n'
    )
    run_cli("ingest", str(source))
    assert json.loads(run_cli("sql", "SELECT reward FROM runs", "--format", "json").stdout) == [
        {"reward": 1.0}
    ]


def test_a_run_directory_with_a_repeated_key_is_refused(run_cli: Cli, tmp_path: Path) -> None:
    from tests.conftest import EXAMPLES

    trial = (
        EXAMPLES
        / "public"
        / "benchflow-ai"
        / "skillsbench-trajectories"
        / "claude-opus-4-5-0126-wenbo"
    )
    jobs = tmp_path / trial.name
    import shutil

    shutil.copytree(trial, jobs)
    [result_json] = [p for p in jobs.rglob("result.json") if "powerlifting" in str(p)]
    text = result_json.read_text()
    result_json.write_text(text.replace("{", '{"trial_name": "forged", ', 1))
    result = run_cli("import", str(jobs), ok=False)
    assert result.exit_code == 1 and "appears more than once" in result.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("[" * 100_000 + "]" * 100_000, "nesting too deep"),
        ('[{"task": "t", "task": "u"}]', "appears more than once"),
        (
            '{"task": '
            + json.dumps([f"t{i}" for i in range(2000)])
            + ', "agent": '
            + json.dumps([f"a{i}" for i in range(2000)])
            + "}",
            "expand to 4000000",
        ),
    ],
    ids=["deeply nested", "duplicate key", "cross product bomb"],
)
def test_audit_refuses_a_bad_matrix(
    run_cli: Cli, tmp_path: Path, content: str, expected: str
) -> None:
    matrix = tmp_path / "matrix.json"
    matrix.write_text(content)
    result = run_cli("audit", "--matrix", str(matrix), ok=False)
    assert result.exit_code == 1 and expected in result.stderr


def test_audit_refuses_a_fifo_as_its_matrix_instead_of_waiting_forever(
    run_cli: Cli, tmp_path: Path
) -> None:
    fifo = tmp_path / "matrix.json"
    os.mkfifo(fifo)
    result = run_cli("audit", "--matrix", str(fifo), ok=False)
    assert result.exit_code == 1 and "FIFO" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("log", "--after", "1" * 20),
        ("log", "--limit", "9" * 20),
        ("sql", "SELECT 1", "--as-of", "1" * 20),
        ("verify", "--head", "1" * 20 + ":sha256:" + "0" * 64),
    ],
)
def test_a_20_digit_position_is_refused_cleanly(run_cli: Cli, args: tuple[str, ...]) -> None:
    result = run_cli(*args, ok=False)
    assert (
        result.exit_code in (1, 2)
        and "Traceback" not in result.output
        and "Overflow" not in result.output
    )


def test_control_characters_in_ids_are_shown_escaped(run_cli: Cli, tmp_path: Path) -> None:
    run = "jobs/\x1b[2J\x1b[31mevil\r__1"
    source = tmp_path / "esc.jsonl"
    source.write_text(json.dumps({"type": "run.registered", "run": run, "task": "[red]t|x"}) + "\n")
    run_cli("ingest", str(source))
    for fmt in ("table", "markdown"):
        out = run_cli("sql", "SELECT run, task FROM runs", "--format", fmt).stdout
        assert "\x1b" not in out and "\r" not in out and "\\x1b[2J" in out, fmt
    assert "[red]t" in run_cli("sql", "SELECT task FROM runs").stdout  # data, not rich markup
    assert "t\\|x" in run_cli("sql", "SELECT task FROM runs", "--format", "markdown").stdout
    tree = run_cli("tree", run).stdout
    assert "\x1b" not in tree and "\\x1b[31mevil" in tree
    assert json.loads(run_cli("sql", "SELECT run FROM runs", "--format", "json").stdout) == [
        {"run": run}
    ]


def test_an_empty_logs_head_verifies(run_cli: Cli) -> None:
    head = run_cli("head").stdout.strip()
    assert head == "0:sha256:" + "0" * 64
    assert (
        json.loads(run_cli("verify", "--head", head, "--format", "json").stdout)["intact"] is True
    )


def store(run_cli: Cli) -> Path:
    return run_cli.home / "events.sqlite"


def ingested(run_cli: Cli, tmp_path: Path, n: int = 4) -> None:
    source = tmp_path / "runs.jsonl"
    source.write_text(
        "".join(
            json.dumps({"type": "run.registered", "run": f"jobs/t__{i}", "task": "t"}) + "\n"
            for i in range(n)
        )
    )
    run_cli("ingest", str(source))


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("topic", "'lineage:run.located'"),
        ("originator_version", "7"),
        ("state", "CAST(state AS TEXT)"),
    ],
)
def test_verify_and_reads_catch_an_edited_topic_version_or_state_type(
    run_cli: Cli, tmp_path: Path, column: str, value: str
) -> None:
    ingested(run_cli, tmp_path)
    with sqlite3.connect(store(run_cli)) as db:
        db.execute(f"UPDATE stored_events SET {column} = {value} WHERE rowid = 3")
    result = run_cli("verify", "--format", "json", ok=False)
    assert result.exit_code == 3 and json.loads(result.stdout)["first_bad_position"] == 3
    assert run_cli("sql", "SELECT count(*) FROM runs", ok=False).exit_code == 3


def test_a_shorter_log_rebuilds_every_read_model(run_cli: Cli, tmp_path: Path) -> None:
    ingested(run_cli, tmp_path)
    assert run_cli("sql", "SELECT count(*) AS n FROM runs", "--format", "csv").stdout == "n\n4\n"
    # the tail cut off, links and all (only a kept head notices)
    with sqlite3.connect(store(run_cli)) as db:
        db.execute("DELETE FROM stored_events WHERE rowid > 2")
        db.execute("DELETE FROM lineage_chain WHERE position > 2")
    assert run_cli("sql", "SELECT count(*) AS n FROM runs", "--format", "csv").stdout == "n\n2\n"
    assert run_cli("sql", "SELECT count(*) AS n FROM events", "--format", "csv").stdout == "n\n2\n"


@pytest.fixture
def server_url() -> str:
    base = os.environ.get("LINEAGE_TEST_POSTGRES_URL")
    if not base:
        from tests.conftest import integration_unavailable

        integration_unavailable("LINEAGE_TEST_POSTGRES_URL is not set (no PostgreSQL server)")
    return base


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda u: u.replace(":lineage@", ":s3cr3t-pw@"), "password authentication failed"),
        (lambda u: u.rsplit("/", 1)[0] + "/no_such_database", "does not exist"),
        (lambda u: u.replace(":5432/", ":1/").replace(":lineage@", ":s3cr3t-pw@"), "refused"),
    ],
    ids=["wrong password", "missing database", "refused connection"],
)
def test_a_store_that_cannot_be_reached_says_why_and_never_shows_the_password(
    tmp_path: Path, server_url: str, change, expected: str
) -> None:
    url = change(server_url)
    result = Cli(tmp_path / "home", store=url)("log", ok=False)
    assert result.exit_code == 4 and expected in result.stderr
    assert (
        "s3cr3t-pw" not in result.output + result.stderr and "lineage:lineage@" not in result.stderr
    )


@pytest.mark.postgres
def test_a_schema_name_the_append_function_cannot_hold_is_refused_and_nothing_made(
    tmp_path: Path, server_url: str
) -> None:
    """The server-side append's body is dollar-quoted, so a `$` in the schema name is refused
    before anything is made there: an input error (exit 1), not "could not open the store" (exit
    4)."""
    import psycopg

    url = f"{server_url}?schema=lab$1"
    result = Cli(tmp_path / "home", store=url)("init", ok=False)
    assert result.exit_code == 1, result.stderr
    assert "without '$'" in result.stderr and "'lab$1'" in result.stderr
    assert "could not open" not in result.stderr and "Traceback" not in result.output
    with psycopg.connect(server_url, autocommit=True) as raw:
        assert raw.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'lab$1'").fetchall() == []


def test_a_stored_event_that_is_not_utf8_is_named_not_a_traceback(
    run_cli: Cli, tmp_path: Path
) -> None:
    ingested(run_cli, tmp_path)
    run_cli("sql", "SELECT 1")
    with sqlite3.connect(store(run_cli)) as db:
        state = bytearray(
            db.execute("SELECT state FROM stored_events WHERE rowid = 3").fetchone()[0]
        )
        state[20] = 0xFF
        db.execute("UPDATE stored_events SET state = ? WHERE rowid = 3", (bytes(state),))
    for command in (("rebuild",), ("log",), ("verify",)):
        result = run_cli(*command, ok=False)
        assert result.exit_code == 3 and "position 3" in (result.stderr + result.stdout), command
        assert "Traceback" not in result.output


@pytest.mark.parametrize("value", ["nan", "inf", "1e300", "-1"])
def test_a_timeout_must_be_a_finite_number_of_seconds(run_cli: Cli, value: str) -> None:
    assert run_cli("sql", "SELECT 1", "--timeout", value, ok=False).exit_code == 2


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://lineage:S3cretPW@127.0.0.1:5432/",
        "postgresql://lineage:S3cretPW@/lineage_test",
        "postgresql://lineage:S3cretPW@127.0.0.1:99999/x",
        "postgresql://lineage:S3cretPW@127.0.0.1:abc/x",
        "postgres ql://lineage:S3cretPW@127.0.0.1/x",
    ],
)
def test_a_malformed_store_url_is_refused_without_its_password(tmp_path: Path, url: str) -> None:
    result = Cli(tmp_path / "home", store=url)("head", ok=False)
    assert result.exit_code == 1 and "S3cretPW" not in result.output + result.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("LINEAGE_LOCK_TIMEOUT", "abc"),
        ("LINEAGE_DUCKDB_MEMORY", "0MB"),
        ("LINEAGE_DUCKDB_MEMORY", "99999999TB"),
    ],
)
def test_bad_settings_are_refused_cleanly(
    run_cli: Cli, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    result = run_cli("sql", "SELECT 1", ok=False)
    assert result.exit_code == 1 and name in result.stderr


def test_json_output_survives_what_it_cannot_nest_or_name(run_cli: Cli) -> None:
    out = run_cli(
        "sql", "SELECT repeat('[', 5000) AS deep, 'nan'::DOUBLE AS x", "--format", "jsonl"
    ).stdout
    assert json.loads(out) == {"deep": "[" * 5000, "x": None}


def test_invisible_format_characters_and_newlines_in_ids_are_shown_escaped(
    run_cli: Cli, tmp_path: Path
) -> None:
    source = tmp_path / "ids.jsonl"
    source.write_text(
        "".join(
            json.dumps({"type": "run.registered", "run": run, "task": "t"}) + "\n"
            for run in ("evil\u202egnp.exe", "evil\n| fake-run | passed |")
        )
    )
    run_cli("ingest", str(source))
    out = run_cli("sql", "SELECT run FROM runs ORDER BY run").stdout
    assert "\u202e" not in out and "\\u202e" in out and "fake-run" in out and "evil\\n" in out


def test_a_long_answer_as_a_table_shows_the_first_rows_and_says_how_many_more(run_cli: Cli) -> None:
    result = run_cli("sql", "SELECT range AS n FROM range(2500)", "--format", "table")
    assert "showed the first 1000 rows; 1500 more were left out" in result.stderr
    assert "│ 999 " in result.stdout and "│ 1000 " not in result.stdout
    assert (
        len(
            run_cli(
                "sql", "SELECT range AS n FROM range(2500)", "--format", "csv"
            ).stdout.splitlines()
        )
        == 2501
    )

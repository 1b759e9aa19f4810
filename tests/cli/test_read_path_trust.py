"""The read side, attacked: user SQL cannot write, reads check the log they come from, a tampered
file cannot matter.

Each test is an attack that worked against the first landing (issue #12): a writing CTE, `EXPLAIN
ANALYZE` of DDL, a macro planted for the next catch-up, a log edited after the read models were
built, a read-model file built from another log, an edited view.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import duckdb
import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from tests.conftest import Cli
from tests.scenarios import ABLATE_RUN, ablate_run_facts, nightly_run_facts

REWARDS = "SELECT run, reward FROM runs ORDER BY run"

#: Statements that must change nothing, whatever DuckDB or our guard says about them.
ATTACKS = (
    f"WITH x AS (UPDATE run_outcomes SET reward = 1 WHERE "
    f"run = '{ABLATE_RUN}' RETURNING run) SELECT * FROM x",
    "WITH x AS (DELETE FROM fork_children RETURNING *) SELECT count(*) FROM x",
    "WITH x AS (INSERT INTO run_outcomes (run, kind, reward) "
    "VALUES ('forged', 'scored', 1) RETURNING run) SELECT * FROM x",
    "EXPLAIN ANALYZE CREATE TABLE planted (a INT)",
    "EXPLAIN ANALYZE DROP VIEW runs",
    "EXPLAIN ANALYZE CREATE OR REPLACE VIEW runs AS SELECT 'forged' AS run, 1.0 AS reward",
    "EXPLAIN ANALYZE DELETE FROM lineage_tracking",
    "EXPLAIN ANALYZE UPDATE lineage_tracking SET position = 0",
    "EXPLAIN ANALYZE CREATE OR REPLACE MACRO json_or_null(j) "
    "AS (SELECT content FROM read_text('/etc/hostname'))",
    "EXPLAIN CREATE TABLE planted (a INT)",
    "DELETE FROM events",
    "UPDATE run_outcomes SET reward = 1",
    "INSERT INTO events (position) VALUES (999)",
    "CREATE TABLE planted (a INT)",
    "CREATE OR REPLACE VIEW runs AS SELECT 1",
    "DROP TABLE events",
    "DROP VIEW runs",
    "CREATE OR REPLACE MACRO json_or_null(j) AS 1",
    "CREATE TEMP TABLE t AS SELECT 1",
    "ALTER TABLE events ADD COLUMN x INT",
    "TRUNCATE events",
    "SELECT 1; DROP TABLE events",
    "COPY (SELECT 1) TO 'out.csv'",
    "COPY events FROM '/etc/passwd'",
    "EXPORT DATABASE 'dump'",
    "IMPORT DATABASE 'dump'",
    "ATTACH 'other.duckdb' AS o",
    "ATTACH ':memory:' AS o",
    "DETACH o",
    "INSTALL httpfs",
    "LOAD httpfs",
    "FORCE INSTALL json",
    "SET enable_external_access = true",
    "SET memory_limit = '64GB'",
    "RESET memory_limit",
    "PRAGMA memory_limit = '64GB'",
    "SET lock_configuration = false",
    "CHECKPOINT",
    "VACUUM",
    "BEGIN TRANSACTION",
    "CALL pragma_version()",
    "USE other",
    "SELECT * FROM read_text('/etc/hostname')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_json_auto('/etc/hostname')",
    "SELECT * FROM read_parquet('x.parquet')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT getenv('HOME')",
    "SELECT * FROM duckdb_secrets()",
    "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 'v')",
    "PREPARE p AS DELETE FROM events",
    "CREATE SEQUENCE s",
    "CREATE TYPE mood AS ENUM ('a')",
    "CREATE SCHEMA s",
    "CREATE INDEX i ON run_outcomes (run)",
    "COMMENT ON TABLE events IS 'x'",
    "ANALYZE",
    "UPDATE lineage_schema SET fingerprint = 'x'",
)


def read_model_file(run_cli: Cli) -> Path:
    return run_cli.home / "projections.duckdb"


def everything_in(path: Path) -> dict[str, object]:
    """Every table's rows and every view's and macro's text in a read-model file."""
    with duckdb.connect(str(path), read_only=True) as db:
        tables = [
            row[0]
            for row in db.execute(
                "SELECT table_name FROM duckdb_tables() WHERE NOT internal"
            ).fetchall()
        ]
        contents: dict[str, object] = {
            name: db.execute(f'SELECT * FROM "{name}" ORDER BY ALL').fetchall() for name in tables
        }
        contents["views"] = db.execute(
            "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1"
        ).fetchall()
        contents["macros"] = db.execute(
            "SELECT function_name, macro_definition FROM duckdb_functions() "
            "WHERE function_type LIKE '%macro%' AND NOT internal ORDER BY ALL"
        ).fetchall()
    return contents


def test_no_statement_changes_the_read_models(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    rewards = run_cli("sql", REWARDS, "--format", "json").stdout
    before = everything_in(read_model_file(run_cli))
    for statement in ATTACKS:
        result = run_cli("sql", statement, ok=False)
        assert result.exit_code in (1, 4), (statement, result.exit_code, result.output)
        assert "Traceback" not in result.output + result.stderr, statement
    assert everything_in(read_model_file(run_cli)) == before
    assert run_cli("sql", REWARDS, "--format", "json").stdout == rewards
    assert not (run_cli.home / "out.csv").exists() and not Path("out.csv").exists()


def test_a_writing_cte_is_refused_by_the_connection_itself(lineage: Lineage, run_cli: Cli) -> None:
    """The statement type is SELECT, so only the read-only connection stands in its way."""
    lineage.record(ablate_run_facts())
    result = run_cli("sql", ATTACKS[0], ok=False)
    assert result.exit_code == 1 and "read-only" in result.stderr


def test_as_of_answers_are_read_only_too(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    assert (
        run_cli("sql", "SELECT count(*) AS n FROM runs", "--as-of", "1", "--format", "csv").stdout
        == "n\n1\n"
    )
    for statement in ATTACKS[:9]:
        assert run_cli("sql", statement, "--as-of", "3", ok=False).exit_code == 1, statement


def test_a_macro_planted_in_the_file_is_replaced_before_the_next_catch_up(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    """Someone who can write the file plants a macro the projections call; the next reader
    re-creates it from code."""
    secret = tmp_path / "secret.txt"
    secret.write_text("do-not-leak")
    lineage.record(ablate_run_facts(with_late_reward=False))
    run_cli("sql", "SELECT 1")
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute(
            f"CREATE OR REPLACE MACRO json_or_null(j) AS "
            f"(SELECT content FROM read_text('{secret}'))"
        )
        db.execute("CREATE OR REPLACE VIEW runs AS SELECT 'forged' AS run")
    lineage.record(
        [f.ChildScored(run=ABLATE_RUN, fork="root", index=3, reward=1.0, tests={"t": "passed"})]
    )
    out = run_cli("sql", "SELECT * FROM children", "--format", "json").stdout
    assert "do-not-leak" not in out
    assert json.loads(run_cli("sql", "SELECT run FROM runs", "--format", "json").stdout) == [
        {"run": ABLATE_RUN}
    ]


def test_a_query_past_its_timeout_is_stopped(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(nightly_run_facts())
    result = run_cli(
        "sql", "SELECT count(*) FROM range(1000000000000) a", "--timeout", "0.3", ok=False
    )
    assert result.exit_code == 4 and "timeout" in result.stderr and "Traceback" not in result.output


def test_a_query_past_the_memory_cap_exits_4(
    lineage: Lineage, run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    lineage.record(nightly_run_facts())
    run_cli("sql", "SELECT 1")
    monkeypatch.setenv("LINEAGE_DUCKDB_MEMORY", "64MB")
    result = run_cli("sql", "SELECT list(x) FROM range(100000000) t(x)", ok=False)
    assert (
        result.exit_code == 4
        and "memory" in result.stderr
        and "LINEAGE_DUCKDB_MEMORY" in result.stderr
    )


def store_file(run_cli: Cli) -> Path:
    return run_cli.home / "events.sqlite"


def edit_reward(path: Path, position: int) -> None:
    with sqlite3.connect(path) as db:
        state = json.loads(
            db.execute("SELECT state FROM stored_events WHERE rowid = ?", (position,)).fetchone()[0]
        )
        state["fact"]["reward"] = 1.0
        db.execute(
            "UPDATE stored_events SET state = ? WHERE rowid = ?",
            (json.dumps(state).encode(), position),
        )


def scored_position(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT rowid FROM stored_events WHERE topic = 'lineage:run.scored'"
        ).fetchone()[0]


def test_rebuild_refuses_a_broken_chain_and_names_the_position(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(ablate_run_facts())
    run_cli("sql", "SELECT 1")
    edit_reward(store_file(run_cli), position := scored_position(store_file(run_cli)))
    result = run_cli("rebuild", ok=False)
    assert result.exit_code == 3 and f"broken at position {position}" in result.stderr
    for command in (("sql", REWARDS), ("tree", ABLATE_RUN), ("export", "tree", ABLATE_RUN)):
        assert run_cli(*command, ok=False).exit_code == 3, command


def test_an_edit_after_the_read_models_is_refused_by_the_next_read(
    lineage: Lineage, run_cli: Cli
) -> None:
    """Events not yet projected are checked as they are read: a tampered reward never reaches a read
    model."""
    lineage.record(nightly_run_facts())
    run_cli("sql", "SELECT 1")
    lineage.record(ablate_run_facts())
    edit_reward(store_file(run_cli), position := scored_position(store_file(run_cli)))
    result = run_cli("sql", REWARDS, ok=False)
    assert (
        result.exit_code == 3
        and f"position {position}" in result.stderr
        and "lineage verify" in result.stderr
    )


def test_read_models_of_another_log_are_rebuilt_not_shown(
    tmp_path: Path, run_cli: Cli, lineage: Lineage
) -> None:
    """Same store URL, same or longer log, different history: the head hash kept in the file tells
    them apart."""
    lineage.record(ablate_run_facts())
    run_cli("sql", "SELECT 1")
    lineage.close()
    other = Cli(tmp_path / "other")
    other(
        "ingest",
        "-",
        input="\n".join(
            json.dumps(line)
            for line in (
                {"type": "run.registered", "run": f"other/run__{i}", "task": "t"} for i in range(30)
            )
        )
        + "\n",
    )
    with (
        sqlite3.connect(store_file(other)) as source,
        sqlite3.connect(store_file(run_cli)) as target,
    ):
        source.backup(target)  # the other log, now at this store's URL
    rows = json.loads(
        run_cli("sql", "SELECT run FROM runs ORDER BY run", "--format", "json").stdout
    )
    assert [row["run"] for row in rows] == [f"other/run__{i}" for i in sorted(range(30), key=str)]


def test_an_edited_row_in_the_read_models_is_caught_by_verify_read_models(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(ablate_run_facts())
    run_cli("sql", "SELECT 1")
    assert "match a rebuild" in run_cli("verify", "--read-models").stdout
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute(f"UPDATE run_outcomes SET reward = 1 WHERE run = '{ABLATE_RUN}'")
    result = run_cli("verify", "--read-models", ok=False)
    assert result.exit_code == 3 and "run_outcomes" in result.stderr
    assert "rebuild" in result.stderr


def test_a_macro_planted_in_the_file_never_runs_in_a_catch_up(
    lineage: Lineage, run_cli: Cli
) -> None:
    """The projections' own statements call `json_or_null` too (each `fork.opened` child's override
    keys): a catch-up that used the file's copy would store what the planter chose in a table, for
    every later reader."""
    lineage.record(nightly_run_facts())
    run_cli("sql", "SELECT 1")
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute("""CREATE OR REPLACE MACRO json_or_null(j) AS '["forged"]'::JSON""")
    lineage.record(ablate_run_facts())
    keys = run_cli(
        "sql", "SELECT DISTINCT config_override_keys AS k FROM fork_children", "--format", "jsonl"
    ).stdout
    assert "forged" not in keys and '["agent"]' in keys
    # The file keeps no macro of its own: the planted one is named, and a rebuild removes it.
    named = run_cli("verify", "--read-models", ok=False)
    assert named.exit_code == 3 and "macro json_or_null" in named.stderr
    run_cli("rebuild")
    run_cli("verify", "--read-models")


@pytest.mark.parametrize(
    "query",
    [
        "SELECT run, reward FROM runs ORDER BY run",  # by its name
        # a name built at run time
        "SELECT run, reward FROM query_table('ru' || 'ns') ORDER BY run",
        "SELECT run, reward FROM query('SELECT * FROM ' || 'ru' || 'ns') ORDER BY run",
        "SELECT r.run, r.reward FROM (SELECT 1) x, LATERAL "
        "(FROM query_table(reverse('snur'))) r ORDER BY 1",
    ],
)
def test_a_view_edited_in_the_file_is_never_what_a_query_reads(
    lineage: Lineage, run_cli: Cli, query: str
) -> None:
    """Each connection makes this code's views when a statement names them; a name that is not
    spelled out (built by `query_table`) must not reach the file's copy instead."""
    lineage.record(ablate_run_facts())
    honest = run_cli("sql", REWARDS, "--format", "json").stdout
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute("CREATE OR REPLACE VIEW runs AS SELECT 'forged' AS run, 1.0 AS reward")
    assert run_cli("sql", query, "--format", "json").stdout == honest
    assert lineage.sql(query) == json.loads(honest)
    with lineage.read_models() as models:
        assert models.db.rows(query) == json.loads(honest)


def test_a_macro_edited_in_the_file_is_not_reached_through_ours(
    lineage: Lineage, run_cli: Cli
) -> None:
    """`lineage_path` calls `ancestors`: naming one makes both."""
    lineage.record(nightly_run_facts())
    path = "SELECT node FROM lineage_path('nightly/csv-dedupe__7c1f2a90', 'n3', 'n4')"
    honest = run_cli("sql", path, "--format", "json").stdout
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute(
            "CREATE OR REPLACE MACRO ancestors(run_key, node_id) AS TABLE "
            "SELECT 'forged' AS node, 0 AS depth"
        )
    assert run_cli("sql", path, "--format", "json").stdout == honest


def serialized(sql: str) -> str:
    """`sql` as DuckDB's `json_execute_serialized_sql` takes it."""
    with duckdb.connect() as db:
        row = db.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize(
    "planted",
    [
        "CREATE OR REPLACE VIEW runs AS SELECT 'forged' AS run",
        "CREATE TABLE runs AS SELECT 'forged' AS run",
    ],
)
def test_a_query_run_on_a_connection_of_its_own_finds_no_view_in_the_file(
    lineage: Lineage, run_cli: Cli, planted: str
) -> None:
    """`json_execute_serialized_sql` runs its query on a new connection: no TEMP views there, only
    the file. The file keeps tables only, and one holding a view or a table of another name is
    rebuilt before it is read."""
    lineage.record(ablate_run_facts())
    run_cli("sql", "SELECT 1")
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute(planted)
    assert "forged" not in run_cli("sql", REWARDS).stdout
    with duckdb.connect(str(read_model_file(run_cli)), read_only=True) as db:
        left = db.execute(
            "SELECT count(*) FROM duckdb_views() WHERE NOT internal AND database_name <> 'temp'"
        ).fetchone()
        kept = {row[0] for row in db.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert left == (0,) and "runs" not in kept
    run_cli("verify", "--read-models")


#: The serialized query as $q, or (`True`) the SQL that calls it, for query() to run.
@pytest.mark.parametrize(
    ("statement", "q_is_the_calling_sql"),
    [
        ("SELECT * FROM json_execute_serialized_sql($q)", False),
        ("SELECT v FROM runs, JSON_EXECUTE_SERIALIZED_SQL($q) LIMIT 1", False),
        (
            "SELECT * FROM query('SELECT * FROM json_execute_' "
            "|| 'serialized_sql(''' || $q || ''')')",
            False,
        ),
        ("EXPLAIN ANALYZE SELECT * FROM json_execute_serialized_sql($q)", False),
        ("SELECT 1; SELECT * FROM json_execute_serialized_sql($q)", False),
        # The SQL that calls it only in a parameter of query(), whose name is quoted or followed by
        # a comment.
        ('SELECT * FROM "query"($q)', True),
        ("SELECT * FROM query/**/($q)", True),
    ],
)
def test_sql_run_on_a_connection_of_its_own_is_refused(
    lineage: Lineage, run_cli: Cli, statement: str, q_is_the_calling_sql: bool
) -> None:
    """That connection resolves names in the file before built-ins (`lower`) and sees none of our
    definitions, and `--timeout` cannot interrupt it; its name may be built at run time, so the plan
    is what is checked."""
    lineage.record(ablate_run_facts())
    run_cli("sql", "SELECT 1")
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute("CREATE MACRO lower(x) AS 'forged'")
    inner = serialized("SELECT lower('ABC') AS v")
    q = f"SELECT * FROM json_execute_serialized_sql('{inner}')" if q_is_the_calling_sql else inner
    result = run_cli("sql", "-p", "q", q, statement, ok=False)
    assert result.exit_code == 1, result.output
    assert "json_execute_serialized_sql" in result.stderr
    assert "forged" not in result.stdout
    assert lineage.sql("SELECT lower('ABC') AS v") == [{"v": "abc"}]
    named = run_cli("verify", "--read-models", ok=False)
    assert named.exit_code == 3 and "macro lower" in named.stderr


def test_a_macro_in_the_file_cannot_stand_in_for_a_pg_catalog_built_in(
    lineage: Lineage, run_cli: Cli
) -> None:
    """About 45 built-ins live in DuckDB's pg_catalog schema, searched after the path a connection
    sets."""
    lineage.record(ablate_run_facts())
    run_cli("sql", "SELECT 1")
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute("CREATE MACRO pg_typeof(x) AS 'forged'")
        db.execute("CREATE MACRO format_type(x, y) AS 'forged'")
    out = run_cli("sql", "SELECT pg_typeof(1) AS a, format_type(23, NULL) AS b", "--format", "csv")
    assert "forged" not in out.stdout and out.stdout.startswith("a,b\ninteger,")
    assert "forged" not in str(lineage.sql("SELECT pg_typeof(1) AS a"))


def test_the_check_of_a_statement_stops_at_its_timeout(run_cli: Cli) -> None:
    """Checking a statement plans it, and planning folds constants: hours of them here. The check
    and the statement share the one --timeout (a subprocess, so a check that ignored it fails the
    test, not CI)."""
    import subprocess
    import sys

    slow = "SELECT levenshtein(repeat('a', 3000000), repeat('b', 3000000)) AS x -- query("
    command = [sys.executable, "-m", "rollout_lineage.cli", "--home", str(run_cli.home)]
    done = subprocess.run(
        [*command, "sql", "--timeout", "1", slow], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 4 and "timeout" in done.stderr


def test_users_sql_spills_nothing_to_disk(lineage: Lineage, run_cli: Cli) -> None:
    """Past the memory cap a read fails (exit 4); it never spills into a temp folder beside the
    file."""
    lineage.record(ablate_run_facts())
    out = run_cli("sql", "SELECT current_setting('temp_directory') AS t", "--format", "csv").stdout
    assert out == 't\n""\n'  # an empty string, not a missing value
    assert lineage.sql("SELECT current_setting('temp_directory') AS t") == [{"t": ""}]
    result = run_cli("sql", "SET temp_directory = '/tmp/spill'", ok=False)
    assert result.exit_code == 1


@pytest.mark.parametrize(
    "planted",
    [
        ["CREATE SCHEMA s", "CREATE TABLE s.anything (a INT)"],
        ["CREATE SCHEMA s", "CREATE VIEW s.runs AS SELECT 'forged' AS run, 1.0 AS reward"],
        # A type named like a built-in would be what the rebuild's CREATE TABLE used (the view
        # forces one).
        ["CREATE TYPE json AS BLOB", "CREATE VIEW v AS SELECT 1"],
        ["CREATE TYPE json AS INTEGER", "CREATE VIEW v AS SELECT 1"],
    ],
)
def test_other_kinds_of_objects_planted_in_the_file_are_removed_by_the_next_read(
    lineage: Lineage, run_cli: Cli, planted: list[str]
) -> None:
    lineage.record(ablate_run_facts())
    honest = run_cli("sql", REWARDS, "--format", "json").stdout
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        for statement in planted:
            db.execute(statement)
    assert run_cli("sql", REWARDS, "--format", "json").stdout == honest
    kinds = run_cli(
        "sql", "SELECT DISTINCT typeof(fact) AS t FROM events", "--format", "csv"
    ).stdout
    assert kinds == "t\nJSON\n"
    with duckdb.connect(str(read_model_file(run_cli)), read_only=True) as db:
        schemas = db.execute(
            "SELECT schema_name FROM duckdb_schemas() WHERE NOT internal"
        ).fetchall()
        types = db.execute("SELECT type_name FROM duckdb_types() WHERE NOT internal").fetchall()
    assert ("s",) not in schemas and types == []
    run_cli("verify", "--read-models")


def test_a_macro_in_the_file_cannot_shadow_a_built_in(lineage: Lineage, run_cli: Cli) -> None:
    """`avg` and `min` stored in the file as macros would change mean rewards and what --as-of TIME
    means."""
    lineage.record(ablate_run_facts())
    honest = run_cli("sql", "SELECT fork, mean_reward FROM forks", "--format", "json").stdout
    as_of = run_cli(
        "sql",
        "SELECT count(*) AS n FROM events",
        "--as-of",
        "2000-01-01T00:00:00Z",
        "--format",
        "csv",
    )
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute("CREATE MACRO avg(x) AS 1.0")
        db.execute("CREATE MACRO min(x) AS 1000000")
    assert (
        run_cli("sql", "SELECT fork, mean_reward FROM forks", "--format", "json").stdout == honest
    )
    assert (
        run_cli("sql", "SELECT avg(reward) AS a FROM children", "--format", "csv").stdout
        != "a\n1.0\n"
    )
    later = run_cli(
        "sql",
        "SELECT count(*) AS n FROM events",
        "--as-of",
        "2000-01-01T00:00:00Z",
        "--format",
        "csv",
    )
    assert later.stdout == as_of.stdout == "n\n0\n"


def test_a_table_replaced_by_a_view_is_named_by_verify_and_rebuilt_by_reads(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(ablate_run_facts())
    honest = run_cli(
        "sql", "SELECT run, idx, reward FROM child_outcomes ORDER BY ALL", "--format", "csv"
    ).stdout
    with duckdb.connect(str(read_model_file(run_cli))) as db:
        db.execute("CREATE TABLE stash AS SELECT * FROM child_outcomes")
        db.execute("DROP TABLE child_outcomes")
        db.execute("CREATE VIEW child_outcomes AS SELECT * REPLACE (1.0 AS reward) FROM stash")
    result = run_cli("verify", "--read-models", ok=False)
    assert result.exit_code == 3 and "child_outcomes" in result.stderr
    assert (
        run_cli(
            "sql", "SELECT run, idx, reward FROM child_outcomes ORDER BY ALL", "--format", "csv"
        ).stdout
        == honest
    )


def test_no_progress_bar_reaches_stdout(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(nightly_run_facts())
    out = run_cli(
        "sql", "SELECT count(*) AS n FROM range(300000000) t(x) WHERE x % 7 = 0", "--format", "csv"
    ).stdout
    assert out == "n\n42857143\n"

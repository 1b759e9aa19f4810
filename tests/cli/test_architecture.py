"""Layering rules checked in a fresh interpreter: the domain imports without I/O libraries, the CLI
and its help open nothing, and a SQLite store loads only the side it needs (the static checks:
tests/unit)."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN_IN_DOMAIN = (
    "duckdb",
    "_duckdb",
    "docker",
    "click",
    "sqlite3",
    "psycopg",
    "rich",
    "rollout_lineage.adapters",
    "rollout_lineage.projections",
    "rollout_lineage.cli",
)


def test_the_domain_imports_without_io_libraries() -> None:
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in FORBIDDEN_IN_DOMAIN)
    code = (
        f"import sys; {blocked}; import rollout_lineage.domain.application, "
        f"rollout_lineage.domain.integrity, "
        "rollout_lineage.domain.vocabulary; print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_importing_the_cli_opens_nothing() -> None:
    code = (
        "import sys; import rollout_lineage.cli.main; print(sorted(m for m in "
        "('docker', 'psycopg', 'eventsourcing.sqlite') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_help_lists_every_command_without_loading_them() -> None:
    """`lineage --help` answers in a blink: no DuckDB, eventsourcing or fact models (issue #14)."""
    code = (
        "import sys, contextlib, io; from rollout_lineage.cli.main import cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n    "
        "cli(['--help'], prog_name='lineage')\nheavy = ('duckdb', '_duckdb', 'eventsourcing', "
        "'pydantic', 'rollout_lineage.domain.facts', 'docker', 'rich')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_reading_a_sqlite_store_loads_no_write_side(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`lineage sql` on a SQLite store catches the read models up through a plain read-only
    connection: no eventsourcing, PostgreSQL driver or fact models to import (issue #14), and the
    answer is the log's. DuckDB's engine is loaded without its Python relation layer (the `duckdb`
    package), which a query does not use."""
    home = str(tmp_path / ".lineage")
    write = (
        "from rollout_lineage import open_store, facts as f\n"
        f"with open_store(home={home!r}) as lineage:\n"
        "    lineage.record([f.RunRegistered(run='r1', "
        "task='t'), f.RunRegistered(run='r2', task='t')])"
    )
    subprocess.run([sys.executable, "-c", write], check=True)
    read = (
        "import sys, contextlib; from rollout_lineage.cli.main import cli\n"
        "with contextlib.suppress(SystemExit):\n"
        f"    cli(['--home', {home!r}, 'sql', 'SELECT count(*) AS n FROM runs', '--format', 'csv'],"
        " prog_name='lineage')\nheavy = ('eventsourcing', 'psycopg', "
        "'pydantic', 'rollout_lineage.domain.facts', 'duckdb')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", read], capture_output=True, text=True, check=False
    )
    assert result.stdout.split() == ["n", "2", "[]"], result.stderr


def test_writing_to_a_sqlite_store_loads_no_postgresql_driver(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A harness or `lineage ingest` on the embedded store never imports psycopg: the PostgreSQL
    recorder lives in `adapters/store/postgres_store.py`, which only a PostgreSQL store URL names
    (issue
    #14: ingest start-up)."""
    facts = tmp_path / "facts.jsonl"
    facts.write_text('{"type": "run.registered", "run": "r1", "task": "t"}\n', encoding="utf-8")
    write = (
        "import sys, contextlib; from rollout_lineage.cli.main import cli\n"
        "with contextlib.suppress(SystemExit):\n"
        f"    cli(['--home', {str(tmp_path / '.lineage')!r}, "
        f"'ingest', {str(facts)!r}], prog_name='lineage')\n"
        "print([m for m in ('psycopg', 'psycopg_pool', "
        "'eventsourcing.postgres') if m in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", write], capture_output=True, text=True, check=False
    )
    assert result.stdout.split() == ["[]"], result.stdout + result.stderr
    assert "appended 1 events" in result.stderr

"""Users' SQL over the read models, for `lineage sql` and the Python read API alike: only reads get
through.

The connection it runs on is read-only and sealed anyway (`runner.read_only_models`); checking the
statements first names the problem in our words, and keeps a query from dropping the TEMP views this
code defined.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ...adapters.duckdb_store import ReadModelDB
from ...domain.errors import InvalidInput

READ_ONLY_STATEMENTS = {"SELECT", "EXPLAIN"}
_EXPLAIN = re.compile(r"^\s*EXPLAIN(\s+ANALY[SZ]E)?\s+", re.IGNORECASE)
#: Text that may call `json_execute_serialized_sql`: by name, or through SQL that `query()` takes at
#: run time. A function is called by its name spelled out (quoted or not; nothing splits an
#: identifier), so a word match finds every statement that could; the plan then decides.
_MAY_RUN_SQL = re.compile(r"\b(json_execute_serialized_sql|query|query_table)\b", re.IGNORECASE)


def statement_kinds(connection: Any, query: str) -> list[str]:
    """Each statement's type, looking inside EXPLAIN: `EXPLAIN ANALYZE` runs what it explains, so it
    counts as that."""
    kinds = []
    for statement in connection.extract_statements(query):
        kind = statement.type.name
        if kind == "EXPLAIN":
            inner = _EXPLAIN.sub("", statement.query, count=1)
            kind = (
                "EXPLAIN"
                if inner != statement.query and statement_kinds(connection, inner) == ["SELECT"]
                else "EXPLAIN of something other than one SELECT"
            )
        kinds.append(kind)
    return kinds


def require_reads(
    db: ReadModelDB,
    query: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
    stated_timeout: float | None = None,
) -> None:
    """Only reads, and none that runs SQL on a connection of its own; the check itself stops past
    `timeout`."""
    try:
        kinds = statement_kinds(db.connection, query)
    except (
        Exception
    ) as exc:  # duckdb.ParserException and friends: the user's SQL, in DuckDB's words
        raise InvalidInput(f"the SQL does not parse: {exc}") from None
    refused = [kind for kind in kinds if kind not in READ_ONLY_STATEMENTS]
    if refused or not kinds:
        raise InvalidInput(
            f"expected read-only statements (SELECT, WITH "
            f"... SELECT, EXPLAIN), found {refused or 'none'}",
            hint="the read models are rebuilt from the log; "
            "change the log with `lineage ingest` instead",
        )
    if not _MAY_RUN_SQL.search(query):
        return  # most queries: no second parse
    for statement in db.connection.extract_statements(query):
        if _MAY_RUN_SQL.search(statement.query):
            _refuse_sql_on_a_connection_of_its_own(
                db, statement.query, params, timeout, stated_timeout
            )


def _refuse_sql_on_a_connection_of_its_own(
    db: ReadModelDB,
    statement: str,
    params: Mapping[str, Any] | None,
    timeout: float | None,
    stated_timeout: float | None,
) -> None:
    """`json_execute_serialized_sql` runs its query on a new connection: it sees the file but none
    of this connection's own views and macros (`shadows`), and the timeout cannot interrupt it. Its
    name, or the SQL that calls it, can reach `query()` as a parameter, so the plan says whether a
    statement calls it."""
    plan = db.plan(
        _EXPLAIN.sub("", statement, count=1),
        timeout=timeout,
        params=dict(params) if params else None,
        stated_timeout=stated_timeout,
    )
    if "JSON_EXECUTE_SERIALIZED_SQL" in plan.upper():
        raise InvalidInput(
            "expected a query over these read models, found "
            "json_execute_serialized_sql: it runs SQL on a connection of its "
            "own, which neither this code's views and macros nor --timeout reach",
            hint="run that SQL as the query itself",
        )


def run_reads(
    db: ReadModelDB,
    query: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
    batch_rows: int = 2048,
) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
    """Column names and a stream of rows (fetched `batch_rows` at a time), after `require_reads`;
    past `timeout` seconds (the check and the statement together) it is stopped."""
    started = time.monotonic()
    require_reads(db, query, params, timeout=timeout)
    return db.query(
        query,
        timeout=_left(timeout, started),
        params=dict(params) if params else None,
        stated_timeout=timeout,
        batch_rows=batch_rows,
    )


def fetch_reads(
    db: ReadModelDB,
    query: str,
    params: Mapping[str, Any] | None,
    how: str,
    *,
    timeout: float | None = None,
) -> Any:
    """`run_reads`, fetched whole by DuckDB (`how`: `to_arrow_table` or `df`)."""
    started = time.monotonic()
    require_reads(db, query, params, timeout=timeout)
    return db.fetch_whole(
        query,
        how,
        timeout=_left(timeout, started),
        params=dict(params) if params else None,
        stated_timeout=timeout,
    )


def _left(timeout: float | None, started: float) -> float | None:
    """What is left of `timeout` for the statement once its check has run (the two share one
    deadline)."""
    return None if timeout is None else max(timeout - (time.monotonic() - started), 0.001)

"""This code's own views and macros: TEMP objects of one connection, each made just before a
statement names it, so nothing stored in the read-model file (which holds tables only) can stand in
for them, and reading writes nothing to the file (a full disk or a read-only copy still answers).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache

from ...adapters.duckdb_store import ReadModelDB
from ..read_models.registry import PROJECTIONS

#: Macros every projection's views and statements may use.
DEFINITIONS = (
    # JSON null inside a fact means "absent": read models show SQL NULL for it.
    "CREATE OR REPLACE MACRO json_or_null(j) AS CASE WHEN j "
    "IS NULL OR json_type(j) = 'NULL' THEN NULL ELSE j END",
)
_CREATE = re.compile(r"^CREATE OR REPLACE (VIEW|MACRO) (\w+)")
#: Statements that may reach a definition without naming it: a name built at run time (`query()`,
#: `query_table()`), or the catalog itself, which lists whichever exist. They get every definition.
#: `json_execute_serialized_sql` runs its query on a connection of its own, which sees no temp
#: catalog, only the file: users' statements may not call it (`user_sql`), and the file holds no
#: view either (`runner` rebuilds a file that does).
_EVERY_DEFINITION = re.compile(
    r"\bquery(_table)?\s*\(|information_schema|\bduckdb_\w+|\bpragma|\bshow\b|\bdescribe\b|\bsummarize\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Definition:
    kind: str  # VIEW or MACRO
    name: str
    temp_statement: str
    uses: frozenset[str]  # the other definitions its text names


def statements() -> list[str]:
    """Every definition as code, in an order where each comes after those it uses."""
    return [*DEFINITIONS, *(statement for p in PROJECTIONS for statement in p.view_statements())]


@cache
def definitions() -> tuple[Definition, ...]:
    parsed = []
    for statement in statements():
        created = _CREATE.match(statement)
        # Our own statements, each a CREATE OR REPLACE of a named view or macro.
        assert created is not None, statement
        parsed.append((created[1], created[2].lower(), statement))
    pattern = _names_pattern(tuple(name for _, name, _ in parsed))
    return tuple(
        Definition(
            kind,
            name,
            _CREATE.sub(rf"CREATE OR REPLACE TEMP {kind} {name}", statement, count=1),
            frozenset(found.lower() for found in pattern.findall(statement)) - {name},
        )
        for kind, name, statement in parsed
    )


@cache
def _names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(
        r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b", re.IGNORECASE
    )


class Shadows:
    """The definitions one connection has made so far; called with every statement before DuckDB
    sees it.

    Making all of them costs about 11 ms a connection (DuckDB parses and binds each), a fifth of a
    fresh process's one-event catch-up, while most statements name one or two; so each is made
    before the first statement that names it, together with the definitions it uses. Names are
    found in the whole text, strings and comments included: a name found in excess costs a
    millisecond, never a wrong answer."""

    def __init__(self, db: ReadModelDB) -> None:
        self.db = db
        self.made: list[Definition] = []

    def __call__(self, sql: str) -> None:
        made = {d.name for d in self.made}
        if len(made) == len(definitions()):
            return
        if _EVERY_DEFINITION.search(sql):
            wanted = {d.name for d in definitions()}
        else:
            pattern = _names_pattern(tuple(d.name for d in definitions()))
            wanted = {found.lower() for found in pattern.findall(sql)}
        if wanted - made:
            self._make(wanted, made)

    def make_scalar_macros(self) -> None:
        scalar = {
            d.name
            for d in definitions()
            if d.kind == "MACRO" and " AS TABLE" not in d.temp_statement
        }
        self._make(scalar, {d.name for d in self.made})

    def _make(self, wanted: set[str], made: set[str]) -> None:
        by_name = {d.name: d for d in definitions()}
        closure, todo = set(), list(wanted)
        while todo:
            name = todo.pop()
            if name not in closure:
                closure.add(name)
                todo.extend(by_name[name].uses)
        # In creation order: what a definition uses exists before it.
        for definition in definitions():
            if definition.name in closure and definition.name not in made:
                self.db.connection.execute(definition.temp_statement)
                self.made.append(definition)


def shadow_on_demand(db: ReadModelDB) -> None:
    """From now on, every statement on `db` runs against this code's own views and macros, never the
    file's."""
    if not isinstance(db.before_statement, Shadows):
        db.before_statement = Shadows(db)
        # The projections' statements call scalar macros and name nothing else of ours, so they run
        # unscanned (`paging`); a scan would find words like `children` in them and make views they
        # never read.
        db.before_statement.make_scalar_macros()
    db.builtins_first()


@contextmanager
def creating_in_file(db: ReadModelDB) -> Iterator[None]:
    """For DDL on the file's own tables: names resolve in the file first meanwhile (with built-ins
    first, a new table would go to the system catalog), while the statements in between still get
    this code's definitions."""
    # The statements in between call scalar macros (made by `shadow_on_demand`), never views or
    # table macros, which are bound when made and so could not be made before their tables exist.
    shadow_on_demand(db)
    shadows = db.before_statement
    db.before_statement = None
    db.file_first()
    try:
        yield
    except BaseException:
        db.before_statement = shadows
        # a database a fatal error invalidated refuses this too: tell the first
        with suppress(Exception):
            db.builtins_first()
        raise
    db.before_statement = shadows
    db.builtins_first()


def macros_in_file(db: ReadModelDB) -> list[tuple[str, str]]:
    """("MACRO" or "MACRO TABLE", name) of each macro stored in the file: this code stores none.

    DuckDB lists macros only among all its functions (~13 ms), so this is asked when the file is
    rebuilt and by `verify --read-models`; reads do not need it (built-ins and this code's
    definitions resolve first).
    """
    rows = db.connection.execute(
        "SELECT DISTINCT function_type, function_name FROM duckdb_functions() "
        "WHERE database_name = ? AND function_type IN ('macro', 'table_macro') ORDER BY ALL",
        [db.catalog],
    ).fetchall()
    return [("MACRO TABLE" if kind == "table_macro" else "MACRO", name) for kind, name in rows]

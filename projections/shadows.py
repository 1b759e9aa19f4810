"""This code's own views and macros as TEMP objects of one connection, each made just before a statement names it.

The read-model file keeps its own copies of every view and macro (a DuckDB shell opened on the file sees them),
but anyone with write access to the file may have edited those. DuckDB resolves a name in the connection's temp
catalog before the file's, so a TEMP copy made from code hides the file's copy; and reading then writes nothing
to the file, so a full disk or a read-only copy still answers. Making all of them costs about 11 ms a connection
(DuckDB parses and binds each), a fifth of a fresh process's one-event catch-up, while most statements name one
or two. So each is made before the first statement that names it, together with the definitions it uses.

A statement can reach a view without spelling its name only by building the name at run time (`query()`,
`query_table()`), and one that reads the catalog lists whichever copies exist: such statements get every
definition first. Names are found in the whole text, strings and comments included: a name found in excess costs
a millisecond, never a wrong answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from ..adapters.duckdb_store import ReadModelDB
from .paging import PROJECTIONS

#: Macros every projection's views may use (the file holds them as well; see the module's doc).
DEFINITIONS = (
    # JSON null inside a fact means "absent": read models show SQL NULL for it.
    "CREATE OR REPLACE MACRO json_or_null(j) AS CASE WHEN j IS NULL OR json_type(j) = 'NULL' THEN NULL ELSE j END",
)
_CREATE = re.compile(r"^CREATE OR REPLACE (VIEW|MACRO) (\w+)")
#: Statements that may reach a definition without naming it: a name built at run time, or the catalog itself.
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
    """Every definition as the file holds it, in an order where each comes after those it uses."""
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
    """The definitions one connection has made so far; called with every statement before DuckDB sees it."""

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

    def drop(self) -> None:
        for definition in reversed(self.made):
            self.db.connection.execute(
                f"DROP {definition.kind} IF EXISTS temp.main.{definition.name}"
            )
        self.made.clear()


def shadow_on_demand(db: ReadModelDB) -> None:
    """From now on, every statement on `db` runs against this code's own views and macros, never the file's."""
    if not isinstance(db.before_statement, Shadows):
        db.before_statement = Shadows(db)
    db.builtins_first()


def unshadow(db: ReadModelDB) -> None:
    """Back to the file's own objects (the schema code creates and drops them)."""
    db.file_first()
    shadows, db.before_statement = db.before_statement, None
    # TEMP objects live as long as their connection: a connection that made none has none to drop.
    if isinstance(shadows, Shadows):
        shadows.drop()

"""What a projection is: tables it owns, how a window of the log fills them, the views on top, and
their docs.

Every projection reads the `events` table (the log as DuckDB rows, filled first for each page) and
appends with `INSERT ... SELECT` over the page's window of positions, so a page costs a handful of
set-based statements rather than one round trip per event. Tables are append-only (facts never
change), and the read models people query are views over them. Bump `version` when a projection
changes: it is rebuilt. A table is declared once as `Columns` (column, fact field, DuckDB type),
which gives its CREATE TABLE columns, its `from_json` spec and its INSERT ... SELECT list, so a fact
field is written in one place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

#: The window of log positions a page covers; every `apply` statement filters on it.
WINDOW = "position > $lo AND position <= $hi"


@dataclass(frozen=True)
class Projection:
    name: str
    version: int
    tables: Mapping[str, str]  # table -> column definitions
    apply: Sequence[str] = ()  # INSERT ... SELECT ... FROM events WHERE {WINDOW}
    views: Mapping[str, str] = field(default_factory=dict)  # view -> SELECT
    macros: Sequence[str] = ()  # CREATE OR REPLACE MACRO ...
    docs: Mapping[str, str] = field(default_factory=dict)  # table or view -> what a row is

    @classmethod
    def of(
        cls,
        name: str,
        version: int,
        columns: Sequence[Columns],
        *,
        views: Mapping[str, str] | None = None,
        macros: Sequence[str] = (),
        docs: Mapping[str, str] | None = None,
    ) -> Projection:
        """A projection whose tables are column lists: each list gives its table's DDL and INSERT,
        so a column is written once."""
        return cls(
            name=name,
            version=version,
            tables={c.table: c.ddl() for c in columns},
            apply=tuple(c.insert() for c in columns),
            views=views or {},
            macros=macros,
            docs=docs or {},
        )

    def create_statements(self) -> list[str]:
        return [
            f"CREATE TABLE IF NOT EXISTS {name} ({columns})"
            for name, columns in self.tables.items()
        ]

    def view_statements(self) -> list[str]:
        return [
            f"CREATE OR REPLACE VIEW {name} AS {select}" for name, select in self.views.items()
        ] + list(self.macros)

    def owned_names(self) -> list[str]:
        """Views first: dropping them releases the tables they read."""
        return [*self.views, *self.tables]


@cache
def consumed_types(statement: str) -> frozenset[str]:
    """The fact types an apply statement reads (from its `type IN (...)` filters), so a page skips
    the others."""
    return frozenset(
        re.findall(r"'([a-z_]+\.[a-z_]+)'", " ".join(re.findall(r"type IN \(([^)]*)\)", statement)))
    )


def parsed(spec: Mapping[str, Any], source: str = "fact") -> str:
    """Parse a JSON column once into a struct `j` (one parse per row instead of one per extracted
    field)."""
    return f"from_json({source}, '{json.dumps(spec, separators=(',', ':'))}') AS j"


def facts_of(types: str, spec: Mapping[str, Any], extra: str = "") -> str:
    """The window's events of the given type(s) (a SQL list body), with the fact parsed as `j`."""
    columns = f"position, type, occurred_at, recorded_at, actor{', ' + extra if extra else ''}"
    return f"(SELECT {columns}, {parsed(spec)} FROM events WHERE type IN ({types}) AND {WINDOW})"


#: Struct fields that are SQL keywords, so the SELECT quotes them (`j."index"`).
_QUOTED = frozenset({"index"})


@dataclass(frozen=True)
class Column:
    """One column of a read-model table: name, DuckDB type, the SELECT expression that fills it
    (over the window's event row and its fact parsed as `j`) and the fact fields it reads (a
    `from_json` spec part)."""

    name: str
    type: str
    sql: str
    reads: Mapping[str, Any] = field(default_factory=dict)


def fact(path: str, type: str = "VARCHAR", *, name: str | None = None, spec: Any = None) -> Column:
    """A fact field copied as it is: `path` is dotted for a nested one (`token_usage.source`), the
    column is named after its last part unless `name` says otherwise, and parsed as `spec` when that
    is not `type`."""
    parts = path.split(".")
    reads: Any = type if spec is None else spec
    for part in reversed(parts):
        reads = {part: reads}
    sql = "j." + ".".join(f'"{p}"' if p in _QUOTED else p for p in parts)
    return Column(name or parts[-1], type, sql, reads)


def facts(*paths: str, type: str = "VARCHAR") -> list[Column]:
    """Several fact fields of one type, each copied as it is."""
    return [fact(path, type) for path in paths]


def through(name: str, type: str = "VARCHAR", *, field: str | None = None) -> Column:
    """A fact field that a `source` subquery selects as `name` (`j.run AS run`), read from there."""
    return Column(name, type, name, {field or name: type})


def event(name: str, type: str) -> Column:
    """A column of the `events` row itself (position, times, actor, type), not of the fact."""
    return Column(name, type, name)


def derived(name: str, type: str, sql: str, **reads: Any) -> Column:
    """A column computed in SQL; `reads` names the fact fields the expression reads, with their
    spec."""
    return Column(name, type, sql, reads)


POSITION = event("position", "BIGINT")
OCCURRED_AT = event("occurred_at", "TIMESTAMPTZ")
RECORDED_AT = event("recorded_at", "TIMESTAMPTZ")
ACTOR = event("actor", "VARCHAR")


def _merge(into: dict[str, Any], part: Mapping[str, Any], table: str) -> None:
    """Add one column's spec part to a table's spec (nested structs and struct lists merge)."""
    for key, value in part.items():
        old = into.get(key)
        if isinstance(old, dict) and isinstance(value, Mapping):
            _merge(old, value, table)
        elif (
            isinstance(old, list)
            and isinstance(value, list)
            and isinstance(old[0], dict)
            and isinstance(value[0], Mapping)
        ):
            _merge(old[0], value[0], table)
        elif old is None:
            # A copy, so merging into it never changes a part another column shares.
            into[key] = json.loads(json.dumps(value))
        elif old != value:
            raise ValueError(
                f"table {table}: fact field {key!r} is read as {old!r} and as {value!r}; "
                "expected one type: parse it once and convert in the column's SQL"
            )


@dataclass(frozen=True)
class Columns:
    """A read-model table declared once: the fact types it reads and its columns, in table order.
    The CREATE TABLE columns, the `from_json` spec and the INSERT's SELECT list all come from this
    list.

    `source` replaces the window's parsed facts as the FROM (an unnest of a list in the fact, say):
    a subquery in which `{facts}` stands for them; its columns read what it names (`through`), and
    `tail` ends the statement (an ORDER BY)."""

    table: str
    facts: tuple[str, ...]
    columns: tuple[Column, ...]
    source: str | None = None
    tail: str = ""

    @classmethod
    def of(
        cls,
        table: str,
        types: Sequence[str],
        *columns: Column | Iterable[Column],
        source: str | None = None,
        tail: str = "",
    ) -> Columns:
        flat: list[Column] = []
        for item in columns:
            flat.extend([item] if isinstance(item, Column) else item)
        names = [c.name for c in flat]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"table {table}: expected each column once, found {twice} more than once; "
                "rename one (fact(..., name=...))"
            )
        return cls(table, tuple(types), tuple(flat), source, tail)

    def ddl(self) -> str:
        return ", ".join(f"{c.name} {c.type}" for c in self.columns)

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        for column in self.columns:
            _merge(spec, column.reads, self.table)
        return spec

    @property
    def type_list(self) -> str:
        """The fact types as a SQL list body, as `facts_of` takes them."""
        return ", ".join(f"'{t}'" for t in self.facts)

    def select(self) -> str:
        return ", ".join(c.sql for c in self.columns)

    def insert(self) -> str:
        window = facts_of(self.type_list, self.spec)
        source = self.source.replace("{facts}", window) if self.source else window
        tail = f" {self.tail}" if self.tail else ""
        return f"INSERT INTO {self.table} SELECT {self.select()} FROM {source}{tail}"

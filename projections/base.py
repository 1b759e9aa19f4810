"""What a projection is: tables it owns, how a window of the log fills them, the views on top, and their docs.

Every projection reads the `events` table (the log as DuckDB rows, filled first for each page) and appends
with `INSERT ... SELECT` over the page's window of positions, so a page costs a handful of set-based
statements rather than one round trip per event. Tables are append-only (facts never change), and the
read models people query are views over them. Bump `version` when a projection changes: it is rebuilt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
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
    """The fact types an apply statement reads (from its `type IN (...)` filters), so a page skips the others."""
    return frozenset(
        re.findall(r"'([a-z_]+\.[a-z_]+)'", " ".join(re.findall(r"type IN \(([^)]*)\)", statement)))
    )


def parsed(spec: Mapping[str, Any], source: str = "fact") -> str:
    """Parse a JSON column once into a struct `j` (one parse per row instead of one per extracted field)."""
    return f"from_json({source}, '{json.dumps(spec, separators=(',', ':'))}') AS j"


def facts_of(types: str, spec: Mapping[str, Any], extra: str = "") -> str:
    """The window's events of the given type(s) (a SQL list body), with the fact parsed as `j`."""
    columns = f"position, type, occurred_at, recorded_at, actor{', ' + extra if extra else ''}"
    return f"(SELECT {columns}, {parsed(spec)} FROM events WHERE type IN ({types}) AND {WINDOW})"

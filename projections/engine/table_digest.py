"""The digest `lineage verify --read-models` compares each read-model table by, in the kept file
and in a rebuild: SHA-256, so that no one who can edit the file can make an edited table hash like
the log's.

It replaced a row count and the sum of DuckDB's `hash(row)` (issue #33): that hash is no
cryptographic hash (a row's is a mix of its other columns XORed with its last column's, and an
integer's is invertible), so whoever edited a row could solve for a value in another column that
gave the row its old hash back, and the sum with it.

A table's digest is SHA-256 over
  * its name and its columns, each a name and a type, in table order (JSON, then a newline): a
    column renamed, moved or given another type is a changed table, even where its values print
    alike;
  * then the SHA-256 of each row (32 bytes), in ascending byte order: a total order that depends
    on the rows alone, so the tables compare as multisets of rows. Where a row sits in the file is
    not compared: a rebuild need not store rows in the order a catch-up did.
A row's SHA-256 is over every value in column order, each written `-` when NULL and otherwise as
its length in bytes, `:` and its text (`TEXT_OF`): a NULL is never an empty text, and no value can
reach into the next one.

Cost: one SHA-256 per row (DuckDB's own, streamed, with no sort in DuckDB), and 32 bytes per row of
the table held here to be sorted (numpy, in place); docs/security.md has the figures. A table whose
rows are too large to hash a DuckDB vector (2,048 rows) at a time under the memory cap is hashed
`DIGEST_ROWS` rows at a time by rowid instead, to the same digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ...adapters.duckdb_store import ReadModelDB, within_limits
from ...domain.errors import ReadLimitExceeded

#: Rows hashed per statement when a DuckDB vector of them does not fit in the cap (a vector of rows
#: each holding a run's 2,000-test map is hundreds of MB).
DIGEST_ROWS = 128
#: Row digests fetched per call.
FETCH_ROWS = 65_536

#: The text each kind of DuckDB type is written as (by `DuckDBPyType.id`); any other type is cast to
#: VARCHAR, which DuckDB writes exactly (a DOUBLE as its shortest round-trip digits, `-0.0` and
#: `nan` included). Timestamps are their count since the epoch, never a text that depends on the
#: connection's time zone (`infinity` for the infinite ones); blobs are hex; nested values are JSON,
#: where every string is quoted and escaped.
TEXT_OF = {
    "timestamp with time zone": "coalesce(epoch_us({c})::VARCHAR, {c}::VARCHAR)",
    "timestamp": "coalesce(epoch_us({c})::VARCHAR, {c}::VARCHAR)",
    "timestamp_ms": "coalesce(epoch_us({c})::VARCHAR, {c}::VARCHAR)",
    "timestamp_s": "coalesce(epoch_us({c})::VARCHAR, {c}::VARCHAR)",
    "timestamp_ns": "coalesce(epoch_ns({c})::VARCHAR, {c}::VARCHAR)",
    "blob": "hex({c})",
    "list": "to_json({c})::VARCHAR",
    "array": "to_json({c})::VARCHAR",
    "struct": "to_json({c})::VARCHAR",
    "map": "to_json({c})::VARCHAR",
    "union": "to_json({c})::VARCHAR",
}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def row_digest_sql(columns: Sequence[tuple[str, str, str]]) -> str:
    """The SQL expression of a row's SHA-256 (hex), given (name, type, type id) of each column."""
    values = []
    for name, _, type_id in columns:
        text = TEXT_OF.get(type_id, "{c}::VARCHAR").format(c=_quoted(name))
        values.append(f"coalesce(strlen({text})::VARCHAR || ':' || {text}, '-')")
    return f"sha256(concat({', '.join(values) or repr('')}))"


def columns_of(db: ReadModelDB, name: str) -> list[tuple[str, str, str]]:
    """(name, type, type id) of each column of the relation `name` reads, in order."""
    description = db.connection.execute(f"SELECT * FROM {name} LIMIT 0").description or []
    return [(column[0], str(column[1]), str(column[1].id)) for column in description]


def table_digest(db: ReadModelDB, name: str) -> str:
    """The table's SHA-256 (hex): its name and columns, then its rows' digests in byte order."""
    columns = columns_of(db, name)
    row = row_digest_sql(columns)
    try:
        with within_limits():
            digests = _collected(db.connection.execute(f"SELECT {row} FROM {name}"))
    except ReadLimitExceeded:
        digests = digests_by_rows(db, name, row)
    return sorted_digest(head_of(name, columns), digests)


def head_of(name: str, columns: Sequence[tuple[str, str, str]]) -> str:
    """What a table's digest starts with: its name and each column's name and type, in order."""
    return json.dumps([name, [[column, kind] for column, kind, _ in columns]])


def sorted_digest(head: str, digests: bytearray) -> str:
    """SHA-256 of `head`, a newline, and the 32-byte `digests` sorted (in place) in byte order."""
    import numpy  # only here: `lineage` starts without it

    rows = numpy.frombuffer(digests, dtype="S32")  # fixed width: compared byte by byte
    rows.sort()
    digest = hashlib.sha256(head.encode() + b"\n")
    digest.update(digests)  # sorted where it lies: no copy
    return digest.hexdigest()


def digests_by_rows(db: ReadModelDB, name: str, row: str) -> bytearray:
    """The rows' digests, `DIGEST_ROWS` rows per statement by rowid (the tables are append-only)."""
    found = bytearray()
    with within_limits():  # a single row past the cap is still exit 4
        end = db.connection.execute(f"SELECT coalesce(max(rowid) + 1, 0) FROM {name}").fetchone()
        assert end is not None  # an aggregate without GROUP BY returns exactly one row
        for start in range(0, end[0], DIGEST_ROWS):
            cursor = db.connection.execute(
                f"SELECT {row} FROM {name} WHERE rowid >= ? AND rowid < ?",
                [start, start + DIGEST_ROWS],
            )
            found += _collected(cursor)
    return found


def _collected(cursor: Any) -> bytearray:
    """Every hex digest a DuckDB cursor returns, as 32 bytes each."""
    found = bytearray()
    while rows := cursor.fetchmany(FETCH_ROWS):
        found += bytes.fromhex("".join(digest for (digest,) in rows))
    return found

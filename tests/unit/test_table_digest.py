"""The digest `verify --read-models` compares tables by (`projections/engine/table_digest.py`): two
tables get one digest only when they hold the same rows, in columns of the same names and types.

Each pair below is two tables an attacker might hope to pass for each other; the old digest (a row
count and the sum of DuckDB's row hashes) was solved for in tests/cli/test_read_model_forgery.py.
"""

from __future__ import annotations

import pytest

from rollout_lineage.adapters.duckdb_store import ReadModelDB
from rollout_lineage.projections.engine.table_digest import table_digest


def digest(schema: str, *inserts: str) -> str:
    db = ReadModelDB.open(":memory:")
    try:
        db.connection.execute(f"CREATE TABLE t ({schema})")
        for insert in inserts:
            db.connection.execute(f"INSERT INTO t VALUES {insert}")
        return table_digest(db, "t")
    finally:
        db.close()


DIFFERENT = {
    "NULL and empty text": (("a VARCHAR", "(NULL)"), ("a VARCHAR", "('')")),
    "NULL and the text NULL": (("a VARCHAR", "(NULL)"), ("a VARCHAR", "('NULL')")),
    "NULL and the text -": (("a VARCHAR", "(NULL)"), ("a VARCHAR", "('-')")),
    "a value reaching into the next": (
        ("a VARCHAR, b VARCHAR", "('ab', 'c')"),
        ("a VARCHAR, b VARCHAR", "('a', 'bc')"),
    ),
    "a length spelled into a value": (
        ("a VARCHAR, b VARCHAR", "('1:x', NULL)"),
        ("a VARCHAR, b VARCHAR", "('x', '1:x')"),
    ),
    "values swapped between rows": (
        ("a INTEGER, b INTEGER", "(1, 2), (3, 4)"),
        ("a INTEGER, b INTEGER", "(1, 4), (3, 2)"),
    ),
    "values swapped between columns": (
        ("a INTEGER, b INTEGER", "(1, 2)"),
        ("a INTEGER, b INTEGER", "(2, 1)"),
    ),
    "the same text in a column of another type": (("a INTEGER", "(1)"), ("a VARCHAR", "('1')")),
    "JSON and VARCHAR holding the same text": (("a JSON", "('1')"), ("a VARCHAR", "('1')")),
    "the same JSON spelled otherwise": (
        ("a JSON", """('{"a":1}')"""),
        ("a JSON", """('{"a": 1}')"""),
    ),
    "a column renamed": (("a INTEGER", "(1)"), ("b INTEGER", "(1)")),
    "a row repeated in place of another": (
        ("a INTEGER", "(1), (2)"),
        ("a INTEGER", "(1), (1)"),
    ),
    "a row more": (("a INTEGER", "(1)"), ("a INTEGER", "(1), (1)")),
    "zero and minus zero": (("a DOUBLE", "(0.0)"), ("a DOUBLE", "('-0.0'::DOUBLE)")),
    "a double and its neighbour": (
        ("a DOUBLE", "(0.1::DOUBLE + 0.2::DOUBLE)"),
        ("a DOUBLE", "(0.3::DOUBLE)"),
    ),
    "a microsecond": (
        ("a TIMESTAMPTZ", "('2026-01-01 00:00:00+00')"),
        ("a TIMESTAMPTZ", "('2026-01-01 00:00:00.000001+00')"),
    ),
    "NULL and infinity": (("a TIMESTAMPTZ", "(NULL)"), ("a TIMESTAMPTZ", "('infinity')")),
    "a list's NULL element and its text": (
        ("a VARCHAR[]", "(['x', NULL])"),
        ("a VARCHAR[]", "(['x', 'null'])"),
    ),
    "a NULL list and an empty one": (("a VARCHAR[]", "(NULL)"), ("a VARCHAR[]", "([])")),
    "list elements joined otherwise": (
        ("a VARCHAR[]", "(['a, b'])"),
        ("a VARCHAR[]", "(['a', 'b'])"),
    ),
}


@pytest.mark.parametrize("pair", DIFFERENT.values(), ids=list(DIFFERENT))
def test_tables_that_differ_have_different_digests(
    pair: tuple[tuple[str, str], tuple[str, str]],
) -> None:
    (schema_a, rows_a), (schema_b, rows_b) = pair
    assert digest(schema_a, rows_a) != digest(schema_b, rows_b)


def test_the_same_rows_stored_in_another_order_have_the_same_digest() -> None:
    """A rebuild need not store rows in the order a catch-up did: the order is not compared."""
    schema = "a INTEGER, b VARCHAR, c TIMESTAMPTZ"
    rows = ["(1, 'x', '2026-01-01 00:00:00+00')", "(2, NULL, NULL)", "(1, 'x', NULL)"]
    assert digest(schema, *rows) == digest(schema, *reversed(rows))
    assert digest(schema, ", ".join(rows)) == digest(schema, *rows)


def test_the_time_zone_of_the_connection_does_not_change_a_digest() -> None:
    db = ReadModelDB.open(":memory:")
    try:
        db.connection.execute("CREATE TABLE t (a TIMESTAMPTZ)")
        db.connection.execute("INSERT INTO t VALUES ('2026-03-29 01:30:00+00')")
        before = table_digest(db, "t")
        db.connection.execute("SET TimeZone = 'America/Los_Angeles'")
        assert table_digest(db, "t") == before
    finally:
        db.close()

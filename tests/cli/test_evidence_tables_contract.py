"""One contract, every implementation of the `EvidenceTables` port: the SQLite file and the
PostgreSQL server.

The Merkle tree, signed batches and bundle provenance write each statement once, with `?` marks, and
read rows as tuples; these cases hold each recorder to what that code relies on, through the port
only, and check what landed with a raw connection of an outsider (`tests/raw_store.py`). The
in-memory log keeps no evidence tables: every reader of them refuses it, saying so, and appends
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rollout_lineage.adapters.evidence import ed25519
from rollout_lineage.adapters.evidence.batch_evidence import (
    PROVENANCE,
    SIGNATURES,
    BatchEvidence,
    check_coverage,
    signatures,
)
from rollout_lineage.adapters.evidence.bundle_import import sources
from rollout_lineage.adapters.evidence.merkle_store import LEAVES, MerkleStore
from rollout_lineage.adapters.store.event_store import ChainedSQLiteRecorder
from rollout_lineage.adapters.store.memory_log import MEMORY_ENV
from rollout_lineage.adapters.store.postgres_store import ChainedPostgresRecorder
from rollout_lineage.adapters.store.store_url import StoreURL
from rollout_lineage.adapters.store_port import EvidenceTables, evidence_tables
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp
from rollout_lineage.domain.errors import InvalidInput
from tests.raw_store import raw_store

SIGNATURE_ROWS = [(1, 2, "lab+0a1b2c3d+AAAA", b"\x00sig\xff"), (3, 3, "lab+0a1b2c3d+BBBB", b"")]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'events.sqlite'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def app(store_url: str) -> Iterator[LineageApp]:
    application = LineageApp(
        env=StoreURL.parse(store_url).application_env(), actor="tester@lab", tool_version="port"
    )
    yield application
    application.close()


@pytest.fixture
def store(app: LineageApp) -> EvidenceTables:
    return evidence_tables(app.recorder)


def _stored(store_url: str, table: str, order: str) -> list[tuple[Any, ...]]:
    """What an outsider's connection finds in the table: committed rows only."""
    with raw_store(store_url) as raw:
        return [
            tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
            for row in raw.execute(f"SELECT * FROM {table} ORDER BY {order}")
        ]


def test_each_sql_recorder_declares_the_port_by_subclassing_it(app: LineageApp) -> None:
    """Declared, not sniffed: mypy checks a subclass's members against the port."""
    assert type(app.recorder) in (ChainedSQLiteRecorder, ChainedPostgresRecorder)
    assert EvidenceTables in type(app.recorder).__mro__
    assert evidence_tables(app.recorder) is app.recorder


def test_inserted_rows_read_back_as_the_same_plain_tuples(
    store: EvidenceTables, store_url: str
) -> None:
    with store.transaction(commit=True) as cursor:
        store.insert(cursor, SIGNATURES, SIGNATURE_ROWS)
    query = (
        f"SELECT * FROM {store.table(SIGNATURES)} WHERE first_position > ? ORDER BY first_position"
    )
    read = store.read(query, (0,))
    with store.transaction(commit=False) as cursor:
        fetched = store.fetch(cursor, query, (0,))
    assert read == fetched == SIGNATURE_ROWS
    assert {type(row) for row in read + fetched} == {tuple}, "rows are tuples, never dicts or Rows"
    assert {type(row[3]) for row in read + fetched} == {bytes}
    assert _stored(store_url, SIGNATURES, "first_position") == SIGNATURE_ROWS, (
        "the port's table is the store's own, where an outsider finds it"
    )


def test_values_are_bound_never_pasted_into_the_statement(
    store: EvidenceTables, store_url: str
) -> None:
    """A `?` or `%s` in a value is the value: the marks are rewritten in our statement, never in
    what is bound."""
    hostile = "x?'); DROP TABLE lineage_signatures; -- %s %(a)s"
    with store.transaction(commit=True) as cursor:
        store.insert(cursor, SIGNATURES, [(5, 6, hostile, b"?")])
    query = f"SELECT first_position, signer FROM {store.table(SIGNATURES)} WHERE signer = ?"
    assert store.read(query, (hostile,)) == [(5, hostile)]
    assert store.read(query, ("x",)) == []
    assert _stored(store_url, SIGNATURES, "first_position") == [(5, 6, hostile, b"?")]


def test_keep_existing_leaves_a_stored_row_as_it_was(store: EvidenceTables, store_url: str) -> None:
    """Two readers catching the tree up write the same rows; a second one never replaces the
    first."""
    with store.transaction(commit=True) as cursor:
        store.insert(cursor, LEAVES, [(0, 1, b"first")])
    with store.transaction(commit=True) as cursor:
        store.insert(cursor, LEAVES, [(0, 1, b"other"), (1, 2, b"next")], keep_existing=True)
    assert _stored(store_url, LEAVES, "idx") == [(0, 1, b"first"), (1, 2, b"next")]


def test_a_stored_key_without_keep_existing_fails_the_whole_transaction(
    store: EvidenceTables, store_url: str
) -> None:
    with store.transaction(commit=True) as cursor:
        store.insert(cursor, SIGNATURES, SIGNATURE_ROWS[:1])
    with (
        pytest.raises(Exception, match=r"(?i)unique|duplicate"),
        store.transaction(commit=True) as cursor,
    ):
        store.insert(cursor, SIGNATURES, [(10, 10, "new", b"")])
        store.insert(cursor, SIGNATURES, SIGNATURE_ROWS[:1])
    assert _stored(store_url, SIGNATURES, "first_position") == SIGNATURE_ROWS[:1]


def test_an_exception_inside_a_transaction_rolls_it_back(
    store: EvidenceTables, store_url: str
) -> None:
    with pytest.raises(RuntimeError, match="midway"), store.transaction(commit=True) as cursor:
        store.insert(cursor, SIGNATURES, SIGNATURE_ROWS)
        raise RuntimeError("midway")
    assert _stored(store_url, SIGNATURES, "first_position") == []


def test_a_transaction_sees_its_rows_and_no_one_else_does_before_it_commits(
    store: EvidenceTables, store_url: str
) -> None:
    query = f"SELECT first_position FROM {store.table(SIGNATURES)} WHERE first_position > ?"
    with store.transaction(commit=True) as cursor:
        store.insert(cursor, SIGNATURES, SIGNATURE_ROWS)
        assert store.fetch(cursor, query, (0,)) == [(1,), (3,)]
        assert store.read(query, (0,)) == []
        assert _stored(store_url, SIGNATURES, "first_position") == []
    assert store.read(query, (0,)) == [(1,), (3,)]


def test_batch_evidence_is_written_through_the_port_in_the_batch_s_transaction(
    app: LineageApp, store: EvidenceTables, store_url: str
) -> None:
    key = ed25519.generate("port")
    store.batch_evidence = BatchEvidence(signer=key)
    position = app.record([f.RunRegistered(run="r/1", task="t")]).position
    [(first, last, signer, _)] = list(signatures(store))
    assert (first, last, signer) == (1, position, str(key.verifier))
    assert check_coverage(store, [key.verifier]).signed == position


def test_a_batch_whose_evidence_fails_appends_nothing(
    app: LineageApp, store: EvidenceTables, store_url: str
) -> None:
    """A failure writing the batch's evidence (here provenance) fails the batch: events, links and
    evidence alike, on PostgreSQL too, where the library commits a transaction whose hook raised in
    Python."""
    app.record([f.RunRegistered(run="r/1", task="t")])

    def failing(ids: Any, rows: Any) -> list[tuple[Any, ...]]:
        raise ValueError("no provenance for this batch")

    store.batch_evidence = BatchEvidence(provenance=failing)
    with pytest.raises(ValueError, match="no provenance"):
        app.record([f.RunRegistered(run="r/2", task="t")])
    store.batch_evidence = None
    assert store.max_notification_id() == 1
    assert [link[0] for link in store.chain_links(0, None)] == [1]
    assert _stored(store_url, PROVENANCE, "position") == []
    assert app.record([f.RunRegistered(run="r/2", task="t")]).appended == 1, (
        "the refused batch is appended whole once its evidence can be written"
    )


# --- the in-memory log keeps no evidence tables ---------------------------------------------------

REFUSED = (
    r"expected a SQLite or PostgreSQL store, found ChainedMemoryRecorder: the in-memory log keeps"
)


class _Impostor:
    """What the old probes looked for (a `datastore`, `chain_table`, `log_rows`), without the
    port."""

    datastore = object()
    chain_table = ("schema", "lineage_chain")

    def log_rows(self, *args: Any) -> list[tuple[Any, ...]]:
        return []


def test_every_reader_of_the_evidence_tables_refuses_the_memory_log() -> None:
    app = LineageApp(env=MEMORY_ENV, actor="tester@lab", tool_version="port")
    app.record([f.RunRegistered(run="r/1", task="t")])
    recorder = app.recorder
    assert not isinstance(recorder, EvidenceTables)
    readers = [
        lambda: evidence_tables(recorder),
        lambda: MerkleStore(recorder),
        lambda: list(signatures(recorder)),
        lambda: check_coverage(recorder, []),
        lambda: sources(recorder),
    ]
    for read in readers:
        with pytest.raises(InvalidInput, match=REFUSED):
            read()
    assert recorder.max_notification_id() == 1


def test_an_object_with_the_old_probes_marks_is_not_taken_for_a_store() -> None:
    with pytest.raises(InvalidInput, match="found _Impostor"):
        MerkleStore(_Impostor())
    with pytest.raises(InvalidInput, match="found _Impostor"):
        list(signatures(_Impostor()))

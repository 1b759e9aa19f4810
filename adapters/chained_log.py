"""The port through which readers see the log: rows in position order and the hash chain beside
them.

The SQLite and PostgreSQL recorders in `event_store` and the in-memory one in `memory_log` implement
it (`tests/cli/test_chained_log_contract.py` runs the same cases against all three); it lives apart
from them so that readers (the projection runner, `lineage sql`, `lineage verify`) can name it
without importing a database driver. The chain arithmetic every recorder shares (`stored_rows`,
`next_links`) is here for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from uuid import UUID

from ..domain.integrity import ChainRow, link

if TYPE_CHECKING:  # readers of the log load no eventsourcing (`lineage sql` starts faster)
    from eventsourcing.persistence import StoredEvent


@runtime_checkable
class ChainedLog(Protocol):
    """The log as readers use it: rows in position order, and the hash chain written beside them."""

    def max_notification_id(self) -> int | None: ...

    def log_rows(
        self, after: int, stop: int | None, limit: int, max_bytes: int | None = None
    ) -> list[tuple[Any, ...]]:
        """(position, originator id hex, version, topic, state bytes as stored (None when not stored
        as bytes), recorded_by) in position order; recorded_by is the identity the store
        authenticated (a PostgreSQL role), None where it has none. At most `limit` rows, and with
        `max_bytes` they end with the first whose state takes their states' total to `max_bytes`
        (`up_to_bytes`)."""

    def chain_links(self, after: int, stop: int | None) -> list[tuple[int, int, str]]: ...

    def chain_hash_at(self, position: int) -> str | None: ...

    def chain_rows(self) -> Iterator[ChainRow]: ...

    def existing_originators(self, ids: set[UUID]) -> set[UUID]:
        """Which of these streams have a first event: one query for a whole batch."""


def up_to(stop: int | None, column: str = "rowid", mark: str = "?") -> str:
    """The SQL bound of a read up to `stop`: none when there is no stop. No reader caps positions
    with a sentinel: any event a writer can see (a position past 2**62 included), every reader
    sees."""
    return "" if stop is None else f" AND {column} <= {mark}"


def chain_stop(events_table: str, chain_table: str, position: str = "rowid") -> str:
    """SQL for the last position the events (`position`: their column) or the links reach (NULL
    for neither), in one read, as `stop`: where a chain walk stops, so that what a writer appends
    during the walk (its events read before it, its links after) is on neither side."""
    return (
        f"SELECT max(p) AS stop FROM (SELECT max({position}) AS p FROM {events_table} "
        f"UNION ALL SELECT max(position) FROM {chain_table}) tails"
    )


def until(stop: int | None) -> tuple[int, ...]:
    """The parameter `up_to` binds."""
    return () if stop is None else (stop,)


def up_to_bytes(rows: Iterable[tuple[Any, ...]], max_bytes: int | None) -> list[tuple[Any, ...]]:
    """The rows (state at index 4) up to the one whose state takes their total to `max_bytes`, that
    one included: at least one row however large, and one row past the budget at most. `rows` may be
    a cursor: the rest is never fetched."""
    if max_bytes is None:
        return list(rows)
    kept, total = [], 0
    for row in rows:
        kept.append(row)
        total += len(row[4] or b"")
        if total >= max_bytes:
            break
    return kept


def stored_rows(events: Sequence[StoredEvent]) -> list[tuple[str, int, str, bytes]]:
    """(originator id as 32 hex, version, topic, state): the form both the SQLite insert and the
    chain use."""
    return [
        (
            e.originator_id.hex if isinstance(e.originator_id, UUID) else str(e.originator_id),
            e.originator_version,
            e.topic,
            e.state,
        )
        for e in events
    ]


def next_links(
    previous: tuple[int, str],
    ids: Sequence[int],
    rows: Sequence[tuple[str, int, str, bytes]],
    recorded_by: str | None = None,
) -> list[tuple[int, int, str]]:
    """(position, previous position, chain hash) for new events at `ids`, continuing from the last
    link; `recorded_by` is the role the store authenticated for the batch (None on a store that has
    none)."""
    links = []
    previous_position, previous_hash = previous
    for position, (originator_id, version, topic, state) in zip(ids, rows, strict=True):
        chain_hash = link(
            previous_hash, position, originator_id, version, topic, state, recorded_by
        )
        links.append((position, previous_position, chain_hash))
        previous_position, previous_hash = position, chain_hash
    return links


def _stored_bytes(state: Any) -> bytes | None:
    """The state as written (bytes); None for anything else, such as TEXT put there by hand."""
    return bytes(state) if isinstance(state, (bytes, bytearray, memoryview)) else None


def merge_chain(
    events: Iterator[tuple[Any, ...]], links: Iterator[tuple[Any, ...]]
) -> Iterator[ChainRow]:
    """Merge two position-ordered streams (events, links) into ChainRows, showing what is missing on
    each side.

    An event row is (position, originator id, version, topic, state[, recorded_by]): the role, where
    the store keeps one, is read with the event (as readers show it) and hashed into its link."""
    event, chain = next(events, None), next(links, None)
    while event is not None or chain is not None:
        if event is not None and (chain is None or event[0] < chain[0]):
            yield ChainRow(
                event[0],
                event[1],
                event[2],
                event[3],
                _stored_bytes(event[4]),
                None,
                None,
                _role(event),
            )
            event = next(events, None)
        elif chain is not None and (event is None or chain[0] < event[0]):
            yield ChainRow(chain[0], None, None, None, None, chain[1], chain[2])
            chain = next(links, None)
        elif event is not None and chain is not None:  # the same position on both sides
            yield ChainRow(
                event[0],
                event[1],
                event[2],
                event[3],
                _stored_bytes(event[4]),
                chain[1],
                chain[2],
                _role(event),
            )
            event, chain = next(events, None), next(links, None)


def _role(event: tuple[Any, ...]) -> str | None:
    return event[5] if len(event) > 5 else None

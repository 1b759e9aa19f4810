"""The port through which readers see the log: rows in position order and the hash chain beside them.

Both recorders in `event_store` implement it; it lives apart from them so that readers (the projection runner,
`lineage sql`) can name it without importing a database driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from ..domain.integrity import ChainRow


@runtime_checkable
class ChainedLog(Protocol):
    """The log as readers use it: rows in position order, and the hash chain written beside them."""

    def max_notification_id(self) -> int | None: ...

    def log_rows(self, after: int, stop: int | None, limit: int) -> list[tuple[Any, ...]]:
        """(position, originator id hex, version, topic, state bytes as stored (None when not stored as bytes),
        recorded_by) in position order; recorded_by is
        the identity the store authenticated (a PostgreSQL role), None where it has none."""

    def chain_links(self, after: int, stop: int | None) -> list[tuple[int, int, str]]: ...

    def chain_hash_at(self, position: int) -> str | None: ...

    def chain_rows(self) -> Iterator[ChainRow]: ...


def _stored_bytes(state: Any) -> bytes | None:
    """The state as written (bytes); None for anything else, such as TEXT put there by hand."""
    return bytes(state) if isinstance(state, (bytes, bytearray, memoryview)) else None


def merge_chain(
    events: Iterator[tuple[Any, ...]], links: Iterator[tuple[Any, ...]]
) -> Iterator[ChainRow]:
    """Merge two position-ordered streams (events, links) into ChainRows, showing what is missing on each side."""
    event, chain = next(events, None), next(links, None)
    while event is not None or chain is not None:
        if event is not None and (chain is None or event[0] < chain[0]):
            yield ChainRow(
                event[0], event[1], event[2], event[3], _stored_bytes(event[4]), None, None
            )
            event = next(events, None)
        elif chain is not None and (event is None or chain[0] < event[0]):
            yield ChainRow(chain[0], None, None, None, None, chain[1], chain[2])
            chain = next(links, None)
        elif event is not None and chain is not None:  # the same position on both sides
            yield ChainRow(
                event[0], event[1], event[2], event[3], _stored_bytes(event[4]), chain[1], chain[2]
            )
            event, chain = next(events, None), next(links, None)

"""The chained log in memory: eventsourcing's plain-Python recorder with the hash chain kept beside
it.

Design decision: the same `ChainedLog` port as the SQLite and PostgreSQL recorders, so tests that
need neither a file nor a server (the domain, projections over a log, the composition root) run on a
log that behaves like a real one, chain included; `tests/cli/test_chained_log_contract.py` holds all
three to the same cases. It is chosen by configuration, as the others are: `MEMORY_ENV` names the
factory below as eventsourcing's PERSISTENCE_MODULE. Nothing survives the process.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, StoredEvent
from eventsourcing.popo import POPOApplicationRecorder, POPOFactory

from ...domain.integrity import GENESIS, ChainRow
from ..chained_log import merge_chain, next_links, stored_rows, up_to_bytes

#: The application environment for an in-memory chained log.
MEMORY_ENV = {"PERSISTENCE_MODULE": f"{__name__}:ChainedMemoryFactory"}
MEMORY_URL = "memory:"
#: How many notifications one read may return: every one (a count, not a position cap).
_ALL = sys.maxsize


class ChainedMemoryRecorder(POPOApplicationRecorder):
    """Events in a list (eventsourcing's), and one chain link per event appended under the same
    lock."""

    def __init__(self) -> None:
        super().__init__()
        self._chain: list[tuple[int, int, str]] = []  # (position, previous position, chain hash)

    def _insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        # The library's lock is re-entrant: events and links are appended together or (on a
        # uniqueness error, raised before anything is appended) not at all, as in one database
        # transaction.
        with self._database_lock:
            ids = super()._insert_events(stored_events, **kwargs)
            if ids:
                last = self._chain[-1] if self._chain else (0, 0, GENESIS)
                self._chain.extend(next_links((last[0], last[2]), ids, stored_rows(stored_events)))
            return ids

    def log_rows(
        self, after: int, stop: int | None, limit: int, max_bytes: int | None = None
    ) -> list[tuple[Any, ...]]:
        return up_to_bytes(
            (
                (n.id, _hex(n.originator_id), n.originator_version, n.topic, n.state, None)
                for n in self.select_notifications(
                    start=after, limit=limit, stop=stop, inclusive_of_start=False
                )
            ),
            max_bytes,
        )

    def chain_links(self, after: int, stop: int | None) -> list[tuple[int, int, str]]:
        with self._database_lock:
            return [
                entry
                for entry in self._chain
                if after < entry[0] and (stop is None or entry[0] <= stop)
            ]

    def chain_hash_at(self, position: int) -> str | None:
        with self._database_lock:
            found = [entry[2] for entry in self._chain if entry[0] == position]
        return found[0] if found else None

    def chain_rows(self) -> Iterator[ChainRow]:
        events = (
            (n.id, _hex(n.originator_id), n.originator_version, n.topic, n.state)
            for n in self.select_notifications(start=None, limit=_ALL)
        )
        return merge_chain(events, iter(self.chain_links(0, None)))

    def existing_originators(self, ids: set[UUID]) -> set[UUID]:
        return {i for i in ids if self.select_events(i, lte=1)}


def _hex(originator_id: UUID | str) -> str:
    return originator_id.hex if isinstance(originator_id, UUID) else str(originator_id)


class ChainedMemoryFactory(POPOFactory):
    def application_recorder(self) -> ApplicationRecorder:
        return ChainedMemoryRecorder()

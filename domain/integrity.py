"""Tamper evidence: every stored event is chained to its predecessor by a hash (`link`).

The links live in their own table, written in the same transaction as the events
(`adapters/store/event_store.py`), so an edited byte or a deleted, inserted or reordered event
breaks the
walk at the first bad position; a kept `Head` proves the tail is still there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import IntegrityFailure

GENESIS = "sha256:" + "0" * 64  # link(0): the link the first event's is made from


def link(
    previous_hash: str,
    position: int,
    originator_id: str,
    originator_version: int,
    topic: str,
    state: bytes,
    recorded_by: str | None = None,
) -> str:
    """link(n) = sha256(link(n-1) | position | originator id | version | topic | sha256(state)),
    with link(0) = `GENESIS`. Where the store authenticates writers (PostgreSQL) the role that
    appended the event is hashed in too (`|by:role` after the state's digest), so editing who
    recorded an event breaks the chain like editing the event; `recorded_by` is None where the store
    has none or the link was made before roles were chained, and the two forms never hash the same
    input."""
    digest = hashlib.sha256()
    digest.update(
        f"{previous_hash}|{position}|{originator_id}|{originator_version}|{topic}|".encode()
    )
    digest.update(hashlib.sha256(state).digest())
    if recorded_by is not None:
        digest.update(f"|by:{recorded_by}".encode())
    return "sha256:" + digest.hexdigest()


def position_gap(previous_position: int, position: int) -> str | None:
    """What breaks the dense rule when `position` follows `previous_position` (None when it holds).

    Positions are dense: the first event is at 1 and each one at the previous one's position + 1
    (the writers' rule, `adapters/store/event_store.py`), so a gap, a jump or a position at or
    below 0 is
    named as such."""
    if position == previous_position + 1:
        return None
    if position <= previous_position:
        return (
            f"position {position} follows position {previous_position}: positions start at 1 and "
            "rise by 1, so it was inserted outside rollout-lineage"
        )
    missing = (
        f"position {previous_position + 1}"
        if position == previous_position + 2
        else f"positions {previous_position + 1}-{position - 1}"
    )
    return (
        f"position {position} follows position {previous_position}: {missing} hold no event; "
        "positions rise by 1, so events were deleted or this one was inserted past a jump"
    )


@dataclass(frozen=True)
class ChainRow:
    """One position as stored: the event (None if missing) and its chain link (None if missing)."""

    position: int
    originator_id: str | None
    originator_version: int | None
    topic: str | None
    state: bytes | None
    previous: int | None
    chain_hash: str | None
    recorded_by: str | None = None


@dataclass(frozen=True)
class Head:
    """A (position, link) pair, as `lineage head` prints it. A truncated tail leaves a shorter but
    valid chain, so a head kept outside the store proves the tail is still there (`check_head`)."""

    position: int
    chain_hash: str

    def __str__(self) -> str:
        return f"{self.position}:{self.chain_hash}"

    @classmethod
    def parse(cls, text: str) -> Head:
        position, _, chain_hash = text.partition(":")
        if (
            not (position.isascii() and position.isdigit())
            or len(position) > 18
            or not chain_hash.startswith("sha256:")
            or len(chain_hash) != 71
        ):
            raise ValueError(
                f"expected POSITION:sha256:<64 hex> as printed by `lineage head`, found {text!r}"
            )
        return cls(int(position), chain_hash)


@dataclass
class ChainReport:
    events: int = 0
    head: Head | None = None
    first_bad_position: int | None = None
    problem: str | None = None
    checked_head: Head | None = None

    @property
    def intact(self) -> bool:
        return self.problem is None

    def summary(self) -> dict[str, object]:
        """The report as the audit, the HTML report, bundles and `verify` print it."""
        return {
            "intact": self.intact,
            "events": self.events,
            "head": str(self.head) if self.head else None,
            "first_bad_position": self.first_bad_position,
            "problem": self.problem,
        }


class ChainWalker:
    """Walks rows in position order, stopping at the first break (later links depend on it
    anyway)."""

    def __init__(self, start: Head | None = None) -> None:
        """Walk from the log's beginning, or from a head already checked (a reader resuming where it
        stopped)."""
        self.report = ChainReport(head=start)
        self._previous_position = start.position if start else 0
        self._previous_hash = start.chain_hash if start else GENESIS

    def feed(self, rows: Iterable[ChainRow]) -> bool:
        return all(self._check(row) for row in rows)

    def _fail(self, position: int, problem: str) -> bool:
        self.report.first_bad_position = position
        self.report.problem = problem
        return False

    def _check(self, row: ChainRow) -> bool:
        p = row.position
        gap = position_gap(self._previous_position, p)
        if gap is not None:
            return self._fail(p, gap)
        if row.state is None and row.originator_id is None:
            return self._fail(p, f"position {p}: the event was deleted (its chain link remains)")
        if row.state is None:
            return self._fail(
                p,
                f"position {p}: the event's state is stored as something other than the bytes "
                "rollout-lineage writes (e.g. TEXT); it was edited",
            )
        if row.chain_hash is None:
            return self._fail(
                p,
                f"position {p}: the event has no chain link, "
                f"so it was inserted outside rollout-lineage",
            )
        if row.previous != self._previous_position:
            return self._fail(
                p,
                f"position {p}: its link points back to position {row.previous}, "
                f"but the event before it is at position {self._previous_position}; "
                f"events were deleted, inserted or reordered",
            )
        expected = link(
            self._previous_hash,
            p,
            row.originator_id or "",
            row.originator_version or 0,
            row.topic or "",
            row.state,
            row.recorded_by,
        )
        if expected != row.chain_hash:
            return self._fail(
                p, f"position {p}: the stored event does not match its chain hash; it was edited"
            )
        self._previous_position, self._previous_hash = p, expected
        self.report.events += 1
        self.report.head = Head(p, expected)
        return True

    def check_head(self, kept: Head, stored_hash_at: str | None) -> None:
        """Compare a head kept elsewhere with what the store now holds at that position."""
        self.report.checked_head = kept
        if self.report.problem is not None:
            return
        if kept.position == 0:  # the head of an empty log: genesis, which every log extends
            stored_hash_at = GENESIS
        if stored_hash_at is None:
            self._fail(
                kept.position,
                f"the kept head {kept} is missing: the log ends at "
                f"{self.report.head or 'position 0'}, so its tail was truncated",
            )
        elif stored_hash_at != kept.chain_hash:
            self._fail(
                kept.position,
                f"the kept head {kept} differs from the stored link at that position "
                f"({stored_hash_at}); the log was rewritten",
            )


def check_window(start: Head | None, rows: Iterable[ChainRow]) -> Head | None:
    """Check one window of the log against its chain, continuing from `start`; returns the window's
    last head.

    Readers call this on every page they project, so nothing broken ever reaches a read model.
    """
    walker = ChainWalker(start)
    if not walker.feed(rows):
        raise IntegrityFailure(
            f"the log's hash chain is broken at position {walker.report.first_bad_position}: "
            f"{walker.report.problem}; the read models stop before it",
            hint="run `lineage verify` for the whole report, and restore the store from a backup "
            "or a kept head; nothing after the break is shown",
        )
    return walker.report.head


def aligned_head(
    start: Head | None,
    events: Sequence[tuple[Any, ...]],
    links: Sequence[tuple[int, int, str]],
) -> Head | None:
    """The window's last head when its events and links pair up one to one and every link holds (the
    normal case), computed without a `ChainRow` or `Head` per event (a third of a rebuild's time);
    None otherwise, and the caller then walks the window with `check_window`, which names the first
    break.

    `events` are (position, originator id, version, topic, state bytes, recorded_by) in position
    order.
    """
    if not events or len(events) != len(links):
        return None
    previous_position, previous_hash = (start.position, start.chain_hash) if start else (0, GENESIS)
    for event, (position, previous, chain_hash) in zip(events, links, strict=True):
        state = event[4]
        if (
            event[0] != position
            or previous != previous_position
            or position != previous_position + 1
            or type(state) is not bytes
        ):
            return None
        expected = link(previous_hash, position, event[1], event[2], event[3], state, event[5])
        if expected != chain_hash:
            return None
        previous_position, previous_hash = position, expected
    return Head(previous_position, previous_hash)

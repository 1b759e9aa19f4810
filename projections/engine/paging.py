"""Catching read models up with the log: checked pages, each applied to every read model in one
transaction, so a crash leaves the previous page's state and the next reader resumes from there.
`runner` decides when to catch up; this module does it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from itertools import chain, islice
from queue import SimpleQueue
from typing import Any, TypeVar

from ...adapters import progress
from ...adapters.chained_log import ChainedLog, merge_chain
from ...adapters.duckdb_store import ReadModelDB
from ...domain.errors import IntegrityFailure
from ...domain.integrity import Head, aligned_head, check_window
from ...domain.vocabulary import TOPIC_PREFIX
from ..read_models import event_rows
from ..read_models.base import consumed_types
from ..read_models.registry import PROJECTIONS

#: Rows applied together: staged into DuckDB, then every projection's statements once for the lot,
#: and one tracking move. One row group (DuckDB's unit of storage): a 1,000,000-event rebuild ran
#: 10% faster than with pages of 50,000 (fewer rounds of statements, fuller row groups written).
PAGE = 122_880
#: Rows read from the store at a time (one DuckDB vector), checked, and appended to the staging
#: table as they come: the reader runs a page ahead in chunks while DuckDB applies the page before,
#: and Python never holds two whole pages (read whole, pages this size took that rebuild's peak from
#: 511 to 728 MB; in chunks it is 460).
READ = 2_048
#: ... and at most this share of the memory cap in states. DuckDB parses a vector's facts together,
#: so its working memory follows the bytes in a vector, not the rows: 100 events holding 20,000-test
#: results each (29 MB of JSON) exhausted a 256 MB cap. A chunk cut short by this ends its page, so
#: every vector of a page stays within it (a single larger event is read alone).
READ_SHARE_OF_MEMORY = 64
#: Chunks appended to the staging table at once: one appender a chunk cost a 1,000,000-event rebuild
#: 0.8 s more.
APPEND_CHUNKS = 8
#: The reader runs a page ahead, and holds at most this share of the memory cap in states (beside
#: DuckDB's).
READ_AHEAD_SHARE_OF_MEMORY = 4
#: A rebuild commits every this many pages: each commit writes the WAL and may checkpoint, and at
#: one commit per page that was a quarter of a 1,000,000-event rebuild (measured).
REBUILD_PAGES_PER_COMMIT = 5
#: The staging table, empty between pages: TEMP (this connection's, in memory), so a page's states
#: are written to the file once (into `events`), not also into the file's WAL on their way in and
#: out. Made anew by every catch-up: a chunk is staged before its page's transaction begins, so a
#: failed catch-up may leave one behind.
STAGING = (
    f"CREATE OR REPLACE TEMP TABLE {event_rows.PAGE_TABLE} "
    f"(position BIGINT, originator_id VARCHAR, "
    "originator_version INTEGER, topic VARCHAR, state VARCHAR, recorded_by VARCHAR)"
)
TRACKING_NAME = "lineage"
T = TypeVar("T")


def tracked_position(db: ReadModelDB) -> int:
    return tracked(db)[0]


def tracked(db: ReadModelDB) -> tuple[int, Head | None]:
    """The position the file holds the log up to, and the chain head there (None before the first
    event)."""
    rows = db.rows(
        "SELECT position, head_hash FROM lineage_tracking WHERE name = ?", [TRACKING_NAME]
    )
    if not rows or not rows[0]["position"]:
        return 0, None
    position, head_hash = rows[0]["position"], rows[0]["head_hash"]
    return position, Head(position, head_hash) if head_hash else None


def catch_up(
    db: ReadModelDB,
    recorder: ChainedLog,
    *,
    stop: int | None = None,
    page: int = PAGE,
    inside_page: Callable[[int], None] | None = None,
    pages_per_commit: int = 1,
) -> int:
    """Apply every event after the tracked position (up to `stop`); returns the new tracked
    position.

    Every page is checked against the log's hash chain before it is applied (continuing from the
    head kept in the file), so a broken chain stops the read models before the break
    (IntegrityFailure, exit 3). Each page moves the tracking row in the transaction that applies it;
    `pages_per_commit` pages share one transaction (a rebuild's choice: a crash then leaves the last
    committed page, and fewer commits write less). A crash anywhere leaves the last committed
    state, and the next reader resumes from there: every event applied exactly once, none skipped.

    A page is read in chunks (`READ` events, and no more than a share of the memory cap in states),
    each checked and staged as it arrives while DuckDB applies the page before; then it is copied
    into `events` and every projection appends its rows for that window of positions with
    set-based SQL (`_apply_page`).
    """
    last, head = tracked(db)
    if stop is not None and last >= stop:
        return last
    target = (stop or recorder.max_notification_id()) if progress.listened() else None
    db.execute(STAGING)
    read = min(page, READ)
    chunks_per_page = -(-page // read)
    read_bytes = db.memory_limit_bytes // READ_SHARE_OF_MEMORY
    chunks = _prefetched(
        _checked_chunks(recorder, head, last, stop, read, read_bytes),
        chunks_per_page,
        db.memory_limit_bytes // READ_AHEAD_SHARE_OF_MEMORY,
        _state_bytes,
    )
    pages = _staged_pages(db, chunks, chunks_per_page, read)
    # Each transaction takes its further pages from the same iterator as this loop.
    for first in pages:
        with _one_thread(db, first.rows), _unscanned(db), db.transaction():
            for staged in chain([first], islice(pages, pages_per_commit - 1)):
                last = _apply_page(db, staged, last, inside_page)
                progress.advance("projecting the log", last, target)
    return last


@dataclass
class _Staged:
    """A page in the staging table: how many rows, its last position and the chain head there, its
    event types."""

    rows: int
    high: int
    head: Head | None
    types: set[str]


def _staged_pages(
    db: ReadModelDB,
    chunks: Iterator[tuple[list[tuple[Any, ...]], Head | None]],
    chunks_per_page: int,
    read: int,
) -> Iterator[_Staged]:
    """Stage up to `chunks_per_page` chunks a page, appended `APPEND_CHUNKS` at a time as they
    arrive. A chunk of fewer than `read` rows (cut short by its bytes, or the log's end) ends its
    page: the page's vectors then line up with its chunks, each within the byte budget."""
    for first in chunks:
        staged = _Staged(0, 0, None, set())
        waiting: list[tuple[Any, ...]] = []
        for rows, head in chain([first], chunks):
            waiting += rows
            staged.rows += len(rows)
            staged.high, staged.head = rows[-1][0], head
            staged.types.update(row[3].removeprefix(TOPIC_PREFIX) for row in rows)
            if len(waiting) >= APPEND_CHUNKS * read:
                db.append(f"temp.main.{event_rows.PAGE_TABLE}", waiting)
                waiting = []
            if len(rows) < read or staged.rows >= chunks_per_page * read:
                break
        db.append(f"temp.main.{event_rows.PAGE_TABLE}", waiting)  # the rest (none appends nothing)
        yield staged


@contextmanager
def _unscanned(db: ReadModelDB) -> Iterator[None]:
    """The projections' own statements, run without the scan for views and macros to make
    (`shadows`): they call only scalar macros, made when the connection was opened, and the scan
    would make every view whose name appears in them as a word (`children`), at a few milliseconds
    each."""
    scan, db.before_statement = db.before_statement, None
    try:
        yield
    finally:
        db.before_statement = scan


@contextmanager
def _one_thread(db: ReadModelDB, rows: int) -> Iterator[None]:
    """DuckDB on one thread while pages are applied, then its default again for the connection's
    queries.

    A page is one row group, the unit DuckDB splits a scan by, so more threads only woke up to wait:
    a 1,000,000-event rebuild took 10% longer with two than with one (it took a tenth more CPU time
    for the same wall time with pages of 50,000); and the page reader's thread needs that core. A
    page under one vector (2,048 rows) is never split, and the two settings would cost a one-event
    catch-up a millisecond.
    """
    if rows < 2048:
        yield
        return
    db.execute("SET threads = 1")
    try:
        yield
    finally:
        db.execute("RESET threads")


def _apply_page(
    db: ReadModelDB,
    staged: _Staged,
    last: int,
    inside_page: Callable[[int], None] | None,
) -> int:
    """The staged page into `events`, every projection's rows for its window, and the tracking row;
    returns its end."""
    high, head = staged.high, staged.head
    db.execute(event_rows.STAGE_PAGE)
    db.execute(f"DELETE FROM temp.main.{event_rows.PAGE_TABLE}")
    for projection in PROJECTIONS[1:]:
        for statement in projection.apply:
            if consumed_types(statement) & staged.types:
                db.execute(statement, {"lo": last, "hi": high})
    if inside_page is not None:
        inside_page(high)  # tests use this to die mid-page
    db.execute(
        "UPDATE lineage_tracking SET position = ?, head_hash = ? WHERE name = ? AND position = ?",
        [high, head.chain_hash if head else None, TRACKING_NAME, last],
    )
    return high


def _checked_chunks(
    recorder: ChainedLog,
    head: Head | None,
    after: int,
    stop: int | None,
    chunk: int,
    max_bytes: int | None = None,
) -> Iterator[tuple[list[tuple[Any, ...]], Head | None]]:
    """Chunks of the log (`chunk` rows, or fewer holding `max_bytes` of state) with the chain head
    at each one's end."""
    if after and head is None:
        raise IntegrityFailure(
            f"the read models are at position {after} but "
            f"do not say which log head they were built from",
            hint="run `lineage rebuild`",
        )
    while rows := recorder.log_rows(after, stop, chunk, max_bytes):
        high = rows[-1][0]
        links = recorder.chain_links(after, high)
        aligned = aligned_head(head, rows, links)
        # something is off (or unusual): the full walk decides, and names a break
        if aligned is None:
            events = iter(rows)
            aligned = check_window(head, merge_chain(events, iter(links)))
        head = aligned
        after = high
        yield _as_text(rows), head
    tail = recorder.chain_links(after, stop)
    # links past the last event: its events were deleted
    if tail and not recorder.log_rows(after, tail[0][0], 1):
        check_window(head, merge_chain(iter(()), iter(tail)))


def _as_text(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows with their state as text for DuckDB; state that is not UTF-8 was not written by this
    tool."""
    try:
        return [(r[0], r[1], r[2], r[3], r[4].decode(), r[5]) for r in rows]
    except (UnicodeDecodeError, AttributeError):
        bad = next(r[0] for r in rows if not isinstance(r[4], bytes) or not _utf8(r[4]))
        raise IntegrityFailure(
            f"the stored event at position {bad} is not the "
            f"UTF-8 JSON rollout-lineage writes; it was edited",
            hint="run `lineage verify` for the whole report, and restore the store from a backup",
        ) from None


def _state_bytes(chunk: tuple[list[tuple[Any, ...]], Head | None]) -> int:
    return sum(len(row[4] or b"") for row in chunk[0])


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _prefetched(
    items: Iterator[T], ahead: int, ahead_bytes: int, size: Callable[[T], int]
) -> Iterator[T]:
    """Read up to `ahead` items, and up to `ahead_bytes` of them by `size` (at least one), from the
    store while DuckDB applies what came before (DuckDB releases the GIL).

    A thread of its own reads and hands items over: a one-event catch-up hands over one item and the
    end, where a future per item read ahead cost it half a millisecond."""
    handed: SimpleQueue[tuple[bool, Any, int]] = SimpleQueue()
    room = threading.Condition()
    held = [0, 0]  # items read and not yet taken, and their size
    stopped = threading.Event()

    def has_room(weight: int) -> bool:
        return (
            stopped.is_set() or not held[0] or (held[0] < ahead and held[1] + weight <= ahead_bytes)
        )

    def read() -> None:
        try:
            for item in items:
                weight = size(item)
                with room:
                    room.wait_for(partial(has_room, weight))
                    if stopped.is_set():
                        return
                    held[0], held[1] = held[0] + 1, held[1] + weight
                handed.put((True, item, weight))
            handed.put((False, None, 0))
        except BaseException as exc:  # handed to the consumer, which raises it as its own
            handed.put((False, exc, 0))

    reader = threading.Thread(target=read, name="lineage-read", daemon=True)
    reader.start()
    interrupted = False
    try:
        while True:
            more, item, weight = handed.get()
            if not more:
                if item is not None:
                    raise item
                return
            with room:
                held[0], held[1] = held[0] - 1, held[1] - weight
                room.notify()
            yield item
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        # a consumer that stops early: the reader, waiting for room or reading, ends at its next
        # step
        with room:
            stopped.set()
            room.notify()
        if not interrupted:  # Ctrl-C ends the process: it does not wait for a read of a stuck store
            reader.join()

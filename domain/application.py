"""The application service: every write goes through `LineageApp.record`.

A call takes a batch of facts and appends them whole or not at all (one `save()`, one transaction).
Each fact is decided by its aggregate first, so re-sent facts append nothing and contradictions
raise before anything is written. Concurrent writers to the same run meet as optimistic-concurrency
conflicts; the batch is then decided again from the fresh state, which turns a lost race into a
no-op, a conflict error, or a clean append. The call returns the log position, so readers can catch
projections up to it.
"""

from __future__ import annotations

import gc
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol, runtime_checkable
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    PersistenceError,
)

from . import facts as f
from . import saved_state
from .aggregates import AGGREGATE_FOR_SUBJECT
from .errors import (
    ClaimRefused,
    InvalidFact,
    SnapshotNotRestorable,
    StoreClosed,
    StoreUnavailable,
)
from .events import EVENT_FOR_FACT, FactMapper, aggregate_id
from .snapshot import Snapshot
from .vocabulary import Layer

MAX_ATTEMPTS = 8  # the default RetryPolicy's
#: Batches of up to this many facts (a live record) are first decided on what the writer holds
#: (`LineageApp._record_held`); a larger one (an import) reads the store first, so a guess that
#: misses never sends a large batch twice.
HELD_BATCH = 32
CACHED_AGGREGATES = 512  # runs and snapshots a long-lived writer keeps decided state for
#: Every stored state starts with its recording time (see `events.encode_state`).
_RECORDED_AT = re.compile(rb'^\{"timestamp":"([^"]+)"')


@runtime_checkable
class KnowsOriginators(Protocol):
    """A recorder that answers "which of these streams exist?" in one query (the adapters'
    `ChainedLog` does); the domain asks through this, without knowing the adapter."""

    def existing_originators(self, ids: set[UUID]) -> set[UUID]: ...


@runtime_checkable
class ReadsForDeciding(Protocol):
    """A recorder that answers a decision's questions in one read (one statement, one round trip):
    which of these streams have a first event, each with its last version, and how the log's last
    stored state begins (None for an empty log). A stream this process holds at its last version
    needs no read of its events."""

    def decision_reads(self, ids: set[UUID]) -> tuple[dict[UUID, int], bytes | None]: ...


class AppendsIfNotBehind(Protocol):
    """A recorder that appends a batch only if the log's last event was recorded no later than the
    batch (checked under its writers' lock, in the same round trip as the append); else it appends
    nothing and raises `TailRecordedLater`. With it, a writer that holds every stream of a batch
    decides without reading the store first (`LineageApp._record_held`)."""

    def insert_events_not_behind(
        self, stored_events: Sequence[Any], recorded_at: datetime
    ) -> Sequence[int] | None: ...


def _subject_ids(batch: Sequence[Entry]) -> dict[tuple[str, str], UUID]:
    """Each subject of the batch (kind, key), in the order first named, with its stream's id."""
    subjects = dict.fromkeys((e.fact.subject_kind, e.fact.subject_key()) for e in batch)
    return {subject: aggregate_id(*subject) for subject in subjects}


def recorded_at(state: object) -> datetime | None:
    """The recording time a stored state begins with; None for no state or one without a readable
    time (only an edit makes one, and `verify` names that: the chain hashes every state)."""
    match = _RECORDED_AT.match(state[:80]) if isinstance(state, bytes) else None
    try:
        return recorded_time(match[1].decode()) if match else None
    except UnicodeDecodeError:
        return None


def recorded_time(text: str) -> datetime | None:
    """A recording time as stored (ISO 8601), or None where it is not one. A time without an offset
    is not readable: no clock of this tool writes one, and it cannot be compared with one that
    has."""
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        return None
    return found if found.utcoffset() is not None else None


class TailRecordedLater(Exception):
    """The log's last event was recorded after the batch's recording time: nothing was appended,
    and the batch is decided again with the time read from the log. `at`: that time as this code
    reads it (None where it cannot: only an edit makes such a time)."""

    def __init__(self, message: str, at: datetime | None = None) -> None:
        super().__init__(message)
        self.at = at


class Entry(NamedTuple):
    """A fact to record and, when known, when it happened (else: when it is recorded)."""

    fact: f.Fact
    occurred_at: datetime | None = None


@dataclass(frozen=True)
class Recorded:
    position: int  # the log position a reader must reach to see this batch (0 for an empty log)
    appended: int  # events appended by this call (0 when every fact was already known)
    new_facts: tuple[f.Fact, ...] = ()  # the facts that were (or, in a dry run, would be) appended


class RetryPolicy(Protocol):
    """How often a batch is tried and how long to wait in between: the store's adapter decides
    (waiting is I/O policy, `adapters/store/backoff.py`); the application decides what a retry means
    (decide again, or insert again)."""

    @property
    def attempts(self) -> int: ...

    def after_lost_race(self, attempt: int) -> None:
        """Another writer appended to one of the batch's streams first."""

    def after_store_away(self, attempt: int) -> None:
        """The store did not answer (a restart, a failover); nothing of the batch was committed."""


class RetryAtOnce:
    """The default: try again without waiting (a log in this process has no other writer to wait
    for)."""

    attempts = MAX_ATTEMPTS

    def after_lost_race(self, attempt: int) -> None:
        return None

    def after_store_away(self, attempt: int) -> None:
        return None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """A batch allocates many objects that live until it is stored (facts, events, aggregates,
    rows); cyclic GC passes over them, triggered again and again while the batch grows, cost a fifth
    of recording time."""
    enabled = gc.isenabled()
    if enabled:  # named before the collector is off, unnamed after it is on: a fork sees no gap
        _COLLECTOR_OFF_BY.add(threading.get_ident())
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
            _COLLECTOR_OFF_BY.discard(threading.get_ident())


#: The threads whose batch turned the cyclic collector off (`_collector_paused`). A process forked
#: while one of them records has only the thread that forked: the collector is turned back on there,
#: or the child runs without it for good.
_COLLECTOR_OFF_BY: set[int] = set()


def _collector_back_in_child() -> None:
    forked_by = threading.get_ident()
    if _COLLECTOR_OFF_BY - {forked_by}:
        gc.enable()
    _COLLECTOR_OFF_BY.intersection_update({forked_by})


os.register_at_fork(after_in_child=_collector_back_in_child)


def _layer_refs(fact: f.StageMarked) -> tuple[tuple[Layer, str | None], ...]:
    return (("environment", fact.environment_ref), ("sandbox", fact.sandbox_ref))


def expand(entry: Entry) -> list[Entry]:
    """Facts that imply others: marking a stage with refs captures a snapshot per non-null ref; a
    registration's run_dir is where the harness keeps the run, recorded as a run.located of kind
    recorded (so a registration sent with it and one sent without are the same, in either order)."""
    fact = entry.fact
    if isinstance(fact, f.RunRegistered) and fact.run_dir is not None:
        return [
            Entry(fact.model_copy(update={"run_dir": None}), entry.occurred_at),
            Entry(
                f.RunLocated(run=fact.run, path=fact.run_dir, kind="recorded"), entry.occurred_at
            ),
        ]
    if not isinstance(fact, f.StageMarked):
        return [entry]
    captures = [
        Entry(
            f.SnapshotCaptured(
                ref=ref, layer=layer, run=fact.run, stage=fact.stage, node=fact.node
            ),
            entry.occurred_at,
        )
        for layer, ref in _layer_refs(fact)
        if ref
    ]
    return [entry, *captures]


#: Times outside these years are typos or sentinels (0001-01-01, 9999-12-31), never when a rollout
#: happened.
PLAUSIBLE_YEARS = range(1970, 2201)


def refuse_implausible_times(batch: Sequence[Entry]) -> None:
    for entry in batch:
        if entry.occurred_at is not None and entry.occurred_at.year not in PLAUSIBLE_YEARS:
            raise InvalidFact(
                f"{entry.fact.type} for {entry.fact.subject_key()!r}: expected "
                f"occurred_at between {PLAUSIBLE_YEARS.start} and "
                f"{PLAUSIBLE_YEARS.stop - 1}, found {entry.occurred_at.isoformat()} "
                "(nothing was recorded)",
                hint="check the artifact's time field",
            )


def _refuse_claims(batch: Sequence[Entry]) -> None:
    claimed = [entry.fact for entry in batch if entry.fact.verified_here]
    if claimed:
        fact = claimed[0]
        raise ClaimRefused(
            f"expected facts a harness or importer observed, found {fact.type!r} "
            f"for {fact.subject_key()!r}, which asserts a verification only "
            f"{fact.verified_here} performs (nothing was recorded)",
            hint="record what you observed (e.g. snapshot.exported with the tar's digest) and let "
            "`lineage snapshots import` verify and load the tar",
        )


class LineageApp(Application[UUID]):
    name = "lineage"

    def __init__(
        self,
        env: dict[str, str] | None = None,
        *,
        actor: str = "unknown",
        tool_version: str = "0",
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(env=env)
        self.actor = actor
        self.tool_version = tool_version
        self.clock = clock
        self.retry: RetryPolicy = retry or RetryAtOnce()
        # Aggregates this process has seen, caught up on each use with only the events stored since
        # (another writer's included), so recording into a long run does not replay its whole
        # history every time.
        self._aggregates: OrderedDict[UUID, Any] = OrderedDict()
        # The version of each cached aggregate's newest saved state (`saved_state`), to know when to
        # save again.
        self._saved_at: dict[UUID, int] = {}
        # Replaced by the composition root with the store's own table (SQLite or PostgreSQL).
        self.saved_states: saved_state.SavedStates = saved_state.InMemorySavedStates()
        self.closed = False

    def close(self) -> None:
        """Closes the store's connections; a later `record` is refused at once (`StoreClosed`),
        where it was retried as a store gone away and ended, seconds later, as unreachable."""
        self.closed = True
        super().close()

    def construct_mapper(self) -> FactMapper:
        return FactMapper(transcoder=self.construct_transcoder())

    # --- writing ----------------------------------------------------------------------------------

    def record(
        self,
        entries: Iterable[Entry | f.Fact],
        *,
        dry_run: bool = False,
        verified_here: bool = False,
    ) -> Recorded:
        """Append the facts that are new, all in one transaction; with dry_run, only say which they
        are.

        Facts that assert a verification this tool performs (`Fact.verified_here`) are refused
        unless the caller is the code that performed it and says so; everyone else (ingest,
        importers, harnesses) may only state what they saw.
        """
        self._refuse_if_closed()
        with _collector_paused():
            batch = [
                e
                for entry in entries
                for e in expand(entry if isinstance(entry, Entry) else Entry(entry))
            ]
            refuse_implausible_times(batch)
            if not verified_here:
                _refuse_claims(batch)
            return self._record_batch(batch, dry_run)

    def _record_batch(self, batch: list[Entry], dry_run: bool) -> Recorded:
        if not dry_run and len(batch) <= HELD_BATCH:
            held = self._record_held(batch)
            if held is not None:
                return held
        attempts = self.retry.attempts
        # Appended only if the log's last recording time is still no later than the batch's (the
        # recorder checks it under its lock): a writer ahead may append between the read and the
        # append.
        not_behind = (
            getattr(self.recorder, "insert_events_not_behind", None) if attempts > 1 else None
        )
        for attempt in range(1, attempts + 1):
            try:
                events, decided, when = self._decide(batch)
                new_facts = tuple(event.fact for event in events)
                if not events or dry_run:
                    if events:  # decided, not stored: those aggregates no longer match the log
                        self._forget(decided)
                    return Recorded(self.position(), 0, new_facts)
                # Storing the events themselves (not the aggregates) keeps the log in the order
                # facts were given.
                stored = [self.mapper.to_stored_event(event) for event in events]
                positions = (
                    not_behind(stored, when)
                    if not_behind is not None
                    else self.recorder.insert_events(stored)
                )
            except TailRecordedLater as exc:
                self._forget(set(_subject_ids(batch).values()))
                # A writer ahead appended after the tail was read: decide again at its time. A time
                # this code reads as no later (or cannot read: an edited tail) is not waited for.
                # Nor on the last attempt: appended as a bare recorder would, readers resolve it.
                if exc.at is None or exc.at <= when or attempt + 1 >= attempts:
                    not_behind = None
                self._before_retry(exc, attempt, attempts)
            except BaseException as exc:
                # Whatever was decided in memory was not stored: the next use reads these aggregates
                # afresh.
                self._forget(set(_subject_ids(batch).values()))
                self._before_retry(exc, attempt, attempts)
            else:
                for agg_id, aggregate in decided.items():
                    self._remember(agg_id, aggregate)
                self._save_states(decided)
                return Recorded(max(positions or [0]), len(events), new_facts)
        raise AssertionError("unreachable")

    def _closed(self) -> StoreClosed:
        return StoreClosed(
            "expected an open store, found this application closed (close() was called on "
            "it); nothing was recorded or read",
            hint="open the store again (open_store, or a new LineageApp) and ask again",
        )

    def _refuse_if_closed(self) -> None:
        """Records and reads alike answer a closed application in our words, not the pool's."""
        if self.closed:
            raise self._closed()

    def _before_retry(self, exc: BaseException, attempt: int, attempts: int) -> None:
        """After an attempt that stored nothing: wait before deciding again, or raise."""
        if self.closed and isinstance(exc, Exception):
            # Closed while this record was under way (by another thread): no retry reopens it.
            raise self._closed() from exc
        if isinstance(exc, TailRecordedLater):
            # A writer ahead in time appended first, to other streams: decide again at once, at
            # its time. A pause only lets more writers ahead in, and made 8 PostgreSQL writers'
            # slowest records 10x slower.
            if attempt == attempts:
                raise exc
        elif isinstance(exc, IntegrityError):
            # Another writer appended to one of these streams first: decide again from its
            # result, after a pause that spreads the writers contending for it.
            if attempt == attempts:
                raise exc
            self.retry.after_lost_race(attempt)
        elif isinstance(exc, (OperationalError, InterfaceError)):
            # The server went away (a restart, a failover): nothing of this batch was committed;
            # retry.
            if attempt == attempts:
                raise StoreUnavailable(
                    f"the event store stayed unavailable after {attempt} attempts: {exc}",
                    hint="check that the store is reachable and not locked by a stuck "
                    "process; the batch was not recorded, so sending it again is safe",
                ) from exc
            self.retry.after_store_away(attempt)
        else:
            raise exc

    def _record_held(self, batch: Sequence[Entry]) -> Recorded | None:
        """The batch decided on what this process holds, with no read of the store first: each
        stream as cached, a stream not cached as new. Appended only where that cannot differ from
        deciding on the store: every stream of the batch gets a new event (so the store's unique
        (stream, version) key refuses the batch if any stream moved on or exists already), and the
        recorder checks the log's last recording time under its lock. Else (a re-sent fact, a
        refusal, a lost race, a later tail, the store away) None: nothing was appended, the streams
        this decision touched are forgotten, and the batch is decided again on the store's reads.
        One round trip per live record on PostgreSQL, where it was two."""
        append = getattr(self.recorder, "insert_events_not_behind", None)
        if append is None:
            return None
        ids = _subject_ids(batch)
        now = self.clock()
        # The cached aggregates are evolved in place: every exit that stores nothing forgets the
        # ones this decision evolved (a Ctrl-C too, which is then raised), and only those, so a
        # refusal on held state costs the store's reads no replay of an untouched stream.
        touched: set[UUID] = set()
        try:
            events, decided = self._decide_on(
                batch, ids, {s: self._aggregates.get(i) for s, i in ids.items()}, now, touched
            )
        except BaseException as exc:  # decided on what may be stale: the store's reads decide again
            self._forget(touched)
            if not isinstance(exc, Exception):
                raise
            return None
        if touched != set(ids.values()):
            self._forget(touched)
            return None
        try:
            positions = append([self.mapper.to_stored_event(event) for event in events], now)
        except (IntegrityError, OperationalError, InterfaceError, TailRecordedLater):
            self._forget(touched)
            return None
        except BaseException as exc:
            self._forget(touched)
            if self.closed and isinstance(exc, Exception):  # closed by another thread meanwhile
                raise self._closed() from exc
            raise
        for agg_id, aggregate in decided.items():
            self._remember(agg_id, aggregate)
        self._save_states(decided)
        return Recorded(max(positions or [0]), len(events), tuple(event.fact for event in events))

    def _decide(self, batch: Sequence[Entry]) -> tuple[list[Any], dict[UUID, Any], datetime]:
        """The new events of the batch in order, the aggregates as they stand after them and the
        batch's recording time; raises (having stored nothing) if any fact is refused."""
        ids = _subject_ids(batch)
        # One query says which streams exist, so new runs and snapshots cost no read at all; on the
        # chained stores the same statement reads the log's last recording time too.
        existing, tail = self._decision_reads(set(ids.values()))
        aggregates: dict[tuple[str, str], Any] = {
            subject: self._load(agg_id, existing[agg_id]) if agg_id in existing else None
            for subject, agg_id in ids.items()
        }
        # one transaction, one recording time
        when = self._recording_time(tail)
        return (*self._decide_on(batch, ids, aggregates, when), when)

    def _decide_on(
        self,
        batch: Sequence[Entry],
        ids: dict[tuple[str, str], UUID],
        aggregates: dict[tuple[str, str], Any],
        now: datetime,
        touched: set[UUID] | None = None,
    ) -> tuple[list[Any], dict[UUID, Any]]:
        """`_decide` on these aggregates (None: a new stream), recorded at `now`; the id of each
        aggregate about to be evolved is added to `touched` first."""
        events: list[Any] = []
        envelope = {"timestamp": now, "actor": self.actor, "tool_version": self.tool_version}
        for fact, occurred_at in batch:
            subject = (fact.subject_kind, fact.subject_key())
            agg = aggregates[subject]
            if not (agg or AGGREGATE_FOR_SUBJECT[subject[0]].blank()).decide(fact):
                continue
            if type(fact) is f.ChildRestored:
                self._require_restorable(fact, aggregates)
            event = EVENT_FOR_FACT[type(fact)].envelope(
                originator_id=ids[subject],
                originator_version=agg.version + 1 if agg else 1,
                occurred_at=occurred_at or now,
                fact=fact,
                **envelope,
            )
            if touched is not None:
                touched.add(ids[subject])
            aggregates[subject] = event.mutate(agg)
            events.append(event)
        return events, {ids[subject]: agg for subject, agg in aggregates.items() if agg is not None}

    def _recording_time(self, tail: bytes | None) -> datetime:
        """Now, or the log's last recording time (read from `tail`, how its last stored state
        begins) when this writer's clock is behind it: recorded time never goes backwards along the
        log, so "what the log held at TIME" is always a prefix of it.

        The tail is read before the write lock is taken, so a writer ahead may append in between:
        a recorder that `AppendsIfNotBehind` then refuses the batch and it is decided again (with a
        bare recorder, readers resolve a time to the position before the first later one, so even
        then `--as-of TIME` is a prefix).
        """
        now = self.clock()
        recorded = recorded_at(tail)
        return recorded if recorded is not None and recorded > now else now

    def _decision_reads(self, ids: set[UUID]) -> tuple[dict[UUID, int | None], bytes | None]:
        """The streams that exist (with their last version, None where unknown) and the log's tail
        state."""
        # Looked up, not `isinstance` against the protocol: that walks the protocol's attributes
        # every call.
        reads = getattr(self.recorder, "decision_reads", None)
        if reads is not None:
            found: tuple[dict[UUID, int | None], bytes | None] = reads(ids)
            return found
        last = self.recorder.max_notification_id()
        tail = self.recorder.select_notifications(start=last, limit=1) if last else []
        return dict.fromkeys(self._existing(ids)), tail[0].state if tail else None

    def _require_restorable(
        self, fact: f.ChildRestored, aggregates: dict[tuple[str, str], Any]
    ) -> None:
        for ref in (fact.snapshot.sandbox, fact.snapshot.environment):
            if not ref:
                continue
            snapshot = aggregates.get(("snapshot", ref)) or self._load(
                aggregate_id("snapshot", ref)
            )
            if isinstance(snapshot, Snapshot):
                restorable, why = snapshot.restorable()
                if not restorable:
                    raise SnapshotNotRestorable(
                        f"fork {fact.fork!r} of run {fact.run!r}: child {fact.index} "
                        f"restores snapshot {ref!r}, which cannot be restored: {why}",
                        hint="export snapshots before cleanup (keep-snapshots)",
                    )

    def _existing(self, ids: set[UUID]) -> set[UUID]:
        # Every chained log answers in one query per batch; a bare recorder is asked stream by
        # stream.
        if isinstance(self.recorder, KnowsOriginators):
            return self.recorder.existing_originators(ids)
        return {i for i in ids if self._load(i) is not None}

    def _load(self, agg_id: UUID, last_version: int | None = None) -> Any:
        """The aggregate as the log holds it now: from this process's cache plus the events stored
        since (one query, however long the stream; none when the store just said the stream's
        `last_version` and the cache holds it), or replayed from the store the first time."""
        aggregate = self._aggregates.get(agg_id)
        if aggregate is not None:
            current = last_version is not None and aggregate.version == last_version
            stored_since = (
                () if current else self.recorder.select_events(agg_id, gt=aggregate.version)
            )
        else:
            # Not seen by this process: from its newest saved state (if this code can use it)
            # onwards.
            aggregate, stored_since = self._saved(agg_id)
        for stored in stored_since:
            event: Any = self.mapper.to_domain_event(stored)  # a LineageEvent (FactMapper)
            aggregate = event.mutate(aggregate)
        if aggregate is None:
            return None
        self._remember(agg_id, aggregate)
        return aggregate

    def _remember(self, agg_id: UUID, aggregate: Any) -> None:
        self._aggregates[agg_id] = aggregate
        self._aggregates.move_to_end(agg_id)
        while len(self._aggregates) > CACHED_AGGREGATES:
            evicted, _ = self._aggregates.popitem(last=False)
            self._saved_at.pop(evicted, None)

    def _forget(self, agg_ids: Iterable[UUID]) -> None:
        for agg_id in agg_ids:
            self._aggregates.pop(agg_id, None)
            self._saved_at.pop(agg_id, None)

    # --- saved states (aggregate snapshots, outside the log) --------------------------------------

    def _saved(self, agg_id: UUID) -> tuple[Any, Sequence[Any]]:
        """The aggregate as its newest usable saved state holds it and the stored events after it;
        or None and the whole stream."""
        found = self.saved_states.newest(agg_id)
        aggregate = saved_state.usable(found, agg_id)
        if found is not None and aggregate is not None:
            # From the saved version itself: a state whose event the log does not hold (a log
            # restored from an older copy) describes another history, and is not used.
            stored = self.recorder.select_events(agg_id, gt=found.version - 1)
            if stored and stored[0].originator_version == found.version:
                self._saved_at[agg_id] = found.version
                return aggregate, stored[1:]
        return None, self.recorder.select_events(agg_id)

    def _save_states(self, aggregates: dict[UUID, Any]) -> None:
        """Save the state of each aggregate that moved `SAVE_EVERY` events past its last saved
        state.

        Its events are committed already; a state that cannot be saved (another writer saved that
        version first, the store went away) only means the next new process reads more events, so it
        is skipped.
        """
        for agg_id, aggregate in aggregates.items():
            if aggregate.version - self._saved_at.get(agg_id, 0) < saved_state.SAVE_EVERY:
                continue
            self._saved_at[agg_id] = aggregate.version
            saved = saved_state.Saved(
                aggregate.version, saved_state.topic(), saved_state.encode(aggregate)
            )
            try:
                self.saved_states.keep(agg_id, saved)
            except PersistenceError:
                continue

    def saved_states_differing(self) -> tuple[int, list[str]]:
        """Replay the stream behind every saved state this code would use and compare: (states
        checked, the ones that are not what the log gives). States written by other code are never
        used here, so skipped."""
        checked, differing = 0, []
        for agg_id, saved in self.saved_states.all():
            if saved.topic != saved_state.topic():
                continue
            checked += 1
            replayed: Any = None
            for stored in self.recorder.select_events(agg_id, lte=saved.version):
                event: Any = self.mapper.to_domain_event(stored)
                replayed = event.mutate(replayed)
            if (
                replayed is None
                or replayed.version != saved.version
                or saved_state.encode(replayed) != saved.state
            ):
                differing.append(f"{agg_id.hex}@{saved.version}")
        return checked, differing

    # --- reading ----------------------------------------------------------------------------------

    def position(self) -> int:
        self._refuse_if_closed()
        return self.recorder.max_notification_id() or 0

    def run(self, key: str) -> Any:
        self._refuse_if_closed()
        return self._load(aggregate_id("run", key))

    def snapshot(self, ref: str) -> Snapshot | None:
        self._refuse_if_closed()
        found = self._load(aggregate_id("snapshot", ref))
        return found if isinstance(found, Snapshot) else None

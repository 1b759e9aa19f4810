"""Attacks on the held write path (`LineageApp._record_held`, PostgreSQL's `lineage_append_v1`,
SQLite's `insert_events_not_behind`): as a careful concurrent writer and as someone with write
access to the store's database.

Each test names the guarantee it tries to break. A test that passes is a regression test: the
guarantee held against that attack.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rollout_lineage.adapters.store.event_store import StoreURL
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp, recorded_at
from rollout_lineage.domain.errors import ConflictingFact, IntegrityFailure, SnapshotNotRestorable
from rollout_lineage.domain.events import aggregate_id
from rollout_lineage.domain.integrity import ChainWalker
from tests.raw_store import RawStore

T0 = datetime(2030, 1, 1, 12, tzinfo=UTC)


class Reads:
    """Counts the decision reads an app's recorder is asked for, and runs `then` after one."""

    def __init__(self, app: LineageApp) -> None:
        self.count = 0
        self.then: Any = None
        asked = app.recorder.decision_reads

        def counted(ids: Any) -> Any:
            self.count += 1
            found = asked(ids)
            then, self.then = self.then, None
            if then is not None:
                then()
            return found

        app.recorder.decision_reads = counted  # type: ignore[method-assign]


@pytest.fixture
def raw(store_url: str, two_apps: tuple[LineageApp, LineageApp]) -> Iterator[RawStore]:
    store = RawStore(store_url)
    yield store
    store.connection.close()


def _report(app: LineageApp) -> Any:
    walker = ChainWalker()
    walker.feed(app.recorder.chain_rows())
    return walker.report


def _intact(app: LineageApp, events: int) -> None:
    report = _report(app)
    assert report.intact and report.events == events, report.problem


def _log(app: LineageApp) -> list[tuple[int, str, int, bytes]]:
    """(position, stream hex, version, state) of every event, in position order."""
    return [
        (n.id, n.originator_id.hex, n.originator_version, n.state)
        for n in app.recorder.select_notifications(None, 1000)
    ]


def _times(app: LineageApp) -> list[datetime]:
    found = [recorded_at(state) for *_, state in _log(app)]
    assert None not in found
    return found  # type: ignore[return-value]


def _run_id(run: str) -> Any:
    return aggregate_id("run", run)


def _fork(run: str, ref: str) -> list[f.Fact]:
    """A run with a fork of one child, restorable from sandbox snapshot `ref` once captured."""
    return [
        f.RunRegistered(run=run, task="t"),
        f.SnapshotCaptured(ref=ref, layer="sandbox", run=run, stage="env-ready", node="root"),
        f.ForkOpened(
            run=run,
            fork="f",
            node="root",
            layers=("sandbox",),
            snapshot=f.SnapshotRefs(sandbox=ref),
            children=(f.ForkChild(index=0, node="c0"),),
        ),
    ]


def _restored(run: str, ref: str) -> f.ChildRestored:
    return f.ChildRestored(
        run=run, fork="f", index=0, layers=("sandbox",), snapshot=f.SnapshotRefs(sandbox=ref)
    )


# --- the cache never holds what the store does not ----------------------------------------------


def test_ctrl_c_while_deciding_a_held_batch_leaves_no_phantom_state(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """Ctrl-C (KeyboardInterrupt) arrives while the held decision reads a snapshot for a
    ChildRestored, after the batch's RunScored has already mutated the cached run in place. Nothing
    was appended; the next record of that reward must append it (guarantees: the cache never holds
    state not in the store after a failed attempt; nothing acknowledged is lost)."""
    first, _ = two_apps
    first.record([f.RunRegistered(run="r/1", task="t"), *_fork("r/2", "snap-a")])
    real = first.recorder.select_events

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    first.recorder.select_events = interrupted  # type: ignore[method-assign]
    first._aggregates.pop(aggregate_id("snapshot", "snap-a"))  # read again by _require_restorable
    with pytest.raises(KeyboardInterrupt):
        first.record([f.RunScored(run="r/1", reward=1.0), _restored("r/2", "snap-a")])
    first.recorder.select_events = real  # type: ignore[method-assign]
    assert len(_log(first)) == 4
    recorded = first.record([f.RunScored(run="r/1", reward=1.0)])
    assert (recorded.position, recorded.appended) == (5, 1), "an acknowledged reward was lost"
    assert first._aggregates[_run_id("r/1")].version == 2
    _intact(first, 5)


# --- recorded time never goes backwards ---------------------------------------------------------


@pytest.mark.parametrize("size", [1, 33])
def test_a_writer_behind_racing_a_writer_ahead_never_records_backwards(
    two_apps: tuple[LineageApp, LineageApp], size: int
) -> None:
    """The first writer's clock is behind the log: its held append is refused (or, for 33 facts,
    never tried) and it decides on the store's reads, clamping to the tail it read. Between that
    read and its append, a writer whose clock is further ahead appends. The first writer must not
    append its batch at the older time after the newer one (guarantee: recorded time never goes
    backwards along the log for a writer whose clock is behind)."""
    first, second = two_apps
    second.clock = lambda: T0 + timedelta(hours=1)
    second.record([f.RunRegistered(run="r/0", task="t")])
    first.clock = lambda: T0
    reads = Reads(first)

    def overtaken() -> None:
        second.clock = lambda: T0 + timedelta(hours=2)
        second.record([f.RunRegistered(run="r/x", task="t")])

    reads.then = overtaken
    first.record([f.RunRegistered(run=f"r/{i}", task="t") for i in range(1, size + 1)])
    times = _times(first)
    assert times == sorted(times), f"recorded times go backwards: {times[:3]}..."
    _intact(first, size + 2)


@pytest.mark.parametrize(
    ("tail", "held"),
    [
        ("2030-01-01T12:30:00+02:00", True),  # 10:30Z: later as text, earlier as a time
        ("2030-01-01T10:30:00-02:00", False),  # 12:30Z: earlier as text, later as a time
        ("2030-01-01T11:00:00Z", True),  # the same instant, no fraction
    ],
)
def test_recording_times_in_other_offsets_are_compared_as_times(
    two_apps: tuple[LineageApp, LineageApp], tail: str, held: bool
) -> None:
    """The tail was recorded by a writer whose clock runs in another offset; this writer records at
    11:00Z. The held append is refused exactly when the tail is later as a time, and the log's times
    never go backwards (guarantee: recorded time never goes backwards; times compared as times)."""
    first, second = two_apps
    moment = datetime.fromisoformat(tail)
    second.clock = lambda: moment
    second.record([f.RunRegistered(run="r/0", task="t")])
    first.clock = lambda: datetime(2030, 1, 1, 11, tzinfo=UTC)
    reads = Reads(first)
    first.record([f.RunRegistered(run="r/1", task="t")])
    assert reads.count == (0 if held else 1)
    times = _times(first)
    assert times == sorted(times)
    _intact(first, 2)


def test_a_writer_far_ahead_drags_every_later_writer_along(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """A clock 170 years ahead records first; a writer with today's clock must record at that time,
    not before it (guarantee: recorded time never goes backwards)."""
    first, second = two_apps
    second.clock = lambda: datetime(2199, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    second.record([f.RunRegistered(run="r/0", task="t")])
    first.record([f.RunRegistered(run="r/1", task="t")])
    first.record([f.RunScored(run="r/1", reward=1.0)])
    assert _times(first) == [datetime(2199, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)] * 3


# --- every exit of a held attempt forgets what it decided ----------------------------------------


def test_an_error_making_the_stored_events_forgets_the_held_aggregates(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """`mapper.to_stored_event` raises after the held decision mutated the cached run in place: the
    writer is told, nothing is appended, and the reward is appended when sent again (guarantees: the
    cache holds nothing the store does not; a writer told an error never finds the batch)."""
    first, _ = two_apps
    first.record([f.RunRegistered(run="r/1", task="t")])
    real = first.mapper.to_stored_event

    def broken(event: Any) -> Any:
        raise RuntimeError("transcoder broke")

    first.mapper.to_stored_event = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        first.record([f.RunScored(run="r/1", reward=1.0)])
    first.mapper.to_stored_event = real  # type: ignore[method-assign]
    assert _run_id("r/1") not in first._aggregates
    assert len(_log(first)) == 1
    assert first.record([f.RunScored(run="r/1", reward=1.0)]).appended == 1
    _intact(first, 2)


def test_a_batch_refused_past_a_break_forgets_the_held_aggregates(
    two_apps: tuple[LineageApp, LineageApp], raw: RawStore
) -> None:
    """Someone stored an event without a link at the tail: the held append is refused whole, and
    once the event is removed the held reward is not taken for known (guarantees: whole batches or
    nothing; the cache holds nothing the store does not; dense positions)."""
    first, _ = two_apps
    first.record([f.RunRegistered(run="r/1", task="t"), f.RunRegistered(run="r/2", task="t")])
    raw.insert_copy(1, 3)
    with pytest.raises(IntegrityFailure):
        first.record([f.RunScored(run="r/1", reward=1.0), f.RunScored(run="r/2", reward=0.0)])
    assert not {_run_id("r/1"), _run_id("r/2")} & set(first._aggregates)
    raw.execute(f"DELETE FROM {raw.events_table} WHERE {raw.position} = 3")
    recorded = first.record([f.RunScored(run="r/1", reward=1.0)])
    assert (recorded.position, recorded.appended) == (3, 1)
    _intact(first, 3)


def test_an_integrity_error_of_another_kind_appends_nothing_and_forgets(
    two_apps: tuple[LineageApp, LineageApp], raw: RawStore
) -> None:
    """A trigger on the chain table raises a unique violation (an IntegrityError that is no lost
    race): the held attempt falls back, every retry fails the same way, the writer is told, and
    nothing of the batch is ever found (guarantees: whole batches or nothing; a writer told an
    error never finds the batch appended later; the cache holds nothing the store does not)."""
    first, _ = two_apps
    first.record([f.RunRegistered(run="r/1", task="t")])
    if raw.postgres:
        raw.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE unique_violation USING MESSAGE = 'duplicate key'; END $$"
        )
        raw.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON lineage_chain FOR EACH ROW "
            "EXECUTE FUNCTION refuse()"
        )
    else:
        raw.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON lineage_chain BEGIN "
            "SELECT RAISE(ABORT, 'UNIQUE constraint failed: lineage_chain.position'); END"
        )
    with pytest.raises(Exception) as raised:
        first.record([f.RunScored(run="r/1", reward=1.0)])
    assert "duplicate" in str(raised.value) or "UNIQUE" in str(raised.value)
    assert _run_id("r/1") not in first._aggregates
    raw.execute("DROP TRIGGER refuse" + (" ON lineage_chain" if raw.postgres else ""))
    assert len(_log(first)) == 1
    assert first.record([f.RunScored(run="r/1", reward=1.0)]).position == 2
    _intact(first, 2)


def test_a_dry_run_after_held_records_leaves_the_cache_as_the_store(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """A dry run decides on the held run and says what it would append; it appends nothing, and the
    next real record appends it (guarantees: dry_run appends nothing; the cache holds nothing the
    store does not)."""
    first, _ = two_apps
    first.record([f.RunRegistered(run="r/1", task="t")])
    dry = first.record([f.RunScored(run="r/1", reward=1.0)], dry_run=True)
    assert (dry.appended, len(dry.new_facts)) == (0, 1)
    assert len(_log(first)) == 1
    assert first.record([f.RunScored(run="r/1", reward=1.0)]).appended == 1
    _intact(first, 2)


def test_a_claim_is_refused_before_any_held_decision(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """A snapshot.imported from a harness (not `lineage snapshots import`) is refused even on a
    stream the writer holds (guarantee: `verified_here` claims are never appended by others)."""
    from rollout_lineage.domain.errors import ClaimRefused

    first, _ = two_apps
    first.record(
        [f.SnapshotCaptured(ref="s", layer="sandbox", run="r/1", stage="env-ready", node="root")]
    )
    digest = "sha256:" + "a" * 64
    with pytest.raises(ClaimRefused):
        first.record(
            [f.SnapshotImported(ref="s", engine="docker", image_id=digest, tar_sha256=digest)]
        )
    assert len(_log(first)) == 1


# --- conflicts decided again ---------------------------------------------------------------------


def test_a_child_restored_from_a_snapshot_another_writer_discarded_is_refused(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """The first writer holds a captured (restorable) snapshot; another writer records its discard.
    A held ChildRestored from it must be refused as deciding on the store refuses it (guarantee:
    conflicts decided again, for a decision that reads a stream outside the batch)."""
    first, second = two_apps
    first.record(_fork("r/1", "snap-a"))
    second.record([f.SnapshotDiscarded(ref="snap-a")])
    with pytest.raises(SnapshotNotRestorable):
        first.record([_restored("r/1", "snap-a")])
    assert len(_log(first)) == 4


def test_a_batch_naming_one_run_twice_is_decided_whole(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """Two different rewards for one run in one held batch: refused whole, nothing appended, and a
    held stream the other writer moved on is not overwritten (guarantees: whole batches or nothing;
    a ConflictingFact where the store holds a different value)."""
    first, second = two_apps
    first.record([f.RunRegistered(run="r/1", task="t"), f.RunRegistered(run="r/2", task="t")])
    with pytest.raises(ConflictingFact):
        first.record(
            [
                f.RunScored(run="r/2", reward=1.0),
                f.RunScored(run="r/1", reward=1.0),
                f.RunScored(run="r/1", reward=0.0),
            ]
        )
    second.record([f.RunScored(run="r/2", reward=0.5)])
    with pytest.raises(ConflictingFact):
        first.record([f.RunScored(run="r/1", reward=1.0), f.RunScored(run="r/2", reward=1.0)])
    assert len(_log(first)) == 3
    _intact(first, 3)


@pytest.mark.parametrize("size", [32, 33])
def test_a_batch_at_and_past_the_held_limit_races_cleanly(
    two_apps: tuple[LineageApp, LineageApp], size: int
) -> None:
    """A batch of 32 facts (held, one value per parameter) and of 33 (read first, arrays), after
    another writer registered one of its runs and scored another differently: the re-sent
    registration appends nothing, the different reward is refused, the rest lands densely and the
    returned position holds the batch's last fact (guarantees: dense positions; read-your-writes;
    conflicts decided again)."""
    first, second = two_apps
    runs = [f"r/{i:02}" for i in range(size)]
    second.record([f.RunRegistered(run=runs[5], task="t")])
    batch = [f.RunRegistered(run=run, task="t") for run in runs]
    recorded = first.record(batch)
    assert (recorded.position, recorded.appended) == (size, size - 1)
    second.record([f.RunScored(run=runs[7], reward=0.0)])
    with pytest.raises(ConflictingFact):
        first.record([f.RunScored(run=run, reward=1.0) for run in runs])
    recorded = first.record([f.RunScored(run=run, reward=0.0) for run in runs])
    assert (recorded.position, recorded.appended) == (2 * size, size - 1)
    log = _log(first)
    assert [p for p, *_ in log] == list(range(1, 2 * size + 1))
    assert log[-1][1] == _run_id(runs[-1]).hex
    _intact(first, 2 * size)


def test_writers_racing_in_threads_keep_one_log(
    two_apps: tuple[LineageApp, LineageApp], store_env: dict[str, str]
) -> None:
    """Four writers (one app per thread, two rewards) record the same runs: every run ends with one
    reward; each writer is told either a position (holding its fact if it appended one, at or past
    it if the fact was known) or a ConflictingFact; positions stay dense and the chain intact
    (guarantees: conflicts decided again; read-your-writes; dense positions; nothing acknowledged
    is lost)."""
    first, second = two_apps
    writers = [
        first,
        second,
        LineageApp(env=store_env, actor="third@lab"),
        LineageApp(env=store_env, actor="fourth@lab"),
    ]
    runs = [f"r/{i}" for i in range(6)]
    first.record([f.RunRegistered(run=run, task="t") for run in runs])
    told: list[tuple[str, float, int, int]] = []
    failures: list[BaseException] = []

    def write(app: LineageApp, reward: float) -> None:
        for run in runs:
            try:
                recorded = app.record([f.RunScored(run=run, reward=reward)])
                told.append((run, reward, recorded.position, recorded.appended))
            except ConflictingFact:
                pass
            except BaseException as exc:  # pragma: no cover - a failure to report
                failures.append(exc)

    threads = [
        threading.Thread(target=write, args=(app, float(i % 2))) for i, app in enumerate(writers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for app in writers[2:]:
        app.close()
    assert not failures, failures
    log = _log(first)
    assert [p for p, *_ in log] == list(range(1, len(log) + 1))
    assert len(log) == 2 * len(runs)
    held = {p: state for p, _, _, state in log if b'"type":"run.scored"' in state}
    for run, reward, position, appended in told:
        found = [
            p
            for p, state in held.items()
            if f'"run":"{run}",'.encode() in state and f'"reward":{reward}'.encode() in state
        ]
        assert len(found) == 1, (run, reward)
        assert found[0] == position if appended else found[0] <= position
    _intact(first, 2 * len(runs))


@pytest.mark.parametrize(
    "stamp",
    [
        b"not a time",
        b"2030-01-01T12:00:00",
        b"infinity",
    ],
)
def test_a_tail_whose_time_was_edited_still_takes_appends_and_verify_names_it(
    two_apps: tuple[LineageApp, LineageApp], raw: RawStore, stamp: bytes
) -> None:
    """The last event's recording time is edited into something no clock wrote (PostgreSQL reads
    some of them, this code none): writers still append, without waiting on that time forever, and
    `verify` names the edited position (guarantees: verify intact exactly when nothing was
    tampered; a writer is not stopped by a time it cannot read)."""
    first, second = two_apps
    first.record([f.RunRegistered(run="r/1", task="t")])
    second.record([f.RunRegistered(run="r/0", task="t")])
    (state,) = raw.execute(f"SELECT state FROM {raw.events_table} WHERE {raw.position} = 2")[0]
    edited = bytes(state).replace(bytes(state)[14:41].split(b'"')[0], stamp, 1)
    raw.execute(f"UPDATE {raw.events_table} SET state = ? WHERE {raw.position} = 2", (edited,))
    for app in (first, second):  # the held path (first) and the store's reads (second)
        try:
            recorded = app.record([f.RunScored(run="r/1", reward=1.0)])
        except TypeError as exc:  # a naive time compared with an aware one
            pytest.fail(f"the writer crashed on the edited time: {exc}")
    assert (recorded.position, recorded.appended) == (3, 0)
    report = _report(first)
    assert not report.intact and report.first_bad_position == 2


# --- PostgreSQL: the append function and what someone with DDL rights does around it -------------


@pytest.fixture
def pg(postgres_url: str) -> Iterator[tuple[LineageApp, RawStore]]:
    app = LineageApp(env=StoreURL.parse(postgres_url).application_env(), actor="first@lab")
    store = RawStore(postgres_url)
    yield app, store
    store.connection.close()
    app.close()


@pytest.mark.postgres
def test_a_replaced_append_function_that_links_otherwise_is_caught_by_verify(
    pg: tuple[LineageApp, RawStore],
) -> None:
    """The function is replaced by one whose links leave the role out: every batch it appends
    breaks the chain at its first event (guarantee: a replaced/edited function is caught by
    verify)."""
    app, raw = pg
    app.record([f.RunRegistered(run="r/1", task="t")])
    (body,) = raw.execute(
        "SELECT prosrc FROM pg_proc WHERE proname = 'lineage_append_v1' AND "
        "pronamespace = current_schema()::regnamespace"
    )[0]
    assert "'|by:' || tail.role" in body
    forged = body.replace("|| convert_to('|by:' || tail.role, 'UTF8')", "")
    raw.connection.execute(  # no parameters: the body holds format()'s %s
        "CREATE OR REPLACE FUNCTION lineage_append_v1(ids uuid[], versions bigint[], "
        "topics text[], states bytea[], lock_wait text, not_before timestamptz) RETURNS TABLE "
        "(first_position bigint, last_position bigint, last_previous bigint, last_hash text, "
        "last_event bigint, role text, unplaced bigint, recorded_later text) LANGUAGE plpgsql "
        "AS $body$" + forged + "$body$"
    )
    app.record([f.RunScored(run="r/1", reward=1.0)])
    report = _report(app)
    assert not report.intact and report.first_bad_position == 2


@pytest.mark.postgres
def test_a_trigger_moving_positions_is_refused_whole(pg: tuple[LineageApp, RawStore]) -> None:
    """A BEFORE INSERT trigger moves each new event 10 positions on: the function's check refuses
    the batch (RL001), nothing is appended, the held run is forgotten, and after the trigger is
    dropped the next batch lands at the next position (guarantees: whole batches or nothing; dense
    positions; the cache holds nothing the store does not)."""
    app, raw = pg
    app.record([f.RunRegistered(run="r/1", task="t")])
    raw.execute(
        "CREATE FUNCTION move() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "NEW.notification_id := NEW.notification_id + 10; RETURN NEW; END $$"
    )
    raw.execute(
        "CREATE TRIGGER move BEFORE INSERT ON lineage_events FOR EACH ROW EXECUTE FUNCTION move()"
    )
    with pytest.raises(IntegrityFailure, match=r"positions 2\.\.2"):
        app.record([f.RunScored(run="r/1", reward=1.0)])
    assert _run_id("r/1") not in app._aggregates
    raw.execute("DROP TRIGGER move ON lineage_events")
    assert len(_log(app)) == 1
    assert app.record([f.RunScored(run="r/1", reward=1.0)]).position == 2
    _intact(app, 2)


@pytest.mark.postgres
@pytest.mark.parametrize("moved", ["RESTART WITH 1000", "RESTART WITH 1", "INCREMENT BY 7"])
def test_a_moved_sequence_changes_no_position(pg: tuple[LineageApp, RawStore], moved: str) -> None:
    """The position sequence restarted or stepped otherwise: positions are given by the function,
    so batches still land densely (guarantee: dense positions 1,2,3...)."""
    app, raw = pg
    app.record([f.RunRegistered(run="r/1", task="t")])
    raw.execute(f"ALTER SEQUENCE lineage_events_notification_id_seq {moved}")
    app.record([f.RunScored(run="r/1", reward=1.0), f.RunRegistered(run="r/2", task="t")])
    app.record([f.RunRegistered(run="r/3", task="t")])
    assert [p for p, *_ in _log(app)] == [1, 2, 3, 4]
    _intact(app, 4)


@pytest.mark.postgres
def test_a_duplicate_at_the_tail_without_the_unique_index_is_named_by_verify(
    pg: tuple[LineageApp, RawStore],
) -> None:
    """The unique index on positions dropped and a copy stored at the tail's position: verify names
    the store as not intact, before and after the next append (guarantee: verify intact exactly
    when nothing was tampered)."""
    app, raw = pg
    app.record([f.RunRegistered(run="r/1", task="t")])
    (index,) = raw.connection.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND "
        "tablename = 'lineage_events' AND indexdef LIKE '%(notification_id)%'"
    ).fetchone()
    raw.execute(f"DROP INDEX {index}")
    raw.insert_copy(1, 1)
    assert not _report(app).intact
    with contextlib.suppress(IntegrityFailure):  # refusing is as good
        app.record([f.RunRegistered(run="r/2", task="t")])
    assert not _report(app).intact


@pytest.mark.postgres
def test_a_schema_named_in_mixed_case_takes_held_appends(postgres_url: str) -> None:
    """A store in a schema whose name must be quoted (mixed case; eventsourcing itself cannot open
    one with a space, a `'` or a `"`): the function is made, called and links as Python does
    (guarantees: odd schema names; verify intact when nothing was tampered)."""
    import psycopg
    from psycopg.sql import SQL, Identifier

    base = postgres_url.split("?")[0]
    name = f"Held_Attack_{postgres_url[-8:]}"
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(SQL("CREATE SCHEMA {}").format(Identifier(name)))
    try:
        from urllib.parse import quote

        env = StoreURL.parse(f"{base}?schema={quote(name)}").application_env()
        app = LineageApp(env=env, actor="odd@lab")
        other = LineageApp(env=env, actor="other@lab")
        app.record([f.RunRegistered(run="r/1", task="t")])
        other.record([f.RunRegistered(run="r/1", task="t"), f.RunScored(run="r/1", reward=0.0)])
        with pytest.raises(ConflictingFact):
            app.record([f.RunScored(run="r/1", reward=1.0)])
        _intact(app, 2)
        app.close()
        other.close()
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(SQL("DROP SCHEMA {} CASCADE").format(Identifier(name)))

"""Issue 26: a live writer decides a small batch on the streams it holds, with no read of the store
first (`LineageApp._record_held`), and appends it in one statement (PostgreSQL: one round trip).

Each test is a way the held state could differ from the store, written to make the writer append
what deciding on the store would have refused (or refuse what it would have appended): another
writer moved a held stream on, created a stream this writer never saw, recorded with a later clock,
or the batch re-sends what is known. Each must end as the store's reads decide it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp, RetryAtOnce
from rollout_lineage.domain.errors import ConflictingFact
from rollout_lineage.domain.integrity import ChainWalker


class Reads:
    """Counts the decision reads an app's recorder is asked for."""

    def __init__(self, app: LineageApp) -> None:
        self.count = 0
        asked = app.recorder.decision_reads

        def counted(ids: Any) -> Any:
            self.count += 1
            return asked(ids)

        app.recorder.decision_reads = counted  # type: ignore[method-assign]


def _intact(app: LineageApp, events: int) -> None:
    walker = ChainWalker()
    walker.feed(app.recorder.chain_rows())
    assert walker.report.intact and walker.report.events == events, walker.report.problem


def test_a_writer_recording_into_streams_it_holds_reads_nothing_first(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    first, _ = two_apps
    reads = Reads(first)
    assert first.record([f.RunRegistered(run="r/1", task="t")]).position == 1
    assert first.record([f.RunScored(run="r/1", reward=1.0)]).position == 2
    recorded = first.record(
        [
            f.RunLocated(run="r/1", path="/runs/1", kind="recorded"),
            f.RunRegistered(run="r/2", task="t"),
        ]
    )
    assert (recorded.position, recorded.appended) == (4, 2)
    assert reads.count == 0, "a batch on held and new streams read the store before deciding"
    _intact(first, 4)


def test_a_held_stream_another_writer_moved_on_is_decided_on_the_store(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """The held state says no reward; the store holds another: the writer must refuse, not append a
    second reward at the version it held."""
    first, second = two_apps
    first.record([f.RunRegistered(run="r/1", task="t")])
    second.record([f.RunScored(run="r/1", reward=0.0)])
    with pytest.raises(ConflictingFact):
        first.record([f.RunScored(run="r/1", reward=1.0)])
    assert first.record([f.RunScored(run="r/1", reward=0.0)]).appended == 0
    _intact(first, 2)


def test_a_stream_another_writer_created_is_decided_on_the_store(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """Never seen by this writer, so held as new: the store's key on (stream, version 1) refuses the
    guess, and the store's reads decide."""
    first, second = two_apps
    second.record([f.RunRegistered(run="r/1", task="t")])
    assert first.record([f.RunRegistered(run="r/1", task="t")]).appended == 0
    with pytest.raises(ConflictingFact):
        first.record([f.RunRegistered(run="r/1", task="other")])
    assert first.record([f.RunScored(run="r/1", reward=1.0)]).position == 2
    _intact(first, 2)


def test_a_re_sent_fact_is_checked_against_the_store(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """A batch that gives a held stream no new event is not checked by the store's key: it reads
    the store, so the answer is the log's position, not what the writer held."""
    first, second = two_apps
    reads = Reads(first)
    first.record([f.RunRegistered(run="r/1", task="t")])
    second.record([f.RunRegistered(run="r/2", task="t")])
    recorded = first.record([f.RunRegistered(run="r/1", task="t")])
    assert (recorded.position, recorded.appended, reads.count) == (2, 0, 1)


def test_a_mixed_batch_where_one_held_stream_gets_nothing_new_reads_the_store(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """r/1's fact is known to the writer, r/2's is new; if the store moved r/1 on with another
    reward the batch must be refused whole."""
    first, second = two_apps
    first.record([f.RunRegistered(run="r/1", task="t"), f.RunScored(run="r/1", reward=1.0)])
    first.record([f.RunRegistered(run="r/2", task="t")])
    second.record([f.RunLocated(run="r/1", path="/runs/1", kind="recorded")])
    reads = Reads(first)
    recorded = first.record(
        [f.RunScored(run="r/1", reward=1.0), f.RunScored(run="r/2", reward=0.5)]
    )
    assert (recorded.position, recorded.appended, reads.count) == (5, 1, 1)
    _intact(first, 5)


def test_a_writer_whose_clock_is_behind_the_tail_records_at_the_tails_time(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """The held batch carries this writer's clock; the server compares it with the last event's
    recording time under the lock and refuses it, and the store's reads clamp it. Times are compared
    as times: a tail in whole seconds ("...12:00:00Z") sorts after "...12:00:00.000001Z" as text."""
    first, second = two_apps
    second.clock = lambda: datetime(2030, 1, 1, 12, tzinfo=UTC)
    second.record([f.RunRegistered(run="r/2", task="t")])
    reads = Reads(first)
    first.clock = lambda: datetime(2030, 1, 1, 11, 59, 59, 999999, tzinfo=UTC)
    first.record([f.RunRegistered(run="r/1", task="t")])
    assert reads.count == 1, "a batch recorded before the tail was appended as held"
    first.clock = lambda: datetime(2030, 1, 1, 12, 0, 0, 1, tzinfo=UTC)
    first.record([f.RunScored(run="r/1", reward=1.0)])
    assert reads.count == 1, "a batch recorded a microsecond after the tail was refused"
    times = [n.state[14:41] for n in first.recorder.select_notifications(None, 10)]
    assert times == [
        b'2030-01-01T12:00:00Z","occu',
        b'2030-01-01T12:00:00Z","occu',
        b"2030-01-01T12:00:00.000001Z",
    ]


def test_a_writer_that_keeps_losing_to_a_later_tail_appends_on_its_last_attempt(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """A writer whose clock is behind, racing writers ahead that always append between its read and
    its append, is refused by the time check each attempt: its last attempt appends unchecked (as a
    bare recorder would; readers resolve such a time), never an exception after the batch was
    fine."""
    from rollout_lineage.domain.application import TailRecordedLater

    first, _ = two_apps
    checked: list[datetime] = []

    def always_later(stored: Any, when: datetime) -> Any:
        checked.append(when)
        raise TailRecordedLater("a writer ahead", datetime(2100, 1, 1, tzinfo=UTC))

    first.recorder.insert_events_not_behind = always_later  # type: ignore[method-assign]
    recorded = first.record([f.RunRegistered(run="r/1", task="t")])
    assert (recorded.position, recorded.appended) == (1, 1)
    assert len(checked) == first.retry.attempts, "held once, then every attempt but the last"


def test_a_writer_refused_for_a_later_tail_decides_again_without_the_pause_of_a_lost_race(
    two_apps: tuple[LineageApp, LineageApp],
) -> None:
    """Writers ahead in time that append (to other streams) between this writer's decision and its
    append, on held state and again after it read the store, cost it refusals by the store's own
    time check and immediate new decisions, not the retry policy's pause for a stream another
    writer moved on: with 8 PostgreSQL writers that pause (5-50 ms x attempt) put one record in a
    thousand at 57-60 ms and the slowest at 195-336 ms, against 14-20 and 26-31 ms without it."""
    first, second = two_apps
    paused: list[int] = []

    class Counting(RetryAtOnce):
        def after_lost_race(self, attempt: int) -> None:
            paused.append(attempt)

    first.retry = Counting()
    first.clock = lambda: datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
    append = first.recorder.insert_events_not_behind  # type: ignore[attr-defined]
    calls: list[datetime] = []

    def overtaken_once(stored: Any, when: datetime) -> Any:
        calls.append(when)
        if len(calls) <= 2:  # on held state, then on the store's reads
            second.clock = lambda: datetime(2030, 1, 1, 12, 0, len(calls), tzinfo=UTC)
            second.record([f.RunRegistered(run=f"r/ahead-{len(calls)}", task="t")])
        return append(stored, when)

    first.recorder.insert_events_not_behind = overtaken_once  # type: ignore[attr-defined]
    recorded = first.record([f.RunRegistered(run="r/behind", task="t")])
    assert (recorded.position, recorded.appended) == (3, 1)
    assert paused == [], "a later tail is no lost race: nothing to wait for"
    assert calls[1:] == [datetime(2030, 1, 1, 12, 0, s, tzinfo=UTC) for s in (1, 2)]
    _intact(first, 3)

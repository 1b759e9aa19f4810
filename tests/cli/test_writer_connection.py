"""Issue 26: a PostgreSQL writer appends through a connection of its own, kept open between records
(`adapters/store/writer_connection.py`). Each test is a way that kept connection could betray the
guarantees the library's pool gave: a session the server ended, a statement cut by Ctrl-C, a
store closed with the connection left open, errors no longer read as a lost race.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp
from rollout_lineage.domain.integrity import ChainWalker


def _app(postgres_url: str, actor: str = "writer@lab") -> LineageApp:
    from rollout_lineage.adapters.store.event_store import StoreURL, open_application

    return open_application(StoreURL.parse(postgres_url), actor=actor, tool_version="tests")


def _base(postgres_url: str) -> str:
    return postgres_url.split("?")[0]


def _writer_pid(app: LineageApp) -> int:
    connection: Any = app.recorder._writer._connection  # type: ignore[attr-defined]
    assert connection is not None, "the writer has not connected"
    pid: int = connection.info.backend_pid
    return pid


def _sessions(postgres_url: str, pid: int) -> int:
    with psycopg.connect(_base(postgres_url), autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def _intact(app: Any, events: int) -> None:
    walker = ChainWalker()
    walker.feed(app.recorder.chain_rows())
    assert walker.report.intact and walker.report.events == events, walker.report.problem


def _client_sessions(postgres_url: str) -> int:
    with psycopg.connect(_base(postgres_url), autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
            "AND datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_records_keep_one_session_and_closing_the_store_ends_it(postgres_url: str) -> None:
    """What the README tells an operator sizing `max_connections`: two sessions per recording
    process (the library's pool holds two; the writer keeps one of them), however many records."""
    before = _client_sessions(postgres_url)
    app = _app(postgres_url)
    app.record([f.RunRegistered(run="r/1", task="t")])
    seen = []
    for _ in range(50):  # the probe's session (opened and closed at once) may linger a moment
        seen.append(_client_sessions(postgres_url) - before)
        if seen[-1] == 2:
            break
        time.sleep(0.1)
    assert seen[-1] == 2, f"expected 2 sessions for one recording process, saw {seen}"
    pid = _writer_pid(app)
    for i in range(2, 6):
        app.record([f.RunRegistered(run=f"r/{i}", task="t")])
    assert _writer_pid(app) == pid  # no new session per record
    assert _sessions(postgres_url, pid) == 1
    app.close()
    for _ in range(50):  # the server notices the client's goodbye at once; allow it a moment
        if _sessions(postgres_url, pid) == 0:
            break
        time.sleep(0.1)
    assert _sessions(postgres_url, pid) == 0, "closing the store left the writer's session open"


def test_a_session_the_server_ended_costs_one_attempt_and_nothing_else(postgres_url: str) -> None:
    """An administrator (or a failover) ends the writer's session between two records: the next
    record is appended once, on a new session, and the chain stays whole."""
    app = _app(postgres_url)
    try:
        app.record([f.RunRegistered(run="r/1", task="t")])
        ended = _writer_pid(app)
        with psycopg.connect(_base(postgres_url), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (ended,))
        recorded = app.record([f.RunRegistered(run="r/2", task="t")])
        assert (recorded.position, recorded.appended) == (2, 1)
        assert _writer_pid(app) != ended
        _intact(app, 2)
    finally:
        app.close()


@pytest.mark.parametrize("where", ["wait", "fetchone"])
def test_a_ctrl_c_mid_append_drops_the_session_and_the_next_record_is_whole(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Interrupted inside the append (before the statement is sent: psycopg sends from its wait
    loop; or after the server committed it, the reply not yet read), the connection's state is
    unknown: it is closed, never reused, and the batch is in the log once or not at all."""
    app = _app(postgres_url)
    try:
        app.record([f.RunRegistered(run="r/1", task="t")])
        first = _writer_pid(app)
        owner = psycopg.Connection if where == "wait" else psycopg.Cursor
        real = getattr(owner, where)

        def interrupted(self: Any, *args: Any, **kwargs: Any) -> Any:
            monkeypatch.setattr(owner, where, real)
            if where == "fetchone":
                real(self, *args, **kwargs)
            raise KeyboardInterrupt

        monkeypatch.setattr(owner, where, interrupted)
        with pytest.raises(KeyboardInterrupt):
            app.record([f.RunRegistered(run="r/2", task="t")])
        assert app.recorder._writer._connection is None  # type: ignore[attr-defined]
        app.record([f.RunRegistered(run="r/2", task="t")])  # re-sent: known or appended, once
        assert _writer_pid(app) != first
        _intact(app, 2)
    finally:
        app.close()


def test_a_lost_race_on_the_kept_session_is_decided_again_on_the_same_session(
    postgres_url: str,
) -> None:
    """The store's key refuses a stale held guess with the library's IntegrityError, as the pool
    said it, so the writer decides again on the store's reads instead of failing."""
    first, second = _app(postgres_url, "first@lab"), _app(postgres_url, "second@lab")
    try:
        first.record([f.RunRegistered(run="r/1", task="t")])
        second.record([f.RunRegistered(run="r/1", task="t")])  # known: second now holds r/1
        session = _writer_pid(second)
        first.record([f.RunScored(run="r/1", reward=1.0)])
        # second holds r/1 at version 1, the store has version 2: the held guess is refused by
        # the store's key (through the kept session) and decided again on the store's reads
        recorded = second.record([f.RunLocated(run="r/1", path="/runs/1", kind="recorded")])
        assert (recorded.position, recorded.appended) == (3, 1)
        _intact(first, 3)
        # A refusal read whole leaves the session as it was: racing writers open no session per
        # lost race (that cost 8 writers half their rate).
        assert _writer_pid(second) == session
    finally:
        first.close()
        second.close()


def test_a_later_tail_is_decided_again_on_the_same_session(postgres_url: str) -> None:
    """A writer whose clock is behind the log's last event is refused under the lock
    (`TailRecordedLater`, raised by the recorder from the reply) and decides again at the log's
    time, on the session it had."""
    ahead = _app(postgres_url, "ahead@lab")
    behind = _app(postgres_url, "behind@lab")
    try:
        behind.record([f.RunRegistered(run="r/0", task="t")])
        session = _writer_pid(behind)
        now = datetime.now(UTC)
        ahead.clock = lambda: now + timedelta(hours=1)
        ahead.record([f.RunRegistered(run="r/1", task="t")])
        behind.clock = lambda: now
        assert behind.record([f.RunRegistered(run="r/2", task="t")]).position == 3
        assert _writer_pid(behind) == session
        _intact(behind, 3)
    finally:
        ahead.close()
        behind.close()

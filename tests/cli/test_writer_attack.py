"""Attacks on the kept writer connection (`adapters/store/writer_connection.py`) and the SQLite
factory
that keeps prepared statements (`adapters/store/sqlite_connections.py`), each naming the guarantee
it
tries to break. A test that passes is a regression test: the guarantee held against that attack.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError

from rollout_lineage.adapters.evidence.batch_evidence import BatchEvidence
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp, RetryAtOnce
from rollout_lineage.domain.errors import StoreClosed, StoreUnavailable
from rollout_lineage.domain.events import aggregate_id
from rollout_lineage.domain.integrity import ChainWalker
from tests.conftest import open_lineage


def _app(postgres_url: str, actor: str = "writer@lab") -> LineageApp:
    from rollout_lineage.adapters.store.event_store import StoreURL, open_application

    return open_application(StoreURL.parse(postgres_url), actor=actor, tool_version="tests")


def _positions(postgres_url: str) -> list[tuple[int, str]]:
    """Every stored event's position and run, read on a session of the test's own."""
    base, schema = postgres_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as connection:
        rows = connection.execute(
            f"SELECT notification_id, convert_from(state, 'UTF8')::json->'fact'->>'run' "
            f"FROM {schema}.lineage_events ORDER BY notification_id"
        ).fetchall()
    return [(int(position), str(run)) for position, run in rows]


def _waits_for_a_lock(postgres_url: str, pid: int) -> bool:
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as connection:
        row = connection.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
    return row is not None and row[0] == "Lock"


def _intact(app: Any, events: int) -> None:
    walker = ChainWalker()
    walker.feed(app.recorder.chain_rows())
    assert walker.report.intact and walker.report.events == events, walker.report.problem


@pytest.mark.postgres
def test_a_forked_child_never_shares_the_parent_s_kept_session(postgres_url: str) -> None:
    """A write acknowledged is durable, and a kept connection is never used by two processes at
    once: a harness opens the store, records, then forks a worker (multiprocessing's 'fork') that
    records a batch with evidence. Were the child's kept connection the parent's session, the
    parent's append would run inside the child's open transaction, and the child's rollback would
    take the parent's acknowledged event with it."""
    app = _app(postgres_url)
    try:
        app.record([f.RunRegistered(run="r/1", task="t")])
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover -- the child reports through its exit status
            status = 1
            try:

                def paused(ids: Any, rows: Any) -> list[tuple[Any, ...]]:
                    os.write(ready_w, b"1")  # the child's batch is appended, not committed
                    os.read(go_r, 1)
                    raise RuntimeError("the child's evidence fails: its batch rolls back")

                app.recorder.batch_evidence = BatchEvidence(provenance=paused)  # type: ignore[attr-defined]
                try:
                    app.record([f.RunRegistered(run="r/child", task="t")])
                except RuntimeError:
                    status = 0
                except BaseException:
                    os.write(ready_w, b"0")
            finally:
                os._exit(status)
        session = app.recorder._writer._connection.info.backend_pid  # type: ignore[attr-defined]
        done: list[Any] = []
        parent = threading.Thread(
            target=lambda: done.append(app.record([f.RunRegistered(run="r/parent", task="t")]))
        )
        try:
            assert os.read(ready_r, 1) == b"1", "the child could not append"
            parent.start()
            # The parent's append waits for the child's transaction (the writers' lock), or, on a
            # session shared with the child, runs inside it and is done at once.
            while parent.is_alive() and not _waits_for_a_lock(postgres_url, session):
                time.sleep(0.01)
        finally:
            os.write(go_w, b"1")
            _, status = os.waitpid(child, 0)
            parent.join()
        assert os.waitstatus_to_exitcode(status) == 0
        [recorded] = done
        assert recorded.appended == 1
        stored = _positions(postgres_url)
        assert (recorded.position, "r/parent") in stored, f"acknowledged, then lost: {stored}"
        assert [position for position, _ in stored] == [1, 2]
        _intact(app, 2)
    finally:
        app.close()


def _terminate(postgres_url: str, pid: int) -> None:
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


@pytest.mark.postgres
@pytest.mark.parametrize("where", ["evidence", "commit"])
def test_a_session_ended_inside_a_batch_with_evidence_appends_it_once(
    postgres_url: str, where: str
) -> None:
    """Whole batches or nothing, and a lost session decided again: the writer's session is ended
    between the append and the evidence (or, with no evidence row, the COMMIT) of a batch. The
    server rolls the transaction back; the batch is decided again on a new session and appended
    once, with its evidence."""
    app = _app(postgres_url)
    recorder: Any = app.recorder
    try:
        app.record([f.RunRegistered(run="r/1", task="t")])
        calls = []

        def provenance(ids: Any, rows: Any) -> list[tuple[Any, ...]]:
            calls.append(list(ids))
            if len(calls) == 1:
                _terminate(postgres_url, recorder._writer._connection.info.backend_pid)
            if where == "commit":
                return []  # no evidence row: the COMMIT is the first statement after the end
            return [(ids[0], "origin", 1, 0, "checkpoint", b"entry", "[]")]

        recorder.batch_evidence = BatchEvidence(provenance=provenance)
        recorded = app.record([f.RunRegistered(run="r/2", task="t")])
        recorder.batch_evidence = None
        assert (recorded.position, recorded.appended) == (2, 1)
        assert len(calls) == 2, calls
        assert _positions(postgres_url) == [(1, "r/1"), (2, "r/2")]
        assert app.record([f.RunRegistered(run="r/3", task="t")]).position == 3
        _intact(app, 3)
    finally:
        app.close()


@pytest.mark.postgres
def test_an_error_in_a_batch_s_evidence_leaves_the_kept_session_usable(postgres_url: str) -> None:
    """A Ctrl-C or an error leaves nothing half-written and a later record works: evidence the
    server refuses (a duplicate key) fails the batch's transaction; the kept session is rolled back,
    not left in a failed transaction, so the next batch appends on it."""
    app = _app(postgres_url)
    recorder: Any = app.recorder
    try:
        app.record([f.RunRegistered(run="r/1", task="t")])
        session = recorder._writer._connection.info.backend_pid

        def duplicated(ids: Any, rows: Any) -> list[tuple[Any, ...]]:
            row = (ids[0], "origin", 1, 0, "checkpoint", b"entry", "[]")
            return [row, row]  # one position twice: the table's key refuses it

        recorder.batch_evidence = BatchEvidence(provenance=duplicated)
        with pytest.raises(IntegrityError):  # the store's key, read as a lost race, eight times
            app.record([f.RunRegistered(run="r/2", task="t")])
        recorder.batch_evidence = None
        assert _positions(postgres_url) == [(1, "r/1")]
        assert app.record([f.RunRegistered(run="r/2", task="t")]).position == 2
        assert recorder._writer._connection.info.backend_pid == session
        _intact(app, 2)
    finally:
        app.close()


@pytest.mark.postgres
def test_a_closed_store_refuses_a_record_and_opens_no_session(postgres_url: str) -> None:
    """A write acknowledged is durable: a record on a store already closed is refused at once and
    says so, appends nothing, and takes no session the store would never give back. Before, it
    was retried eight times as a store gone away (about 7 s) and ended "check that the store is
    reachable"."""
    app = _app(postgres_url)
    app.record([f.RunRegistered(run="r/1", task="t")])
    app.close()
    consulted: list[int] = []

    class Counting(RetryAtOnce):
        def after_store_away(self, attempt: int) -> None:
            consulted.append(attempt)

    app.retry = Counting()
    with pytest.raises(StoreClosed, match="found this application closed"):
        app.record([f.RunRegistered(run="r/2", task="t")])
    assert consulted == [], "a closed store is not a store gone away"
    assert app.recorder._writer._connection is None  # type: ignore[attr-defined]
    assert _positions(postgres_url) == [(1, "r/1")]


def test_a_closed_sqlite_store_refuses_a_record(tmp_path: Path) -> None:
    """The same on SQLite, and through `open_store`'s object a closed store opens again on the next
    record, as a harness that closes and reuses it expects."""
    app = _sqlite_app(tmp_path)
    app.record([f.RunRegistered(run="r/1", task="t")])
    app.close()
    with pytest.raises(StoreClosed, match="nothing was recorded"):
        app.record([f.RunRegistered(run="r/2", task="t")])
    for read in (app.position, lambda: app.run("r/1"), lambda: app.snapshot("s")):
        with pytest.raises(StoreClosed, match="found this application closed"):
            read()
    assert [p for p, _ in _sqlite_runs(tmp_path)] == [1]
    lineage = open_lineage(f"sqlite:///{tmp_path / 'store' / 'events.sqlite'}", tmp_path / "home")
    lineage.record([f.RunRegistered(run="r/2", task="t")])
    lineage.close()
    assert lineage.record([f.RunRegistered(run="r/3", task="t")]).position == 3
    lineage.close()


def _sqlite_app(tmp_path: Path) -> LineageApp:
    from rollout_lineage.adapters.store.event_store import StoreURL, open_application

    url = StoreURL.parse(f"sqlite:///{tmp_path / 'store' / 'events.sqlite'}")
    return open_application(url, actor="writer@lab", tool_version="tests")


def _sqlite_runs(tmp_path: Path) -> list[tuple[int, str]]:
    with contextlib.closing(sqlite3.connect(tmp_path / "store" / "events.sqlite")) as connection:
        rows = connection.execute(
            "SELECT rowid, json_extract(CAST(state AS TEXT), '$.fact.run') FROM stored_events "
            "ORDER BY rowid"
        ).fetchall()
    return [(int(position), str(run)) for position, run in rows]


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE elsewhere (x INTEGER)",
        "CREATE INDEX lineage_chain_by_hash ON lineage_chain (chain_hash)",
        # the same table made again: its statements' pages are elsewhere
        "CREATE TABLE copied AS SELECT * FROM lineage_chain; DROP TABLE lineage_chain; "
        "CREATE TABLE lineage_chain (position INTEGER PRIMARY KEY, previous INTEGER NOT NULL, "
        "chain_hash TEXT NOT NULL); INSERT INTO lineage_chain SELECT * FROM copied; "
        "DROP TABLE copied",
        "VACUUM",
    ],
)
def test_a_schema_changed_under_kept_statements_is_read_afresh(tmp_path: Path, change: str) -> None:
    """Positions dense and read-your-writes: another process changes the store's schema (makes a
    table, an index, the chain's table again; VACUUM moves every table) between two records of a
    writer whose connections keep their prepared statements. Each statement is prepared again on
    the new schema; the next batches land right after the last."""
    app = _sqlite_app(tmp_path)
    try:
        for i in range(3):
            app.record([f.RunRegistered(run=f"r/{i}", task="t")])
        with contextlib.closing(sqlite3.connect(tmp_path / "store" / "events.sqlite")) as other:
            other.executescript(change)
        assert app.record([f.RunRegistered(run="r/3", task="t")]).position == 4
        assert app.record([f.RunScored(run="r/0", reward=1.0)]).position == 5
        assert [p for p, _ in _sqlite_runs(tmp_path)] == [1, 2, 3, 4, 5]
        _intact(app, 5)
    finally:
        app.close()


class _TimedOut(Exception):
    """What a harness's own alarm handler raises (an Exception, unlike Ctrl-C's)."""


@pytest.mark.postgres
def test_an_exception_from_a_signal_handler_mid_append_leaves_later_records_working(
    postgres_url: str,
) -> None:
    """A later record works after an interrupted one, not only after Ctrl-C: a harness's alarm
    handler raises its own exception while the append waits for the writers' lock, the statement
    sent and its reply unread. The kept session is then mid-statement, not a refusal read whole: it
    is given up, and the next records append once each on a new one."""
    app = _app(postgres_url)
    base, schema = postgres_url.split("?schema=")
    before = signal.getsignal(signal.SIGALRM)

    def alarm(signum: int, frame: Any) -> None:
        raise _TimedOut("the harness's step took too long")

    try:
        app.record([f.RunRegistered(run="r/1", task="t")])
        with psycopg.connect(base) as holder:  # another writer, holding the writers' lock
            holder.execute(f"LOCK TABLE {schema}.lineage_events IN EXCLUSIVE MODE")
            signal.signal(signal.SIGALRM, alarm)
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            with pytest.raises(_TimedOut):
                app.record([f.RunRegistered(run="r/2", task="t")])
            signal.setitimer(signal.ITIMER_REAL, 0)
        assert app.record([f.RunRegistered(run="r/2", task="t")]).position == 2
        assert app.record([f.RunRegistered(run="r/3", task="t")]).position == 3
        assert _positions(postgres_url) == [(1, "r/1"), (2, "r/2"), (3, "r/3")]
        _intact(app, 3)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
        app.close()


def test_threads_of_one_app_append_one_batch_at_a_time(store_env: dict[str, str]) -> None:
    """A kept connection is never used by two threads at once, and every acknowledged write is
    stored at the position it was told: four threads share one application (one kept connection on
    PostgreSQL, one pool of connections with prepared statements on SQLite) and record at once."""
    app = LineageApp(env=store_env, actor="threads@lab", tool_version="tests")
    told: list[tuple[int, str]] = []
    failures: list[BaseException] = []

    def write(thread: int) -> None:
        for i in range(25):
            run = f"t{thread}/{i}"
            try:
                recorded = app.record([f.RunRegistered(run=run, task="t")])
                told.append((recorded.position, run))
            except BaseException as exc:  # pragma: no cover - a failure to report
                failures.append(exc)

    try:
        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures
        stored = {(n.id, n.originator_id) for n in app.recorder.select_notifications(None, 1000)}
        assert sorted(p for p, _ in stored) == list(range(1, 101))
        assert sorted(p for p, _ in told) == list(range(1, 101))
        assert {(p, aggregate_id("run", run)) for p, run in told} == stored
        _intact(app, 100)
    finally:
        app.close()


@pytest.mark.parametrize("when", ["before the links", "after the events"])
def test_verify_while_a_writer_appends_names_no_break(
    store_url: str,
    store_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    when: str,
) -> None:
    """`lineage verify` says what the log is: run beside a live writer that appends before verify
    reads the links (or once it has read the last event), it walks the log as it stood when it
    began and finds it intact, where it used to name the new link's event as deleted (exit 3)."""
    writer = LineageApp(env=store_env, actor="writer@lab", tool_version="tests")
    try:
        writer.record([f.RunRegistered(run="r/1", task="t")])
        with open_lineage(store_url, tmp_path / "home") as lineage:
            log: Any = lineage.log
            paged, made = log._paged, []

            def appended_meanwhile(*args: Any) -> Any:
                made.append(args)
                rows = paged(*args)

                def events() -> Any:
                    yield from rows
                    if when == "after the events":
                        writer.record([f.RunRegistered(run="r/2", task="t")])

                def links() -> Any:  # read at the walk's first step, after the events' first page
                    if when == "before the links":
                        writer.record([f.RunRegistered(run="r/2", task="t")])
                    yield from rows

                return events() if len(made) == 1 else links()

            monkeypatch.setattr(log, "_paged", appended_meanwhile)
            report = lineage.verify()
            assert len(made) == 2
            assert report.intact, report.problem
            assert report.events == 1
    finally:
        writer.close()


def test_a_store_file_replaced_under_a_writer_refuses_its_next_record(tmp_path: Path) -> None:
    """A write acknowledged is readable: a backup restored over the store file while a writer holds
    it open (a new file at the path) left the writer's connections on the old, unlinked file, and
    its next record was acknowledged there and never seen again. Now it is refused, nothing
    appended, and says what happened; a store opened again appends to the restored file."""
    store = tmp_path / "store" / "events.sqlite"
    app = _sqlite_app(tmp_path)
    try:
        app.record([f.RunRegistered(run="r/1", task="t")])
        backup = tmp_path / "backup.sqlite"
        with (
            contextlib.closing(sqlite3.connect(store)) as live,
            contextlib.closing(sqlite3.connect(backup)) as copy,
        ):
            live.backup(copy)
        app.record([f.RunRegistered(run="r/2", task="t")])
        # The restore, as an operator does it: the copy moved over the store file, and the old
        # file's WAL and shared memory removed (else the next open replays the old WAL onto it).
        os.replace(backup, store)
        for stale in ("-wal", "-shm"):
            Path(f"{store}{stale}").unlink(missing_ok=True)
        with pytest.raises(StoreUnavailable, match="replaced or removed while this process"):
            app.record([f.RunRegistered(run="r/3", task="t")])
    finally:
        app.close()
    assert [run for _, run in _sqlite_runs(tmp_path)] == ["r/1"]
    reopened = _sqlite_app(tmp_path)
    try:
        assert reopened.record([f.RunRegistered(run="r/3", task="t")]).position == 2
        _intact(reopened, 2)
    finally:
        reopened.close()

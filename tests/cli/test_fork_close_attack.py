"""Attacks on today's fork hook (`bootstrap.py`) and on `LineageApp.close()` refusing later records,
each naming the guarantee it tries to break. A test that passes is a regression test: the guarantee
held against that attack."""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp, RetryAtOnce
from rollout_lineage.domain.errors import StoreClosed
from tests.conftest import open_lineage


def _exit_code_of_child(work: Any) -> int:
    """Fork; the child runs `work()` and exits 0 if it returned True (os._exit, as multiprocessing's
    fork children do); the parent waits and gets its exit code."""
    child = os.fork()
    if child == 0:  # pragma: no cover -- the child reports through its exit status
        status = 1
        try:
            status = 0 if work() is True else 1
        finally:
            os._exit(status)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_worker_forked_while_another_thread_records_keeps_its_garbage_collector(
    tmp_path: Path,
) -> None:
    """A forked worker may use the object it inherits as a fresh process would: a harness thread
    is mid-record (its batch pauses the cyclic collector) when the process forks. The thread that
    would turn the collector back on does not exist in the child, which recorded and ran on with
    the collector off for good."""
    lineage = open_lineage(f"sqlite:///{tmp_path / 'events.sqlite'}", tmp_path / "home")
    with lineage:
        lineage.record([f.RunRegistered(run="r/0", task="t")])
        append = lineage.app.recorder.insert_events_not_behind  # type: ignore[attr-defined]
        inside, release = threading.Event(), threading.Event()

        def paused(stored: Any, when: Any) -> Any:
            inside.set()
            release.wait(10)
            return append(stored, when)

        lineage.app.recorder.insert_events_not_behind = paused  # type: ignore[attr-defined]
        thread = threading.Thread(
            target=lineage.record, args=([f.RunRegistered(run="r/thread", task="t")],)
        )
        thread.start()
        try:
            assert inside.wait(10)

            def work() -> bool:
                lineage.record([f.RunRegistered(run="r/child", task="t")])
                return gc.isenabled()

            code = _exit_code_of_child(work)
        finally:
            release.set()
            thread.join()
        assert code == 0, "the forked worker runs with the cyclic collector off"
        assert gc.isenabled()
        report = lineage.verify()
        assert report.intact and report.events == 3, report.problem


def _closed_by_another_thread_mid_record(app: LineageApp) -> list[int]:
    """The app's next append first closes the app, as a thread that closes it while this one is
    between its decision and its append; the retry policy's consultations are returned."""
    consulted: list[int] = []

    class Counting(RetryAtOnce):
        def after_store_away(self, attempt: int) -> None:
            consulted.append(attempt)

        def after_lost_race(self, attempt: int) -> None:
            consulted.append(attempt)

    app.retry = Counting()
    append = app.recorder.insert_events_not_behind  # type: ignore[attr-defined]

    def closing(stored: Any, when: Any) -> Any:
        app.close()
        return append(stored, when)

    app.recorder.insert_events_not_behind = closing  # type: ignore[attr-defined]
    return consulted


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_an_app_closed_by_another_thread_mid_record_refuses_it_as_closed(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A record on a closed application is refused at once and says so (`StoreClosed`), also when
    another thread closes it while the record is under way. Before, PostgreSQL retried it eight
    times as a store gone away (about 7 s) and said "check that the store is reachable"; SQLite
    raised the library's bare ConnectionPoolClosedError."""
    from rollout_lineage.adapters.store.event_store import StoreURL, open_application

    url = (
        f"sqlite:///{tmp_path / 'events.sqlite'}"
        if kind == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    app = open_application(StoreURL.parse(url), actor="writer@lab", tool_version="tests")
    app.record([f.RunRegistered(run="r/1", task="t")])
    consulted = _closed_by_another_thread_mid_record(app)
    with pytest.raises(StoreClosed, match="found this application closed"):
        app.record([f.RunRegistered(run="r/2", task="t")])
    assert consulted == [], "a closed store is neither a store gone away nor a lost race"
    lineage = open_lineage(url, tmp_path / "home")
    with lineage:
        assert lineage.position() == 1


def test_a_worker_forked_while_another_thread_opens_a_store_opens_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked worker's next use opens its own connections: also when the process forks while
    another thread is opening a store (any `Lineage`'s first use). On Python before 3.12 every
    `cached_property` holds one lock for all instances while it computes; that thread does not
    exist in the child, which waited for the lock for ever on its own first use."""
    import signal

    from rollout_lineage.adapters.store import event_store

    lineage = open_lineage(f"sqlite:///{tmp_path / 'events.sqlite'}", tmp_path / "home")
    other = open_lineage(f"sqlite:///{tmp_path / 'other.sqlite'}", tmp_path / "other")
    with lineage, other:
        lineage.record([f.RunRegistered(run="r/0", task="t")])
        opening, release = threading.Event(), threading.Event()
        open_application = event_store.open_application

        def slow_open(*args: Any, **kwargs: Any) -> Any:
            opening.set()
            release.wait(10)
            return open_application(*args, **kwargs)

        monkeypatch.setattr(event_store, "open_application", slow_open)
        thread = threading.Thread(target=lambda: other.app)
        thread.start()
        try:
            assert opening.wait(10)

            def work() -> bool:
                release.set()  # the child's own open is not held up
                # A child stuck on the lock is ended by the alarm (not pytest-timeout's handler).
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(10)
                return lineage.record([f.RunRegistered(run="r/child", task="t")]).position == 2

            code = _exit_code_of_child(work)
        finally:
            release.set()
            thread.join()
        assert code != -signal.SIGALRM, "the forked worker hung on a lock of a thread it lacks"
        assert code == 0
        assert lineage.position() == 2

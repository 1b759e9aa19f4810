"""Attacks on the kept writer connection (`adapters/writer_connection.py`) and the SQLite factory
that keeps prepared statements (`adapters/sqlite_connections.py`), each naming the guarantee it
tries to break. A test that passes is a regression test: the guarantee held against that attack.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
import pytest

from rollout_lineage.adapters.batch_evidence import BatchEvidence
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp
from rollout_lineage.domain.integrity import ChainWalker


def _app(postgres_url: str, actor: str = "writer@lab") -> LineageApp:
    from rollout_lineage.adapters.event_store import StoreURL, open_application

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
        try:
            assert os.read(ready_r, 1) == b"1", "the child could not append"
            recorded = app.record([f.RunRegistered(run="r/parent", task="t")])
        finally:
            os.write(go_w, b"1")
            _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert recorded.appended == 1
        stored = _positions(postgres_url)
        assert (recorded.position, "r/parent") in stored, f"acknowledged, then lost: {stored}"
        assert [position for position, _ in stored] == [1, 2]
        _intact(app, 2)
    finally:
        app.close()

"""A harness that opens the store, then forks its workers (multiprocessing's default 'fork' on
Linux): each worker records through the store object it inherited, and must do so through
connections of its own. SQLite's documentation lists a connection carried across fork() among the
ways to corrupt a database; a PostgreSQL session is the parent's, and a child closing it ends it for
the parent too. Attacked through `open_store`'s object, as a harness holds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rollout_lineage.domain import facts as f
from tests.conftest import open_lineage


def _in_child(work: object) -> int:
    """Fork; the child runs `work()` and exits 0 if it returned True (os._exit, as multiprocessing's
    fork children do: no finalizer runs); the parent gets the child's pid."""
    child = os.fork()
    if child == 0:  # pragma: no cover -- the child reports through its exit status
        status = 1
        try:
            status = 0 if work() is True else 1  # type: ignore[operator]
        finally:
            os._exit(status)
    return child


def _exit_code(child: int) -> int:
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_forked_sqlite_worker_records_through_connections_of_its_own(tmp_path: Path) -> None:
    """Parent and forked child record at once through the one object: the child's application
    (and so its SQLite connections) is opened in the child, the parent's never used there, and the
    log stays whole and dense."""
    lineage = open_lineage(f"sqlite:///{tmp_path / 'events.sqlite'}", tmp_path / "home")
    with lineage:
        lineage.record([f.RunRegistered(run="r/0", task="t")])
        inherited = id(lineage.app)

        def work() -> bool:
            mine = lineage.app
            for i in range(40):
                lineage.record([f.RunRegistered(run=f"c/{i}", task="t")])
            return id(mine) != inherited

        child = _in_child(work)
        try:
            for i in range(40):
                lineage.record([f.RunRegistered(run=f"p/{i}", task="t")])
        finally:
            code = _exit_code(child)
        assert code == 0, "the child recorded through the parent's application"
        report = lineage.verify()
        assert report.intact and report.events == 81, report.problem
        assert lineage.position() == 81


@pytest.mark.postgres
def test_a_forked_postgres_worker_that_closes_its_store_leaves_the_parent_s_sessions(
    postgres_url: str, tmp_path: Path
) -> None:
    """A child that records, reads and closes the store it inherited: the parent's read session
    is the same server session afterwards, still answering (before, the child's close gave the
    parent's sessions back to a pool it closed, ending them on the server)."""
    import psycopg

    lineage = open_lineage(postgres_url, tmp_path / "home")
    with lineage:
        lineage.record([f.RunRegistered(run="r/0", task="t")])
        pool = lineage.app.recorder.datastore.pool  # type: ignore[attr-defined]

        def backend() -> int:
            with pool.connection() as connection:
                row = connection.execute("SELECT pg_backend_pid() AS pid").fetchone()
                return int(row["pid"])

        session = backend()

        def work() -> bool:
            recorded = lineage.record([f.RunRegistered(run="r/child", task="t")])
            mine = lineage.app.recorder.datastore.pool  # type: ignore[attr-defined]
            lineage.close()
            return recorded.position == 2 and mine is not pool

        assert _exit_code(_in_child(work)) == 0, "the child used the parent's sessions"
        assert backend() == session, "the parent's read session was ended by the child"
        with psycopg.connect(postgres_url.split("?")[0]) as admin:
            alive = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (session,)
            ).fetchone()
        assert alive == (1,)
        assert lineage.record([f.RunRegistered(run="r/parent", task="t")]).position == 3
        report = lineage.verify()
        assert report.intact and report.events == 3, report.problem


#: A harness process: opens the store, records, forks a worker that records and then ends as a
#: script does (a normal exit: the interpreter finalizes what it holds, the parent's connections it
#: set aside included); the parent then records and reads on. Prints what the parent saw.
NORMAL_EXIT = """
import json, os, sys
from rollout_lineage import open_store
from rollout_lineage.domain import facts as f

lineage = open_store(sys.argv[1], actor="harness@lab")
lineage.record([f.RunRegistered(run="r/0", task="t")])
child = os.fork()
if child == 0:
    lineage.record([f.RunRegistered(run="r/child", task="t")])
    sys.exit(0)
_, status = os.waitpid(child, 0)
recorded = lineage.record([f.RunRegistered(run="r/parent", task="t")])
report = lineage.verify()
print(json.dumps({"child": os.waitstatus_to_exitcode(status), "position": recorded.position,
                  "intact": report.intact, "events": report.events}))
lineage.close()
"""


def test_a_worker_that_exits_normally_leaves_the_parent_recording(
    store_url: str, tmp_path: Path
) -> None:
    """What the child set aside is finalized when its interpreter ends, not used: the parent's
    next record and its verify work on the sessions and files it had."""
    import json
    import subprocess
    import sys

    from tests.conftest import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "LINEAGE_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", NORMAL_EXIT, store_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"child": 0, "position": 3, "intact": True, "events": 3}

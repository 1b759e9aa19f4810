"""Read models: exactly-once catch-up that survives a crash mid-page, rebuilds, read-only SQL,
lineage macros."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from rollout_lineage.adapters.duckdb_store import ReadModelDB
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.engine import paging, runner, table_digest
from tests.conftest import table_contents
from tests.interrupts import when_main_thread_inside
from tests.scenarios import ablate_run_facts, nightly_run_facts


class Crash(Exception):
    pass


def fresh_tables(lineage: Lineage) -> dict[str, list[tuple]]:
    db = ReadModelDB.open(":memory:")
    runner.ensure_schema(db, "test")
    runner.catch_up(db, lineage.log)
    return table_contents(db)


def test_a_crash_mid_page_resumes_to_the_same_tables_as_a_fresh_rebuild(
    memory_lineage: Lineage,
) -> None:
    lineage = memory_lineage
    lineage.record(ablate_run_facts())
    lineage.record(nightly_run_facts())
    db = ReadModelDB.open(lineage.read_models_path)
    runner.ensure_schema(db, "test")
    pages = []

    def die_on_third_page(high: int) -> None:
        pages.append(high)
        if len(pages) == 3:
            raise Crash

    with pytest.raises(Crash):
        runner.catch_up(db, lineage.log, page=7, inside_page=die_on_third_page)
    assert runner.tracked_position(db) == pages[1], (
        "the dying page left no trace, not even its tracking"
    )
    db.close()
    db = ReadModelDB.open(lineage.read_models_path)  # a new process, as after a crash
    runner.ensure_schema(db, "test")
    assert runner.catch_up(db, lineage.log, page=7) == lineage.position()
    assert table_contents(db) == fresh_tables(lineage)
    assert db.scalar("SELECT count(*) FROM events") == lineage.position()


def test_a_page_read_in_chunks_fails_whole_and_the_same_connection_resumes_without_doubles(
    memory_lineage: Lineage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page is read from the store in chunks, each staged as it comes (`paging.READ`); a page that
    fails leaves its chunks staged, and a long-lived reader (`ReadModels.refresh`) catching up again
    on the same connection must not apply them a second time."""
    lineage = memory_lineage
    lineage.record(ablate_run_facts())
    lineage.record(nightly_run_facts())
    monkeypatch.setattr(paging, "READ", 3)
    db = ReadModelDB.open(lineage.read_models_path)
    runner.ensure_schema(db, "test")
    pages: list[int] = []

    def die_on_second_page(high: int) -> None:
        pages.append(high)
        if len(pages) == 2:
            raise Crash

    with pytest.raises(Crash):
        runner.catch_up(db, lineage.log, page=10, inside_page=die_on_second_page)
    assert pages == [12, 24], "a page is whole chunks: ceil(10 / 3) = 4 reads of 3 events"
    assert runner.tracked_position(db) == 12
    assert runner.catch_up(db, lineage.log, page=10) == lineage.position()
    assert table_contents(db) == fresh_tables(lineage)
    assert db.scalar("SELECT count(*) FROM events") == lineage.position()


def test_a_log_ending_on_a_whole_chunk_mid_page_is_staged_whole(
    memory_lineage: Lineage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks are appended a few at a time; the last ones of a log that ends on a whole chunk,
    before its page is full, are appended too."""
    monkeypatch.setattr(paging, "READ", 3)
    memory_lineage.record([f.RunRegistered(run=f"r{i}", task="t") for i in range(6)])
    db = ReadModelDB.open(memory_lineage.read_models_path)
    runner.ensure_schema(db, "test")
    assert runner.catch_up(db, memory_lineage.log, page=12) == 6
    assert db.scalar("SELECT count(*) FROM events") == 6
    assert table_contents(db) == fresh_tables(memory_lineage)


def test_the_page_reader_hands_over_its_failure_keeps_within_its_budget_and_stops_with_its_reader() -> (  # noqa: E501
    None
):
    """`paging._prefetched` runs the store reads on a thread of its own, up to a count and a size
    ahead."""

    def broken() -> Iterator[int]:
        yield 1
        raise Crash

    got = []
    with pytest.raises(Crash):
        for item in paging._prefetched(broken(), 4, 10**9, lambda _: 1):
            got.append(item)
    assert got == [1]

    read: list[int] = []

    def endless() -> Iterator[int]:
        for n in range(10**9):
            read.append(n)
            yield n

    def wait_for_reader(at_least: int) -> None:
        deadline = time.monotonic() + 5
        while len(read) < at_least and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # and a little longer: it must stop there

    pages = paging._prefetched(endless(), 100, 25, lambda _: 10)
    assert next(pages) == 0
    wait_for_reader(3)
    assert len(read) == 4, "one taken, two held (20 of 25 bytes), and the next waiting for room"
    pages.close()  # the consumer stops: the reader, waiting for room, must end too
    assert not [t for t in threading.enumerate() if t.name == "lineage-read"]

    read.clear()
    pages = paging._prefetched(endless(), 2, 10**9, lambda _: 1)
    assert next(pages) == 0
    wait_for_reader(3)
    assert len(read) == 4, "one taken, two held (the count), and the next waiting for room"
    pages.close()
    assert not [t for t in threading.enumerate() if t.name == "lineage-read"]


@pytest.mark.slow
@pytest.mark.usefixtures("ctrl_c_delivered")
def test_ctrl_c_does_not_wait_for_a_store_read_that_is_stuck() -> None:
    """The reader is a daemon thread: Ctrl-C ends the process without joining it (it waited for the
    read)."""
    release = threading.Event()

    def stuck() -> Iterator[int]:
        yield 0
        release.wait(60)  # a store that stopped answering
        yield 1

    pages = paging._prefetched(stuck(), 4, 10**9, lambda _: 1)
    assert next(pages) == 0
    # Ctrl-C once this thread waits inside `next(pages)` for the item the stuck reader never hands
    # over.
    interrupt = when_main_thread_inside(
        paging._prefetched.__code__,
        lambda: signal.pthread_kill(threading.main_thread().ident, signal.SIGINT),
    )
    try:
        with pytest.raises(KeyboardInterrupt):
            next(pages)
        assert [t for t in threading.enumerate() if t.name == "lineage-read"], (
            "the interrupt came back before the stuck read ended"
        )
    finally:
        release.set()
        interrupt.join()


def test_a_table_hashed_a_few_rows_at_a_time_has_the_digest_of_the_whole(
    memory_lineage: Lineage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`verify --read-models` falls back to hashing by rowid windows past the memory cap: a window
    that skipped or repeated rows would do so on both sides and still match, so the two ways must
    agree exactly."""
    memory_lineage.record(ablate_run_facts())
    memory_lineage.record(nightly_run_facts())
    db = ReadModelDB.open(":memory:")
    runner.ensure_schema(db, "test")
    runner.catch_up(db, memory_lineage.log)
    monkeypatch.setattr(table_digest, "DIGEST_ROWS", 3)
    for name in ("events", "nodes", "test_outcomes", "stage_marks"):
        columns = table_digest.columns_of(db, name)
        by_rows = table_digest.digests_by_rows(db, name, table_digest.row_digest_sql(columns))
        assert len(by_rows) > 3 * 32, name
        whole = table_digest.table_digest(db, name)
        assert table_digest.sorted_digest(table_digest.head_of(name, columns), by_rows) == whole


def test_snapshot_restorability_agrees_with_the_domain(memory_lineage: Lineage) -> None:
    lineage = memory_lineage
    lineage.record(ablate_run_facts())
    with lineage.read_models() as models:
        rows = models.db.rows("SELECT ref, restorable, restorable_because FROM snapshots")
    assert rows, "the scenario has snapshots"
    for row in rows:
        assert lineage.app.snapshot(row["ref"]).restorable() == (
            row["restorable"],
            row["restorable_because"],
        )


def test_duckdb_loads_no_module_of_its_own_once_a_read_model_is_open() -> None:
    """A Ctrl-C that lands while DuckDB imports a module mid-query (it did for `zoneinfo`, at the
    first TIMESTAMPTZ of `lineage tree`) comes back as DuckDB's own "Required module failed to
    import" and a traceback, not exit 130: every module it loads for results must be loaded before
    the first query. In a fresh interpreter, since this one has imported them all already."""
    probe = (
        "import sys\n"
        "from rollout_lineage.adapters.duckdb_store import ReadModelDB\n"
        "db = ReadModelDB.open(':memory:')\n"
        "before = set(sys.modules)\n"
        "db.rows(\"SELECT TIMESTAMPTZ '2026-01-01 00:00:00+00', TIMESTAMP '2026-01-01', "
        "DATE '2026-01-01', 1.5::DECIMAL(10, 2), uuid(), INTERVAL 1 DAY, TIME '10:00', "
        "[1], {'a': 1}, '{}'::JSON, 'x'::BLOB\")\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == [], f"DuckDB imported these during a query: {loaded}"


def test_solve_samples_show_each_trial_folders_latest_reading(memory_lineage: Lineage) -> None:
    lineage = memory_lineage
    run = "2026-11-03__09-00-00/t__1f2e3d4c"
    job = "/jobs/opus/trial-02/2026-11-03__09-00-00"
    first = f.SampleObserved(
        run=run, job_dir=job, evaluation_job=True, trial_number=2, alias="opus", result_mtime=10.0
    )
    lineage.record([f.RunRegistered(run=run, task="t"), first])
    lineage.record([first.model_copy(update={"result_mtime": 20.0, "reward": 1.0})])
    with lineage.read_models() as models:
        [row] = models.db.rows(
            "SELECT job, trial_number, alias, result_mtime, reward, observations FROM solve_samples"
        )
    assert row == {
        "job": "2026-11-03__09-00-00",
        "trial_number": 2,
        "alias": "opus",
        "result_mtime": 20.0,
        "reward": 1.0,
        "observations": 2,
    }

"""Issue 26: many live writers on the write path, a writer killed mid-batch, the server restarted
and crashed (kill -9) under writers.

Every writer is a spawned process recording batches of new runs (a batch's runs share its name, so a
batch is recognisable in the log) and writing each acknowledged batch's position to its own file,
one line per `record` returned, as a harness would keep it. Every scenario ends with the same
checks: `lineage verify` finds the chain and the Merkle tree intact, positions are dense (the last
one is the number of events), every batch in the log is whole, and every acknowledged position holds
exactly the writer's own batch.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from rollout_lineage.domain import facts as f
from tests.conftest import open_lineage

pytestmark = pytest.mark.slow


def _batch(worker: int, index: int, size: int) -> list[f.Fact]:
    return [f.RunRegistered(run=f"w{worker}/b{index}/r{k}", task="live") for k in range(size)]


def _write(store_url: str, home: str, worker: int, batches: int, size: int, acks: str) -> None:
    """Record `batches` batches, noting each acknowledged one (line-buffered: a line written is the
    kernel's, so a kill -9 of this process right after keeps it)."""
    from rollout_lineage.domain.errors import StoreUnavailable

    try:
        with open_lineage(store_url, home) as lineage, open(acks, "a", buffering=1) as out:
            for index in range(batches):
                recorded = lineage.record(_batch(worker, index, size))
                out.write(f"{recorded.position} {recorded.appended} {worker} {index}\n")
    except StoreUnavailable:
        # the server stayed away past the writer's retries: nothing of that batch committed
        sys.exit(4)


def _start(
    store_url: str, tmp_path: Path, writers: int, batches: int, size: int
) -> list[multiprocessing.process.BaseProcess]:
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(
            target=_write,
            args=(store_url, str(tmp_path / "home"), w, batches, size, str(_acks(tmp_path, w))),
        )
        for w in range(writers)
    ]
    for process in processes:
        process.start()
    return processes


def _acks(tmp_path: Path, worker: int) -> Path:
    return tmp_path / f"acks-{worker}.txt"


def _acknowledged(tmp_path: Path, writers: int) -> list[tuple[int, int, int, int]]:
    found = []
    for w in range(writers):
        path = _acks(tmp_path, w)
        if path.exists():
            found += [tuple(map(int, line.split())) for line in path.read_text().splitlines()]
    return found  # type: ignore[return-value]


def _wait_for_acks(tmp_path: Path, writers: range, at_least: int, timeout: float = 120) -> None:
    """Until each of `writers` has acknowledged `at_least` batches (a deadline only against a
    hang)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        counts = [
            len(_acks(tmp_path, w).read_text().splitlines()) if _acks(tmp_path, w).exists() else 0
            for w in writers
        ]
        if min(counts) >= at_least:
            return
        time.sleep(0.05)
    raise AssertionError(f"expected {at_least} acknowledged batches per writer, found {counts}")


def assert_log_holds_acknowledged(
    store_url: str, tmp_path: Path, writers: int, size: int
) -> dict[tuple[int, int], list[int]]:
    """The checks every scenario ends with; returns each batch's positions as the log holds them."""
    acks = _acknowledged(tmp_path, writers)
    with open_lineage(store_url, tmp_path / "home") as lineage:
        report = lineage.verify()
        assert report.intact, report.problem
        rows = lineage.log.log_rows(0, None, 10**7)
        positions = [row[0] for row in rows]
        assert positions == list(range(1, len(rows) + 1)), "positions are dense from 1"
        assert report.events == len(rows)
    batches: dict[tuple[int, int], list[int]] = defaultdict(list)
    for row in rows:
        run = json.loads(bytes(row[4]))["fact"]["run"]
        worker, index, _ = run.split("/")
        batches[(int(worker[1:]), int(index[1:]))].append(row[0])
    for key, found in batches.items():
        assert len(found) == size, f"batch {key} holds {len(found)} of its {size} events"
        assert found == list(range(found[0], found[0] + size)), f"batch {key} is not contiguous"
    for position, appended, worker, index in acks:
        held = batches.get((worker, index))
        assert held is not None, (
            f"writer {worker} was told batch {index} is at {position}: it is not"
        )
        if appended == 0:
            # A commit whose answer the restart lost: decided again, the batch was found in the log,
            # and the writer told a position that covers it (read-your-writes).
            assert position >= held[-1], f"writer {worker} batch {index}: {position} < {held}"
        else:
            assert (appended, position) == (size, held[-1]), (
                f"writer {worker} was told position {position} ({appended} "
                f"events) for batch {index}; the log holds it at {held}"
            )
    return batches


def _join(processes: list[multiprocessing.process.BaseProcess], allowed: tuple[int, ...]) -> None:
    for process in processes:
        process.join(600)
        assert process.exitcode in allowed, f"a writer exited with {process.exitcode}"


@pytest.mark.parametrize(
    ("backend", "writers"),
    [
        pytest.param("postgresql", 8, marks=pytest.mark.postgres),
        pytest.param("postgresql", 32, marks=pytest.mark.postgres),
        ("sqlite", 8),
    ],
    ids=["postgresql-8", "postgresql-32", "sqlite-8"],
)
def test_concurrent_writers_each_find_their_own_batches(
    backend: str, writers: int, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store_url = (
        request.getfixturevalue("postgres_url")
        if backend == "postgresql"
        else f"sqlite:///{tmp_path / 'store' / 'events.sqlite'}"
    )
    batches, size = (12, 3) if writers <= 8 else (5, 2)
    _join(_start(store_url, tmp_path, writers, batches, size), (0,))
    held = assert_log_holds_acknowledged(store_url, tmp_path, writers, size)
    assert len(held) == writers * batches, "every batch of every writer landed"
    assert len(_acknowledged(tmp_path, writers)) == writers * batches


@pytest.mark.parametrize(
    "backend", [pytest.param("postgresql", marks=pytest.mark.postgres), "sqlite"]
)
def test_a_writer_killed_mid_batch_loses_nothing_acknowledged(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store_url = (
        request.getfixturevalue("postgres_url")
        if backend == "postgresql"
        else f"sqlite:///{tmp_path / 'store' / 'events.sqlite'}"
    )
    # Large batches, so a writer spends most of its time inside `record` and the kill lands in one.
    writers, size = 4, 400
    processes = _start(store_url, tmp_path, writers, 40, size)
    _wait_for_acks(tmp_path, range(writers), 2)
    os.kill(processes[0].pid, signal.SIGKILL)  # type: ignore[arg-type]
    processes[0].join()
    _join(processes[1:], (0,))
    held = assert_log_holds_acknowledged(store_url, tmp_path, writers, size)
    killed = [key for key in held if key[0] == 0]
    assert len(killed) >= 2, "the killed writer's acknowledged batches are in the log"
    assert len([key for key in held if key[0] != 0]) == (writers - 1) * 40


@pytest.mark.postgres
def test_a_server_restart_under_eight_writers_loses_nothing_acknowledged(
    postgres_url: str, tmp_path: Path
) -> None:
    restart = os.environ.get("LINEAGE_TEST_PG_RESTART")
    if not restart:
        pytest.skip(
            "LINEAGE_TEST_PG_RESTART (a command that restarts the PostgreSQL server) is not set"
        )
    writers, size = 8, 3
    processes = _start(postgres_url, tmp_path, writers, 60, size)
    _wait_for_acks(tmp_path, range(writers), 3)  # restart only once every writer is writing
    subprocess.run(restart, shell=True, check=True)
    _join(processes, (0, 4))  # retried through the restart, or StoreUnavailable after its retries
    held = assert_log_holds_acknowledged(postgres_url, tmp_path, writers, size)
    assert len(held) >= writers * 3


@pytest.mark.postgres
def test_a_server_crash_under_eight_writers_loses_nothing_acknowledged(
    postgres_url: str, tmp_path: Path
) -> None:
    """kill -9 of the postmaster and every backend while eight writers append 50-event batches (so
    commits are in flight when it lands), then a start that recovers from the WAL: what a writer
    was told is there (its acknowledgement came after the server's fsync), nothing is half there,
    and writers retried through the outage go on appending densely after it."""
    crash = os.environ.get("LINEAGE_TEST_PG_CRASH")
    if not crash:
        pytest.skip(
            "LINEAGE_TEST_PG_CRASH (a command that kills the PostgreSQL server with SIGKILL and "
            "starts it again) is not set"
        )
    writers, size = 8, 50
    processes = _start(postgres_url, tmp_path, writers, 30, size)
    _wait_for_acks(tmp_path, range(writers), 2)
    before = len(_acknowledged(tmp_path, writers))
    subprocess.run(crash, shell=True, check=True)
    _join(processes, (0, 4))  # retried through the recovery, or StoreUnavailable after its retries
    held = assert_log_holds_acknowledged(postgres_url, tmp_path, writers, size)
    assert len(held) >= before
    if any(process.exitcode == 0 for process in processes):  # one that finished wrote after it
        assert len(_acknowledged(tmp_path, writers)) > before

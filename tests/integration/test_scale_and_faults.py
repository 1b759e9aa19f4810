"""Issue 7: many writers at once, kill -9 in the middle of writes and catch-ups, a PostgreSQL
restart.

Writers run in real processes (spawned, so nothing is shared but the store). Every scenario ends
with the same three checks: the hash chain is intact, every fact landed exactly once, and the read
models equal a fresh rebuild from the log.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rollout_lineage.adapters.duckdb_store import ReadModelDB
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.errors import ConflictingFact
from rollout_lineage.projections.engine import runner
from tests.conftest import EXAMPLES, Cli, open_lineage, table_contents

RUN = "shared/run"
N_CHILDREN = 4


def assert_consistent(lineage: Lineage, expected_events: int) -> None:
    report = lineage.verify()
    assert report.intact, report.problem
    assert report.events == expected_events
    with lineage.read_models() as models:
        caught_up = table_contents(models.db)
        assert models.position == lineage.position()
    fresh = ReadModelDB.open(":memory:")
    runner.ensure_schema(fresh, "fresh")
    runner.catch_up(fresh, lineage.app.recorder)
    assert caught_up == table_contents(fresh)


def _own_runs(store_url: str, home: str, worker: int, n_runs: int) -> None:
    with open_lineage(store_url, home) as lineage:
        for i in range(n_runs):
            run = f"w{worker}/run-{i}"
            lineage.record(
                [
                    f.RunRegistered(run=run, task="t"),
                    f.StageMarked(run=run, stage="env-ready", sandbox_ref=f"s-{worker}-{i}"),
                    f.RunScored(run=run, reward=1.0),
                ]
            )


def _one_child(store_url: str, home: str, index: int, results: multiprocessing.Queue) -> None:
    with open_lineage(store_url, home) as lineage:
        try:
            lineage.record(
                [
                    f.ChildRestored(
                        run=RUN,
                        fork="root",
                        index=index,
                        snapshot=f.SnapshotRefs(sandbox="s-shared"),
                    )
                ]
            )
            lineage.record(
                [f.ChildScored(run=RUN, fork="root", index=index, reward=float(index % 2))]
            )
            # Every worker also re-sends one identical fact: it must land once, whoever wins.
            lineage.record(
                [
                    f.ChildRestored(
                        run=RUN, fork="root", index=0, snapshot=f.SnapshotRefs(sandbox="s-shared")
                    )
                ]
            )
            results.put(("ok", index))
        except Exception as exc:  # reported to the test, which fails on any
            results.put((type(exc).__name__, str(exc)))


def test_eight_writers_on_own_runs_and_four_on_one_fork(store_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    children = tuple(f.ForkChild(index=i, node=f"n{i + 1}") for i in range(N_CHILDREN))
    with open_lineage(store_url, home) as lineage:
        lineage.record(
            [
                f.RunRegistered(run=RUN, task="t"),
                f.StageMarked(run=RUN, stage="env-ready", sandbox_ref="s-shared"),
                f.ForkOpened(
                    run=RUN, fork="root", node="root", stage="env-ready", children=children
                ),
            ]
        )
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(target=_own_runs, args=(store_url, str(home), w, 15)) for w in range(8)
    ]
    processes += [
        context.Process(target=_one_child, args=(store_url, str(home), i, results))
        for i in range(N_CHILDREN)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(300)
        assert process.exitcode == 0
    assert sorted(results.get(timeout=5) for _ in range(N_CHILDREN)) == [
        ("ok", i) for i in range(N_CHILDREN)
    ]
    with open_lineage(store_url, home) as lineage:
        fork = lineage.app.run(RUN).forks["root"]
        assert sorted(fork.outcomes) == list(range(N_CHILDREN)) and sorted(fork.restored) == list(
            range(N_CHILDREN)
        )
        assert_consistent(lineage, 4 + 8 * 15 * 4 + 2 * N_CHILDREN)


def _score(store_url: str, home: str, reward: float, results: multiprocessing.Queue) -> None:
    with open_lineage(store_url, home) as lineage:
        try:
            lineage.record([f.ChildScored(run=RUN, fork="root", index=0, reward=reward)])
            results.put(("ok", reward))
        except ConflictingFact as exc:
            results.put(("conflict", str(exc)))


def test_racing_writers_with_different_rewards_one_wins_the_other_sees_both_values(
    store_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    with open_lineage(store_url, home) as lineage:
        lineage.record(
            [
                f.RunRegistered(run=RUN, task="t"),
                f.ForkOpened(
                    run=RUN,
                    fork="root",
                    node="root",
                    children=(f.ForkChild(index=0, node="n1"), f.ForkChild(index=1, node="n2")),
                ),
            ]
        )
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    processes = [
        context.Process(target=_score, args=(store_url, str(home), reward, results))
        for reward in (0.0, 1.0)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    outcomes = sorted(results.get(timeout=5) for _ in processes)
    assert [kind for kind, _ in outcomes] == ["conflict", "ok"]
    assert "reward: recorded" in outcomes[0][1] and "now" in outcomes[0][1]
    with open_lineage(store_url, home) as lineage:
        assert_consistent(lineage, 3)


def test_project_follow_tracks_a_store_others_write_to(store_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with open_lineage(store_url, home) as lineage:
        lineage.record([f.RunRegistered(run="first", task="t")])
    expected = 1 + 4 * 10 * 4
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rollout_lineage.cli",
            "--home",
            str(home),
            "--store",
            store_url,
            "project",
            "--follow",
            "--interval",
            "0.05",
            "--until",
            str(expected),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    context = multiprocessing.get_context("spawn")
    writers = [
        context.Process(target=_own_runs, args=(store_url, str(home), w, 10)) for w in range(4)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
    _, stderr = follower.communicate(timeout=120)
    assert follower.returncode == 0, stderr
    assert f"read models at log position {expected}" in stderr.splitlines()[-1]
    with open_lineage(store_url, home) as lineage:
        assert_consistent(lineage, expected)


def lineage_command(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "rollout_lineage.cli", "--home", str(home), *args]


def kill_when(process: subprocess.Popen, ready: callable, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()


def write_runs(source: Path, n: int, *, scored: bool) -> Path:
    with source.open("w") as out:
        for i in range(n):
            out.write(
                json.dumps({"type": "run.registered", "run": f"big/run-{i}", "task": "t"}) + "\n"
            )
            if scored:
                out.write(
                    json.dumps({"type": "run.scored", "run": f"big/run-{i}", "reward": 1.0}) + "\n"
                )
    return source


@pytest.mark.slow
def test_kill_9_during_ingest_leaves_whole_batches_and_a_rerun_completes(tmp_path: Path) -> None:
    home, source = tmp_path / "home", write_runs(tmp_path / "facts.jsonl", 4000, scored=True)
    Cli(home)("init")  # creates the store
    process = subprocess.Popen(
        lineage_command(home, "ingest", str(source)), stderr=subprocess.DEVNULL
    )
    started = time.monotonic()
    kill_when(process, lambda: time.monotonic() - started > 1.0)
    with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as lineage:
        assert lineage.position() in (0, 8000), "a file is one batch: all of it or none of it"
        assert lineage.verify().intact
    Cli(home)("ingest", str(source))
    with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as lineage:
        assert_consistent(lineage, 8000)


@pytest.mark.slow
def test_kill_9_during_a_chunked_ingest_leaves_whole_chunks_and_a_rerun_completes(
    tmp_path: Path,
) -> None:
    home, source = tmp_path / "home", write_runs(tmp_path / "facts.jsonl", 20_000, scored=False)
    Cli(home)("init")  # creates the store
    store = home / "events.sqlite"
    process = subprocess.Popen(
        lineage_command(home, "ingest", "--chunk-size", "1000", str(source)),
        stderr=subprocess.DEVNULL,
    )
    with open_lineage(f"sqlite:///{store}", home) as lineage:
        kill_when(process, lambda: lineage.position() >= 3000)
        assert 3000 <= lineage.position() < 20_000, "killed in the middle"
        assert lineage.position() % 1000 == 0, "each chunk is one transaction: whole chunks only"
        assert lineage.verify().intact
    Cli(home)("ingest", "--chunk-size", "1000", str(source))
    with open_lineage(f"sqlite:///{store}", home) as lineage:
        assert_consistent(lineage, 20_000)


@pytest.mark.slow
def test_kill_9_during_import_keeps_whole_runs_and_a_rerun_completes(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    source = EXAMPLES / "pr-layout" / "jobs" / "nightly" / "csv-dedupe__7c1f2a90"
    for i in range(40):  # forty distinct runs: each copy gets its own snapshot refs
        copy = jobs / f"nightly-{i:02d}" / source.name
        shutil.copytree(source, copy)
        for path in copy.rglob("*.json"):
            path.write_text(
                path.read_text().replace("bf-snap-csv-dedupe-", f"bf-snap-copy{i:02d}-")
            )
    clean_home, home = tmp_path / "clean", tmp_path / "home"
    Cli(clean_home)("import", str(jobs))
    with open_lineage(f"sqlite:///{clean_home / 'events.sqlite'}", clean_home) as clean:
        clean_events = clean.position()
    process = subprocess.Popen(
        lineage_command(home, "import", str(jobs)), stderr=subprocess.DEVNULL
    )
    store = home / "events.sqlite"
    kill_when(process, lambda: store.exists() and store.stat().st_size > 200_000)
    per_run = clean_events // 40
    with open_lineage(f"sqlite:///{store}", home) as lineage:
        assert lineage.position() % per_run == 0, "runs are imported whole"
        assert lineage.verify().intact
    Cli(home)("import", str(jobs))
    with open_lineage(f"sqlite:///{store}", home) as lineage:
        assert_consistent(lineage, clean_events)


@pytest.mark.slow
def test_kill_9_during_catch_up_resumes_to_a_fresh_rebuild(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = f"sqlite:///{home / 'events.sqlite'}"
    with open_lineage(store, home) as lineage:
        for start in range(0, 6000, 500):
            lineage.record(
                [
                    fact
                    for i in range(start, start + 500)
                    for fact in (
                        f.RunRegistered(run=f"r{i}", task="t"),
                        f.StageMarked(run=f"r{i}", stage="env-ready", sandbox_ref=f"s{i}"),
                        f.RunScored(run=f"r{i}", reward=1.0, tests={"a": "passed", "b": "failed"}),
                    )
                ]
            )
        total = lineage.position()
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys; from rollout_lineage.bootstrap import Lineage; from "
                "rollout_lineage.settings import Settings; from rollout_lineage.projections.engine "
                "import runner; from rollout_lineage.adapters.duckdb_store import ReadModelDB; "
                f"l = Lineage(Settings.from_env({{}}, home={str(home)!r})); "
                f"db = ReadModelDB.open(l.settings.projections_path); "
                "runner.ensure_schema(db, l.store_url.redacted()); runner.catch_up(db, "
                "l.app.recorder, page=500, inside_page=lambda high: print(high, flush=True))"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    kill_when(process, lambda: bool(process.stdout.readline()))
    with open_lineage(store, home) as lineage:
        assert_consistent(lineage, total)


@pytest.mark.slow
@pytest.mark.postgres
def test_postgres_restart_while_writers_run(postgres_url: str, tmp_path: Path) -> None:
    restart = os.environ.get("LINEAGE_TEST_PG_RESTART")
    if not restart:
        pytest.skip(
            "LINEAGE_TEST_PG_RESTART (a command that restarts the PostgreSQL server) is not set"
        )
    home = tmp_path / "home"
    context = multiprocessing.get_context("spawn")
    writers = [
        context.Process(target=_runs_until_failure, args=(postgres_url, str(home), w))
        for w in range(3)
    ]
    for writer in writers:
        writer.start()
    # Restart only once the writers are writing (a fixed sleep raced their start-up on a busy
    # machine).
    with open_lineage(postgres_url, home) as lineage:
        deadline = time.monotonic() + 60
        while lineage.position() < 30 and time.monotonic() < deadline:
            time.sleep(0.1)
    subprocess.run(restart, shell=True, check=True)
    for writer in writers:
        writer.join(180)
        assert writer.exitcode in (0, 4), (
            "a writer either retried through the restart or failed with StoreUnavailable"
        )
    with open_lineage(postgres_url, home) as lineage:
        # Positions may skip numbers (PostgreSQL's sequence does not roll back), so count the events
        # themselves.
        events = lineage.verify().events
        assert events % 3 == 0 and events > 0, "each batch (3 events) landed whole or not at all"
        assert_consistent(lineage, events)


def _runs_until_failure(store_url: str, home: str, worker: int) -> None:
    from rollout_lineage.domain.errors import StoreUnavailable

    try:
        with open_lineage(store_url, home) as lineage:
            for i in range(150):
                run = f"pg{worker}/run-{i}"
                lineage.record(
                    [
                        f.RunRegistered(run=run, task="t"),
                        f.StageMarked(run=run, stage="env-ready", sandbox_ref=f"pg-{worker}-{i}"),
                    ]
                )
                time.sleep(0.01)
    except StoreUnavailable:
        sys.exit(4)

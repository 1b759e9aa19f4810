"""Live recording against the database alone: how much of what SQLite and PostgreSQL can commit reaches the log.

Each case is measured both ways in the same minute, alternated, `--repeats` times:

- the database alone: one INSERT of a 300-byte row per commit, through `sqlite3` (WAL,
  `synchronous=FULL`) or `psycopg` (autocommit: one round trip per commit; the server's fsync and
  synchronous_commit as configured, both on by default and checked below);
- rollout-lineage: `open_store(url).record([fact])` in a loop, one new run per fact (one event, its
  chain link and Merkle leaf kept as usual), on the same database with the same durability.

Cases: SQLite with one writer, PostgreSQL with one writer, PostgreSQL with `--writers` (8) writers.
Every writer is its own process (a `spawn`ed one: as separate machines would, each has its own
interpreter, connection and store object), started and warmed up (connected, one commit) before a
barrier lets all of them go; the aggregate rate is every commit over the time from the barrier to
the last writer's end. Each writer also reports its process's CPU time per commit (the client's
share of the cost). A share is rollout-lineage's rate over the database's in the same repeat; the
JSON gives every figure's median, min and max over the repeats.

PostgreSQL: the server at LINEAGE_BENCH_POSTGRES_URL (else LINEAGE_TEST_POSTGRES_URL); the bench
makes its own database there (`lineage_live_bench`, dropped and made again on each start) and a
fresh schema per measurement.

Usage: python bench/live.py [--commits 2000] [--repeats 5] [--writers 8] [--only sqlite pg1 pgN]
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

from installed import compile_package

BENCH_DB = "lineage_live_bench"
PAYLOAD = b"x" * 300


# --- one writer (a process of its own) ------------------------------------------------------------


def _bare_sqlite(path: str) -> Any:
    import sqlite3

    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("PRAGMA busy_timeout=60000")

    def commit(i: int) -> None:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO rows (payload) VALUES (?)", (PAYLOAD,))
        connection.execute("COMMIT")

    return commit, connection.close


def _bare_postgres(url: str, schema: str) -> Any:
    import psycopg

    connection = psycopg.connect(url, autocommit=True)
    statement = f"INSERT INTO {schema}.rows (payload) VALUES (%s)"

    def commit(i: int) -> None:
        connection.execute(statement, (PAYLOAD,))

    return commit, connection.close


def _ours(url: str, writer: int) -> Any:
    from rollout_lineage import open_store
    from rollout_lineage.domain import facts as f

    lineage = open_store(url, actor="bench@lab")
    tag = uuid.uuid4().hex[:8]

    def commit(i: int) -> None:
        lineage.record([f.RunRegistered(run=f"live/{tag}-{writer}/{i}", task="live")])

    return commit, lineage.close


def writer(
    side: str, target: dict[str, str], index: int, commits: int, barrier: Any, out: Any
) -> None:
    if side == "bare" and target["kind"] == "sqlite":
        commit, close = _bare_sqlite(target["path"])
    elif side == "bare":
        commit, close = _bare_postgres(target["url"], target["schema"])
    else:
        commit, close = _ours(target["store"], index)
    commit(-1)  # connected, tables made, code paths warm: none of that is timed
    barrier.wait()
    cpu, start = time.process_time(), time.perf_counter()
    for i in range(commits):
        commit(i)
    end = time.perf_counter()
    out.put((start, end, (time.process_time() - cpu) / commits * 1000))
    close()


# --- the coordinator ------------------------------------------------------------------------------


def measure(side: str, target: dict[str, str], writers: int, commits: int) -> dict[str, float]:
    context = mp.get_context("spawn")
    barrier, out = context.Barrier(writers), context.Queue()
    processes = [
        context.Process(target=writer, args=(side, target, i, commits, barrier, out), daemon=True)
        for i in range(writers)
    ]
    for process in processes:
        process.start()
    results = [out.get(timeout=600) for _ in processes]
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise RuntimeError(f"a {side} writer exited with {process.exitcode}")
    elapsed = max(r[1] for r in results) - min(r[0] for r in results)
    return {
        "per_s": writers * commits / elapsed,
        "client_cpu_ms": statistics.mean(r[2] for r in results),
    }


def with_database(url: str, database: str) -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path="/" + database, query=""))


def postgres_setup(base: str) -> str:
    import psycopg

    with psycopg.connect(base, autocommit=True) as connection:
        settings = {
            name: connection.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
            for name in ("fsync", "synchronous_commit")
        }
        if settings != {"fsync": "on", "synchronous_commit": "on"}:
            raise SystemExit(f"expected fsync and synchronous_commit on, found {settings}")
        connection.execute(f"DROP DATABASE IF EXISTS {BENCH_DB}")
        connection.execute(f"CREATE DATABASE {BENCH_DB}")
    return with_database(base, BENCH_DB)


def target_for(case: str, side: str, work: Path, pg_url: str) -> dict[str, str]:
    """A fresh table (the database alone) or a fresh store (ours) for one measurement."""
    name = f"m_{uuid.uuid4().hex[:10]}"
    if case == "sqlite":
        path = work / f"{name}.sqlite"
        if side == "bare":
            import sqlite3

            with sqlite3.connect(path) as connection:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute(
                    "CREATE TABLE rows (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)"
                )
        return {"kind": "sqlite", "path": str(path), "store": f"sqlite:///{path}"}
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {name}")
        if side == "bare":
            connection.execute(
                f"CREATE TABLE {name}.rows (id bigserial PRIMARY KEY, payload bytea NOT NULL)"
            )
    store = f"{pg_url}?schema={name}"
    if side == "ours":  # the tables made once, before any writer starts
        from rollout_lineage import open_store

        with open_store(store, actor="bench@lab") as lineage:
            lineage.position()
    return {"kind": "postgresql", "url": pg_url, "schema": name, "store": store}


def spread(values: list[float], digits: int = 3) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=2000, help="commits per writer")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--writers", type=int, default=8, help="writers of the many-writer case")
    parser.add_argument("--only", nargs="*", default=["sqlite", "pg1", "pgN"])
    args = parser.parse_args()
    compile_package()
    cases = {"sqlite": ("sqlite", 1), "pg1": ("postgresql", 1), "pgN": ("postgresql", args.writers)}
    base = os.environ.get("LINEAGE_BENCH_POSTGRES_URL") or os.environ.get(
        "LINEAGE_TEST_POSTGRES_URL"
    )
    needs_pg = any(cases[c][0] == "postgresql" for c in args.only)
    if needs_pg and not base:
        raise SystemExit("set LINEAGE_BENCH_POSTGRES_URL (or LINEAGE_TEST_POSTGRES_URL)")
    pg_url = postgres_setup(base) if needs_pg and base else ""
    work = Path(tempfile.mkdtemp(prefix="lineage-live-"))
    raw: dict[str, dict[str, list[dict[str, float]]]] = {
        c: {"bare": [], "ours": []} for c in args.only
    }
    try:
        for repeat in range(args.repeats):
            for case in args.only:
                kind, writers = cases[case]
                # Alternated: the side that goes first changes from repeat to repeat.
                order = ("bare", "ours") if repeat % 2 == 0 else ("ours", "bare")
                for side in order:
                    target = target_for("sqlite" if kind == "sqlite" else "pg", side, work, pg_url)
                    raw[case][side].append(measure(side, target, writers, args.commits))
                print(
                    f"repeat {repeat + 1} {case}: bare {raw[case]['bare'][-1]['per_s']:.0f}/s, "
                    f"ours {raw[case]['ours'][-1]['per_s']:.0f}/s",
                    file=sys.stderr,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_average_at_end": os.getloadavg()},
        "commits_per_writer": args.commits,
        "repeats": args.repeats,
        "writers_are": "processes (spawn), one connection and one store object each",
    }
    for case in args.only:
        bare, ours = raw[case]["bare"], raw[case]["ours"]
        report[case] = {
            "writers": cases[case][1],
            "database_alone_commits_per_s": spread([m["per_s"] for m in bare], 0),
            "rollout_lineage_events_per_s": spread([m["per_s"] for m in ours], 0),
            "share": spread([o["per_s"] / b["per_s"] for o, b in zip(ours, bare, strict=True)]),
            "client_cpu_ms_per_commit": {
                "database_alone": spread([m["client_cpu_ms"] for m in bare]),
                "rollout_lineage": spread([m["client_cpu_ms"] for m in ours]),
            },
        }
    if "pg1" in raw and "pgN" in raw:
        pairs = zip(raw["pgN"]["ours"], raw["pg1"]["ours"], strict=True)
        report["pgN"]["rollout_lineage_vs_one_writer"] = spread(
            [many["per_s"] / one["per_s"] for many, one in pairs]
        )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

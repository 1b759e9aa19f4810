"""The benchmark suite: prints one JSON object with every figure the README's performance table shows.

Each figure is the median of several runs. `--quick` shrinks every workload so the whole suite
finishes in under a minute; the full run uses the sizes the targets name (1,000,000 events for
rebuilds, 100,000 nodes for the descendants query, a 1 GiB tar). Stores are built under bench/out/
(gitignored).

Usage: python bench/run.py [--quick] [--only NAME ...]
"""  # noqa: E501

from __future__ import annotations

import argparse
import atexit
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import tar_verify
from installed import compile_package
from synthetic import EVENTS_PER_RUN, batches

from rollout_lineage.adapters.jsonl import parse_lines
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.reports.exports import exports
from rollout_lineage.settings import Settings

OUT = Path(__file__).resolve().parent / "out"


def median(action: Callable[[], float], runs: int = 3) -> float:
    return statistics.median(action() for _ in range(runs))


def _drop_schema(store: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(store, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def fresh(name: str, store: str | None = None) -> Lineage:
    """An empty store: a new SQLite file, or a new schema in the PostgreSQL database."""
    home = OUT / name
    shutil.rmtree(home, ignore_errors=True)
    if store is not None and store.startswith("postgres"):
        import uuid

        import psycopg

        schema = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(store, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {schema}")
        atexit.register(_drop_schema, store, schema)
        store = f"{store}{'&' if '?' in store else '?'}schema={schema}"
    return Lineage(Settings.from_env({}, home=home, store=store, actor="bench@lab"))


def append_single(store: str | None = None, n: int = 1000) -> float:
    def once() -> float:
        with fresh("single", store) as lineage:
            facts = [f.RunRegistered(run=f"single/{i}", task="t") for i in range(n)]
            lineage.position()
            start = time.perf_counter()
            for fact in facts:
                lineage.record([fact])
            return n / (time.perf_counter() - start)

    return median(once)


def deep_run(lineage: Lineage, deep: int) -> str:
    """A registered run already holding `deep` nodes (recorded in batches of 1,000); returns its
    key."""
    run = "live/run__1"
    lineage.record([f.RunRegistered(run=run, task="t")])
    for start in range(0, deep, 1000):
        lineage.record(
            [
                f.NodeOpened(run=run, node=f"d{i}", parent="root")
                for i in range(start, min(deep, start + 1000))
            ]
        )
    return run


def append_live(n: int = 1000, *, deep: int = 0) -> float:
    """A harness recording one run live, one fact per transaction as it happens: nodes/s over `n`
    nodes, after `deep` nodes already in the run (recorded in batches). Constant cost means the two
    figures agree."""

    def once() -> float:
        with fresh("live") as lineage:
            run = deep_run(lineage, deep)
            began = time.perf_counter()
            for i in range(n):
                lineage.record([f.NodeOpened(run=run, node=f"n{i}", parent="root")])
            return n / (time.perf_counter() - began)

    return median(once)


def record_in_new_process_ms(deep: int) -> float:
    """One fact recorded by a process that has not seen the run (a new `Lineage`, nothing cached),
    into a run of `deep` events: the saved aggregate state keeps this flat (issue #14). Opening the
    store is not timed."""
    with fresh("new-process") as lineage:
        run = deep_run(lineage, deep)
        settings = lineage.settings
    timings = []
    for i in range(9):
        with Lineage(settings) as writer:
            writer.position()
            began = time.perf_counter()
            writer.record([f.NodeOpened(run=run, node=f"new{i}", parent="root")])
            timings.append((time.perf_counter() - began) * 1000)
    return statistics.median(timings)


def _wall_ms(command: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return (time.perf_counter() - began) * 1000


def cli_start_up(repeats: int = 9) -> dict[str, float]:
    """`lineage --help` and `lineage sql "select 1"` on an up-to-date store, against `python -c
    "import click"`, each a fresh process; measured in turn within each repeat, so load on the
    machine hits all three alike. Then `lineage runs` and the same `lineage sql`, each up to date
    and right after one new event: the whole extra cost of a one-event catch-up in a fresh process
    (the event is recorded by this process, outside the timing). `runs` reads with this code's own
    statements on the connection that caught up; `sql` reopens the file read-only for the user's
    statement, so it opens it twice."""
    lineage_cli = str(Path(sys.executable).parent / "lineage")
    with fresh("cli") as lineage:
        for batch in batches(2_000):
            lineage.record(batch)
        home = str(lineage.settings.home)
    select = [lineage_cli, "--home", home, "sql", "select 1"]
    runs = [lineage_cli, "--home", home, "runs", "--format", "jsonl"]
    subprocess.run(select, check=True, capture_output=True)  # catches the read models up
    click_ms, help_ms, sql_ms, behind_ms, runs_ms, runs_behind_ms = [], [], [], [], [], []
    with Lineage(Settings.from_env({}, home=home, actor="bench@lab")) as writer:
        for i in range(repeats):
            click_ms.append(_wall_ms([sys.executable, "-c", "import click"]))
            help_ms.append(_wall_ms([lineage_cli, "--help"]))
            sql_ms.append(_wall_ms(select))
            writer.record([f.RunRegistered(run=f"cli/behind-{i}", task="t")])
            behind_ms.append(_wall_ms(select))
            runs_ms.append(_wall_ms(runs))
            writer.record([f.RunRegistered(run=f"cli/runs-behind-{i}", task="t")])
            runs_behind_ms.append(_wall_ms(runs))
    click, help_, sql, behind, runs_up, runs_behind = (
        statistics.median(v)
        for v in (click_ms, help_ms, sql_ms, behind_ms, runs_ms, runs_behind_ms)
    )
    return {
        "sql_one_event_behind_ms": round(behind, 1),
        "catch_up_one_event_fresh_process_ms": round(runs_behind - runs_up, 1),
        "catch_up_one_event_fresh_process_sql_ms": round(behind - sql, 1),
        "click_import_ms": round(click, 1),
        "cli_help_ms": round(help_, 1),
        "cli_help_ms_ratio_vs_click": round(help_ / click, 2),
        "sql_first_query_ms": round(sql, 1),
        "sql_first_query_ms_ratio_vs_click": round(sql / click, 2),
        "sql_first_query_ms_spread": [round(min(sql_ms), 1), round(max(sql_ms), 1)],
    }


def append_batch(store: str | None = None, n: int = 60_000) -> float:
    def once() -> float:
        with fresh("batch", store) as lineage:
            prepared = list(batches(n))
            lineage.position()
            start = time.perf_counter()
            appended = sum(lineage.record(batch).appended for batch in prepared)
            return appended / (time.perf_counter() - start)

    return median(once)


def ingest_jsonl(n: int = 60_000) -> float:
    source = OUT / "ingest.jsonl"
    OUT.mkdir(exist_ok=True)
    with source.open("w") as out:
        for batch in batches(n):
            out.writelines(fact.model_dump_json(exclude_none=True) + "\n" for fact in batch)

    def once() -> float:
        with fresh("ingest") as lineage:
            lineage.position()
            start = time.perf_counter()
            with source.open("rb") as lines:
                appended = lineage.record(parse_lines(lines, str(source))).appended
            return appended / (time.perf_counter() - start)

    return median(once)


# A child's own peak: VmHWM, not ru_maxrss, which Linux carries over from the parent through fork
# and exec (so a child of this big benchmark process would report the parent's peak).
PEAK_RSS_MB = """
import re
from pathlib import Path
def peak_rss_mb():
    return int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text())[1]) / 1024
"""
INGEST_CHILD = (
    PEAK_RSS_MB
    + """
import atexit, sys
from rollout_lineage.cli.main import main
atexit.register(lambda: print(peak_rss_mb()))
sys.argv[0] = "lineage"
main()
"""
)


def ingest_peak_rss_mb(chunk_size: int | None) -> float:
    """Peak RSS of `lineage ingest` of the ingest benchmark's file, in a fresh process: whole, or
    chunked."""
    home = OUT / "ingest-rss"
    shutil.rmtree(home, ignore_errors=True)
    chunk = ["--chunk-size", str(chunk_size)] if chunk_size else []
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            INGEST_CHILD,
            "--home",
            str(home),
            "ingest",
            *chunk,
            str(OUT / "ingest.jsonl"),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(out.split()[-1])


def big_store(n_events: int) -> Lineage:
    """A store of n_events synthetic events, built once and reused between benchmark runs."""
    home = OUT / f"store-{n_events}"
    lineage = Lineage(Settings.from_env({}, home=home, actor="bench@lab"))
    if lineage.position() < (n_events // EVENTS_PER_RUN) * EVENTS_PER_RUN:
        lineage.close()
        shutil.rmtree(home, ignore_errors=True)
        lineage = Lineage(Settings.from_env({}, home=home, actor="bench@lab"))
        for batch in batches(n_events, runs_per_batch=500):
            lineage.record(batch)
    return lineage


REBUILD_CHILD = (
    PEAK_RSS_MB
    + """
import os, sys, time
from rollout_lineage.adapters.duckdb_store import ReadModelDB
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.projections.engine import runner
from rollout_lineage.settings import Settings
lineage = Lineage(Settings.from_env({}, home=sys.argv[1], actor="bench@lab"))
target = sys.argv[2]
db = ReadModelDB.open(target, memory_limit=os.environ.get("LINEAGE_DUCKDB_MEMORY", "256MB"))
start = time.perf_counter()
position = runner.rebuild(db, lineage.app.recorder, lineage.store_url.redacted())
seconds = time.perf_counter() - start
print(position / seconds, peak_rss_mb())
"""
)


def rebuild(n_events: int, memory_cap: str = "256MB") -> tuple[float, float]:
    """Events per second and peak RSS of a whole rebuild, each in a fresh process with this DuckDB
    memory cap."""
    lineage = big_store(n_events)
    home = lineage.settings.home
    lineage.close()
    results = []
    for _ in range(3):
        target = OUT / "rebuild.duckdb"
        for path in (target, target.with_suffix(".duckdb.wal")):
            path.unlink(missing_ok=True)
        line = subprocess.run(
            [sys.executable, "-c", REBUILD_CHILD, str(home), str(target)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, "LINEAGE_DUCKDB_MEMORY": memory_cap},
        ).stdout.split()
        results.append((float(line[0]), float(line[1])))
    return statistics.median(r[0] for r in results), max(r[1] for r in results)


def catch_up_one_event_ms() -> tuple[float, float]:
    """Latency of a read right after one new event: a long-lived reader, and a fresh process-like
    open."""
    with fresh("catchup") as lineage:
        for batch in batches(12_000):
            lineage.record(batch)
        warm, cold = [], []
        with lineage.read_models() as models:
            for i in range(15):
                lineage.record([f.RunRegistered(run=f"warm/{i}", task="t")])
                start = time.perf_counter()
                models.refresh(lineage)
                models.db.scalar("SELECT count(*) FROM runs")
                warm.append((time.perf_counter() - start) * 1000)
        for i in range(15):
            lineage.record([f.RunRegistered(run=f"cold/{i}", task="t")])
            start = time.perf_counter()
            with lineage.read_models() as models:
                models.db.scalar("SELECT count(*) FROM runs")
            cold.append((time.perf_counter() - start) * 1000)
        return statistics.median(warm), statistics.median(cold)


def binary_tree_facts(run: str, n_nodes: int) -> list[list[f.Fact]]:
    """A run whose tree is a complete binary tree of forks: node k forks children 2k+1 and 2k+2."""
    name = lambda k: "root" if k == 0 else f"n{k}"  # noqa: E731
    facts: list[f.Fact] = [f.RunRegistered(run=run, task="wide")]
    for k in range((n_nodes - 1) // 2):
        children = tuple(f.ForkChild(index=i, node=name(2 * k + 1 + i)) for i in range(2))
        facts.append(f.ForkOpened(run=run, fork=name(k), node=name(k), children=children))
    return [facts[i : i + 5000] for i in range(0, len(facts), 5000)]


def tree_store(n_nodes: int) -> Lineage:
    lineage = fresh(f"tree-{n_nodes}")
    for batch in binary_tree_facts("wide/run", n_nodes):
        lineage.record(batch)
    return lineage


def export_tree_ms(n_nodes: int = 10_000) -> float:
    with tree_store(n_nodes) as lineage, lineage.read_models() as models:

        def once() -> float:
            start = time.perf_counter()
            document = exports.tree_document(models.db, "wide/run")
            assert len(document["nodes"]) == n_nodes - (n_nodes + 1) % 2
            return (time.perf_counter() - start) * 1000

        return median(once, 5)


def descendants_query_ms(n_nodes: int = 100_000) -> float:
    with tree_store(n_nodes) as lineage, lineage.read_models() as models:

        def once() -> float:
            start = time.perf_counter()
            count = models.db.scalar("SELECT count(*) FROM descendants('wide/run', 'n1')")
            assert count > n_nodes // 3
            return (time.perf_counter() - start) * 1000

        return median(once, 5)


def verify_log(n_events: int) -> float:
    with big_store(n_events) as lineage:

        def once() -> float:
            start = time.perf_counter()
            report = lineage.verify()
            assert report.intact
            return report.events / (time.perf_counter() - start)

        return median(once)


def _plan(quick: bool, big: int, pg: str | None) -> list[tuple[str, Callable[[], Any]]]:
    plan: list[tuple[str, Callable[[], Any]]] = [
        ("append_single_events_per_s", lambda: append_single(n=300 if quick else 2000)),
        ("append_batch_events_per_s", lambda: append_batch(n=24_000 if quick else 120_000)),
        ("append_live_events_per_s", lambda: append_live(300 if quick else 1000)),
        (
            "append_live_events_per_s_deep_run",
            lambda: append_live(300 if quick else 1000, deep=10_000),
        ),
        ("record_in_new_process_ms", lambda: record_in_new_process_ms(0)),
        ("record_in_new_process_ms_deep_run", lambda: record_in_new_process_ms(10_000)),
        ("cli_start_up", cli_start_up),
        ("ingest_jsonl_events_per_s", lambda: ingest_jsonl(12_000 if quick else 120_000)),
        ("ingest_peak_rss_mb", lambda: (ingest_peak_rss_mb(None), ingest_peak_rss_mb(10_000))),
        ("rebuild", lambda: rebuild(big)),
        ("catch_up_one_event_ms", catch_up_one_event_ms),
        ("export_tree_10k_nodes_ms", lambda: export_tree_ms(10_001)),
        ("sql_query_ms", lambda: descendants_query_ms(20_001 if quick else 100_001)),
        ("verify_log_events_per_s", lambda: verify_log(big)),
        ("tar_verify", lambda: tar_verify.run(quick=quick)),
    ]
    if pg:
        plan[2:2] = [
            (
                "append_single_events_per_s_postgresql",
                lambda: append_single(pg, n=300 if quick else 1000),
            ),
            (
                "append_batch_events_per_s_postgresql",
                lambda: append_batch(pg, n=24_000 if quick else 60_000),
            ),
        ]
    return plan


def _rebuild_figures(figures: dict[str, Any], value: Any, big: int) -> None:
    figures["rebuild_events"] = big
    figures["rebuild_events_per_s"], figures["rebuild_peak_rss_mb"] = (
        round(value[0]),
        round(value[1], 1),
    )
    # The same rebuild over a log a tenth as long, and both under a smaller cap: what grows with the
    # log is DuckDB's buffer pool filling up to its cap (LINEAGE_DUCKDB_MEMORY), not anything
    # unbounded.
    figures[f"rebuild_peak_rss_mb_at_{big // 10}_events"] = round(rebuild(big // 10)[1], 1)
    figures["rebuild_peak_rss_mb_cap_64mb"] = round(rebuild(big, "64MB")[1], 1)
    figures[f"rebuild_peak_rss_mb_cap_64mb_at_{big // 10}_events"] = round(
        rebuild(big // 10, "64MB")[1], 1
    )


def _record(figures: dict[str, Any], name: str, value: Any, big: int) -> None:
    """Put one measurement into the figures, under the names the README's table uses."""
    if name == "rebuild":
        _rebuild_figures(figures, value, big)
    elif name == "ingest_peak_rss_mb":
        figures["ingest_peak_rss_mb_whole"], figures["ingest_peak_rss_mb_chunked_10000"] = (
            round(v, 1) for v in value
        )
    elif name == "catch_up_one_event_ms":
        figures[name], figures["catch_up_one_event_cold_open_ms"] = (
            round(value[0], 1),
            round(value[1], 1),
        )
    elif name == "cli_start_up":
        figures.update(value)
    elif name == "tar_verify":
        figures["tar_verify_ratio_vs_hashlib"] = value["tar_verify_ratio_vs_hashlib"]
        figures["tar_verify_bytes"] = value["tar_bytes"]
    else:
        figures[name] = round(value, 1) if name.endswith("_ms") else round(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small workloads (under a minute)")
    parser.add_argument("--only", nargs="*", help="run only these figures (prefixes)")
    args = parser.parse_args()
    compile_package()
    quick = args.quick
    big = 100_000 if quick else 1_000_000
    pg = os.environ.get("LINEAGE_BENCH_POSTGRES_URL") or os.environ.get("LINEAGE_TEST_POSTGRES_URL")
    figures: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU, "
        f"{round(os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30)} GiB, "
        f"Python {platform.python_version()}",
        "quick": quick,
    }
    for name, action in _plan(quick, big, pg):
        if args.only and not any(name.startswith(prefix) for prefix in args.only):
            continue
        print(f"running {name} ...", file=sys.stderr, flush=True)
        _record(figures, name, action(), big)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

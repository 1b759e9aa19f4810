"""Latency of `lineage serve`, the command itself: p50/p99 of `/api/runs`, run pages, a 10,000-node tree page
and the charts, over real HTTP on loopback, on new and on kept-alive connections, cold and warm, sequential
and from concurrent clients.

The store is built from examples/ (plus `--runs N` synthetic runs of `bench/synthetic.py`, 12 events
each, and a run whose tree has `--tree-nodes` nodes, `bench/run.py`'s binary fork tree); then the real
`lineage serve --port P` is started as a user starts it (a subprocess, `python -m rollout_lineage.cli`), and
clients ask it (bounded: `--requests` per figure, after a few warm-up requests). `--rounds R` measures
every figure R times on the same store and prints each figure's median p50/p99 with the spread (min-max)
over the rounds.

Which figure is which:
- `kept_alive_*`: one connection for every request, as a browser asks (HTTP/1.1 keep-alive). Before
  issue #36 each answer here waited ~40 ms for Nagle's algorithm (the listening socket was not TCP to
  asyncio, so TCP_NODELAY was never set on accepted connections).
- `new_connection_*`: a new TCP connection for each request (connect, ask, close), as `curl` does.
- `cold_run_page`: run pages never asked before (a different synthetic run each time), so nothing is
  remembered: catch-up, the queries and the arm statistics all count. `warm` figures ask the same page
  again (answers are remembered per log position, `projections/reports/served_reads.py`).
- `*_after_a_write`: one event appended (by this process, beside the server) before each timed
  request: catch-up, reopening the copy and the queries count there.
- `concurrent_*`: `--clients` threads, each with its own kept-alive connection, all asking at once;
  their latencies are pooled.
`serve_ready_s` is from starting the command to its first answer (the read models built or caught up).

Usage: python bench/serve.py [--runs N] [--tree-nodes 10001] [--requests 200] [--clients 8]
[--rounds 3] (prints one JSON object)
"""  # noqa: E501

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from run import binary_tree_facts
from synthetic import EVENTS_PER_RUN, batches

from rollout_lineage.adapters.importers.service import import_runs
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.settings import Settings

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
RUN = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
SYNTHETIC_RUN = "bench/task-3__00000003"
TREE_RUN = "wide/run"
WARM_UP = 5


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _summary(spent: list[float]) -> dict[str, float]:
    spent = sorted(spent)
    return {
        "p50_ms": round(statistics.median(spent), 2),
        "p95_ms": round(spent[min(len(spent) - 1, int(len(spent) * 0.95))], 2),
        "p99_ms": round(spent[min(len(spent) - 1, int(len(spent) * 0.99))], 2),
        "max_ms": round(spent[-1], 2),
    }


class Client:
    """GETs over one kept-alive HTTP/1.1 connection, or (`fresh`) over a new connection each."""

    def __init__(self, port: int, fresh: bool = False) -> None:
        self.port = port
        self.fresh = fresh
        self.connection: http.client.HTTPConnection | None = None

    def get(self, path: str) -> bytes:
        if self.connection is None:
            self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        self.connection.request("GET", path)
        answer = self.connection.getresponse()
        body = answer.read()
        assert answer.status == 200, (path, answer.status, body[:300])
        if self.fresh or answer.will_close:
            self.close()
        return body

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _timed(client: Client, path: str) -> float:
    started = time.perf_counter()
    client.get(path)
    return (time.perf_counter() - started) * 1000


def _percentiles(
    client: Client, path: str, requests: int, before: Callable[[int], None] | None = None
) -> dict[str, float]:
    """Latency of `requests` sequential GETs of `path`; `before(i)` (untimed) runs ahead of each."""
    for _ in range(WARM_UP if before is None else 1):
        _timed(client, path)
    spent = []
    for i in range(requests):
        if before is not None:
            before(i)
        spent.append(_timed(client, path))
    return _summary(spent)


def _cold(client: Client, paths: list[str]) -> dict[str, float]:
    """Each path asked once, none asked before: nothing remembered."""
    return _summary([_timed(client, path) for path in paths])


def _concurrent(port: int, paths: list[str], clients: int, requests: int) -> dict[str, float]:
    """`clients` threads with a kept-alive connection each, every one asking `requests` times,
    round the paths."""

    def one(k: int) -> list[float]:
        client = Client(port)
        try:
            _timed(client, paths[k % len(paths)])
            return [_timed(client, paths[(k + i) % len(paths)]) for i in range(requests)]
        finally:
            client.close()

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        spent = [ms for part in pool.map(one, range(clients)) for ms in part]
    wall = time.perf_counter() - started
    return {**_summary(spent), "requests_per_s": round(len(spent) / wall, 1)}


def _round(
    port: int,
    requests: int,
    clients: int,
    write: Callable[[int], None],
    cold_runs: list[str],
) -> dict[str, Any]:
    kept = Client(port)
    new = Client(port, fresh=True)
    after = max(10, requests // 5)
    try:
        return {
            "cold_run_page": _cold(kept, [f"/runs/{run}" for run in cold_runs]),
            "kept_alive_api_runs": _percentiles(kept, "/api/runs", requests),
            "new_connection_api_runs": _percentiles(new, "/api/runs", requests),
            "kept_alive_warm_run_page": _percentiles(kept, f"/runs/{RUN}", requests),
            "new_connection_warm_run_page": _percentiles(new, f"/runs/{RUN}", requests),
            "kept_alive_api_runs_filtered_sorted_page": _percentiles(
                kept, "/api/runs?task=task-3&sort=-reward&page=2", requests
            ),
            "kept_alive_runs_page": _percentiles(kept, "/runs", requests),
            "kept_alive_warm_synthetic_run_page": _percentiles(
                kept, f"/runs/{SYNTHETIC_RUN}", requests
            ),
            "kept_alive_warm_tree_page_10k_nodes": _percentiles(
                kept, f"/runs/{TREE_RUN}", max(20, requests // 10)
            ),
            "kept_alive_warm_charts_page": _percentiles(kept, "/charts", max(20, requests // 10)),
            f"concurrent_{clients}_clients_api_runs": _concurrent(
                port, ["/api/runs"], clients, requests // 2
            ),
            f"concurrent_{clients}_clients_mixed": _concurrent(
                port,
                ["/api/runs", f"/runs/{RUN}", "/runs", "/api/runs?task=task-7&sort=run"],
                clients,
                requests // 2,
            ),
            # After a write: each request first catches up and reopens the copy.
            "api_runs_after_a_write": _percentiles(kept, "/api/runs", after, before=write),
            "run_page_after_a_write": _percentiles(kept, f"/runs/{RUN}", after, before=write),
        }
    finally:
        kept.close()


def _spread(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per figure and key: the median over the rounds, with [min, max]."""
    out: dict[str, Any] = {}
    for figure in rounds[0]:
        out[figure] = {}
        for key in rounds[0][figure]:
            values = [r[figure][key] for r in rounds]
            out[figure][key] = round(statistics.median(values), 2)
            if len(values) > 1:
                out[figure][key + "_range"] = [min(values), max(values)]
    return out


def _serving(home: Path, port: int) -> tuple[subprocess.Popen[bytes], float]:
    """`lineage serve --port PORT` started as a user starts it, and the seconds until it answers."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "rollout_lineage.cli", "--home", str(home)]
    process = subprocess.Popen(
        [*command, "serve", "--port", str(port)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 600
    while True:
        try:
            Client(port, fresh=True).get("/api/runs")
            return process, time.perf_counter() - started
        except (OSError, http.client.HTTPException):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise SystemExit(
                    f"lineage serve did not start: {process.communicate()[1]!r}"
                ) from None
            time.sleep(0.05)


def run(
    extra_runs: int, tree_nodes: int, requests: int, clients: int, rounds: int
) -> dict[str, Any]:
    synthetic_runs = max(4, extra_runs)
    cold_count = min(synthetic_runs - 1, max(10, requests // 5))
    with tempfile.TemporaryDirectory(prefix="lineage-bench-serve-") as scratch:
        home = Path(scratch) / "home"
        settings = Settings.from_env({}, home=home, actor="bench")
        with Lineage(settings) as lineage:
            built = time.perf_counter()
            import_runs(lineage, [EXAMPLES])
            for batch in batches(synthetic_runs * EVENTS_PER_RUN):
                lineage.record(batch)
            for batch in binary_tree_facts(TREE_RUN, tree_nodes):
                lineage.record(batch)
            built_s = time.perf_counter() - built
            events = lineage.position()
        port = _free_port()
        process, ready_s = _serving(home, port)
        written = iter(range(10**9))

        def write(_i: int) -> None:  # a new run each time (a repeated fact appends nothing)
            with Lineage(settings) as writer:
                writer.record([f.RunRegistered(run=f"bench/written-{next(written):06d}", task="w")])

        try:
            first = Client(port)
            firsts = {
                "synthetic_run_page_first_ms": round(_timed(first, f"/runs/{SYNTHETIC_RUN}"), 1),
                "tree_page_10k_nodes_first_ms": round(_timed(first, f"/runs/{TREE_RUN}"), 1),
                "charts_page_first_ms": round(_timed(first, "/charts"), 1),
            }
            total = json.loads(first.get("/api/runs"))["total"]
            first.close()
            measured = []
            for r in range(rounds):  # fresh runs for every round's cold pages
                cold_runs = [
                    f"bench/task-{i % 97}__{i:08d}"
                    for i in range(1 + r * cold_count, 1 + (r + 1) * cold_count)
                    if i < synthetic_runs and i != 3
                ]
                measured.append(_round(port, requests, clients, write, cold_runs))
            figures = {
                "runs_in_store": total,
                "events_in_store": events,
                "store_built_s": round(built_s, 1),
                "serve_ready_s": round(ready_s, 2),
                **firsts,
                **_spread(measured),
            }
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
    figures["rounds"] = rounds
    figures["clients"] = clients
    figures["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    figures["goals"] = {
        "api_runs_p50_ms": 20,
        "cold_run_page_p50_ms": 50,
        "cold_run_page_p95_ms": 100,
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=0, help="synthetic runs added to the examples")
    parser.add_argument(
        "--tree-nodes", type=int, default=10_001, help="nodes of the wide run's tree"
    )
    parser.add_argument("--requests", type=int, default=200, help="timed requests per figure")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    parser.add_argument("--rounds", type=int, default=1, help="measure every figure this often")
    arguments = parser.parse_args()
    print(
        json.dumps(
            run(
                arguments.runs,
                arguments.tree_nodes,
                arguments.requests,
                arguments.clients,
                arguments.rounds,
            ),
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

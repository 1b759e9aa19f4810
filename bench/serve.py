"""Latency of `lineage serve`: p50/p99 of `/api/runs`, run pages, a 10,000-node tree page and the charts, over
real HTTP on loopback, sequential and from concurrent clients.

The store is built from examples/ (plus `--runs N` synthetic runs of `bench/synthetic.py`, 12 events
each, and a run whose tree has `--tree-nodes` nodes, `bench/run.py`'s binary fork tree), the
application is the one `lineage serve` runs, under uvicorn in a thread of this process, and
keep-alive clients ask (bounded: `--requests` per figure, after a few warm-up requests). `--rounds
R` measures every figure R times on the same store and prints each figure's median p50/p99 with the
spread (min-max) over the rounds.

The hash chain is walked (and the Merkle tree built) once, in the background from the start as
`lineage serve` does, and waited for before any figure (`chain_walk_and_merkle_tree_at_start_s`).
Answers are remembered per log position (`projections/reports/served_reads.py`), so the
`*_after_a_write` figures append one event before each timed request: catch-up, reopening the file
and the queries all count there. `concurrent_*` runs `--clients` threads, each with its own
connection, all asking at once; their latencies are pooled. The synthetic run's page carries its arm
statistics over its task's ~N/97 trials per arm (a bootstrap each): `first` is its first request,
then remembered. Goals (issue #25): p50 <= 20 ms for the API, a run page under 300 ms.

Usage: python bench/serve.py [--runs N] [--tree-nodes 10001] [--requests 200] [--clients 8]
[--rounds 3] (prints one JSON object)
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from run import binary_tree_facts
from synthetic import EVENTS_PER_RUN, batches

from rollout_lineage.adapters.importers.service import import_runs
from rollout_lineage.adapters.web.app import build_app
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.serve_cmds import ChainChecks, allowed_hosts
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.reports.served_reads import ServedReads
from rollout_lineage.settings import Settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
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
        "p99_ms": round(spent[min(len(spent) - 1, int(len(spent) * 0.99))], 2),
        "max_ms": round(spent[-1], 2),
    }


def _timed(client: httpx.Client, path: str) -> float:
    started = time.perf_counter()
    answer = client.get(path)
    spent = (time.perf_counter() - started) * 1000
    assert answer.status_code == 200, (path, answer.status_code, answer.text[:300])
    return spent


def _percentiles(
    client: httpx.Client, path: str, requests: int, before: Callable[[int], None] | None = None
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


def _concurrent(base: str, paths: list[str], clients: int, requests: int) -> dict[str, float]:
    """`clients` threads with a connection each, every one asking `requests` times, round the
    paths."""

    def one(k: int) -> list[float]:
        with httpx.Client(base_url=base, timeout=120) as client:
            _timed(client, paths[k % len(paths)])
            return [_timed(client, paths[(k + i) % len(paths)]) for i in range(requests)]

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        spent = [ms for part in pool.map(one, range(clients)) for ms in part]
    wall = time.perf_counter() - started
    return {**_summary(spent), "requests_per_s": round(len(spent) / wall, 1)}


def _round(
    client: httpx.Client,
    base: str,
    requests: int,
    clients: int,
    write: Callable[[int], None],
) -> dict[str, Any]:
    cold = max(10, requests // 5)
    return {
        "api_runs": _percentiles(client, "/api/runs", requests),
        "api_runs_filtered_sorted_page": _percentiles(
            client, "/api/runs?task=task-3&sort=-reward&page=2", requests
        ),
        "runs_page": _percentiles(client, "/runs", requests),
        "run_page": _percentiles(client, f"/runs/{RUN}", requests),
        "synthetic_run_page": _percentiles(client, f"/runs/{SYNTHETIC_RUN}", requests),
        "tree_page_10k_nodes": _percentiles(client, f"/runs/{TREE_RUN}", max(20, requests // 10)),
        "charts_page": _percentiles(client, "/charts", max(20, requests // 10)),
        f"concurrent_{clients}_clients_api_runs": _concurrent(
            base, ["/api/runs"], clients, requests // 2
        ),
        f"concurrent_{clients}_clients_mixed": _concurrent(
            base,
            ["/api/runs", f"/runs/{RUN}", "/runs", "/api/runs?task=task-7&sort=run"],
            clients,
            requests // 2,
        ),
        # After a write: each request first catches up and reopens the file.
        "api_runs_after_a_write": _percentiles(client, "/api/runs", cold, before=write),
        "run_page_after_a_write": _percentiles(client, f"/runs/{RUN}", cold, before=write),
        "synthetic_run_page_after_a_write": _percentiles(
            client, f"/runs/{SYNTHETIC_RUN}", cold, before=write
        ),
    }


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


def run(
    extra_runs: int, tree_nodes: int, requests: int, clients: int, rounds: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lineage-bench-serve-") as scratch:
        settings = Settings.from_env({}, home=Path(scratch) / "home", actor="bench")
        with Lineage(settings) as lineage:
            built = time.perf_counter()
            import_runs(lineage, [EXAMPLES])
            for batch in batches(max(4, extra_runs) * EVENTS_PER_RUN):
                lineage.record(batch)
            for batch in binary_tree_facts(TREE_RUN, tree_nodes):
                lineage.record(batch)
            built_s = time.perf_counter() - built
            checks = ChainChecks(lineage)
            reads = ServedReads(lineage, checks)
            started = time.perf_counter()
            reads.head()
            open_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            checks.start().join()  # as `lineage serve` starts it, waited for before any figure
            walk_s = time.perf_counter() - started
            port = _free_port()
            app = build_app(reads, token=None, allowed_hosts=allowed_hosts("127.0.0.1"))
            server = uvicorn.Server(
                uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            )
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            base = f"http://127.0.0.1:{port}"
            try:
                deadline = time.monotonic() + 60
                while not server.started and time.monotonic() < deadline:
                    time.sleep(0.05)
                written = iter(range(10**9))

                def write(_i: int) -> None:  # a new run each time (a repeated fact appends nothing)
                    lineage.record(
                        [f.RunRegistered(run=f"bench/written-{next(written):06d}", task="w")]
                    )

                with httpx.Client(base_url=base, timeout=300) as client:
                    firsts = {
                        "synthetic_run_page_first_ms": round(
                            _timed(client, f"/runs/{SYNTHETIC_RUN}"), 1
                        ),
                        "tree_page_10k_nodes_first_ms": round(
                            _timed(client, f"/runs/{TREE_RUN}"), 1
                        ),
                        "charts_page_first_ms": round(_timed(client, "/charts"), 1),
                    }
                    charts = client.get("/api/charts").json()
                    measured = [
                        _round(client, base, requests, clients, write) for _ in range(rounds)
                    ]
                    figures = {
                        "runs_in_store": client.get("/api/runs").json()["total"],
                        "events_in_store": lineage.position(),
                        "store_built_s": round(built_s, 1),
                        "first_open_and_catch_up_ms": round(open_ms, 1),
                        "chain_walk_and_merkle_tree_at_start_s": round(walk_s, 1),
                        **firsts,
                        "charts_groups_shown": f"{len(charts['groups'])} of "
                        f"{charts['groups_total']}",
                        "charts_reward_intervals_left_out": len(charts["no_interval"]),
                        **_spread(measured),
                    }
            finally:
                server.should_exit = True
                thread.join(timeout=60)
                reads.close()
    figures["rounds"] = rounds
    figures["clients"] = clients
    figures["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    figures["goals"] = {"api_runs_p50_ms": 20, "run_page_ms": 300}
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

"""Latency of `lineage serve`: p50/p99 of `/api/runs` and of a run page, over real HTTP on loopback.

The store is built from examples/ (plus `--runs N` synthetic runs of `bench/synthetic.py`, 12 events each),
the application is the one `lineage serve` runs, under uvicorn in a thread of this process, and one
keep-alive client asks sequentially (bounded: `--requests` per figure, after a few warm-up requests).
Answers are remembered per log position (`projections/reports/served_reads.py`), so the `*_after_a_write` figures
append one event before each timed request: catch-up, reopening the file and the queries all count there.
Goals (issue #25): p50 <= 20 ms for the API, a run page under 300 ms.

Usage: python bench/serve.py [--runs N] [--requests 200]    (prints one JSON object)
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import uvicorn
from synthetic import EVENTS_PER_RUN, batches

from rollout_lineage.adapters.importers.service import import_runs
from rollout_lineage.adapters.web_app import build_app
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.serve_cmds import ChainChecks, allowed_hosts
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.reports.served_reads import ServedReads
from rollout_lineage.settings import Settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RUN = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
WARM_UP = 5


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _percentiles(
    client: httpx.Client, path: str, requests: int, before: Callable[[int], None] | None = None
) -> dict[str, float]:
    """Latency of `requests` sequential GETs of `path`; `before(i)` (untimed) runs ahead of each."""
    for _ in range(WARM_UP):
        assert client.get(path).status_code == 200, path
    spent = []
    for i in range(requests):
        if before is not None:
            before(i)
        started = time.perf_counter()
        answer = client.get(path)
        spent.append((time.perf_counter() - started) * 1000)
        assert answer.status_code == 200, (path, answer.status_code)
    spent.sort()
    return {
        "p50_ms": round(statistics.median(spent), 2),
        "p99_ms": round(spent[min(len(spent) - 1, int(len(spent) * 0.99))], 2),
        "max_ms": round(spent[-1], 2),
    }


def run(extra_runs: int, requests: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="lineage-bench-serve-") as scratch:
        settings = Settings.from_env({}, home=Path(scratch) / "home", actor="bench")
        with Lineage(settings) as lineage:
            import_runs(lineage, [EXAMPLES])
            for batch in batches(extra_runs * EVENTS_PER_RUN) if extra_runs else ():
                lineage.record(batch)
            reads = ServedReads(lineage, ChainChecks(lineage))
            started = time.perf_counter()
            reads.head()
            open_ms = (time.perf_counter() - started) * 1000
            port = _free_port()
            app = build_app(reads, token=None, allowed_hosts=allowed_hosts("127.0.0.1"))
            server = uvicorn.Server(
                uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            )
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            try:
                deadline = time.monotonic() + 30
                while not server.started and time.monotonic() < deadline:
                    time.sleep(0.05)
                cold = max(10, requests // 5)

                written = iter(range(10**9))

                def write(_i: int) -> None:  # a new run each time (a repeated fact appends nothing)
                    lineage.record(
                        [f.RunRegistered(run=f"bench/written-{next(written):06d}", task="w")]
                    )

                with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                    total = client.get("/api/runs").json()["total"]
                    figures = {
                        "runs_in_store": total,
                        "events_in_store": lineage.position(),
                        "first_open_and_catch_up_ms": round(open_ms, 1),
                        "api_runs": _percentiles(client, "/api/runs", requests),
                        "api_runs_filtered_sorted_page": _percentiles(
                            client, "/api/runs?task=task-3&sort=-reward&page=2", requests
                        ),
                        "run_page": _percentiles(client, f"/runs/{RUN}", requests),
                        "runs_page": _percentiles(client, "/runs", requests),
                        # After a write: each request first catches up and reopens the file.
                        "api_runs_after_a_write": _percentiles(
                            client, "/api/runs", cold, before=write
                        ),
                        "run_page_after_a_write": _percentiles(
                            client, f"/runs/{RUN}", cold, before=write
                        ),
                    }
            finally:
                server.should_exit = True
                thread.join(timeout=30)
                reads.close()
    figures["goals"] = {"api_runs_p50_ms": 20, "run_page_ms": 300}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=0, help="synthetic runs added to the examples")
    parser.add_argument("--requests", type=int, default=200, help="timed requests per figure")
    arguments = parser.parse_args()
    print(json.dumps(run(arguments.runs, arguments.requests), indent=2))


if __name__ == "__main__":
    main()

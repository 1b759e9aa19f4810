"""Latency of `lineage serve`'s trajectory page (issue #36): a rollout written by benchflow's writer
functions as the tests mirror them (`tests/rollout_writer.py`) with an ACP trajectory of about
`--lines` lines and a reward hack near its end, imported, and served by the real `lineage serve`
command; one kept-alive connection asks.

Figures: `first_view_ms` (the hacked line's page, first asked: the whole file hashed against the
SHA-256 recorded at import), `same_page_again_ms` (the check remembered per inode, size and times),
`other_pages` (every other page once, p50/p95). Goal (issue #36): a 2,000-line trajectory <= 200 ms.

Usage: python bench/trajectory.py [--lines 2000] [--repeats 5] (prints one JSON object)
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.cli.test_serve_trajectory import hacking_run  # noqa: E402
from tests.conftest import Cli  # noqa: E402
from tests.serve_process import serving  # noqa: E402


def run(lines: int, repeats: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="lineage-bench-trajectory-") as scratch:
        run_dir = hacking_run(Path(scratch), padding=lines)
        acp = run_dir / "trajectory" / "acp_trajectory.jsonl"
        home = Path(scratch) / "home"
        Cli(home)("import", str(run_dir))
        with serving(home) as (_, base):
            connection = http.client.HTTPConnection("127.0.0.1", int(base.rsplit(":", 1)[1]))

            def timed(path: str) -> float:
                started = time.perf_counter()
                connection.request("GET", path)
                answer = connection.getresponse()
                body = answer.read()
                assert answer.status == 200, (path, answer.status, body[:300])
                return (time.perf_counter() - started) * 1000

            connection.request("GET", "/audit")
            audit = connection.getresponse().read().decode()
            link = re.findall(r'href="(/trajectory/[^"]*file=acp[^"]*)"', audit)[0]
            link = link.replace("&amp;", "&").split("#")[0]
            first = timed(link)
            again = [timed(link) for _ in range(repeats)]
            pages = (sum(1 for _ in acp.open("rb")) - 1) // 50 + 1
            plain = link.split("&line=")[0]
            others = sorted(timed(f"{plain}&page={p}") for p in range(1, pages + 1))
            return {
                "trajectory_lines": sum(1 for _ in acp.open("rb")),
                "trajectory_bytes": acp.stat().st_size,
                "first_view_ms": round(first, 1),
                "same_page_again_ms": round(statistics.median(again), 1),
                "other_pages": {
                    "pages": pages,
                    "p50_ms": round(statistics.median(others), 1),
                    "p95_ms": round(others[min(len(others) - 1, int(len(others) * 0.95))], 1),
                },
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                "goal_ms": 200,
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000, help="ACP lines before the hack")
    parser.add_argument("--repeats", type=int, default=5, help="times the same page is asked")
    arguments = parser.parse_args()
    print(json.dumps(run(arguments.lines, arguments.repeats), indent=2))


if __name__ == "__main__":
    main()

"""Run `bench/run.py` several times, each in its own process, and print every figure's median, min and max (JSON).

One run on a shared two-core machine moves by 10-20%; the README's table gives the median of several
with their spread, and this is how those are made. Options after `--` go to `bench/run.py`
(`--quick`, `--only PREFIX...`).

Usage: python bench/repeat.py [--runs 3] [-- --only rebuild catch_up]
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RUN = Path(__file__).resolve().parent / "run.py"


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each numeric figure as {median, min, max}; anything else (the machine, `quick`) as the first
    run gave it."""
    out: dict[str, Any] = {}
    for name, first in runs[0].items():
        values = [run[name] for run in runs if name in run]
        if isinstance(first, bool) or not isinstance(first, int | float):
            out[name] = first
        else:
            out[name] = {
                "median": round(statistics.median(values), 2),
                "min": min(values),
                "max": max(values),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=3, help="how many runs of bench/run.py (default 3)"
    )
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- then options for bench/run.py")
    args = parser.parse_args()
    passed = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    runs = []
    for i in range(args.runs):
        started = time.strftime("%H:%M:%S", time.gmtime())
        print(
            f"run {i + 1} of {args.runs} (started {started} UTC) ...", file=sys.stderr, flush=True
        )
        done = subprocess.run(
            [sys.executable, str(RUN), *passed], check=True, capture_output=True, text=True
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(json.dumps({"runs": args.runs, **summary(runs)}))


if __name__ == "__main__":
    main()

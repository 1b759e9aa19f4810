"""Each second code path that exists for speed, measured on the command a user runs: with it and without it.

Every figure is a whole `lineage` command in a fresh process, run with the path as it is ("with")
and with the path turned off by a patch applied in the child before the command starts ("without");
both children import the same modules first, so only the patch differs. The two are alternated
within each repeat (ABBA order), so load from other work on the machine hits both alike; each figure
is the median of the repeats with its spread, and `saved_ms` is the median of the paired differences
(without minus with). Wall and CPU time (user + system, the child's threads included) are both
given: on a machine shared with other work the wall clock moves by more than the differences
measured, the CPU time much less. Prints one JSON object.

Usage: python bench/micro.py [--repeats 15] [--only NAME ...]
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from installed import compile_package
from synthetic import EVENTS_PER_RUN, batches

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.settings import Settings

OUT = Path(__file__).resolve().parent / "out"

RUN_CLI = "import sys; sys.argv[0] = 'lineage'\nfrom rollout_lineage.cli.main import main\nmain()\n"

#: name -> (what the child does first in both variants, the patch that turns the path off)
PATHS: dict[str, tuple[str, str]] = {
    # Every TEMP view and macro made on the connection's first statement, instead of those it names.
    "shadows_on_demand": (
        "from rollout_lineage.projections.engine import shadows\n",
        "def _all(self, sql):\n"
        "    if len(self.made) < len(shadows.definitions()):\n"
        "        self._make({d.name for d in shadows.definitions()}, {d.name for d in self.made})\n"
        "shadows.Shadows.__call__ = _all\n",
    ),
    # Always ask the file whether it is current, whatever the file times say.
    "read_only_probe_skipped_by_file_times": (
        "from rollout_lineage.projections.engine import read_only\n",
        "read_only._log_written_since = lambda lineage: False\n",
    ),
    # A current file opened read-only once, instead of a catch-up open, its close and a read-only
    # open.
    "read_only_current_opened_once": (
        "from rollout_lineage.projections.engine import read_only\n",
        "read_only._current_read_only = lambda lineage, writable_directory=None: None\n",
    ),
    # The `duckdb` package loaded (as `import duckdb` would), not only its engine module `_duckdb`.
    "engine_module_not_package": (
        "import rollout_lineage.adapters.duckdb_store\n",
        "import duckdb\n",
    ),
    # Global options after the subcommand left where they are (click then refuses them).
    "hoist_global_options": (
        "from rollout_lineage.cli import main as cli_main\n",
        "cli_main.hoist_global_options = lambda args: list(args)\n",
    ),
}


#: name -> (the patch that turns the path off) for the bulk path: `record` of synthetic batches in
#: one process.
BULK_PATHS: dict[str, str] = {
    # Cyclic garbage collection left on while a batch is built.
    "collector_paused_in_a_batch": (
        "import contextlib\n"
        "from rollout_lineage.domain import application\n"
        "application._collector_paused = contextlib.nullcontext\n"
    ),
    # Events built by pydantic's `model_construct` instead of the hand-made envelope.
    "event_envelope_by_hand": (
        "from rollout_lineage.domain.events import LineageEvent\n"
        "LineageEvent.envelope = classmethod(lambda cls, **values: cls.model_construct(**values))\n"
    ),
}
BULK_CHILD = """
import sys, tempfile, time
sys.path.insert(0, sys.argv[2])
from synthetic import batches
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.settings import Settings
with tempfile.TemporaryDirectory() as home:
    with Lineage(Settings.from_env({}, home=home, actor="bench@lab")) as lineage:
        prepared = list(batches(int(sys.argv[1])))
        lineage.position()
        began = time.perf_counter()
        appended = sum(lineage.record(batch).appended for batch in prepared)
        print(appended / (time.perf_counter() - began))
"""


def compare_bulk(path: str, repeats: int, n_events: int = 24_000) -> dict[str, object]:
    """Batch append (events/s, `record` of 100-run batches into a new store) with the path and
    without it."""
    variants = {"with": BULK_CHILD, "without": BULK_PATHS[path] + BULK_CHILD}
    rates: dict[str, list[float]] = {"with": [], "without": []}
    here = str(Path(__file__).resolve().parent)
    for i in range(repeats):
        for variant in ("with", "without") if i % 2 == 0 else ("without", "with"):
            out = subprocess.run(
                [sys.executable, "-c", variants[variant], str(n_events), here],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rates[variant].append(float(out.split()[-1]))
    lost = [100 * (a - b) / a for a, b in zip(rates["with"], rates["without"], strict=True)]
    return {
        "figure": f"append_batch_events_per_s ({n_events} events)",
        "with": _summary(rates["with"]),
        "without": _summary(rates["without"]),
        "lost_pct_without": _summary(lost),
    }


def store(name: str, n_runs: int) -> str:
    """A store of `n_runs` synthetic runs (12 events each), built once and kept under bench/out/."""
    home = OUT / name
    settings = Settings.from_env({}, home=home, actor="bench@lab")
    with Lineage(settings) as lineage:
        if lineage.position() != n_runs * EVENTS_PER_RUN:
            lineage.close()
            shutil.rmtree(home, ignore_errors=True)
            with Lineage(settings) as fresh:
                for batch in batches(n_runs * EVENTS_PER_RUN, runs_per_batch=500):
                    fresh.record(batch)
    return str(home)


def _child_ms(code: str, args: list[str]) -> tuple[float, float]:
    """(wall, CPU) milliseconds of one child: CPU is user + system time of the child and its
    threads, which other work on the machine moves far less than the wall clock."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True)
    wall = (time.perf_counter() - began) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def _summary(values: list[float]) -> dict[str, object]:
    return {
        "median": round(statistics.median(values), 1),
        "spread": [round(min(values), 1), round(max(values), 1)],
    }


def compare(
    path: str, args: list[str], repeats: int, *, home: str | None = None, behind: bool = False
) -> dict[str, object]:
    """`lineage ARGS` with the path and without it, alternated; `behind`: one new event before each
    run."""
    prelude, patch = PATHS[path]
    variants = {"with": prelude + RUN_CLI, "without": prelude + patch + RUN_CLI}
    wall: dict[str, list[float]] = {"with": [], "without": []}
    cpu: dict[str, list[float]] = {"with": [], "without": []}
    writer = Lineage(Settings.from_env({}, home=home, actor="bench@lab")) if home else None
    for name in variants.values():  # warm the page cache and catch the read models up
        subprocess.run([sys.executable, "-c", name, *args], check=True, capture_output=True)
    try:
        for i in range(repeats):
            order = ("with", "without") if i % 2 == 0 else ("without", "with")
            for variant in order:
                if behind and writer is not None:
                    writer.record([f.RunRegistered(run=f"micro/{path}/{variant}-{i}", task="t")])
                w, c = _child_ms(variants[variant], args)
                wall[variant].append(w)
                cpu[variant].append(c)
    finally:
        if writer is not None:
            writer.close()
    figures: dict[str, object] = {
        "command": "lineage " + " ".join(a for a in args if not a.startswith("/")),
        "one_event_behind": behind,
    }
    for clock, timings in (("wall", wall), ("cpu", cpu)):
        saved = [b - a for a, b in zip(timings["with"], timings["without"], strict=True)]
        figures[clock] = {
            "with_ms": _summary(timings["with"]),
            "without_ms": _summary(timings["without"]),
            "saved_ms": _summary(saved),
            "saved_pct": round(
                100 * statistics.median(saved) / statistics.median(timings["with"]), 1
            ),
        }
    return figures


def hoist_in_process_us(repeats: int = 100_000) -> float:
    """What the argv rewrite itself costs, per call, on a typical command line."""
    from rollout_lineage.cli.main import hoist_global_options

    argv = ["runs", "--format", "jsonl", "--home", "/tmp/x", "--limit", "10"]
    began = time.perf_counter()
    for _ in range(repeats):
        hoist_global_options(argv)
    return round((time.perf_counter() - began) / repeats * 1e6, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--only", nargs="*", help="only these paths (prefixes)")
    args = parser.parse_args()
    compile_package()
    OUT.mkdir(exist_ok=True)
    small, large = store("micro-small", 100), store("micro-10k", 10_000)
    n = args.repeats
    select = ["sql", "select 1"]
    runs = ["runs", "--format", "jsonl"]
    plan = {
        "shadows_on_demand": [
            lambda: compare("shadows_on_demand", ["--home", small, *select], n),
            lambda: compare("shadows_on_demand", ["--home", small, *runs], n),
            lambda: compare("shadows_on_demand", ["--home", large, *runs], n),
        ],
        "read_only_probe_skipped_by_file_times": [
            lambda: compare("read_only_probe_skipped_by_file_times", ["--home", small, *select], n),
            lambda: compare(
                "read_only_probe_skipped_by_file_times",
                ["--home", small, *select],
                n,
                home=small,
                behind=True,
            ),
        ],
        "read_only_current_opened_once": [
            lambda: compare("read_only_current_opened_once", ["--home", small, *select], n),
            lambda: compare("read_only_current_opened_once", ["--home", large, *select], n),
        ],
        "engine_module_not_package": [
            lambda: compare("engine_module_not_package", ["--home", small, *select], n),
            lambda: compare("engine_module_not_package", ["--home", small, *runs], n),
        ],
        "hoist_global_options": [
            lambda: compare("hoist_global_options", ["--help"], n),
            lambda: compare("hoist_global_options", ["--home", small, *select], n),
        ],
    }
    figures: dict[str, object] = {
        "machine": f"{os.cpu_count()} CPU, load average {os.getloadavg()[0]:.1f} at start",
        "repeats": n,
    }
    for name, cases in plan.items():
        if args.only and not any(name.startswith(prefix) for prefix in args.only):
            continue
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        figures[name] = [case() for case in cases]
    for name in BULK_PATHS:
        if args.only and not any(name.startswith(prefix) for prefix in args.only):
            continue
        print(f"measuring {name} ...", file=sys.stderr, flush=True)
        figures[name] = compare_bulk(name, max(5, n // 3))
    if not args.only or any("hoist".startswith(p) or p.startswith("hoist") for p in args.only):
        figures["hoist_global_options_in_process_us"] = hoist_in_process_us()
    figures["load_average_at_end"] = round(os.getloadavg()[0], 1)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

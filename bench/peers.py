"""The peer benchmark: the same fork tree recorded and queried in MLflow and in rollout-lineage, on SQLite and,
with a server (`--postgres`), on PostgreSQL (MLflow's SQLAlchemy store over psycopg 3, `postgresql+psycopg://`).

The tree is a complete binary tree of N nodes (node k forks children 2k+1 and 2k+2); every node but
the root has a reward, 1 for every third node and 0.5 otherwise. Each side records it and then
answers one question: which descendants of the root have reward >= 1 (both answers are checked
against the tree).

- MLflow: one run per node (nested: tag `mlflow.parentRunId`), its reward as a metric, then ended;
  MLflow's search syntax has no recursion and no `IN` over tags, so the descendants are found level
  by level with one nested `search_runs` per parent, as its documentation does for nested runs.
- rollout-lineage, live: `open_store().record([...])` once per node, with that node's facts (its
  score and, if it has children, its fork), as a harness records while the rollout happens. Import:
  the whole tree as one batch (`record`), and as `lineage ingest` of a JSON-lines file in a fresh
  process.
- The query: first in a fresh process (interpreter start and, for us, the read models catching up
  with the whole log included: `lineage sql`), then again on a warm reader in this process.

Every figure is measured `--repeats` times; the JSON gives each one's median, min and max, and the
ratios (ours over MLflow's, per repeat) the same way. Needs the `peer` extra: `pip install -e
'.[peer]'`.

Usage: python bench/peers.py [--nodes 1000] [--repeats 3] [--postgres URL]
"""  # noqa: E501

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

from installed import compile_package

from rollout_lineage import open_store
from rollout_lineage.domain import facts as f

OUT = Path(__file__).resolve().parent / "out" / "peers"
RUN = "peer/run"
QUERY = (
    f"SELECT count(*) AS n FROM descendants('{RUN}', 'root') d "
    f"JOIN children c ON c.run = '{RUN}' AND c.node = d.node WHERE c.reward >= 1"
)
#: The same question asked of MLflow in a fresh process: one nested search per parent, level by
#: level.
MLFLOW_QUERY = """
import sys
from mlflow.tracking import MlflowClient

def rewarded_descendants(client, experiment, root):
    found, level = 0, [root]
    while level:
        below = []
        for parent in level:
            token = None
            while True:
                page = client.search_runs(
                    [experiment], filter_string=f"tags.mlflow.parentRunId = '{parent}'",
                    max_results=1000, page_token=token,
                )
                for run in page:
                    below.append(run.info.run_id)
                    found += run.data.metrics.get("reward", 0) >= 1
                token = page.token
                if not token:
                    break
        level = below
    return found

if __name__ == "__main__":
    client = MlflowClient(tracking_uri=sys.argv[1])
    print(rewarded_descendants(client, sys.argv[2], sys.argv[3]))
"""


def name(k: int) -> str:
    return "root" if k == 0 else f"n{k}"


def reward(k: int) -> float:
    return 1.0 if k % 3 == 0 else 0.5


def expected_answer(n: int) -> int:
    return sum(1 for k in range(1, n) if reward(k) >= 1)


def node_facts(n: int) -> list[list[f.Fact]]:
    """One list per node, in the order a harness learns them: its own score (it is child `(k-1) % 2`
    of its parent's fork), then the fork that starts its children."""
    per_node: list[list[f.Fact]] = []
    for k in range(n):
        facts: list[f.Fact] = []
        if k == 0:
            facts.append(f.RunRegistered(run=RUN, task="peer"))
        else:
            parent = (k - 1) // 2
            facts.append(
                f.ChildScored(run=RUN, fork=name(parent), index=(k - 1) % 2, reward=reward(k))
            )
        children = [c for c in (2 * k + 1, 2 * k + 2) if c < n]
        if children:
            facts.append(
                f.ForkOpened(
                    run=RUN,
                    fork=name(k),
                    node=name(k),
                    children=tuple(
                        f.ForkChild(index=i, node=name(c)) for i, c in enumerate(children)
                    ),
                )
            )
        per_node.append(facts)
    return per_node


# --- MLflow ---------------------------------------------------------------------------------------


def mlflow_record(n: int, home: Path, uri: str | None = None) -> tuple[float, str, str, str]:
    """Nodes per second recording the tree in MLflow (in a SQLite file in `home`, or at the database
    `uri`), and (tracking URI, experiment id, root run id)."""
    from mlflow.tracking import MlflowClient

    uri = uri or f"sqlite:///{home / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("peer")  # creates the schema: not part of the timing
    start = time.perf_counter()
    run_ids: list[str] = []
    for k in range(n):
        tags = {"mlflow.parentRunId": run_ids[(k - 1) // 2]} if k else {}
        run_id = client.create_run(experiment, tags=tags, run_name=name(k)).info.run_id
        if k:
            client.log_metric(run_id, "reward", reward(k))
        client.set_terminated(run_id)
        run_ids.append(run_id)
    return n / (time.perf_counter() - start), uri, experiment, run_ids[0]


def mlflow_queries(uri: str, experiment: str, root: str, n: int) -> tuple[float, float]:
    """(first query in a fresh process, query on a warm client), in ms; both answers checked."""
    script = OUT / "mlflow_query.py"
    script.write_text(MLFLOW_QUERY)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(script), uri, experiment, root],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    first = (time.perf_counter() - start) * 1000
    assert int(out.split()[-1]) == expected_answer(n), out
    from mlflow.tracking import MlflowClient

    search: dict[str, Any] = {}
    exec(MLFLOW_QUERY, search)  # the very function the fresh process ran
    client = MlflowClient(tracking_uri=uri)
    assert search["rewarded_descendants"](client, experiment, root) == expected_answer(n)
    start = time.perf_counter()
    assert search["rewarded_descendants"](client, experiment, root) == expected_answer(n)
    return first, (time.perf_counter() - start) * 1000


# --- rollout-lineage ------------------------------------------------------------------------------


def ours_live(per_node: list[list[f.Fact]], home: Path, store: str | None = None) -> float:
    start = time.perf_counter()
    with open_store(store, home=str(home), actor="bench@lab") as lineage:
        for facts in per_node:
            lineage.record(facts)
    return len(per_node) / (time.perf_counter() - start)


def ours_import(per_node: list[list[f.Fact]], home: Path, store: str | None = None) -> float:
    facts = [fact for node in per_node for fact in node]
    start = time.perf_counter()
    with open_store(store, home=str(home), actor="bench@lab") as lineage:
        lineage.record(facts)
    return len(per_node) / (time.perf_counter() - start)


def lineage_cli(home: Path, *args: str, store: str | None = None) -> str:
    where = ["--store", store] if store else []
    return subprocess.run(
        [str(Path(sys.executable).parent / "lineage"), "--home", str(home), *where, *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def ours_ingest(per_node: list[list[f.Fact]], home: Path) -> float:
    """`lineage ingest` of the tree as JSON lines, timed as a fresh process (interpreter start
    included)."""
    source = home.parent / "tree.jsonl"
    with source.open("w") as out:
        out.writelines(
            fact.model_dump_json(exclude_none=True) + "\n" for n in per_node for fact in n
        )
    start = time.perf_counter()
    lineage_cli(home, "ingest", str(source))
    return len(per_node) / (time.perf_counter() - start)


def ours_queries(home: Path, n: int, store: str | None = None) -> tuple[float, float]:
    """(first `lineage sql` in a fresh process, read models catching up with the whole log; the same
    query on a warm reader, which checks the log for new events first), in ms; both answers
    checked."""
    start = time.perf_counter()
    out = lineage_cli(home, "sql", QUERY, "--format", "csv", store=store)
    first = (time.perf_counter() - start) * 1000
    assert int(out.split()[-1]) == expected_answer(n), out
    with open_store(store, home=str(home)) as lineage, lineage.read_models() as models:
        assert models.db.scalar(QUERY) == expected_answer(n)
        start = time.perf_counter()
        models.refresh(lineage)
        answer = models.db.scalar(QUERY)
        warm = (time.perf_counter() - start) * 1000
    assert answer == expected_answer(n)
    return first, warm


# --- one repeat, and the summary ------------------------------------------------------------------


def fresh_home(label: str) -> Path:
    home = OUT / label
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    return home


def fresh_database(base: str, name: str) -> str:
    """A new, empty database `name` on the server at `base` (dropped first if a run left one), as a
    URL."""
    import psycopg

    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {name}")
    return urlunparse(urlparse(base)._replace(path="/" + name, query=""))


def postgres_repeat(n: int, repeat: int, base: str) -> dict[str, float]:
    """The same figures with both on PostgreSQL: MLflow's tracking store (SQLAlchemy over psycopg 3)
    and ours, each in a database of its own made for this repeat."""
    per_node = node_facts(n)
    figures: dict[str, float] = {}
    mlflow_db = fresh_database(base, f"lineage_peers_mlflow_{repeat}")
    figures["pg_mlflow_record_nodes_per_s"], uri, experiment, root = mlflow_record(
        n, OUT, mlflow_db.replace("postgresql://", "postgresql+psycopg://", 1)
    )
    first, warm = mlflow_queries(uri, experiment, root, n)
    figures["pg_mlflow_first_query_ms"], figures["pg_mlflow_warm_query_ms"] = first, warm
    live = fresh_database(base, "lineage_peers_live")
    figures["pg_live_nodes_per_s"] = ours_live(per_node, fresh_home("pg-live"), live)
    batch = fresh_database(base, "lineage_peers_batch")
    figures["pg_import_batch_nodes_per_s"] = ours_import(per_node, fresh_home("pg-batch"), batch)
    figures["pg_first_query_ms"], figures["pg_warm_query_ms"] = ours_queries(
        fresh_home("pg-query"), n, batch
    )
    mlflow_rate = figures["pg_mlflow_record_nodes_per_s"]
    figures["pg_live_ratio"] = figures["pg_live_nodes_per_s"] / mlflow_rate
    figures["pg_import_batch_ratio"] = figures["pg_import_batch_nodes_per_s"] / mlflow_rate
    figures["pg_first_query_ratio"] = (
        figures["pg_mlflow_first_query_ms"] / figures["pg_first_query_ms"]
    )
    figures["pg_warm_query_ratio"] = (
        figures["pg_mlflow_warm_query_ms"] / figures["pg_warm_query_ms"]
    )
    return figures


def one_repeat(n: int, repeat: int) -> dict[str, float]:
    per_node = node_facts(n)
    figures: dict[str, float] = {}
    # A new file per repeat: MLflow keeps one database engine per tracking URI for the whole
    # process.
    home = fresh_home(f"mlflow-{repeat}")
    figures["mlflow_record_nodes_per_s"], uri, experiment, root = mlflow_record(n, home)
    first, warm = mlflow_queries(uri, experiment, root, n)
    figures["mlflow_first_query_ms"], figures["mlflow_warm_query_ms"] = first, warm

    figures["live_nodes_per_s"] = ours_live(per_node, fresh_home("live") / ".lineage")
    figures["import_batch_nodes_per_s"] = ours_import(per_node, fresh_home("batch") / ".lineage")
    home = fresh_home("ingest") / ".lineage"
    figures["import_ingest_cli_nodes_per_s"] = ours_ingest(per_node, home)
    figures["first_query_ms"], figures["warm_query_ms"] = ours_queries(home, n)

    mlflow_rate = figures["mlflow_record_nodes_per_s"]
    figures["live_ratio"] = figures["live_nodes_per_s"] / mlflow_rate
    figures["import_batch_ratio"] = figures["import_batch_nodes_per_s"] / mlflow_rate
    figures["import_ingest_cli_ratio"] = figures["import_ingest_cli_nodes_per_s"] / mlflow_rate
    figures["first_query_ratio"] = figures["mlflow_first_query_ms"] / figures["first_query_ms"]
    figures["warm_query_ratio"] = figures["mlflow_warm_query_ms"] / figures["warm_query_ms"]
    return figures


GOALS = {
    "live_ratio": 10,
    "pg_live_ratio": 10,
    "import_batch_ratio": 100,
    "import_ingest_cli_ratio": 100,
    "first_query_ratio": 20,
    "warm_query_ratio": 200,
}


def summary(repeats: list[dict[str, float]]) -> dict[str, Any]:
    def rounded(value: float) -> float:
        return round(value, 1) if value < 100 else round(value)

    figures: dict[str, Any] = {}
    for key in repeats[0]:
        values = [r[key] for r in repeats]
        figures[key] = {
            "median": rounded(statistics.median(values)),
            "min": rounded(min(values)),
            "max": rounded(max(values)),
        }
        if key in GOALS:
            figures[key]["goal"] = GOALS[key]
            figures[key]["met"] = statistics.median(values) >= GOALS[key]
    return figures


def main(argv: list[str] | None = None, progress: Callable[[str], None] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes in the tree (default 1000)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per figure (default 3)")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("LINEAGE_BENCH_POSTGRES_URL")
        or os.environ.get("LINEAGE_TEST_POSTGRES_URL"),
        help="a PostgreSQL server URL (default LINEAGE_BENCH_POSTGRES_URL, "
        "else LINEAGE_TEST_POSTGRES_URL): both are also measured there, "
        "each in databases this makes; none: SQLite only",
    )
    args = parser.parse_args(argv)
    if args.nodes < 2 or args.repeats < 1:
        parser.error(
            f"expected --nodes >= 2 and --repeats >= 1, found {args.nodes}, {args.repeats}"
        )
    compile_package()
    try:
        import mlflow
    except ImportError:
        parser.error("expected MLflow installed, found none: pip install -e '.[peer]'")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    OUT.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MLFLOW_TRACKING_URI", "")  # never a server configured elsewhere
    results = []
    for i in range(args.repeats):
        print(f"repeat {i + 1}/{args.repeats} ...", file=sys.stderr, flush=True)
        figures = one_repeat(args.nodes, i)
        if args.postgres:
            figures.update(postgres_repeat(args.nodes, i, args.postgres))
        results.append(figures)
    import mlflow

    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "repeats": args.repeats,
                "mlflow": mlflow.__version__,
                **summary(results),
            }
        )
    )


if __name__ == "__main__":
    main()

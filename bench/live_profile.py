"""Where a live `record` spends its time: statements and round trips per record, and a cProfile of the loop.

`open_store(url).record([fact])`, one new run per fact, `--records` times after one warm-up record,
on a fresh SQLite file or a fresh schema on the PostgreSQL server at LINEAGE_BENCH_POSTGRES_URL
(else LINEAGE_TEST_POSTGRES_URL). Counted, not sampled: on SQLite every statement the library runs
(sqlite3's trace callback on each connection the store opens); on PostgreSQL every message libpq
exchanges (its protocol trace): statements are the server's CommandComplete messages, round trips
the times the client, having sent, reads the server's answer (a pipeline sends several statements
and Syncs before it reads). Then the profile's top functions by own CPU time.

Usage: python bench/live_profile.py {sqlite,postgresql} [--records 500] [--top 25]
"""  # noqa: E501

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sqlite3
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from installed import compile_package

STATEMENTS: Counter[str] = Counter()


def trace_sqlite() -> None:
    """Every connection opened from here on counts the statements it runs, by their first word."""
    connect = sqlite3.connect

    def counted(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(lambda sql: STATEMENTS.update([sql.split()[0].upper()]))
        return connection

    sqlite3.connect = counted  # type: ignore[assignment]


def trace_postgres(path: Path) -> Any:
    """Every psycopg connection opened from here on writes libpq's protocol trace to `path`."""
    import psycopg

    out = path.open("w")
    connect = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def traced(cls: Any, *args: Any, **kwargs: Any) -> Any:
        connection = connect(cls, *args, **kwargs)
        connection.pgconn.trace(out.fileno())
        connection.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        return connection

    psycopg.Connection.connect = classmethod(traced)  # type: ignore[method-assign,assignment]
    return out


def postgres_counts(path: Path) -> Counter[str]:
    found: Counter[str] = Counter()
    last = ""
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        side, message = parts[0], parts[2]
        # the client sent, then read the server's answer: one round trip
        if side == "B" and last == "F":
            found["round trips"] += 1
        last = side
        if side == "B" and message == "CommandComplete":
            found["statements"] += 1
            found[parts[3].strip().strip('"').split()[0]] += 1
        elif side == "B" and message == "ReadyForQuery":
            found["ReadyForQuery (one per Sync or simple query)"] += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("backend", choices=["sqlite", "postgresql"])
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    compile_package()
    work = Path(tempfile.mkdtemp(prefix="lineage-profile-"))
    trace = work / "libpq.trace"
    if args.backend == "sqlite":
        url = f"sqlite:///{work / 'events.sqlite'}"
    else:
        import psycopg

        base = (
            os.environ.get("LINEAGE_BENCH_POSTGRES_URL") or os.environ["LINEAGE_TEST_POSTGRES_URL"]
        )
        schema = f"profile_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {schema}")
        url = f"{base}?schema={schema}"
    from rollout_lineage import open_store
    from rollout_lineage.domain import facts as f

    lineage = open_store(url, actor="bench@lab")
    lineage.record([f.RunRegistered(run="profile/warm-up", task="t")])
    # Counting starts on connections opened from here: the warm-up's are counted by closing the
    # pools first.
    lineage.close()
    out = trace_postgres(trace) if args.backend == "postgresql" else None
    if args.backend == "sqlite":
        trace_sqlite()
    lineage = open_store(url, actor="bench@lab")
    lineage.record([f.RunRegistered(run="profile/warm-up-2", task="t")])
    STATEMENTS.clear()
    if out is not None:
        out.flush()
        os.ftruncate(out.fileno(), 0)
        out.seek(0)
    profile = cProfile.Profile(time.process_time)  # CPU time: what a shared machine leaves alone
    profile.enable()
    for i in range(args.records):
        lineage.record([f.RunRegistered(run=f"profile/{i}", task="t")])
    profile.disable()
    if out is not None:
        out.flush()
    counts = postgres_counts(trace) if args.backend == "postgresql" else STATEMENTS
    print(f"per record ({args.records} records):")
    for what, n in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"  {what}: {n / args.records:.2f}")
    text = io.StringIO()
    stats = pstats.Stats(profile, stream=text)
    print(f"profiled: {stats.total_tt / args.records * 1000:.3f} ms per record")  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(args.top)
    print(text.getvalue())
    lineage.close()
    if args.backend == "postgresql":  # the schema made above, and only it
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f"DROP SCHEMA {schema} CASCADE")


if __name__ == "__main__":
    main()

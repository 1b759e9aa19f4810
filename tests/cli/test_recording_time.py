"""Recorded time never goes backwards along the log, on both backends, and `--as-of TIME` is always
a prefix.

The attack: a writer whose clock says 2020 appends at the log's tail; `--as-of 2021-01-01` used to
show runs recorded in 2026 (every event at or before 2021 by its own claim, wherever it stood in the
log).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from rollout_lineage.domain import facts as f
from tests.conftest import Cli, open_lineage


def test_a_writer_whose_clock_is_behind_records_at_the_tails_time(
    store_url: str, tmp_path: Path
) -> None:
    with open_lineage(store_url, tmp_path / "home") as lineage:
        lineage.app.clock = lambda: datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
        lineage.record([f.RunRegistered(run="jobs/a__1", task="t")])
        lineage.app.clock = lambda: datetime(2020, 1, 1, tzinfo=UTC)  # a clock set back
        lineage.record([f.RunRegistered(run="jobs/b__1", task="t")])
        lineage.app.clock = lambda: datetime(2026, 11, 2, 11, 0, tzinfo=UTC)
        lineage.record([f.RunRegistered(run="jobs/c__1", task="t")])
        with lineage.read_models() as models:
            times = [
                row["recorded_at"]
                for row in models.db.rows("SELECT recorded_at FROM events ORDER BY position")
            ]
    assert times == sorted(times) and times[0] == times[1] == datetime(
        2026, 11, 2, 10, 0, tzinfo=UTC
    )


def test_as_of_a_time_is_the_prefix_before_the_first_later_recording(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Even a log written before the clamp (an early time after later ones) answers with a
    prefix."""
    from rollout_lineage.domain.application import LineageApp

    lines = [{"type": "run.registered", "run": f"jobs/t__{i}", "task": "t"} for i in range(3)]
    run_cli("ingest", "-", input=json.dumps(lines[0]) + "\n")
    original = LineageApp._recording_time
    try:  # an old writer: no clamp, and a clock in 2020
        LineageApp._recording_time = lambda self, tail: datetime(2020, 1, 1, tzinfo=UTC)  # type: ignore[method-assign]
        run_cli("ingest", "-", input=json.dumps(lines[1]) + "\n")
    finally:
        LineageApp._recording_time = original  # type: ignore[method-assign]
    run_cli("ingest", "-", input=json.dumps(lines[2]) + "\n")
    runs = json.loads(
        run_cli(
            "sql",
            "SELECT run FROM runs ORDER BY run",
            "--as-of",
            "2021-01-01T00:00:00Z",
            "--format",
            "json",
        ).stdout
    )
    assert runs == [], (
        "nothing was in the log by 2021: the 2020 event stands after one recorded in 2026"
    )
    assert (
        len(
            json.loads(
                run_cli(
                    "sql",
                    "SELECT run FROM runs",
                    "--as-of",
                    "2200-01-01T00:00:00Z",
                    "--format",
                    "json",
                ).stdout
            )
        )
        == 3
    )


def test_the_actor_is_self_asserted_and_the_store_says_who_recorded(
    store_url: str, tmp_path: Path
) -> None:
    """A writer may call itself anything; PostgreSQL also records the role it authenticated (SQLite:
    nobody)."""
    with open_lineage(store_url, tmp_path / "home") as lineage:
        lineage.app.actor = "the-auditor@lab"  # a claim
        lineage.record([f.RunRegistered(run="jobs/a__1", task="t")])
        with lineage.read_models() as models:
            [row] = models.db.rows("SELECT actor, recorded_by FROM events")
    expected = "lineage" if store_url.startswith("postgresql") else None
    assert row == {"actor": "the-auditor@lab", "recorded_by": expected}

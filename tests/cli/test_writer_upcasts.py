"""Facts whose meaning changed with rules 5 and 9 are read forward by upcasters, never refused as
conflicts.

A store written by version 1 is simulated faithfully: the run directory is imported while the stored
state is rewritten to what version 1 stored (no `class_version`; `request_global` false beside the
`request_global` category; no reward `basis`; times rewritten as UTC ISO-8601 with no `time_zone`; a
trajectory source version 1 had no word for dropped). Then today's code reads that store.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rollout_lineage.domain import events
from rollout_lineage.domain.events import aggregate_id
from tests.conftest import Cli, open_lineage
from tests.writer_runs import benchflow_run

RUN = "nightly/csv-dedupe__5e0d1c2b"


def as_version_1(fact: dict[str, Any]) -> None:
    kind = fact["type"]
    if kind == "run.failed":
        fact["request_global"] = False
    elif kind == "run.scored":
        fact.pop("basis")
    elif kind == "run.finished":
        fact.pop("time_zone")
        for key in ("started_at", "finished_at"):
            moment = datetime.fromisoformat(fact[key]).replace(tzinfo=UTC)
            fact[key] = moment.isoformat()
        if fact["trajectory"] not in ("acp", "llm", "both", "none"):
            fact["trajectory"] = None


def version_1_store(run_cli: Cli, run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = events.encode_state

    def encode_as_version_1(event: Any) -> bytes:
        state = json.loads(real(event))
        state.pop("class_version", None)
        as_version_1(state["fact"])
        return json.dumps(state, separators=(",", ":")).encode()

    with monkeypatch.context() as patch:
        patch.setattr(events, "encode_state", encode_as_version_1)
        run_cli("import", str(run_dir))


def test_a_version_1_store_reads_forward_and_takes_the_same_run_again(
    run_cli: Cli, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `_build_rollout_result` (benchflow rollout/_results.py) writing a branched parent that never
    # verified, whose session also failed with a request-global error and left a partial ACP
    # trajectory.
    run_dir = benchflow_run(
        tmp_path,
        rewards={"reward": 0.5, "source": "branch_aggregate"},
        error="bad effort",
        error_category="request_global",
        trajectory_source="partial_acp",
    )
    version_1_store(run_cli, run_dir, monkeypatch)
    stored = [json.loads(line) for line in run_cli("log", "--format", "jsonl").stdout.splitlines()]
    failed = next(e["fact"] for e in stored if e["type"] == "run.failed")
    assert failed["request_global"] is False  # what version 1 stored

    assert "intact" in run_cli("verify").stdout
    [row] = json.loads(
        run_cli(
            "sql",
            "SELECT outcome, request_global, time_zone, started_at, trajectory FROM runs",
            "--format",
            "json",
        ).stdout
    )
    assert row == {
        "outcome": "branch_aggregate",
        "request_global": True,
        "time_zone": "utc-assumed",
        "started_at": "2026-11-03T09:12:44.208311+00:00",
        "trajectory": None,
    }

    with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as lineage:
        run = lineage.app.run(RUN)
        assert run.failed.request_global is True and run.scored.basis == "branch_aggregate"
        assert run.finished.time_zone == "utc-assumed"
        assert lineage.app.repository.get(aggregate_id("run", RUN)).version == run.version

    again = run_cli("import", str(run_dir))
    assert "0 events appended" in again.stderr, again.stderr


def test_new_facts_are_stored_with_their_class_version(
    run_cli: Cli, tmp_path: Path, home: Path
) -> None:
    run_cli(
        "import",
        str(
            benchflow_run(
                tmp_path, error="bad effort", error_category="request_global", rewards=None
            )
        ),
    )
    with sqlite3.connect(home / "events.sqlite") as db:
        states = {
            topic: json.loads(state)
            for topic, state in db.execute("SELECT topic, state FROM stored_events")
        }
    assert states["lineage:run.failed"]["class_version"] == 2
    assert states["lineage:run.failed"]["fact"]["request_global"] is True
    # version 1 facts are stored as they always were
    assert "class_version" not in states["lineage:run.registered"]

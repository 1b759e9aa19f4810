"""One scenario, every backend: the embedded SQLite file and a real PostgreSQL server behave the
same."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.errors import ConflictingFact
from tests.conftest import EXAMPLES, Cli, open_lineage
from tests.scenarios import ABLATE_IMPLIED, ABLATE_RUN, ablate_run_facts, nightly_run_facts


def test_record_idempotence_conflicts_and_verify(store_url: str, tmp_path: Path) -> None:
    with open_lineage(store_url, tmp_path / "home") as lineage:
        first = lineage.record(ablate_run_facts())
        assert first.position == first.appended == len(ablate_run_facts()) + ABLATE_IMPLIED
        assert lineage.record(ablate_run_facts()).appended == 0
        with pytest.raises(ConflictingFact, match=r"reward: recorded 1\.0, now 0\.5"):
            lineage.record([f.ChildScored(run=ABLATE_RUN, fork="root", index=0, reward=0.5)])
        assert lineage.position() == first.position
        report = lineage.verify()
        assert report.intact and report.events == first.position


def test_exports_are_identical_on_every_backend(store_url: str, tmp_path: Path) -> None:
    run_cli = Cli(tmp_path / "home", store=store_url)
    with open_lineage(store_url, tmp_path / "home") as lineage:
        lineage.record(ablate_run_facts())
        lineage.record(nightly_run_facts())
    exported = run_cli("export", "ablation", f"{ABLATE_RUN}:root").stdout
    assert (
        exported == (EXAMPLES / "pr-layout/ablate-2026-11-02__10-15-00/ablation.json").read_text()
    )
    head = run_cli("head").stdout.strip()
    run_cli("verify", "--head", head)


def _record_runs(store_url: str, home: str, worker: int, n_runs: int) -> None:
    with open_lineage(store_url, Path(home)) as lineage:
        for i in range(n_runs):
            run = f"w{worker}/run-{i}"
            lineage.record(
                [
                    f.RunRegistered(run=run, task="t"),
                    f.StageMarked(run=run, stage="env-ready", sandbox_ref=f"snap-{worker}-{i}"),
                    f.RunScored(run=run, reward=float(i % 2)),
                ]
            )


def test_two_processes_appending_at_once_lose_nothing(store_url: str, tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_record_runs, args=(store_url, str(tmp_path / "home"), w, 25))
        for w in range(2)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    run_cli = Cli(tmp_path / "home", store=store_url)
    report = json.loads(run_cli("verify", "--format", "json").stdout)
    assert report["intact"] and report["events"] == 2 * 25 * 4
    counts = json.loads(
        run_cli(
            "sql",
            "SELECT count(*) AS runs, count(DISTINCT run) AS distinct_runs FROM runs",
            "--format",
            "json",
        ).stdout
    )
    assert counts == [{"runs": 50, "distinct_runs": 50}]


def _count_reads(recorder: Any) -> list[int]:
    """Events read per `select_events` call, from now on."""
    select, read = recorder.select_events, []

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = select(*args, **kwargs)
        read.append(len(found))
        return found

    recorder.select_events = counted
    return read


def test_a_new_process_reads_a_bounded_part_of_a_long_run(store_url: str, tmp_path: Path) -> None:
    """Saved aggregate states on every backend (issue #14): recording into a run of 2,000 events
    from a new process reads at most SAVE_EVERY of its events, and decides as a full replay
    would."""
    from rollout_lineage.domain import saved_state
    from rollout_lineage.domain.errors import InvariantViolated

    run = "deep/run__1"
    with open_lineage(store_url, tmp_path / "home") as lineage:
        lineage.record([f.RunRegistered(run=run, task="t")])
        for start in range(0, 2000, 500):
            lineage.record(
                [
                    f.NodeOpened(run=run, node=f"d{i}", parent="root")
                    for i in range(start, start + 500)
                ]
            )
    for attempt in range(3):
        with open_lineage(store_url, tmp_path / "home") as lineage:
            recorder = lineage.app.recorder
            read = _count_reads(recorder)
            with pytest.raises(InvariantViolated, match="already exists"):
                lineage.record([f.NodeOpened(run=run, node="d5", parent="d6")])
            assert lineage.record(
                [f.NodeOpened(run=run, node=f"new{attempt}", parent="d9")]
            ).appended
            assert 0 < sum(read) <= saved_state.SAVE_EVERY, read
            assert lineage.verify().intact
            assert lineage.app.saved_states_differing() == (1, [])

"""Saved aggregate states (issue #14): a new process decides from the newest saved state and the
events after it, with exactly the decisions a full replay gives, and never trusts a state it cannot
vouch for."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.domain import saved_state
from rollout_lineage.domain.errors import ConflictingFact, InvariantViolated
from rollout_lineage.domain.events import aggregate_id
from tests.conftest import open_lineage
from tests.scenarios import ABLATE_RUN, ablate_run_facts

RUN = "deep/run__1"


def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'events.sqlite'}"


def build_run(url: str, home: Path, n_nodes: int) -> None:
    with open_lineage(url, home) as lineage:
        lineage.record([f.RunRegistered(run=RUN, task="t")])
        for start in range(0, n_nodes, 500):
            lineage.record(
                [
                    f.NodeOpened(run=RUN, node=f"d{i}", parent="root")
                    for i in range(start, min(n_nodes, start + 500))
                ]
            )


@contextmanager
def counting_reads(lineage: Lineage) -> Iterator[list[int]]:
    """The number of stored events the application reads, per call of `select_events`."""
    recorder = lineage.app.recorder
    select = recorder.select_events
    read: list[int] = []

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = select(*args, **kwargs)
        read.append(len(found))
        return found

    recorder.select_events = counted
    try:
        yield read
    finally:
        recorder.select_events = select


def events_read_recording_one_fact(url: str, home: Path, node: str) -> int:
    with open_lineage(url, home) as lineage:  # a new process: nothing cached
        with counting_reads(lineage) as read:
            lineage.record([f.NodeOpened(run=RUN, node=node, parent="d3")])
        return sum(read)


def test_a_new_process_reads_as_many_events_of_a_long_run_as_of_a_short_one(tmp_path: Path) -> None:
    short, long = tmp_path / "short", tmp_path / "long"
    short.mkdir(), long.mkdir()
    build_run(store(short), short, 250)
    build_run(store(long), long, 5000)
    reads = [
        events_read_recording_one_fact(store(where), where, f"new{i}")
        for where in (short, long)
        for i in range(3)
    ]
    assert max(reads) <= saved_state.SAVE_EVERY, reads
    # the 5,000-node run costs what the 250-node one does
    assert max(reads[3:]) <= max(reads[:3]) + 3, reads
    # Without saved states, the same record reads the whole run.
    with sqlite3.connect(long / "events.sqlite") as connection:
        connection.execute("DELETE FROM lineage_saved_states")
    assert events_read_recording_one_fact(store(long), long, "after-drop") > 5000


def test_decisions_from_a_saved_state_are_those_of_a_full_replay(tmp_path: Path) -> None:
    url = store(tmp_path)
    facts = ablate_run_facts()
    run = next(e.fact.run for e in facts if isinstance(e.fact, f.RunRegistered))
    padding = [f.NodeOpened(run=run, node=f"pad{i}", parent="root") for i in range(320)]
    with open_lineage(url, tmp_path) as lineage:
        lineage.record(facts)
        lineage.record(padding)
    with open_lineage(url, tmp_path) as lineage:
        from_saved = lineage.app.run(run)
        assert lineage.app._saved_at[aggregate_id("run", run)] == from_saved.version
        lineage.app.saved_states = saved_state.InMemorySavedStates()  # none: a full replay
        lineage.app._aggregates.clear()
        replayed = lineage.app.run(run)
    assert from_saved is not replayed
    assert saved_state.encode(from_saved) == saved_state.encode(replayed)
    assert from_saved.forks.keys() == replayed.forks.keys() and from_saved.nodes == replayed.nodes
    with open_lineage(url, tmp_path) as lineage:  # a new process, deciding from the saved state
        assert lineage.record([*facts, *padding]).appended == 0
        with pytest.raises(ConflictingFact, match=r"reward: recorded 1\.0, now 0\.5"):
            lineage.record([f.ChildScored(run=ABLATE_RUN, fork="root", index=0, reward=0.5)])
        with pytest.raises(InvariantViolated, match="already exists"):
            lineage.record([f.NodeOpened(run=run, node="pad7", parent="pad8")])


def tamper(tmp_path: Path, statement: str) -> None:
    with sqlite3.connect(tmp_path / "events.sqlite") as connection:
        assert connection.execute(statement).rowcount >= 1


@pytest.mark.parametrize(
    ("statement", "stream"),
    [
        ("UPDATE lineage_saved_states SET state = X'7B7D'", 301),  # not a state at all
        ("UPDATE lineage_saved_states SET topic = 'lineage-state:written-by-other-code'", 301),
        ("UPDATE lineage_saved_states SET originator_version = originator_version - 1", 301),
        (
            "UPDATE lineage_saved_states SET state = "
            "CAST(replace(CAST(state AS TEXT), '\"Node\"', '\"Evil\"') AS BLOB)",
            301,
        ),
        # The log no longer holds the event the state was saved at (a log restored from an older
        # copy).
        ("DELETE FROM stored_events WHERE originator_version > 250", 250),
    ],
    ids=["garbage", "other-code", "other-version", "unknown-part", "log-behind-the-state"],
)
def test_a_saved_state_that_cannot_be_vouched_for_is_replayed_over(
    tmp_path: Path, statement: str, stream: int
) -> None:
    url = store(tmp_path)
    build_run(url, tmp_path, 300)
    tamper(tmp_path, statement)
    with open_lineage(url, tmp_path) as lineage, counting_reads(lineage) as read:
        with pytest.raises(InvariantViolated, match="already exists"):
            lineage.record([f.NodeOpened(run=RUN, node="d5", parent="d6")])
        assert read[-1] == stream  # the whole stream
        assert lineage.record([f.NodeOpened(run=RUN, node="d5", parent="root")]).appended == 0


def test_states_are_saved_every_so_many_events_and_replace_the_older_one(tmp_path: Path) -> None:
    url = store(tmp_path)
    with open_lineage(url, tmp_path) as lineage:
        lineage.record([f.RunRegistered(run=RUN, task="t")])
        for i in range(2 * saved_state.SAVE_EVERY + 5):
            lineage.record([f.NodeOpened(run=RUN, node=f"n{i}", parent="root")])
        position = lineage.position()
    with sqlite3.connect(tmp_path / "events.sqlite") as connection:
        rows = connection.execute(
            "SELECT originator_version, topic FROM lineage_saved_states"
        ).fetchall()
        events = connection.execute("SELECT count(*) FROM stored_events").fetchone()[0]
    assert rows == [(2 * saved_state.SAVE_EVERY, saved_state.topic())]
    assert events == position  # nothing of the saved states went into the log
    with open_lineage(url, tmp_path) as lineage:
        assert lineage.verify().intact


def test_the_fingerprint_changes_with_the_code_that_evolves_state() -> None:
    from rollout_lineage.domain import run

    before = saved_state.fingerprint()
    evolver = run.RUN_HANDLERS.evolvers[f.NodeOpened]
    try:
        run.RUN_HANDLERS.evolvers[f.NodeOpened] = run.Run._stage_marked
        saved_state.fingerprint.cache_clear()
        assert saved_state.fingerprint() != before
    finally:
        run.RUN_HANDLERS.evolvers[f.NodeOpened] = evolver
        saved_state.fingerprint.cache_clear()
    assert saved_state.fingerprint() == before


def test_the_fingerprint_is_the_same_in_every_process() -> None:
    """Another process (another hash seed) must find the states this one saved."""
    import os
    import subprocess
    import sys

    code = "from rollout_lineage.domain import saved_state; print(saved_state.fingerprint())"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "random")
    }
    assert seen == {saved_state.fingerprint()}


def test_verify_replays_every_saved_state_and_names_a_forged_one(tmp_path: Path) -> None:
    """`lineage verify --saved-states` (exit 3): a state changed in the store, so that it would
    still be used (its fingerprint and version kept), is named; dropping the table makes the writers
    replay."""
    from tests.conftest import Cli

    url = store(tmp_path)
    build_run(url, tmp_path, 300)
    cli = Cli(tmp_path, store=url)
    assert "1 match the log" in cli("verify", "--saved-states", "--format", "json").stdout
    # Forge the state: forget node d7, which would let d7 be opened again elsewhere.
    tamper(
        tmp_path,
        "UPDATE lineage_saved_states SET state = "
        "CAST(replace(CAST(state AS TEXT), "
        '\',"d7":["Node","d7","root",null,null]\', \'\') AS BLOB)',
    )
    with open_lineage(url, tmp_path) as lineage:  # the forged state is used by a writer
        assert lineage.record([f.NodeOpened(run=RUN, node="d7", parent="d8")]).appended == 1
    result = cli("verify", "--saved-states", ok=False)
    assert result.exit_code == 3, result.output
    run_id = aggregate_id("run", RUN).hex
    assert (
        f"{run_id}@301" in result.stderr and "drop the table lineage_saved_states" in result.stderr
    )
    # A plain verify still says the chain is intact: the forgery let a fact in, the chain holds it.
    assert cli("verify").exit_code == 0

"""Invariants of the release-gate evidence and of terminal preservation receipts, on the in-memory
store."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rollout_lineage.adapters.store.memory_log import MEMORY_ENV
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp
from rollout_lineage.domain.errors import ConflictingFact, InvariantViolated, UnknownSubject
from tests.domain_refusals import refused

RUN = "job/task__1"
HISTORY = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


@pytest.fixture
def app() -> LineageApp:
    app = LineageApp(env=MEMORY_ENV, actor="tester@lab", tool_version="test")
    app.record([f.RunRegistered(run=RUN, task="task")])
    return app


def receipt(**overrides: object) -> f.PreservationReceipted:
    values = {
        "run": RUN,
        "history_run": RUN,
        "history_digest": HISTORY,
        "result": "sealed",
        "checkpoint": "exports/terminal-native-1",
    }
    return f.PreservationReceipted(**{**values, **overrides})


def test_a_repeated_receipt_appends_nothing_and_a_different_one_cannot_reseal(
    app: LineageApp,
) -> None:
    app.record([f.ScorerDrained(run=RUN, history_digest=HISTORY), receipt()])
    assert app.record([receipt()]).appended == 0
    message = refused(app, ConflictingFact, receipt(checkpoint="exports/terminal-native-2"))
    assert "cannot reseal" in message
    assert (
        "checkpoint: recorded 'exports/terminal-native-1', now 'exports/terminal-native-2'"
        in message
    )
    refused(
        app,
        ConflictingFact,
        receipt(result="failed", checkpoint=None, error="ValueError: relative log dir"),
    )


def test_a_receipt_must_seal_the_runs_own_history(app: LineageApp) -> None:
    message = refused(app, UnknownSubject, receipt())
    assert (
        "expected its scorer history digest (scorer.drained)" in message
        and "record the run's scorer.drained" in message
    )
    app.record([f.ScorerDrained(run=RUN, history_digest=HISTORY)])
    message = refused(app, InvariantViolated, receipt(history_digest=OTHER))
    assert (
        f"expected the preservation receipt to seal its scorer history {HISTORY}, found {OTHER}"
        in message
    )
    message = refused(app, InvariantViolated, receipt(history_run="job/other__2"))
    assert (
        "found one for run 'job/other__2'" in message
        and "record the receipt on run 'job/other__2'" in message
    )


def test_a_run_has_one_drained_history(app: LineageApp) -> None:
    app.record([f.ScorerDrained(run=RUN, history_digest=HISTORY)])
    assert app.record([f.ScorerDrained(run=RUN, history_digest=HISTORY)]).appended == 0
    refused(app, ConflictingFact, f.ScorerDrained(run=RUN, history_digest=OTHER))


def test_a_receipt_states_its_result_consistently() -> None:
    with pytest.raises(ValidationError, match="needs its error"):
        receipt(result="failed", checkpoint=None)
    with pytest.raises(ValidationError, match="carries no error"):
        receipt(error="boom")
    with pytest.raises(ValidationError):
        receipt(history_digest="md5:1234")


def test_evidence_is_about_a_node_of_the_tree_and_each_observation_is_recorded_once(
    app: LineageApp,
) -> None:
    refused(app, UnknownSubject, f.EvidenceObserved(run=RUN, node="n9"))
    early = f.EvidenceObserved(run=RUN, trial="task__1", results=f.ResultsRow(present=False))
    app.record([early])
    assert app.record([early]).appended == 0
    # benchflow writes results.jsonl after result.json: a later read sees it, which is another
    # observation, no conflict
    later = early.model_copy(
        update={"results": f.ResultsRow(present=True, rows=1, training_ready=True)}
    )
    assert app.record([later]).appended == 1
    assert app.record([early, later]).appended == 0
    assert app.run(RUN).evidence["root"] == [early, later]
    with pytest.raises(ValidationError):
        f.EvidenceObserved(run=RUN, acp_trajectory={"present": True, "lines": 3})


def test_file_digests_default_to_none_and_adding_them_to_the_same_read_is_nothing_new(
    app: LineageApp,
) -> None:
    """Issue #36: each trajectory file's SHA-256 (and the node's folder, Harbor's ATIF file) are
    recorded at import; an observation recorded before them reads as None, and reading the same
    files again with digests appends nothing (it would otherwise look like files that changed)."""
    old = f.EvidenceObserved.model_validate(
        {
            "type": "run.evidence_observed",
            "run": RUN,
            "acp_trajectory": {"present": True, "size": 3},
        }
    )
    assert old.acp_trajectory is not None and old.acp_trajectory.sha256 is None
    assert (old.folder, old.atif_trajectory) == (None, None)
    app.record([old])
    digested = old.model_copy(
        update={
            "acp_trajectory": f.TrajectoryFile(present=True, size=3, sha256=HISTORY),
            "atif_trajectory": f.TrajectoryFile(present=True, size=9, records=2, sha256=OTHER),
            "folder": ".",
        }
    )
    assert app.record([digested]).appended == 0
    # other contents are another observation, digests or not
    grown = digested.model_copy(
        update={"acp_trajectory": f.TrajectoryFile(present=True, size=4, sha256=OTHER)}
    )
    assert app.record([grown]).appended == 1
    assert app.record([grown]).appended == 0
    with pytest.raises(ValidationError):
        f.TrajectoryFile(present=True, sha256="md5:abc")

"""The writer-rule invariants on facts themselves, as `lineage ingest` and the Python API meet
them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rollout_lineage.domain import facts as f


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: f.RunFailed(
                run="r", error="e", category="request_global", request_global=False
            ),
            "expected request_global true with category 'request_global', found false",
        ),
        (
            lambda: f.RunScored(
                run="r",
                reward=0.5,
                rewards={"reward": 0.5, "source": "branch_aggregate"},
                basis="verified",
            ),
            "expected basis 'branch_aggregate' (the rewards "
            "say source 'branch_aggregate'), found 'verified'",
        ),
        (
            lambda: f.RunFinished(
                run="r", status="completed", started_at="2026-11-03 09:12:44", time_zone="recorded"
            ),
            "expected time_zone 'unknown' (what the times give), found 'recorded'",
        ),
        (
            lambda: f.RunFinished(run="r", status="completed", started_at="yesterday"),
            "expected an ISO-8601 time",
        ),
        (
            lambda: f.CustodyFailed(run="r", fork="x", phase="release", error="e", index=0),
            "expected index only on a hand-off failure",
        ),
        (
            lambda: f.CutPointServed(
                run="r", source_run="s", accounting="served", configured_k=0, served_k=0
            ),
            "expected configured K >= 1",
        ),
    ],
)
def test_refused_with_what_was_expected(build, message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_derived_fields() -> None:
    assert f.RunFailed(run="r", error="e", category="request_global").request_global is True
    assert (
        f.RunScored(
            run="r", reward=0.5, rewards={"reward": 0.5, "source": "branch_aggregate"}
        ).basis
        == "branch_aggregate"
    )
    assert (
        f.RunFinished(run="r", status="completed", finished_at="2026-11-03T09:12:44Z").time_zone
        == "recorded"
    )
    assert f.RunRegistered(run="r", task="t", skill_mode="self-gen").skill_mode == "self-gen"
    with pytest.raises(ValidationError):
        f.Delta(skill_mode="self-gen")  # BranchDelta takes only no-skill and with-skill

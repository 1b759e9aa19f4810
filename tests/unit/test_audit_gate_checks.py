"""The experiment-review skill's checks and preservation receipts as pure functions on evidence
rows."""

from __future__ import annotations

import pytest

from rollout_lineage.projections.reports.audit import audit_gate as gate
from rollout_lineage.projections.reports.audit.checks import Finding


def evidence_row(**overrides: object) -> dict:
    """An `evidence` view row of a healthy benchflow rollout."""
    row: dict = {
        "run": "r",
        "node": "root",
        "trial": "t__1",
        "partial_trajectory": False,
        "acp_present": True,
        "acp_size": 10,
        "acp_records": 18,
        "acp_malformed": 0,
        "acp_agent_events": 18,
        "llm_present": True,
        "llm_size": 10,
        "llm_records": 9,
        "llm_malformed": 0,
        "llm_requests": 9,
        "llm_responses": 9,
        "llm_responses_with_usage": 9,
        "results_present": True,
        "results_rows": 1,
        "results_malformed": 0,
        "training_ready": True,
        "training_ready_reason": None,
        "results_rows_without_usage": 0,
        "results_unlisted_tool_calls": 0,
        "input_tokens": 100,
        "output_tokens": 5,
        "total_tokens": 105,
        "started_at": "2026-11-02T09:00:00+00:00",
        "finished_at": "2026-11-02T09:03:00+00:00",
        "duration_sec": 180.0,
        "skill_mode": "no-skill",
        "skills_dir": None,
        "skill_invocations": 0,
        "skill_marker_lines": 0,
    }
    return {**row, **overrides}


def reasons(**overrides: object) -> list[str]:
    return [reason for _, reason in gate.gate_reasons(evidence_row(**overrides), oracle=False)]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"acp_present": False, "acp_records": 0, "acp_agent_events": None},
            "missing required artifact trajectory/acp_trajectory.jsonl",
        ),
        (
            {"llm_present": False, "llm_records": 0},
            "missing required artifact trajectory/llm_trajectory.jsonl",
        ),
        (
            {"results_present": False, "results_rows": 0, "training_ready": None},
            "missing required artifact results.jsonl",
        ),
        ({"acp_records": 0, "acp_agent_events": 0}, "empty trajectory/acp_trajectory.jsonl"),
        ({"llm_malformed": 2}, "2 unparsable line(s) in trajectory/llm_trajectory.jsonl"),
        ({"acp_agent_events": 0}, "no agent-side events in trajectory/acp_trajectory.jsonl"),
        ({"llm_requests": 0}, "no provider request bodies in trajectory/llm_trajectory.jsonl"),
        (
            {"llm_responses": 0, "llm_responses_with_usage": 0},
            "no provider response bodies in trajectory/llm_trajectory.jsonl",
        ),
        (
            {"llm_responses": 8},
            "trajectory/llm_trajectory.jsonl: provider response count 8 < request count 9",
        ),
        (
            {"llm_responses_with_usage": 0},
            "no provider token usage in the response bodies of trajectory/llm_trajectory.jsonl",
        ),
        ({"results_rows": 2}, "results.jsonl: expected exactly one rollout row, found 2"),
        (
            {"training_ready": False, "training_ready_reason": "agent_error"},
            "results.jsonl: the rollout row is not training_ready (agent_error)",
        ),
        (
            {"results_rows_without_usage": 1},
            "results.jsonl: a training-ready row carries no positive token usage",
        ),
        (
            {"results_unlisted_tool_calls": 1},
            "results.jsonl: assistant tool_calls without tool definitions (tool_defs or tools)",
        ),
        ({"partial_trajectory": True}, "the trajectory is partial (partial_trajectory is true)"),
        (
            {"total_tokens": None, "input_tokens": 0, "output_tokens": None},
            "missing or zero token usage",
        ),
        (
            {"duration_sec": None, "finished_at": None},
            "missing timing (no start and end, no duration)",
        ),
    ],
)
def test_the_trajectory_gate_and_usage_and_timing(overrides: dict, expected: str) -> None:
    assert reasons() == []
    assert expected in reasons(**overrides)


def test_no_evidence_fails_closed_and_a_layout_without_trajectories_is_not_held_to_them() -> None:
    [(check, reason)] = gate.gate_reasons(None, oracle=False)
    assert (
        check == "trajectory-gate"
        and "no release-gate evidence is recorded" in reason
        and "re-import the run" in reason
    )
    harbor = {key: None for key in evidence_row() if key.startswith(("acp_", "llm_", "results_"))}
    assert reasons(**harbor, training_ready=None) == []
    assert reasons(total_tokens=None, input_tokens=7, output_tokens=3) == [], (
        "input plus output is token usage"
    )


def test_an_oracle_lane_needs_no_model_trajectory_or_tokens_but_still_timing() -> None:
    bare = evidence_row(
        llm_present=False,
        llm_records=0,
        results_present=False,
        results_rows=0,
        total_tokens=0,
        input_tokens=None,
        output_tokens=None,
    )
    assert gate.gate_reasons(bare, oracle=True) == []
    assert gate.gate_reasons({**bare, "duration_sec": None, "started_at": None}, oracle=True) == [
        ("usage-and-timing", "missing timing (no start and end, no duration)")
    ]
    assert (
        gate.is_oracle(" Oracle ")
        and not gate.is_oracle("claude-agent-acp")
        and not gate.is_oracle(None)
    )


def test_skill_loading_for_with_skill_and_leakage_for_no_skill() -> None:
    loaded = evidence_row(
        skill_mode="with-skill", skills_dir="/home/agent/.claude/skills", skill_invocations=1
    )
    assert gate.skill_problem("with-skill", loaded) is None
    assert gate.skill_problem("with-skill", evidence_row(skill_invocations=2)) is None, (
        "an invoked skill was loaded"
    )
    assert "no skills directory in the sandbox, no skill invoked" in gate.skill_problem(
        "with-skill", evidence_row()
    )
    assert "no evidence of skill loading is recorded" in gate.skill_problem("with-skill", None)
    assert gate.skill_problem("no-skill", evidence_row()) is None
    assert gate.skill_problem("no-skill", None) is None
    leak = gate.skill_problem(
        "no-skill", evidence_row(skill_marker_lines=3, skills_dir="/home/agent/.claude/skills")
    )
    assert leak == (
        "no-skill leakage: skills directory /home/agent/.claude/skills in the sandbox, "
        "3 trajectory line(s) naming skill resources"
    )


def receipt_row(**overrides: object) -> dict:
    digest = "sha256:" + "ab" * 32
    row = {
        "run": "r",
        "result": "sealed",
        "history_digest": digest,
        "drained_digest": digest,
        "checkpoint": "exports/terminal-native-1",
        "error": None,
    }
    return {**row, **overrides}


def test_preserved_runs_are_unqualified_and_a_failed_attempt_is_named() -> None:
    [(level, run, message)] = gate.preservation_problems([receipt_row()])
    assert (level, run) == ("quarantine", "r") and message.startswith("preserved but unqualified:")
    assert "not a qualified recovery" in message and "exports/terminal-native-1" in message
    [(level, _, message)] = gate.preservation_problems(
        [receipt_row(result="failed", checkpoint=None, error="ValueError")]
    )
    assert level == "quarantine" and message.startswith(
        "the one preservation attempt failed (ValueError)"
    )
    [(level, _, message)] = gate.preservation_problems(
        [receipt_row(drained_digest="sha256:" + "cd" * 32)]
    )
    assert level == "blocker" and "but the run's drained scorer history is sha256:cdcd" in message


def test_a_finding_about_a_node_carries_its_address() -> None:
    assert (
        Finding("skill-loading", "quarantine", "r:f/arm", "x", "jobs/r__1", "n1").as_dict()[
            "address"
        ]
        == "jobs/r__1:n1"
    )
    assert Finding("integrity", "not-publishable", "log", "edited").as_dict()["address"] is None

"""`lineage audit` follows the experiment-review skill, and preservation receipts, end to end on
real SQLite files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from tests import audit_scenarios as s
from tests.cli_helpers import audit_json, matrix_file
from tests.conftest import EXAMPLES, Cli

NIGHTLY = EXAMPLES / "pr-layout" / "jobs" / "nightly"
RUN = "audit/plain__9"
HISTORY = "sha256:" + "ab" * 32


def plain_run(
    run: str = RUN, trial: str = "9", *, agent: str = s.AGENT, **evidence: object
) -> list:
    return s.at(
        [
            f.RunRegistered(
                run=run, task=s.TASK, agent=agent, model=s.MODEL, skill_mode=s.SKILL, trial=trial
            ),
            f.RunScored(run=run, reward=1.0),
            f.RunFinished(run=run, status="completed", trajectory="both"),
            s.evidence(run, **evidence),
        ]
    )


def by_check(report: dict, check: str) -> list[tuple[str, str | None, str]]:
    return [
        (f["level"], f["address"], f["message"]) for f in report["findings"] if f["check"] == check
    ]


def test_a_run_failing_the_trajectory_gate_is_quarantined_at_its_address_and_history_follows_it(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(
        plain_run(
            llm_trajectory=f.TrajectoryFile(present=False),
            results=f.ResultsRow(
                present=True, rows=1, training_ready=False, training_ready_reason="agent_error"
            ),
        )
    )
    report = audit_json(run_cli, code=11)
    assert by_check(report, "trajectory-gate") == [
        (
            "quarantine",
            f"{RUN}:root",
            "unhealthy (infrastructure): missing required artifact trajectory/llm_trajectory.jsonl",
        ),
        (
            "quarantine",
            f"{RUN}:root",
            "unhealthy (infrastructure): results.jsonl: the "
            "rollout row is not training_ready (agent_error)",
        ),
    ]
    assert report["quarantined"] == [RUN] and report["runs"][0]["health"] == "unhealthy"
    history = json.loads(run_cli("history", f"{RUN}:root", "--format", "json").stdout)
    assert "run.evidence_observed" in [event["type"] for event in history["steps"][-1]["events"]]


def test_a_run_without_recorded_evidence_fails_closed(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(plain_run()[:-1])
    [(level, address, message)] = by_check(audit_json(run_cli, code=11), "trajectory-gate")
    assert (level, address) == (
        "quarantine",
        f"{RUN}:root",
    ) and "no release-gate evidence is recorded" in message


def test_missing_token_usage_or_timing_is_unhealthy(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(
        plain_run(token_usage=f.TokenUsage(total_tokens=0), duration_sec=None, finished_at=None)
    )
    assert [
        message for _, _, message in by_check(audit_json(run_cli, code=11), "usage-and-timing")
    ] == [
        "unhealthy (infrastructure): missing or zero token usage",
        "unhealthy (infrastructure): missing timing (no start and end, no duration)",
    ]


def test_a_with_skill_arm_must_show_its_skills_loaded(lineage: Lineage, run_cli: Cli) -> None:
    entries = s.healthy_ablation()
    bare = s.evidence(
        s.HEALTHY, "n1", skills=f.SkillLoading(skill_mode="with-skill", invocations=0)
    )
    lineage.record(
        [
            e._replace(fact=bare)
            if getattr(e.fact, "node", None) == "n1" and e.fact.type == "run.evidence_observed"
            else e
            for e in entries
        ]
    )
    report = audit_json(run_cli, code=11)
    [(level, address, message)] = by_check(report, "skill-loading")
    assert (level, address) == ("quarantine", f"{s.HEALTHY}:n1")
    assert (
        message == "with-skill, but the task skills show no loading: no "
        "skills directory in the sandbox, no skill invoked"
    )
    assert [f["subject"] for f in report["findings"] if f["check"] == "skill-loading"] == [
        f"{s.HEALTHY}:root/with-skill"
    ]
    assert (
        f"{s.HEALTHY}:root/with-skill: with-skill, but the task skills show no loading: "
        f"no skills directory in the sandbox, no skill invoked (at {s.HEALTHY}:n1)"
    ) in run_cli("audit", ok=False).stdout
    history = json.loads(run_cli("history", address, "--format", "json").stdout)
    assert (
        history["steps"][-1]["node"] == "n1"
        and history["steps"][-1]["events"][-1]["type"] == "run.evidence_observed"
    )


def test_a_no_skill_run_that_reaches_skill_resources_leaks(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    lineage.record(
        plain_run(skills=f.SkillLoading(skill_mode="no-skill", invocations=0, marker_lines=2))
    )
    report = audit_json(
        run_cli, "--matrix", str(matrix_file(tmp_path, {**s.MATRIX, "trial": ["9"]})), code=11
    )
    assert by_check(report, "skill-loading") == [
        (
            "quarantine",
            f"{RUN}:root",
            "unhealthy (leakage): no-skill leakage: 2 trajectory line(s) naming skill resources",
        )
    ]
    assert [slot["status"] for slot in report["matrix"]] == ["unhealthy"], (
        "a leaking run does not fill its slot healthily"
    )


def test_oracle_lanes_are_reported_apart_from_the_model_runs(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    oracle = "audit/oracle__9"
    lineage.record(
        plain_run()
        + s.at(
            [
                f.RunRegistered(run=oracle, task=s.TASK, agent="oracle", trial="9"),
                f.RunUnscored(run=oracle, reason="reward.txt missing"),
                s.evidence(
                    oracle,
                    llm_trajectory=f.TrajectoryFile(present=False),
                    results=f.ResultsRow(present=False),
                    token_usage=None,
                ),
            ]
        )
    )
    matrix = matrix_file(tmp_path, {**s.MATRIX, "trial": ["9"]})
    report = audit_json(run_cli, "--matrix", str(matrix), code=0)
    assert report["verdict"] == "publishable" and report["lanes"] == {"model": 1, "oracle": 1}
    assert {row["run"]: row["lane"] for row in report["runs"]} == {RUN: "model", oracle: "oracle"}
    assert [slot["runs"] for slot in report["matrix"]] == [[RUN]], (
        "an oracle run fills no model slot"
    )
    assert by_check(report, "oracle-lane") == [
        (
            "warning",
            f"{oracle}:root",
            "oracle run, reported apart from the model "
            "runs: unhealthy: unscored: reward.txt missing",
        )
    ]
    assert "(oracle lane, reported apart)" in run_cli("audit").stdout
    only_oracle = audit_json(run_cli, "--run", oracle, code=11)
    assert by_check(only_oracle, "selection")[0][2].startswith(
        "no model run matched the selection (1 oracle run(s)"
    )


def test_benchflow_runs_fill_matrix_slots_by_the_trial_their_files_name(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_cli("import", str(NIGHTLY))
    trials = ["csv-dedupe__7c1f2a90", "csv-dedupe__d4e5f6a7", "csv-dedupe__0000beef"]
    matrix = matrix_file(
        tmp_path,
        {
            "task": "csv-dedupe",
            "agent": "openhands",
            "model": "claude-sonnet-4-5",
            "skill_mode": "no-skill",
            "trial": trials,
        },
    )
    report = audit_json(run_cli, "--matrix", str(matrix), code=11)
    slots = {slot["trial"]: (slot["status"], slot["runs"]) for slot in report["matrix"]}
    assert slots == {
        "csv-dedupe__7c1f2a90": (
            "unhealthy",
            ["nightly/csv-dedupe__7c1f2a90", "nightly/csv-dedupe__7c1f2a90__continued"],
        ),
        "csv-dedupe__d4e5f6a7": ("unhealthy", ["nightly/csv-dedupe__d4e5f6a7"]),
        "csv-dedupe__0000beef": ("missing", []),
    }
    detail = next(
        slot["detail"] for slot in report["matrix"] if slot["trial"] == "csv-dedupe__7c1f2a90"
    )
    assert detail.startswith(
        "run nightly/csv-dedupe__7c1f2a90__continued: missing required artifact: results.jsonl"
    )
    assert not [f for f in report["findings"] if "matches no slot" in f["message"]]


def test_import_records_what_the_trajectory_files_hold(run_cli: Cli, tmp_path: Path) -> None:
    run = tmp_path / "jobs" / "nightly" / "csv-dedupe__d4e5f6a7"
    shutil.copytree(NIGHTLY / run.name, run)
    with (run / "trajectory" / "acp_trajectory.jsonl").open("a") as handle:
        handle.write(
            '{"type": "tool_call", "title": "cat '
            '/app/.claude/skills/csv/SKILL.md"}\n{"truncated": \n'
        )
    (run / "trajectory" / "llm_trajectory.jsonl").write_text("")
    call = {
        "role": "assistant",
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "bash"}}],
    }
    row = {
        "info": {"training_ready": False, "training_ready_reason": "agent_error"},
        "prompt": [],
        "completion": [call],
    }
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    run_cli("import", str(run))
    [row] = json.loads(
        run_cli(
            "sql",
            "SELECT trial, acp_records, acp_malformed, acp_agent_events, llm_present, llm_records, "
            "results_rows, training_ready, training_ready_reason, results_unlisted_tool_calls, "
            "total_tokens, skill_marker_lines FROM evidence WHERE node = 'root'",
            "--format",
            "json",
        ).stdout
    )
    assert row == {
        "trial": "csv-dedupe__d4e5f6a7",
        "acp_records": 17,
        "acp_malformed": 1,
        "acp_agent_events": 17,
        "llm_present": True,
        "llm_records": 0,
        "results_rows": 1,
        "training_ready": False,
        "training_ready_reason": "agent_error",
        "results_unlisted_tool_calls": 1,
        "total_tokens": 19474,
        "skill_marker_lines": 1,
    }
    leak, *reasons = next(r["reasons"] for r in audit_json(run_cli, code=11)["runs"])
    # A no-skill run that read a skill's SKILL.md, its task's skills unnamed: leakage (the SOP's
    # leakage scan), before the validator's issues.
    assert leak == (
        "no-skill, but a skill was invoked or its SKILL.md read, and the task's skills are not "
        "named, so it may be one of them: /app/.claude/skills/csv/SKILL.md at "
        "trajectory/acp_trajectory.jsonl:17"
    )
    # The experiment-review skill's validator (scripts/validate_run_artifacts.py at benchflow
    # 17a3573b) prints these eight issues for this directory, in this order.
    assert reasons == [
        "trajectory/acp_trajectory.jsonl:18: JSON parse error: Expecting value [acp.malformed]",
        "trajectory/llm_trajectory.jsonl: empty JSONL [llm.empty]",
        "trajectory/llm_trajectory.jsonl: no provider request bodies [llm.no_requests]",
        "trajectory/llm_trajectory.jsonl: no provider response bodies [llm.no_responses]",
        "trajectory/llm_trajectory.jsonl: no provider "
        "token usage in response bodies [llm.no_usage]",
        "results.jsonl:1: healthy rollout marked training_ready=false [results.healthy_not_ready]",
        "results.jsonl:1: non-training-ready row lacks error payload [results.unready_no_error]",
        "results.jsonl:1: assistant tool_calls require non-empty tool_defs/tools"
        " [results.tool_calls_without_defs]",
    ]
    assert "0 events appended" in run_cli("import", str(run)).stderr


def test_a_results_file_linked_out_of_the_run_is_refused(run_cli: Cli, tmp_path: Path) -> None:
    run = tmp_path / "jobs" / "nightly" / "csv-dedupe__d4e5f6a7"
    shutil.copytree(NIGHTLY / run.name, run)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text('{"info": {"training_ready": true}}\n')
    os.symlink(outside, run / "results.jsonl")
    result = run_cli("import", str(run), ok=False)
    assert result.exit_code == 1 and "results.jsonl: expected a file inside" in result.stderr
    assert (
        run_cli("sql", "SELECT count(*) AS n FROM events", "--format", "csv").stdout.splitlines()[1]
        == "0"
    )


def receipt_line(**overrides: object) -> str:
    values = {
        "type": "scorer.preservation_receipted",
        "run": RUN,
        "history_run": RUN,
        "history_digest": HISTORY,
        "result": "sealed",
        "checkpoint": "exports/terminal-native-1",
    }
    return json.dumps({**values, **overrides})


def ingest(run_cli: Cli, tmp_path: Path, *lines: str, ok: bool = True):
    path = tmp_path / f"facts-{len(list(tmp_path.glob('facts-*')))}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return run_cli("ingest", str(path), ok=ok)


def test_a_preservation_receipt_is_ingested_once_and_audited_as_preserved_but_unqualified(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    lineage.record(plain_run())
    drained = json.dumps({"type": "scorer.drained", "run": RUN, "history_digest": HISTORY})
    assert "appended 2 events" in ingest(run_cli, tmp_path, drained, receipt_line()).stderr
    assert "appended 0 events" in ingest(run_cli, tmp_path, receipt_line()).stderr, (
        "a repeated notification appends nothing"
    )

    report = audit_json(run_cli, code=11)
    [(level, address, message)] = by_check(report, "preservation")
    assert (level, address) == ("quarantine", f"{RUN}:root") and message.startswith(
        "preserved but unqualified"
    )
    assert report["runs"][0]["preservation"] == "preserved, unqualified" and report[
        "quarantined"
    ] == [RUN]
    assert f"{RUN}  pass [preserved, unqualified]" in run_cli("audit", ok=False).stdout
    [row] = json.loads(
        run_cli(
            "sql",
            "SELECT run, result, history_digest = "
            "drained_digest AS matches, qualified FROM receipts",
            "--format",
            "json",
        ).stdout
    )
    assert row == {"run": RUN, "result": "sealed", "matches": True, "qualified": False}
    history = run_cli("history", f"{RUN}:root").stdout
    assert (
        f"preservation attempt sealed: history {HISTORY[:19]}, exports/terminal-native-1" in history
    )


def test_a_second_different_receipt_cannot_reseal(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    lineage.record(plain_run() + s.at([f.ScorerDrained(run=RUN, history_digest=HISTORY)]))
    ingest(run_cli, tmp_path, receipt_line())
    refused = ingest(
        run_cli,
        tmp_path,
        receipt_line(result="failed", checkpoint=None, error="ValueError: relative log dir"),
        ok=False,
    )
    assert refused.exit_code == 1 and "cannot reseal" in refused.stderr
    assert "result: recorded 'sealed', now 'failed'" in refused.stderr


def test_a_receipt_for_another_history_or_run_is_refused_with_what_to_do(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    lineage.record(plain_run() + s.at([f.ScorerDrained(run=RUN, history_digest=HISTORY)]))
    other = "sha256:" + "cd" * 32
    refused = ingest(run_cli, tmp_path, receipt_line(history_digest=other), ok=False)
    assert refused.exit_code == 1
    assert (
        f"expected the preservation receipt to seal its scorer history {HISTORY}, found {other}"
        in refused.stderr
    )
    assert "check that it was written by this run's scorer" in refused.stderr
    refused = ingest(run_cli, tmp_path, receipt_line(history_run="audit/other__1"), ok=False)
    assert refused.exit_code == 1 and "found one for run 'audit/other__1'" in refused.stderr
    assert (
        run_cli("sql", "SELECT count(*) AS n FROM receipts", "--format", "csv").stdout.splitlines()[
            1
        ]
        == "0"
    )


def test_a_harbor_trial_is_held_to_usage_and_timing_not_to_benchflow_trajectories(
    run_cli: Cli,
) -> None:
    trial = (
        EXAMPLES
        / "public"
        / "benchflow-ai"
        / "skillsbench-trajectories"
        / "claude-opus-4-5-0126-wenbo"
    )
    run_cli("import", str(trial))
    [row] = json.loads(
        run_cli(
            "sql",
            "SELECT trial, acp_present, llm_present, results_present, "
            "total_tokens, duration_sec > 0 AS timed FROM evidence",
            "--format",
            "json",
        ).stdout
    )
    assert row == {
        "trial": None,
        "acp_present": None,
        "llm_present": None,
        "results_present": None,
        "total_tokens": None,
        "timed": True,
    }
    report = audit_json(run_cli, code=11)
    assert by_check(report, "trajectory-gate") == []
    assert [message for _, _, message in by_check(report, "usage-and-timing")] == [
        "unhealthy (infrastructure): missing or zero token usage"
    ]
    assert report["runs"][0]["trial"] == "powerlifting-coef-calc__8rkRX6k", (
        "Harbor's trial comes from its registration"
    )


def test_a_run_read_before_benchflow_wrote_results_jsonl_is_observed_again_without_conflict(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = tmp_path / "jobs" / "nightly" / "csv-dedupe__d4e5f6a7"
    shutil.copytree(NIGHTLY / run.name, run)
    # result.json is written, results.jsonl not yet: benchflow writes it last
    run_cli("import", str(run))
    row = {
        "info": {"training_ready": True},
        "token_usage": {"total_tokens": 19474},
        "prompt": [],
        "completion": [],
    }
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    again = run_cli("import", str(run))
    assert "1 events appended" in again.stderr and "0 runs rejected" in again.stderr
    [latest] = json.loads(
        run_cli(
            "sql",
            "SELECT results_present, training_ready, "
            "observations FROM evidence WHERE node = 'root'",
            "--format",
            "json",
        ).stdout
    )
    assert latest == {"results_present": True, "training_ready": True, "observations": 2}
    report = audit_json(run_cli, code=11)
    reasons = report["runs"][0]["reasons"]
    assert not any("results.missing" in reason for reason in reasons), "the latest is judged"
    assert any("results.ready_payload" in reason for reason in reasons), "its row is judged"
    [(level, address, message)] = by_check(report, "evidence-changed")
    assert (level, address) == (
        "warning",
        "nightly/csv-dedupe__d4e5f6a7:root",
    ) and "read 2 times" in message


def test_a_harness_records_its_receipt_through_the_python_api(tmp_path: Path) -> None:
    from rollout_lineage import facts, open_store

    store = f"sqlite:///{tmp_path / 'events.sqlite'}"
    receipt = facts.PreservationReceipted(
        run=RUN,
        history_run=RUN,
        history_digest=HISTORY,
        result="failed",
        error="ValueError: destination must be absolute",
    )
    with open_store(store, home=str(tmp_path), actor="harness@lab") as lineage:
        first = lineage.record(
            [*plain_run(), facts.ScorerDrained(run=RUN, history_digest=HISTORY), receipt]
        )
        again = lineage.record([receipt])
    assert first.appended == 6 and again.appended == 0 and again.position == first.position
    report = audit_json(Cli(tmp_path, store), code=11)
    assert by_check(report, "preservation") == [
        (
            "quarantine",
            f"{RUN}:root",
            "the one preservation attempt failed (ValueError: destination must be absolute): "
            "the scorer's final history has no independent checkpoint",
        )
    ]
    assert report["runs"][0]["preservation"] == "preservation failed"

"""tests/rollout_writer.py writes what benchflow's rollout writers write, and the validator's
verdicts.

The scenarios and the validator's observed verdicts are in tests/validator_scenarios.py (it says how
to observe them again). The tests here pin the directories' shape; audit tests compare `lineage
audit` with the table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.rollout_writer import (
    AcpEvent,
    Exchange,
    ToolCall,
    bash,
    damage,
    fixing_run,
    scripted_run,
    write_job_results_jsonl,
    write_rollout,
)
from tests.validator_scenarios import (
    BASE_SCENARIOS,
    SCENARIOS,
    VALIDATOR_VERDICTS,
    Build,
    codex_pass,
    docker_startup_failure,
    gemini_daytona,
    healthy_pass,
    healthy_timeout,
    idle_timeout,
    missing_api_key,
    openhands_pass,
    oracle_run,
    partial_timeout,
    verifier_crash,
    verifier_timeout,
    with_skill,
)

# The table ----------------------------------------------------------------------------------------


def test_the_table_covers_every_scenario_and_a_verdict_follows_its_issues() -> None:
    assert set(VALIDATOR_VERDICTS) == set(SCENARIOS)
    for name, (healthy, issues) in VALIDATOR_VERDICTS.items():
        assert healthy == (not issues), name


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_artifact_the_validator_calls_missing_is_missing_and_no_other(
    tmp_path: Path, name: str
) -> None:
    """The table's "missing required artifact" sentences agree with the directory built today."""
    run_dir = SCENARIOS[name](tmp_path)
    said_missing = {
        issue.removeprefix("missing required artifact: <run>/")
        for issue in VALIDATOR_VERDICTS[name][1]
        if issue.startswith("missing required artifact: ")
    }
    required = {
        "trajectory/acp_trajectory.jsonl",
        "trajectory/llm_trajectory.jsonl",
        "results.jsonl",
    }
    assert {p for p in required if not (run_dir / p).is_file()} == said_missing


# The files, and when they exist -------------------------------------------------------------------

COMPLETED_RUN_FILES = {
    "agent",
    "artifacts",
    "verifier",
    "trajectory",
    "trajectory/acp_trajectory.jsonl",
    "trajectory/llm_trajectory.jsonl",
    "agent/acp_trajectory.jsonl",
    "verifier/reward.txt",
    "config.json",
    "result.json",
    "timing.json",
    "prompts.json",
    "rewards.jsonl",
    "results.jsonl",
}


def files(run_dir: Path) -> set[str]:
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*")}


def test_a_completed_run_has_the_writers_files_under_jobs_job_task_hash(tmp_path: Path) -> None:
    run_dir = healthy_pass(tmp_path)
    assert run_dir.parent == tmp_path / "2026-11-03__09-12-44"
    assert re.fullmatch(r"csv-dedupe__[0-9a-f]{8}", run_dir.name)
    assert files(run_dir) == COMPLETED_RUN_FILES


def test_rollout_names_are_stable_and_distinct(tmp_path: Path) -> None:
    """Every undamaged scenario can share one job directory: no two share a rollout name."""
    assert fixing_run().name == fixing_run().name
    built = {BASE_SCENARIOS[name](tmp_path).name for name in BASE_SCENARIOS}
    assert len(built) == len(BASE_SCENARIOS)
    assert len(list((tmp_path / "2026-11-03__09-12-44").iterdir())) == len(BASE_SCENARIOS)


def test_a_sandbox_that_never_started_leaves_no_llm_trajectory_and_no_rewards(
    tmp_path: Path,
) -> None:
    run_dir = docker_startup_failure(tmp_path)
    assert files(run_dir) == COMPLETED_RUN_FILES - {
        "trajectory/llm_trajectory.jsonl",
        "agent/acp_trajectory.jsonl",
        "verifier/reward.txt",
        "rewards.jsonl",
    }
    assert (run_dir / "trajectory" / "acp_trajectory.jsonl").read_text() == ""


def test_daytona_writes_sandbox_json_with_the_provider_class(tmp_path: Path) -> None:
    run_dir = gemini_daytona(tmp_path)
    info = json.loads((run_dir / "sandbox.json").read_text())
    assert list(info) == ["sandbox_id", "provider", "created_at"]
    assert info["sandbox_id"] == "sb-7f3a" and info["provider"] == "DaytonaSandbox"
    assert json.loads((run_dir / "config.json").read_text())["acp_transport"] == "ssh"


def test_serialisation_follows_each_writer(tmp_path: Path) -> None:
    """json.dumps(indent=2) without newline for the .json files; JSONL joined by newlines, the
    trajectories without a final newline, results.jsonl and rewards.jsonl with one."""
    run_dir = healthy_pass(tmp_path)
    for name in ("config.json", "result.json", "timing.json", "prompts.json"):
        text = (run_dir / name).read_text()
        assert text == json.dumps(json.loads(text), indent=2), name
    for name in ("trajectory/acp_trajectory.jsonl", "trajectory/llm_trajectory.jsonl"):
        assert not (run_dir / name).read_text().endswith("\n"), name
    for name in ("results.jsonl", "rewards.jsonl"):
        text = (run_dir / name).read_text()
        assert text.endswith("\n") and text.count("\n") == 1, name


# config.json and result.json ----------------------------------------------------------------------

SKILL_KEYS = [
    "skill_mode",
    "skill_source",
    "requested_skills_dir",
    "effective_skills_dir",
    "skills_sandbox_dir",
    "include_task_skills",
]


def test_config_json_keys_in_the_writers_order(tmp_path: Path) -> None:
    config = json.loads((healthy_pass(tmp_path) / "config.json").read_text())
    assert list(config) == [
        "task_path",
        "agent",
        "model",
        "reasoning_effort",
        "environment",
        "acp_transport",
        "environment_manifest",
        *SKILL_KEYS,
        "sandbox_user",
        "sandbox_locked_paths",
        "sandbox_setup_timeout",
        "skip_install",
        "agent_install_timeout",
        "context_root",
        "base_image_override",
        "timeout_sec",
        "concurrency",
        "agent_idle_timeout_sec",
        "started_at",
        "agent_env",
        "scenes",
        "loop",
        "usage_tracking",
    ]
    assert config["task_path"] == "csv-dedupe" and config["acp_transport"] == "docker-stdio"
    assert config["skills_sandbox_dir"] is None and config["include_task_skills"] is False


def test_config_json_drops_secret_bearing_env(tmp_path: Path) -> None:
    env = {
        "ANTHROPIC_API_KEY": "x",
        "GH_TOKEN": "y",
        "ANTHROPIC_BASE_URL": "http://proxy",
        "LANG": "C",
    }
    run_dir = write_rollout(tmp_path, fixing_run(agent_env=env))
    recorded = json.loads((run_dir / "config.json").read_text())["agent_env"]
    assert recorded == {"ANTHROPIC_BASE_URL": "http://proxy", "LANG": "C"}


RESULT_KEYS = [
    "task_name",
    "rollout_name",
    "rewards",
    "agent",
    "agent_name",
    "model",
    *SKILL_KEYS,
    "n_tool_calls",
    "n_skill_invocations",
    "n_prompts",
    "agent_result",
    "final_metrics",
    "trajectory_summary",
    "usage_tracking",
    "error",
    "error_category",
    "verifier_error",
    "verifier_error_category",
    "export_error",
    "idle_timeout_info",
    "agent_timeout_info",
    "sandbox_startup_info",
    "transport_error_info",
    "verifier_timeout_info",
    "api_error_info",
    "suspected_api_error_info",
    "partial_trajectory",
    "trajectory_source",
    "started_at",
    "finished_at",
    "timing",
    "scenes",
    "loop",
    "sandbox_id",
]


def result_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "result.json").read_text())


def test_result_json_keys_usage_and_counts(tmp_path: Path) -> None:
    run_dir = healthy_pass(tmp_path)
    result = result_of(run_dir)
    assert list(result) == RESULT_KEYS
    assert result["rollout_name"] == run_dir.name and result["rewards"] == {"reward": 1.0}
    assert result["n_tool_calls"] == 3 and result["n_skill_invocations"] == 0
    agent_result = result["agent_result"]
    assert list(agent_result) == [
        "n_tool_calls",
        "n_skill_invocations",
        "n_prompts",
        "n_input_tokens",
        "n_output_tokens",
        "n_cache_read_tokens",
        "n_cache_creation_tokens",
        "total_tokens",
        "cost_usd",
        "usage_source",
        "price_source",
    ]
    # default_usage: 1200 + 350 per Anthropic history message (1, 3, 5, 7) in, 180 out
    assert agent_result["n_input_tokens"] == 4 * 1200 + 350 * (1 + 3 + 5 + 7)
    assert agent_result["n_output_tokens"] == 4 * 180
    assert agent_result["total_tokens"] == agent_result["n_input_tokens"] + 4 * 180
    assert agent_result["usage_source"] == "provider_response"
    assert result["usage_tracking"]["status"] == "enabled"
    assert result["timing"] == {
        "environment_setup": 41.2,
        "agent_setup": 12.5,
        "agent_execution": 290.0,
        "verifier": 31.8,
        "total": 378.3,
    }
    summary = result["trajectory_summary"]
    assert summary["tool_call_steps"] == 3 and summary["agent_message_steps"] == 4
    assert summary["user_message_steps"] == 1 and summary["trajectory_source"] == "acp"


def test_a_clean_timeout_scores_zero_and_records_its_diagnostic(tmp_path: Path) -> None:
    run_dir = healthy_timeout(tmp_path)
    result = result_of(run_dir)
    assert result["error"] == "Agent prompt exceeded wall-clock budget 900s"
    assert result["error_category"] == "timeout" and result["rewards"] == {"reward": 0.0}
    assert result["agent_timeout_info"] == {
        "reason": "wall_clock_timeout",
        "timeout_sec": 900.0,
        "n_tool_calls": 3,
        "pending_tool_call_ids": [],
        "terminal_event_recorded": True,
        "terminal_trajectory_complete": True,
    }
    assert result["partial_trajectory"] is False and result["trajectory_source"] == "acp"
    last = (run_dir / "trajectory" / "acp_trajectory.jsonl").read_text().splitlines()[-1]
    assert json.loads(last)["type"] == "agent_timeout"


def test_a_timeout_with_a_call_in_flight_is_partial(tmp_path: Path) -> None:
    result = result_of(partial_timeout(tmp_path))
    assert result["partial_trajectory"] is True and result["trajectory_source"] == "partial_acp"
    assert result["agent_timeout_info"]["pending_tool_call_ids"] == ["call_3"]


@pytest.mark.parametrize(
    ("agent", "invocations"),
    [("openhands", 1), ("claude-agent-acp", 1), ("gemini", 1), ("codex-acp", 0)],
)
def test_with_skill_records_the_mount_and_counts_the_invocation(
    tmp_path: Path, agent: str, invocations: int
) -> None:
    """Codex loads a skill by reading its SKILL.md: benchflow does not count a `read` as one."""
    result = result_of(with_skill(agent)(tmp_path))
    assert result["skill_mode"] == "with-skill" and result["skill_source"] == "task_bundled"
    assert result["skills_sandbox_dir"] == "/skills" and result["include_task_skills"] is True
    assert result["effective_skills_dir"] == "tasks/csv-dedupe/environment/skills"
    assert result["n_skill_invocations"] == invocations and result["n_tool_calls"] == 4


CATALOG_MARKERS = {
    "openhands": "<available_skills><skill><name>csv-tools</name>",
    "claude-agent-acp": "The following skills are available "
    "for use with the Skill tool:\n\n- csv-tools: ",
    "codex-acp": "<skills_instructions>",
    "gemini": "# Available Agent Skills",
}


@pytest.mark.parametrize("agent", sorted(CATALOG_MARKERS))
def test_the_startup_catalog_is_in_the_first_captured_request(tmp_path: Path, agent: str) -> None:
    """Where each harness shows its catalog, and the wire benchflow's capture keeps."""
    run_dir = with_skill(agent)(tmp_path)
    first = json.loads(
        (run_dir / "trajectory" / "llm_trajectory.jsonl").read_text().splitlines()[0]
    )
    body = first["request"]["body"]
    assert CATALOG_MARKERS[agent] in json.dumps(
        body["input" if agent == "codex-acp" else "messages"]
    ).replace("\\n", "\n")
    expected_path = "/v1/messages" if agent == "claude-agent-acp" else "/v1/chat/completions"
    assert first["request"]["path"] == expected_path
    assert "system" not in body and "instructions" not in body  # _base_record keeps neither


def test_error_categories(tmp_path: Path) -> None:
    assert result_of(docker_startup_failure(tmp_path / "a"))["error_category"] == "sandbox_setup"
    assert result_of(missing_api_key(tmp_path / "b"))["error_category"] == "provider_auth"
    crashed = result_of(verifier_crash(tmp_path / "c"))
    assert crashed["verifier_error_category"] == "verifier_failure" and crashed["rewards"] is None
    unavailable = result_of(missing_api_key(tmp_path / "d"))
    assert unavailable["agent_result"]["usage_source"] == "unavailable"
    assert unavailable["usage_tracking"]["endpoint_kind"] == "none"


# results.jsonl ------------------------------------------------------------------------------------


def row_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.jsonl").read_text())


def test_a_healthy_row_is_training_ready_with_one_step_per_exchange(tmp_path: Path) -> None:
    run_dir = healthy_pass(tmp_path)
    row = row_of(run_dir)
    assert list(row) == [
        "example_id",
        "prompt",
        "completion",
        "info",
        "reward",
        "error",
        "timing",
        "is_completed",
        "is_truncated",
        "stop_condition",
        "metrics",
        "tool_defs",
        "token_usage",
        "score",
        "total_tool_calls",
        "trajectory",
    ]
    info = row["info"]
    assert info["task_id"] == info["task_name"] == info["environment"] == "csv-dedupe"
    assert info["rollout_dir"] == str(run_dir)
    assert (info["training_ready"], info["training_ready_reason"], row["error"]) == (
        True,
        None,
        None,
    )
    assert row["is_completed"] is True and row["stop_condition"] == "agent_completed"
    assert row["metrics"] == {"n_tool_calls": 3, "n_prompts": 1, "reward": 1.0}
    assert row["total_tool_calls"] == 3.0 and row["reward"] == row["score"] == 1.0
    assert [t["function"]["name"] for t in row["tool_defs"]] == [
        "bash",
        "str_replace_based_edit_tool",
        "finish",
    ]
    assert list(row["token_usage"]) == [
        "input_tokens",
        "output_tokens",
        "final_input_tokens",
        "final_output_tokens",
        "total_tokens",
    ]
    steps = row["trajectory"]
    assert [s["extras"]["exchange_index"] for s in steps] == [0, 1, 2, 3]
    assert steps[0]["trajectory_id"] == f"{run_dir.name}__llm_0"
    assert list(steps[0]) == [
        "prompt",
        "completion",
        "response",
        "tokens",
        "reward",
        "advantage",
        "is_truncated",
        "trajectory_id",
        "extras",
    ]
    # Anthropic tool results travel as user messages, so the last-user window is the last
    # tool result and the final answer
    assert row["prompt"] == [{"role": "user", "content": "3 passed"}]
    assert row["completion"] == [
        {"role": "assistant", "content": "Fixed: rows are now compared case-insensitively."}
    ]
    tool_use = steps[0]["completion"][0]["tool_calls"][0]
    assert tool_use["function"] == {
        "name": "bash",
        "arguments": json.dumps({"command": "pytest -q tests/test_dedupe.py"}),
    }


@pytest.mark.parametrize(
    ("build", "completion_roles"),
    [
        (openhands_pass, ["assistant", "tool"] * 3 + ["assistant"]),
        (codex_pass, ["assistant", "assistant", "tool"] * 3 + ["assistant"]),
    ],
)
def test_chat_and_responses_rows_keep_every_turn_after_the_instruction(
    tmp_path: Path, build: Build, completion_roles: list[str]
) -> None:
    """OpenAI-style tool results are tool messages: the window starts at the instruction. LiteLLM's
    function_call / provider_specific_fields never reach the row."""
    row = row_of(build(tmp_path))
    assert row["info"]["training_ready"] is True
    assert row["prompt"] == [{"role": "user", "content": "Fix the failing tests."}]
    assert [m["role"] for m in row["completion"]] == completion_roles
    for message in row["completion"] + row["trajectory"][-1]["prompt"]:
        assert set(message) <= {"role", "content", "tool_calls", "tool_call_id"}


@pytest.mark.parametrize(
    ("build", "reason", "error", "stop"),
    [
        (healthy_timeout, "agent_error", "agent_error", "agent_error"),
        (partial_timeout, "partial_trajectory", "agent_error", "partial_trajectory"),
        (verifier_crash, "verifier_error", "verifier_error", "verifier_error"),
        (
            docker_startup_failure,
            "missing_healthy_structured_llm_trajectory",
            "agent_error",
            "agent_error",
        ),
    ],
)
def test_an_unready_row_names_its_reason_and_carries_an_error(
    tmp_path: Path, build: Build, reason: str, error: str, stop: str
) -> None:
    row = row_of(build(tmp_path))
    assert row["info"]["training_ready"] is False
    assert row["info"]["training_ready_reason"] == reason
    assert row["error"]["error"] == error and row["stop_condition"] == stop
    assert row["is_completed"] is False


def test_a_row_without_llm_capture_falls_back_to_the_prompts(tmp_path: Path) -> None:
    row = row_of(docker_startup_failure(tmp_path))
    assert row["prompt"] == [{"role": "user", "content": "Fix the failing tests."}]
    assert row["completion"] is None and row["trajectory"] == [] and row["tool_defs"] == []
    assert row["reward"] == 0.0 and row["token_usage"]["total_tokens"] == 0.0


def test_a_failed_provider_call_is_captured_but_never_a_step(tmp_path: Path) -> None:
    run_dir = missing_api_key(tmp_path)
    line = (run_dir / "trajectory" / "llm_trajectory.jsonl").read_text()
    record = json.loads(line)
    assert record["response"]["status_code"] == 401 and "error" in record["response"]["body"]
    assert row_of(run_dir)["trajectory"] == []


def test_a_timeout_that_ends_on_an_unconsumed_call_still_keeps_that_step(tmp_path: Path) -> None:
    """The last response's call id is never sent back, but no request follows it: it is safe."""
    steps = row_of(healthy_timeout(tmp_path))["trajectory"]
    assert [s["extras"]["exchange_index"] for s in steps] == [0, 1, 2]


def test_a_retried_request_keeps_only_the_response_that_was_consumed(tmp_path: Path) -> None:
    run = fixing_run()
    retry = run.exchanges[1]
    run.exchanges.insert(
        1, Exchange(retry.messages, retry.tools, "", [ToolCall("call_x", "bash", {})])
    )
    run.exchanges[1].usage = retry.usage
    steps = row_of(write_rollout(tmp_path, run))["trajectory"]
    assert [s["extras"]["exchange_index"] for s in steps] == [0, 2, 3, 4]


# write_job_results_jsonl --------------------------------------------------------------------------


def test_job_results_number_examples_by_task_and_record_bad_rows(tmp_path: Path) -> None:
    job = write_rollout(tmp_path, fixing_run(rollout_name="csv-dedupe__00000001")).parent
    write_rollout(
        tmp_path, fixing_run(rollout_name="csv-dedupe__00000002", rewards={"reward": 0.0})
    )
    other = write_rollout(tmp_path, fixing_run("log-parse", rollout_name="log-parse__00000003"))
    out = write_job_results_jsonl(job)
    assert out == job / "results.jsonl"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["info"]["rollout_name"], r["example_id"]) for r in rows] == [
        ("csv-dedupe__00000001", 0),
        ("csv-dedupe__00000002", 0),
        ("log-parse__00000003", 1),
    ]
    assert not (job / "results.errors.json").exists()
    (other / "results.jsonl").write_text("{not json\n")
    write_job_results_jsonl(job)
    errors = json.loads((job / "results.errors.json").read_text())
    assert errors["skipped_count"] == 1
    assert errors["skipped"][0]["error"] == "invalid_results_artifact_json"
    assert len(out.read_text().splitlines()) == 2


def test_no_rollout_rows_no_job_file(tmp_path: Path) -> None:
    assert write_job_results_jsonl(tmp_path) is None
    assert not (tmp_path / "results.jsonl").exists()


# damage -------------------------------------------------------------------------------------------


def snapshot(run_dir: Path) -> dict[str, str]:
    """Each file's text, the run directory's own path (in results.jsonl's info) written as <run>."""
    return {
        str(p.relative_to(run_dir)): p.read_text().replace(str(run_dir), "<run>")
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("name", "changed"),
    [
        ("no_llm_trajectory", "trajectory/llm_trajectory.jsonl"),
        ("no_acp_trajectory", "trajectory/acp_trajectory.jsonl"),
        ("no_results_row", "results.jsonl"),
        ("truncated_llm_line", "trajectory/llm_trajectory.jsonl"),
        ("usage_stripped", "trajectory/llm_trajectory.jsonl"),
        ("healthy_marked_unready", "results.jsonl"),
        ("reasoning_in_message", "results.jsonl"),
        ("gold_in_row", "results.jsonl"),
        ("task_mismatch", "results.jsonl"),
        ("step_dropped", "results.jsonl"),
        ("zero_tool_calls", "result.json"),
        ("no_reward", "result.json"),
        ("no_timing", "result.json"),
    ],
)
def test_each_damage_touches_one_file(tmp_path: Path, name: str, changed: str) -> None:
    healthy = snapshot(healthy_pass(tmp_path / "healthy"))
    broken = snapshot(SCENARIOS[name](tmp_path / "broken"))
    differs = {p for p in healthy.keys() | broken.keys() if healthy.get(p) != broken.get(p)}
    assert differs == {changed}


def test_damage_to_the_llm_trajectory_hits_one_exchange(tmp_path: Path) -> None:
    run_dir = healthy_pass(tmp_path)
    damage.strip_usage(run_dir, 1)
    records = [
        json.loads(line)
        for line in (run_dir / "trajectory" / "llm_trajectory.jsonl").read_text().splitlines()
    ]
    assert ["usage" in r["response"]["body"] for r in records] == [True, False, True, True]


def test_zero_tokens_and_zero_tool_calls_without_an_error_is_a_suspected_api_error(
    tmp_path: Path,
) -> None:
    """_maybe_classify_api_error: the verifier's reward is dropped, the slot is unscored."""
    run = fixing_run()
    run.exchanges, run.acp = [], [AcpEvent("agent_message", text="I cannot use that model.")]
    result = result_of(write_rollout(tmp_path, run))
    assert result["error"].startswith("suspected provider api error: agent ended with zero tokens")
    assert result["error_category"] == "suspected_api_error" and result["rewards"] is None
    assert result["suspected_api_error_info"] == {
        "total_tokens": 0,
        "n_tool_calls": 0,
        "total_requests": 0,
        "failed_requests": 0,
    }


def test_a_run_whose_every_call_failed_needs_its_error_spelled_out(tmp_path: Path) -> None:
    """The proxy-proven api_error is not derived here: the writer refuses rather than guess."""
    run = fixing_run()
    run.exchanges = [Exchange(run.exchanges[0].messages, status_code=429, error="rate limited")]
    with pytest.raises(ValueError, match=r"pass Rollout\.error"):
        write_rollout(tmp_path, run)


@pytest.mark.parametrize("name", sorted(BASE_SCENARIOS))
def test_times_are_consistent(tmp_path: Path, name: str) -> None:
    """The total covers the phases and every provider call falls between started_at and
    finished_at (an audit reads overlaps as verifier-isolation evidence)."""
    from datetime import datetime

    run_dir = BASE_SCENARIOS[name](tmp_path)
    result = result_of(run_dir)
    phases = {k: v for k, v in result["timing"].items() if k != "total"}
    assert result["timing"]["total"] >= sum(phases.values())
    started = datetime.fromisoformat(result["started_at"])
    finished = datetime.fromisoformat(result["finished_at"])
    assert (finished - started).total_seconds() == pytest.approx(
        result["timing"]["total"], abs=0.05
    )
    llm = run_dir / "trajectory" / "llm_trajectory.jsonl"
    for line in llm.read_text().splitlines() if llm.exists() else []:
        record = json.loads(line)
        request = datetime.fromisoformat(record["request"]["timestamp"])
        response = datetime.fromisoformat(record["response"]["timestamp"])
        setup = phases.get("environment_setup", 0) + phases.get("agent_setup", 0)
        assert started.timestamp() + setup <= request.timestamp() < response.timestamp()
        execution = phases.get("agent_execution", result["timing"]["total"] - setup)
        assert response.timestamp() <= started.timestamp() + setup + execution


def test_an_idle_timeout_is_captured_at_cleanup_as_partial(tmp_path: Path) -> None:
    """execute() raised: no agent_execution time, nothing published to the verifier, the session
    captured as partial_acp, and the unscored agent gets reward 0.0."""
    run_dir = idle_timeout(tmp_path)
    result = result_of(run_dir)
    assert result["error"].startswith("Agent idle for 600s with no new tool call")
    assert result["error_category"] == "idle_timeout" and result["rewards"] == {"reward": 0.0}
    assert result["idle_timeout_info"]["n_tool_calls"] == 2
    assert (result["partial_trajectory"], result["trajectory_source"]) == (True, "partial_acp")
    assert "agent_execution" not in result["timing"]
    assert not (run_dir / "agent" / "acp_trajectory.jsonl").exists()
    assert row_of(run_dir)["info"]["training_ready_reason"] == "partial_trajectory"


def test_a_verifier_timeout_leaves_no_reward_and_no_verifier_files(tmp_path: Path) -> None:
    run_dir = verifier_timeout(tmp_path)
    result = result_of(run_dir)
    assert result["verifier_error"] == "verifier timed out after 600s"
    assert result["verifier_error_category"] == "verifier_timeout" and result["rewards"] is None
    assert result["verifier_timeout_info"] == {
        "timeout_budget_sec": 600.0,
        "elapsed_sec": 600.0,
        "task_name": "csv-dedupe",
    }
    assert not any((run_dir / "verifier").iterdir())
    assert not (run_dir / "rewards.jsonl").exists()


def test_an_oracle_run_has_one_oracle_event_and_no_model_evidence(tmp_path: Path) -> None:
    run_dir = oracle_run(tmp_path)
    result = result_of(run_dir)
    assert result["agent_name"] == "oracle" and result["trajectory_source"] is None
    assert result["n_tool_calls"] == 0 and "agent_execution" not in result["timing"]
    events = (run_dir / "trajectory" / "acp_trajectory.jsonl").read_text().splitlines()
    assert [json.loads(e)["type"] for e in events] == ["oracle"]
    assert (run_dir / "agent" / "oracle.txt").is_file()
    assert not (run_dir / "trajectory" / "llm_trajectory.jsonl").exists()
    config = json.loads((run_dir / "config.json").read_text())
    assert config["agent_install_timeout"] is None


def test_a_scripted_run_shows_each_action_in_both_trajectories(tmp_path: Path) -> None:
    """What a reward-hacking test needs: the command in the LLM call's arguments and in the ACP
    title, under one call id."""
    action = bash("echo 1 > /logs/verifier/reward.txt", "", "Writing the reward.")
    run_dir = write_rollout(tmp_path, scripted_run("csv-dedupe", [action]))
    acp = [
        json.loads(e)
        for e in (run_dir / "trajectory/acp_trajectory.jsonl").read_text().splitlines()
    ]
    call = next(e for e in acp if e["type"] == "tool_call")
    assert (
        call["title"] == "echo 1 > /logs/verifier/reward.txt" and call["tool_call_id"] == "call_1"
    )
    first = json.loads((run_dir / "trajectory/llm_trajectory.jsonl").read_text().splitlines()[0])
    (tool_use,) = [b for b in first["response"]["body"]["content"] if b["type"] == "tool_use"]
    assert tool_use == {
        "type": "tool_use",
        "id": "call_1",
        "name": "bash",
        "input": {"command": "echo 1 > /logs/verifier/reward.txt"},
    }

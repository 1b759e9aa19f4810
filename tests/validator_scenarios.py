"""The run directories the validator-parity tests judge, built as benchflow's rollout writers build
them, and the verdicts benchflow's own validator gave them.

`SCENARIOS` builds run directories with the writer functions of tests/rollout_writer.py
(`write_rollout` = `_init_rollout`, `_write_config`, the ACP/LLM trajectory writers,
`_build_rollout_result`, `build_rollout_results_record`) plus one `damage` step where the scenario
needs one. `VALIDATOR_VERDICTS` is what benchflow's own judge,
`.agents/skills/benchflow-experiment-review/scripts/validate_run_artifacts.py` at commit 17a3573b,
said about each directory, observed by running it (`python -m tests.validator_scenarios
VALIDATOR.py` prints the table again). Issues are the validator's own sentences with the run
directory replaced by `<run>`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.rollout_writer import (
    FIXING,
    Exchange,
    Rollout,
    bash,
    damage,
    fixing_run,
    scripted_run,
    write_rollout,
)

Build = Callable[[Path], Path]


def healthy_pass(jobs: Path) -> Path:
    return write_rollout(jobs, fixing_run())


def healthy_fail(jobs: Path) -> Path:
    return write_rollout(jobs, fixing_run(rewards={"reward": 0.0}))


def healthy_timeout(jobs: Path) -> Path:
    """The wall-clock budget ran out between tool calls: the trajectory is complete, reward 0.0."""
    run = scripted_run("csv-dedupe", FIXING, final=None, timed_out_after=900, rewards=None)
    return write_rollout(jobs, run)


def partial_timeout(jobs: Path) -> Path:
    """The budget ran out with the last tool call still running: a partial trajectory."""
    actions = [*FIXING[:2], bash("pytest -q tests/test_dedupe.py", "", status="in_progress")]
    run = scripted_run("csv-dedupe", actions, final=None, timed_out_after=900, rewards=None)
    return write_rollout(jobs, run)


def idle_timeout(jobs: Path) -> Path:
    """The idle watchdog fired: execute() raised, so cleanup captures the session as partial."""
    run = scripted_run("csv-dedupe", FIXING[:2], final=None, idle_after=600, rewards=None)
    return write_rollout(jobs, run)


def verifier_timeout(jobs: Path) -> Path:
    return write_rollout(jobs, fixing_run(verifier_timed_out_after=600))


def oracle_run(jobs: Path) -> Path:
    """The oracle lane: solve.sh, no model, no LLM trajectory."""
    run = Rollout("csv-dedupe", agent="oracle", model=None, rewards={"reward": 1.0})
    return write_rollout(jobs, run)


TASK_SKILL = ("csv-tools", "Read, clean and deduplicate CSV files.")
GLOBAL_SKILL = ("code-review", "Review a change for defects.")  # a harness-global skill


def with_skill(agent: str) -> Build:
    """A with-skill run: the task's skill is in the startup catalog and is loaded first."""

    def build(jobs: Path) -> Path:
        run = fixing_run(
            agent=agent,
            skill_mode="with-skill",
            catalog=[TASK_SKILL, GLOBAL_SKILL],
            load_skills=(TASK_SKILL[0],),
        )
        return write_rollout(jobs, run)

    return build


def with_skill_never_loaded(jobs: Path) -> Path:
    """with-skill in config.json, but the catalog shows harness-global skills only, none loaded."""
    return write_rollout(jobs, fixing_run(skill_mode="with-skill", catalog=[GLOBAL_SKILL]))


def no_skill_with_global_catalog(jobs: Path) -> Path:
    return write_rollout(jobs, fixing_run(catalog=[GLOBAL_SKILL]))


def no_skill_loads_task_skill(jobs: Path) -> Path:
    """A no-skill run that nevertheless sees and loads the task's skill (leakage)."""
    run = fixing_run(catalog=[TASK_SKILL, GLOBAL_SKILL], load_skills=(TASK_SKILL[0],))
    return write_rollout(jobs, run)


def openhands_pass(jobs: Path) -> Path:
    return write_rollout(jobs, fixing_run(agent="openhands", model="gpt-5"))


def codex_pass(jobs: Path) -> Path:
    return write_rollout(jobs, fixing_run(agent="codex-acp", model="gpt-5-codex"))


def pi_pass(jobs: Path) -> Path:
    return write_rollout(jobs, fixing_run(agent="pi-acp", model="gpt-5"))


def gemini_daytona(jobs: Path) -> Path:
    run = fixing_run(agent="gemini", model="gemini-2.5-pro", environment="daytona")
    run.sandbox_id = "sb-7f3a"
    return write_rollout(jobs, run)


def docker_startup_failure(jobs: Path) -> Path:
    """The sandbox never came up: config.json, an empty ACP trajectory, no LLM trajectory."""
    error = "Sandbox startup failed: docker compose command failed: exit status 1"
    return write_rollout(jobs, Rollout("csv-dedupe", reached="start", error=error))


def missing_api_key(jobs: Path) -> Path:
    """The provider refused the key on the first call; the agent died with an ACP error."""
    run = fixing_run(reached="execute", rewards=None)
    run.exchanges = [Exchange(run.exchanges[0].messages, run.exchanges[0].tools, status_code=401)]
    run.exchanges[0].error = "AuthenticationError: invalid x-api-key"
    run.acp = []
    run.error = "ACP error -32603: Internal error | provider auth failed (HTTP 401)"  # :2431
    return write_rollout(jobs, run)


def verifier_crash(jobs: Path) -> Path:
    error = "verifier crashed: test.sh exited 127 (pytest: command not found)"
    return write_rollout(jobs, fixing_run(rewards=None, verifier_error=error))


def damaged(step: Callable[[Path], None], base: Build = healthy_pass) -> Build:
    def build(jobs: Path) -> Path:
        run_dir = base(jobs)
        step(run_dir)
        return run_dir

    return build


BASE_SCENARIOS: dict[str, Build] = {
    "healthy_pass": healthy_pass,
    "healthy_fail": healthy_fail,
    "healthy_timeout": healthy_timeout,
    "partial_timeout": partial_timeout,
    "openhands_pass": openhands_pass,
    "codex_pass": codex_pass,
    "pi_pass": pi_pass,
    "gemini_daytona": gemini_daytona,
    "with_skill_openhands": with_skill("openhands"),
    "with_skill_claude": with_skill("claude-agent-acp"),
    "with_skill_codex": with_skill("codex-acp"),
    "with_skill_gemini": with_skill("gemini"),
    "with_skill_never_loaded": with_skill_never_loaded,
    "no_skill_with_global_catalog": no_skill_with_global_catalog,
    "no_skill_loads_task_skill": no_skill_loads_task_skill,
    "docker_startup_failure": docker_startup_failure,
    "missing_api_key": missing_api_key,
    "verifier_crash": verifier_crash,
    "idle_timeout": idle_timeout,
    "verifier_timeout": verifier_timeout,
    "oracle_run": oracle_run,
}
DAMAGED_SCENARIOS: dict[str, Build] = {
    "no_llm_trajectory": damaged(lambda d: damage.delete(d, "trajectory/llm_trajectory.jsonl")),
    "no_acp_trajectory": damaged(lambda d: damage.delete(d, "trajectory/acp_trajectory.jsonl")),
    "no_results_row": damaged(lambda d: damage.delete(d, "results.jsonl")),
    "truncated_llm_line": damaged(
        lambda d: damage.truncate_line(d, "trajectory/llm_trajectory.jsonl", 1)
    ),
    "usage_stripped": damaged(lambda d: damage.strip_usage(d, 1)),
    "healthy_marked_unready": damaged(lambda d: damage.set_training_ready(d, False)),
    "timeout_marked_ready": damaged(lambda d: damage.set_training_ready(d, True), healthy_timeout),
    "reasoning_in_message": damaged(damage.banned_message_key),
    "gold_in_row": damaged(damage.banned_row_key),
    "task_mismatch": damaged(damage.mismatched_task),
    "zero_tool_calls": damaged(damage.zero_tool_calls),
    "step_dropped": damaged(damage.drop_trajectory_step),
    "no_reward": damaged(damage.drop_reward),
    "no_timing": damaged(damage.drop_timing),
}
SCENARIOS = {**BASE_SCENARIOS, **DAMAGED_SCENARIOS}

# Observed from validate_run_artifacts.py at benchflow 17a3573b on the directories SCENARIOS builds.
VALIDATOR_VERDICTS: dict[str, tuple[bool, frozenset[str]]] = {
    "healthy_pass": (True, frozenset([])),
    "healthy_fail": (True, frozenset([])),
    "healthy_timeout": (True, frozenset([])),
    "partial_timeout": (True, frozenset([])),
    "openhands_pass": (True, frozenset([])),
    "codex_pass": (True, frozenset([])),
    "pi_pass": (True, frozenset([])),
    "gemini_daytona": (True, frozenset([])),
    "with_skill_openhands": (True, frozenset([])),
    "with_skill_claude": (True, frozenset([])),
    "with_skill_codex": (True, frozenset([])),
    "with_skill_gemini": (True, frozenset([])),
    "with_skill_never_loaded": (True, frozenset([])),
    "no_skill_with_global_catalog": (True, frozenset([])),
    "no_skill_loads_task_skill": (True, frozenset([])),
    "docker_startup_failure": (
        False,
        frozenset(
            [
                "<run>/results.jsonl:1: missing non-empty messages or prompt+completion",
                "<run>/results.jsonl:1: no assistant message",
                "<run>/trajectory/acp_trajectory.jsonl: empty JSONL",
                "<run>/trajectory/acp_trajectory.jsonl: no agent-side events",
                "missing or zero token usage in result metadata",
                "missing or zero tool usage metadata",
                "missing required artifact: <run>/trajectory/llm_trajectory.jsonl",
                "missing verifier reward/score",
                "result carries infra/provider error markers",
            ]
        ),
    ),
    "missing_api_key": (
        False,
        frozenset(
            [
                "<run>/results.jsonl:1: missing non-empty messages or prompt+completion",
                "<run>/results.jsonl:1: no assistant message",
                "<run>/trajectory/llm_trajectory.jsonl: no provider token usage in response bodies",
                "missing or zero token usage in result metadata",
                "missing or zero tool usage metadata",
                "missing verifier reward/score",
                "result carries infra/provider error markers",
            ]
        ),
    ),
    "verifier_crash": (False, frozenset(["missing verifier reward/score"])),
    "idle_timeout": (True, frozenset([])),
    "verifier_timeout": (False, frozenset(["missing verifier reward/score"])),
    "oracle_run": (
        False,
        frozenset(
            [
                "<run>/results.jsonl:1: healthy rollout marked training_ready=false",
                "<run>/results.jsonl:1: missing non-empty messages or prompt+completion",
                "<run>/results.jsonl:1: no assistant message",
                "missing or zero token usage in result metadata",
                "missing or zero tool usage metadata",
                "missing required artifact: <run>/trajectory/llm_trajectory.jsonl",
            ]
        ),
    ),
    "no_llm_trajectory": (
        False,
        frozenset(["missing required artifact: <run>/trajectory/llm_trajectory.jsonl"]),
    ),
    "no_acp_trajectory": (
        False,
        frozenset(["missing required artifact: <run>/trajectory/acp_trajectory.jsonl"]),
    ),
    "no_results_row": (False, frozenset(["missing required artifact: <run>/results.jsonl"])),
    "truncated_llm_line": (
        False,
        frozenset(
            [
                "<run>/results.jsonl:1: results exchange indices [0, "
                "1, 2, 3] != successful LLM exchange indices [0, 1, 2]",
                "<run>/results.jsonl:1: results trajectory steps 4 != successful LLM responses 3",
                "<run>/trajectory/llm_trajectory.jsonl:2: JSON parse error: Expecting value",
            ]
        ),
    ),
    "usage_stripped": (
        False,
        frozenset(
            [
                "<run>/trajectory/llm_trajectory.jsonl: completed "
                "responses with usage 3 < completed responses 4"
            ]
        ),
    ),
    "healthy_marked_unready": (
        False,
        frozenset(
            [
                "<run>/results.jsonl:1: healthy rollout marked training_ready=false",
                "<run>/results.jsonl:1: non-training-ready row lacks error payload",
                "<run>/results.jsonl:1: non-training-ready row lacks training_ready_reason",
            ]
        ),
    ),
    "timeout_marked_ready": (
        False,
        frozenset(
            [
                "<run>/results.jsonl:1: terminal errored/partial "
                "rollout marked training_ready=true",
                "<run>/results.jsonl:1: training_ready row carries non-null error",
                "<run>/results.jsonl:1: training_ready row has non-null training_ready_reason",
                "<run>/results.jsonl:1: training_ready row is not completed",
                "<run>/results.jsonl:1: unexpected stop_condition for training-ready row",
            ]
        ),
    ),
    "reasoning_in_message": (
        False,
        frozenset(["<run>/results.jsonl:1: messages[1] has banned keys: reasoning_content"]),
    ),
    "gold_in_row": (False, frozenset(["<run>/results.jsonl:1: banned leakage keys present: gold"])),
    "task_mismatch": (
        False,
        frozenset(["<run>/results.jsonl:1: task mismatch result='csv-dedupe' row='another-task'"]),
    ),
    "zero_tool_calls": (False, frozenset(["missing or zero tool usage metadata"])),
    "step_dropped": (
        False,
        frozenset(
            [
                "<run>/results.jsonl:1: results exchange indices [0, "
                "1, 2] != successful LLM exchange indices [0, 1, 2, 3]",
                "<run>/results.jsonl:1: results trajectory steps 3 != successful LLM responses 4",
            ]
        ),
    ),
    "no_reward": (False, frozenset(["missing verifier reward/score"])),
    "no_timing": (False, frozenset(["missing timing metadata"])),
}


def observe(validator: Path, jobs: Path) -> dict[str, tuple[bool, list[str]]]:
    """Run benchflow's validator on every scenario (by hand: it lives outside this repository)."""
    out = {}
    for name, build in SCENARIOS.items():
        run_dir = build(jobs / name)
        report = subprocess.run(
            [sys.executable, str(validator), str(run_dir), "--json"], capture_output=True, text=True
        )
        rollout = json.loads(report.stdout)["rollouts"][0]
        issues = sorted(issue.replace(str(run_dir), "<run>") for issue in rollout["issues"])
        out[name] = (rollout["healthy"], issues)
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, (healthy, issues) in observe(Path(sys.argv[1]), Path(tmp)).items():
            print(f"    {name!r}: ({healthy}, frozenset({issues!r})),")

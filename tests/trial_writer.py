"""benchflow jobs trees written the way today's benchflow writes them, for solve rates (`lineage
rates`).

Each function mirrors one benchflow writer and is named after it; the files, their keys and their
order are the writer's, the code is ours (docs/benchflow-formats.md §6.1):

- `write_trial`: one trial folder `<jobs_dir>/<job>/<task>__<8 hex>/`, as
  `rollout/_results._write_config` and `_build_rollout_result` (benchflow e0b5e2f6) leave it:
  config.json, result.json (its keys in the writer's order; the fields no solve rate reads left
  out), timing.json, prompts.json and trajectory/acp_trajectory.jsonl;
- `Evaluation`: an Evaluation's job folder (evaluation.py @ 8915455a): evaluation.json when it
  starts, a trial per task, a retry of a task in the same folder, summary.json when it ends;
- `run_matrix_eval`: `bench eval run --matrix M --trials N --jobs-dir R`
  (cli/eval_artifacts.run_matrix_eval @ e0b5e2f6): one Evaluation per alias and trial in
  `R/<alias>/trial-{t:02d}/`, and `R/matrix-summary.json`;
- `run_batch`: a `bf.run_batch` folder: trials side by side, no evaluation.json or summary.json, so
  each is a sample of its own.

The attempts of a task in one Evaluation are told apart by result.json's modification time (the
newest wins among scored ones, `_utils/result_paths.attempt_rank` @ 2381cf03); a test sets it with
`mtime=` so the order never depends on the file system's clock.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

COMMIT = "e0b5e2f6"
STARTED = datetime(2026, 11, 3, 9, 0, 0, 250000)  # str(datetime.now()): naive local time
PROMPT = "Deduplicate the rows of /app/data.csv and write /app/out.csv."
#: An agent that worked: the prompt, a thought, a tool call and its answer (ACP session updates).
WORKED = [
    {"type": "user_message", "text": PROMPT},
    {"type": "agent_thought", "text": "Read the file first."},
    {"type": "tool_call", "title": "cat /app/data.csv", "status": "completed"},
    {"type": "agent_message", "text": "Done."},
]
#: An agent whose integration broke: after the prompt, only a harness shim's stderr as a thought.
DID_NOTHING = [
    {"type": "user_message", "text": PROMPT},
    {"type": "agent_thought", "text": "[openclaw stderr] Node.js v22+ is required"},
]


@dataclass
class Trial:
    """One rollout of a task: who ran it and how it ended."""

    task: str
    agent: str = "claude-agent-acp"
    model: str | None = "claude-sonnet-4-5"
    reward: float | None = 1.0
    error: str | None = None
    error_category: str | None = None
    verifier_error: str | None = None
    skill_mode: str = "no-skill"
    events: list[dict[str, Any]] = field(default_factory=lambda: list(WORKED))
    n_output_tokens: int | None = 250
    #: result.json fields some writers add: `integration_failure_info` (diagnostics), `assessment`
    #: (embodied tasks), `scoring` (integrated review), `purpose` (a reviewer run).
    extra: dict[str, Any] = field(default_factory=dict)
    #: config.json fields some runners add (`task_variant` of an oracle or empty-solution copy).
    config: dict[str, Any] = field(default_factory=dict)
    #: result.json's modification time, seconds since the epoch (None: when it was written).
    mtime: float | None = None


def _dump(path: Path, payload: Any) -> None:
    """`review.persistence.write_json_atomic`: indent 2, keys in insertion order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2))


def write_trial(job_dir: Path, trial: Trial, *, started: datetime = STARTED) -> Path:
    """`_write_config` then `_build_rollout_result`: the trial folder, named `<task>__<8 hex>`."""
    rollout_name = f"{trial.task}__{uuid.uuid4().hex[:8]}"
    folder = job_dir / rollout_name
    finished = started + timedelta(seconds=95.5)
    skills = {"skill_mode": trial.skill_mode, "skill_source": "none"}
    _dump(
        folder / "config.json",
        {
            "task_path": trial.task,
            "agent": trial.agent,
            "model": trial.model,
            "environment": "docker",
            **skills,
            "timeout_sec": 1800,
            "started_at": str(started),
            "agent_env": {},
            **trial.config,
        },
    )
    tool_calls = sum(e.get("type") == "tool_call" for e in trial.events)
    prompts = sum(e.get("type") == "user_message" for e in trial.events)
    (folder / "trajectory").mkdir(parents=True, exist_ok=True)
    (folder / "trajectory" / "acp_trajectory.jsonl").write_text(
        "".join(json.dumps(event) + "\n" for event in trial.events)
    )
    timing = {"agent_execution": 60.2, "verifier": 20.1, "total": 95.5}
    (folder / "timing.json").write_text(json.dumps(timing, indent=2))
    (folder / "prompts.json").write_text(json.dumps([PROMPT] * prompts, indent=2))
    result = {
        "task_name": trial.task,
        "rollout_name": rollout_name,
        "rewards": None if trial.reward is None else {"reward": trial.reward},
        "agent": trial.agent,
        "agent_name": trial.agent,
        "model": trial.model,
        **skills,
        "n_tool_calls": tool_calls,
        "n_skill_invocations": 0,
        "n_prompts": prompts,
        "agent_result": {
            "n_tool_calls": tool_calls,
            "n_prompts": prompts,
            "n_input_tokens": 1200,
            "n_output_tokens": trial.n_output_tokens,
            "cost_usd": None,
            "usage_source": "unavailable",
        },
        "error": trial.error,
        "error_category": trial.error_category,
        "verifier_error": trial.verifier_error,
        "verifier_error_category": None,
        "export_error": None,
        "partial_trajectory": False,
        "trajectory_source": "acp",
        "started_at": str(started),
        "finished_at": str(finished),
        "timing": timing,
        "sandbox_id": None,
        **trial.extra,
    }
    _dump(folder / "result.json", result)
    if trial.mtime is not None:
        os.utime(folder / "result.json", (trial.mtime, trial.mtime))
    return folder


@dataclass
class Evaluation:
    """An Evaluation's job folder: evaluation.json at start, the trials (retries in the same
    folder), summary.json at the end."""

    jobs_dir: Path
    job_name: str = "2026-11-03__09-00-00"

    @property
    def job_dir(self) -> Path:
        return self.jobs_dir / self.job_name

    def start(self) -> Evaluation:
        _dump(self.job_dir / "evaluation.json", {"job_name": self.job_name, "status": "running"})
        return self

    def run(self, trial: Trial) -> Path:
        return write_trial(self.job_dir, trial)

    def finish(self) -> Path:
        """summary.json (its solve_rates block is not what `bench eval metrics` prints, so the
        importer never reads it: only that it exists)."""
        _dump(self.job_dir / "summary.json", {"job_name": self.job_name, "status": "completed"})
        return self.job_dir


def evaluation(jobs_dir: Path, trials: list[Trial], job_name: str | None = None) -> Path:
    """One whole Evaluation of `trials` (a task listed twice is retried in the same folder)."""
    job = Evaluation(jobs_dir, job_name or Evaluation.job_name).start()
    for trial in trials:
        job.run(trial)
    return job.finish()


def run_batch(jobs_dir: Path, job_name: str, trials: list[Trial]) -> Path:
    """A `bf.run_batch` folder: independent rollouts side by side, no job records."""
    for trial in trials:
        write_trial(jobs_dir / job_name, trial)
    return jobs_dir / job_name


def run_matrix_eval(
    root: Path, models: dict[str, list[list[Trial]]], *, job_name: str | None = None
) -> Path:
    """`--matrix --trials N`: for each alias (in order) and trial t, an Evaluation whose jobs dir is
    `root/<alias>/trial-{t:02d}`, its job folder named by its start time unless `job_name` is
    given; `models[alias][t - 1]` are the rollouts of trial t. Then matrix-summary.json."""
    runs = []
    for index, (alias, per_trial) in enumerate(models.items()):
        for t, trials in enumerate(per_trial, start=1):
            trial_dir = root / alias / f"trial-{t:02d}"
            stamp = STARTED + timedelta(minutes=10 * index, seconds=t)
            name = job_name or stamp.strftime("%Y-%m-%d__%H-%M-%S")
            job_dir = evaluation(trial_dir, trials, name)
            _dump(trial_dir / "summary.json", json.loads((job_dir / "summary.json").read_text()))
            runs.append({"alias": alias, "trial": t, "jobs_dir": str(trial_dir)})
    (root / "matrix-summary.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "matrix": "models.yaml",
                "trials": max(len(per_trial) for per_trial in models.values()),
                "runs": runs,
            },
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    return root

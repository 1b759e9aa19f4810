"""A benchflow trial folder as benchflow's solve rates read it: `run.sample_observed`.

`bench eval metrics <dir>` (`bf.load_job(dir).solve_rates()`, jobs.py @ a4e694bd) counts every
trial folder under `dir` as one sample of its task, with four exceptions, each of which reads
something the other facts do not keep (docs/benchflow-formats.md §6.1):

- attempts: in an Evaluation job folder (one holding `evaluation.json` or `summary.json`), a task's
  trial folders with the same agent and model are attempts of one trial, and only the best counts:
  a scored one first, then the one whose result.json was modified last (`attempt_rank`,
  _utils/result_paths.py @ 2381cf03). So the folder, whether it is an Evaluation's, and
  result.json's modification time are recorded;
- controls: an oracle or empty/nop run (`Trial.control`) checks the task, not an agent;
- withheld rewards: a declared outcome assessment that is not `verified`/`failed`
  (`assessment_withholds_score`, _utils/scoring.py @ bf6e8412), or an agent whose integration
  broke: stored as `integration_failure_info`, or found on read in its trajectory
  (`integration_health.diagnose_trial_dir` @ 4fd2bc83): a prompt, then no tool call, no message
  with text, no thought but a harness shim's diagnostic, and no output tokens;
- reviewer runs (`purpose: reviewer`) are not trials.

What `bench eval run --matrix --trials N` adds is the place: `<jobs-dir>/<alias>/trial-NN/<job>/`
(cli/eval_artifacts.run_matrix_eval @ e0b5e2f6), so the trial number and the alias are read from the
folders above the job folder. Only names and file existence are read above the trial folder, never
contents.

The detector's cause (auth, install, ...) reads the agent's logs; only whether the reward is
withheld matters to a solve rate, so the logs are not read. benchflow follows links; this reader
never does, so a trajectory behind a link out of the trial folder is not judged.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...domain import facts as f
from ...domain.application import Entry
from ...domain.facts.fact_base import MAX_COUNT
from ..rundir import RunFolder
from .benchflow_staged.staged_import import containment_for
from .fields import build
from .plan import RunPlan
from .run_evidence import MAX_LINE_BYTES

#: Files an Evaluation (or a branch job) writes in its job folder: where they are, a task's trials
#: are attempts of one trial.
JOB_RECORDS = ("evaluation.json", "summary.json")
#: The folder `--matrix --trials` writes per trial (`trial-{t:02d}`), above the job folder.
TRIAL_FOLDER = re.compile(r"trial-(\d+)")
TRAJECTORIES = ("trajectory/acp_trajectory.jsonl", "agent/acp_trajectory.jsonl")
EMPTY_AGENTS = frozenset({"nop", "noop", "empty"})
#: Agents and trajectory events the detector never judges (integration_health @ 4fd2bc83).
CONTROL_AGENTS = frozenset({"oracle", "nop", "empty"})
CONTROL_EVENTS = frozenset({"oracle", "nop"})
ASSESSMENT_STATUSES = frozenset({"pending", "verified", "failed", "unassessable"})
#: A harness shim's diagnostic that reaches the trajectory as a thought ("[openclaw stderr] ...").
DIAGNOSTIC_THOUGHT = re.compile(r"^\s*\[[\w .-]*(?:stderr|shim)[\w .-]*\]", re.I)


def control_of(task: str, agent: Any, model: Any, variant: str) -> str | None:
    """`oracle` or `empty` for a control run, None for an agent run (`Trial.control`)."""
    if variant.startswith("oracle"):
        return "oracle"
    if variant.startswith("empty"):
        return "empty"
    if task.endswith("__e"):
        return "empty"
    if task.endswith("__o"):
        return "oracle"
    name = str(agent or "").strip().lower()
    if name == "oracle":
        return "oracle"
    if name in EMPTY_AGENTS and not model:
        return "empty"
    return None


def assessment_status(result: Mapping[str, Any]) -> str | None:
    """The declared outcome assessment's status, or None: an unknown value is `unassessable`, so it
    never lets a reward count."""
    assessment = result.get("assessment")
    if assessment is None:
        return "pending" if result.get("status") == "awaiting_assessment" else None
    status = assessment.get("status") if isinstance(assessment, Mapping) else assessment
    return status if isinstance(status, str) and status in ASSESSMENT_STATUSES else "unassessable"


def reward_of(rewards: Any) -> float | None:
    """`RolloutResult.reward`: `rewards["reward"]` as a float; None when absent or not finite."""
    if not isinstance(rewards, Mapping) or not rewards:
        return None
    value = rewards.get("reward")
    if isinstance(value, (bool, int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if math.isfinite(value) else None


def _text(event: Mapping[str, Any]) -> str:
    text = event.get("text")
    if isinstance(text, str):
        return text
    content = event.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping) and isinstance(content.get("text"), str):
        return str(content["text"])
    return ""


@dataclass
class Activity:
    """What an ACP trajectory shows of the agent, read line by line."""

    events: int = 0
    truncated: bool = False
    control: bool = False
    prompt: bool = False
    tool_calls: int = 0
    messages: int = 0
    thoughts: int = 0

    def add(self, event: dict[str, Any]) -> None:
        self.events += 1
        kind = event.get("type")
        if kind in CONTROL_EVENTS:
            self.control = True
        if kind in ("user_message", "user_message_chunk"):
            self.prompt = True
        elif kind in ("tool_call", "tool_call_update"):
            self.tool_calls += 1
        elif kind in ("agent_message", "agent_message_chunk") and _text(event).strip():
            self.messages += 1
        elif kind in ("agent_thought", "agent_thought_chunk") and _text(event).strip():
            self.thoughts += not DIAGNOSTIC_THOUGHT.match(_text(event))


def read_activity(path: Path) -> Activity | None:
    """The trajectory's events, as benchflow reads them (lines split as `str.splitlines` splits,
    bytes that are not UTF-8 replaced, a line that does not parse marks it truncated); None when it
    cannot be read or a line nests too deep to parse (benchflow then judges nothing)."""
    activity = Activity()
    with open(path, "rb") as handle:
        while line := handle.readline(MAX_LINE_BYTES + 1):
            if len(line) > MAX_LINE_BYTES:  # never held whole: a line that does not parse
                activity.truncated = True
                while line and not line.endswith(b"\n"):
                    line = handle.readline(MAX_LINE_BYTES)
                continue
            for piece in line.decode("utf-8", errors="replace").splitlines():
                if not piece.strip():
                    continue
                try:
                    event = json.loads(piece)
                except RecursionError:
                    return None
                except ValueError:
                    activity.truncated = True
                    continue
                if isinstance(event, dict):
                    activity.add(event)
    return activity


def _trajectory(folder: RunFolder) -> Path | None:
    for relative in TRAJECTORIES:
        path = folder.root / relative
        if path.is_file():
            return path if folder.contains(path) else None
    return None


def judged(result: Mapping[str, Any]) -> bool:
    """Whether the detector looks at this trial at all: a task run (not a reviewer's) that did not
    fail with an error other than a timeout, whose trajectory is benchflow's own capture, of an
    agent that is not a control."""
    if result.get("purpose") not in (None, "task"):
        return False
    if result.get("error") and result.get("error_category") not in (
        None,
        "timeout",
        "idle_timeout",
    ):
        return False
    if result.get("trajectory_source") not in (None, "acp", "partial_acp"):
        return False
    return str(result.get("agent") or "").strip().lower() not in CONTROL_AGENTS


def idle(activity: Activity, result: Mapping[str, Any]) -> bool:
    """Whether a trajectory shows the agent did nothing after the prompt (`diagnose`)."""
    if (not activity.events and not activity.truncated) or activity.control:
        return False
    prompt_sent = (_int(result.get("n_prompts")) or 0) > 0
    if not (activity.prompt or prompt_sent or activity.truncated):
        return False
    agent_result = result.get("agent_result")
    usage = agent_result if isinstance(agent_result, Mapping) else {}
    tokens = _int(usage.get("n_output_tokens"))
    if tokens is None:
        tokens = _int(result.get("n_output_tokens"))
    tool_calls = (_int(result.get("n_tool_calls")) or 0) + activity.tool_calls
    return not (tool_calls or activity.messages or activity.thoughts or (tokens or 0) > 0)


def did_nothing(folder: RunFolder, result: Mapping[str, Any]) -> bool:
    """Whether benchflow's read-time detector finds that the agent did nothing after the prompt
    (`diagnose_trial_dir`): then its reward is withheld."""
    if not judged(result):
        return False
    path = _trajectory(folder)
    try:
        activity = read_activity(path) if path is not None else None
    except OSError:
        activity = None
    return activity is not None and idle(activity, result)


def _legacy(result: dict[str, Any]) -> dict[str, Any]:
    """`_normalize_legacy`: a top-level `reward` when `rewards` is null, `task_id` for a missing
    `task_name`."""
    data = dict(result)
    if data.get("rewards") is None and isinstance(data.get("reward"), (int, float)):
        data["rewards"] = {"reward": float(data["reward"])}
    if not data.get("task_name"):
        data["task_name"] = data.get("task_id") or ""
    return data


def _placement(path: Path) -> dict[str, Any]:
    job_dir = Path(os.path.realpath(path)).parent
    match = TRIAL_FOLDER.fullmatch(job_dir.parent.name)
    number = int(match.group(1)) if match and len(match.group(1)) <= 9 else None
    return {
        "job_dir": str(job_dir),
        "evaluation_job": any((job_dir / name).is_file() for name in JOB_RECORDS),
        "trial_number": number if number is not None and number <= MAX_COUNT else None,
        "alias": (job_dir.parent.parent.name or None) if number is not None else None,
    }


def read_sample(path: Path, key: str) -> f.SampleObserved | None:
    """The trial folder at `path` as benchflow's solve rates read it; None without a result.json
    object (benchflow skips such a folder)."""
    folder = RunFolder(path, containment_for(path))
    found = folder.resolve("result.json")
    raw = folder.read_json("result.json") if found is not None else None
    if found is None or not isinstance(raw, dict):
        return None
    result = _legacy(raw)
    config = folder.read_json("config.json")
    config = config if isinstance(config, dict) else {}
    agent_result = result.get("agent_result")
    merged = {**(agent_result if isinstance(agent_result, dict) else {}), **result}
    task, agent, model = str(result["task_name"]), merged.get("agent", ""), merged.get("model")
    variant = str(config.get("task_variant") or result.get("task_variant") or "")
    control = control_of(task, agent, model, variant)
    reward = reward_of(result.get("rewards"))
    failure = None
    if isinstance(result.get("integration_failure_info"), Mapping):
        failure = "recorded"
    elif (
        control is None
        and not merged.get("n_tool_calls")
        and reward is not None
        and did_nothing(folder, result)
    ):
        failure = "detected"
    scoring = merged.get("scoring")
    passed = (
        scoring.get("passed")
        if isinstance(scoring, Mapping) and scoring.get("status") == "complete"
        else None
    )
    return build(
        f.SampleObserved,
        str(found),
        run=key,
        **_placement(path),
        result_mtime=os.stat(found).st_mtime,
        task=task,
        agent="" if agent is None else str(agent),
        model=None if model is None else str(model),
        control=control,
        purpose=result.get("purpose") if isinstance(result.get("purpose"), str) else None,
        reward=reward,
        passed=passed if isinstance(passed, bool) else None,
        assessment=assessment_status(result),
        integration_failure=failure,
    )


def add_sample(plan: RunPlan) -> None:
    """The plan with its trial folder's `run.sample_observed` last, at the run's latest time."""
    sample = read_sample(plan.path, plan.key)
    if sample is None:
        return
    when = max((e.occurred_at for e in plan.entries if e.occurred_at is not None), default=None)
    plan.entries.append(Entry(sample, when))

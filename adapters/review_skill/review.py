"""The experiment-review skill's review of one rollout directory, read once and recorded at import.

`read_rollout` reads the files the skill's judges look at (bounded and contained like every run
file); `review_rollout` runs the three judges over them: the validator's artifact contract, the
reward-hacking scan and the skill-catalog recovery, plus the capability-attribution traces SKILL.md
asks for. What they find goes into the run's `run.evidence_observed` fact, so the audit judges from
the log alone.
"""

from __future__ import annotations

import os
from pathlib import PurePosixPath
from typing import Any

from ...domain.errors import InvalidInput
from ...domain.facts.review_facts import ReviewObservation
from .. import rundir
from ..rundir import NOTHING_APPENDED, RunFolder, require_regular
from .artifact_contract import RULES, check_rollout, is_oracle
from .fidelity import find_fidelity_problems
from .review_input import ACP, CONFIG_NAMES, LLM, RESULTS, Jsonl, Rollout
from .reward_hacking import find_reward_hacks
from .skill_catalog import review_skills
from .task_skills import find_task_skills

#: A trajectory this much larger than a lineage JSON file is not reviewed: the run is unhealthy, and
#: says so.
TRAJECTORY_CAP_FACTOR = 16
SKILL_MODES = {
    "with-skill": "with-skill",
    "with_skills": "with-skill",
    "with-skills": "with-skill",
    "no-skill": "no-skill",
    "no_skills": "no-skill",
    "no-skills": "no-skill",
    "without_skills": "no-skill",
    "self-gen": "self-gen",
}


def _read_jsonl(folder: RunFolder, name: str) -> Jsonl:
    path = folder.resolve(name)
    if path is None:
        return Jsonl(name)
    require_regular(path)
    cap = rundir.MAX_JSON_BYTES * TRAJECTORY_CAP_FACTOR
    try:
        size = os.stat(path).st_size
        if size > cap:
            return Jsonl(name, True, (), ((1, f"{size} bytes, over the {cap}-byte review cap"),))
        with open(path, "rb") as handle:
            data = handle.read(cap + 1)
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read ({exc.strerror})", hint=NOTHING_APPENDED
        ) from None
    return Jsonl.parse(name, data.decode("utf-8", errors="replace"))


def _read_object(folder: RunFolder, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """A JSON object file, or why it is not one (a missing file is (None, None))."""
    if folder.resolve(name) is None:
        return None, None
    try:
        value = folder.read_json(name)
    except InvalidInput as exc:
        return None, str(exc)  # the reader's own message names the file and what is wrong
    if not isinstance(value, dict):
        return None, f"{name}: expected a JSON object"
    return value, None


def _first(documents: list[dict[str, Any] | None], *keys: str) -> Any:
    for document in documents:
        for key in keys:
            if document is not None and document.get(key) not in (None, ""):
                return document[key]
    return None


def read_rollout(folder: RunFolder) -> Rollout:
    """The review inputs of the rollout directory `folder`."""
    result, result_error = _read_object(folder, "result.json")
    if result is None and result_error is None:
        result_error = "result.json: missing"
    config, config_name = None, None
    for name in CONFIG_NAMES:
        config, _ = _read_object(folder, name)
        if config is not None:
            config_name = name
            break
    task = _first([result, config], "task_name", "task_id")
    if task is None and config is not None and isinstance(config.get("task_path"), str):
        task = PurePosixPath(config["task_path"]).name or None
    mode = _first([config, result], "skill_mode")
    named = find_task_skills([(config_name or "config", config), ("result.json", result)])
    return Rollout(
        result=result,
        result_error=result_error,
        config=config,
        config_name=config_name,
        acp=_read_jsonl(folder, ACP),
        llm=_read_jsonl(folder, LLM),
        results=_read_jsonl(folder, RESULTS),
        task=str(task) if task is not None else None,
        harness=_harness(config, result),
        skill_mode=SKILL_MODES.get(str(mode).strip().lower()) if mode is not None else None,
        task_skills=named.names if named else (),
        task_skills_source=named.source if named else None,
        task_skills_from=named.origin if named else None,
    )


def _harness(config: dict[str, Any] | None, result: dict[str, Any] | None) -> str | None:
    name = _first([config, result], "harness", "agent", "agent_name")
    return str(name) if name is not None else None


def review_rollout(rollout: Rollout) -> ReviewObservation:
    """Everything the skill's judges find in the rollout, each observation naming its file and
    line."""
    return ReviewObservation(
        rules=RULES,
        oracle=is_oracle(rollout.result or {}, rollout.config),
        issues=check_rollout(rollout),
        hacks=find_reward_hacks(rollout),
        skills=review_skills(rollout),
        fidelity=find_fidelity_problems(rollout),
    )

"""A rollout folder as the experiment-review skill's validator and evals lay it out.

`result.json` beside `run_config.json` (or `config.json` / `metadata.json`) and `trajectory/`, with
none of benchflow's lineage files: what the validator accepts and the skill's eval fixtures are. Its
identity comes from the configuration (`task_id`, `harness`, `model`, `skill_mode`, `trial_id`), its
outcome from result.json (`reward` or `rewards.reward`, `status`, `error`), and its evidence is the
skill's review of the folder.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from ...domain import facts as f
from ...domain.application import Entry
from ..review_skill.review import read_rollout, review_rollout
from ..review_skill.review_input import CONFIG_NAMES, Rollout
from ..rundir import RunFolder, parse_time
from .fields import build
from .keys import run_key
from .plan import RunPlan

#: result.json `status` words and the run.finished status each means.
STATUSES = {
    "pass": "completed",
    "fail": "completed",
    "completed": "completed",
    "timeout": "timeout",
}


def looks_like_rollout_folder(names: set[str], result: object) -> bool:
    """The validator's unit: a result.json object with a run configuration or a trajectory beside
    it."""
    return isinstance(result, dict) and bool(names & {*CONFIG_NAMES, "trajectory"})


def _time(value: Any, where: str) -> datetime | None:
    return parse_time(value, where) if isinstance(value, str) and value else None


def _times(result: dict[str, Any], where: str) -> tuple[datetime | None, datetime | None]:
    given = result.get("timing")
    timing = given if isinstance(given, dict) else {}
    started = _time(result.get("started_at") or timing.get("started_at"), where)
    finished = _time(result.get("finished_at") or timing.get("ended_at"), where)
    return started, finished


def _reward(result: dict[str, Any]) -> Any:
    rewards = result.get("rewards")
    return rewards.get("reward") if isinstance(rewards, dict) else result.get("reward")


def _registration(key: str, rollout: Rollout, where: str) -> f.RunRegistered:
    config = rollout.config or {}
    trial = config.get("trial_id", config.get("trial"))
    return build(
        f.RunRegistered,
        where,
        run=key,
        task=rollout.task or Path(key).name,
        agent=rollout.harness,
        model=config.get("model") or (rollout.result or {}).get("model"),
        skill_mode=rollout.skill_mode,  # read_rollout spelled it in our words already
        sandbox=config.get("sandbox") or config.get("environment"),
        trial=str(trial) if trial is not None else None,
    )


def _outcome(key: str, result: dict[str, Any], where: str) -> list[f.Fact]:
    reward, error = _reward(result), result.get("error")
    facts: list[f.Fact] = []
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        facts.append(build(f.RunScored, where, run=key, reward=float(reward)))
    else:
        why = result.get("verifier_error") or "result.json records no reward"
        facts.append(build(f.RunUnscored, where, run=key, reason=str(why)))
    status = STATUSES.get(str(result.get("status") or "").lower())
    if isinstance(error, str) and error and status != "timeout":
        facts.append(build(f.RunFailed, where, run=key, error=error))
    return facts


def import_rollout_folder(path: Path) -> RunPlan:
    folder = RunFolder(path)
    key = run_key(path)
    rollout = read_rollout(folder)
    where = str(folder.root / (rollout.config_name or "result.json"))
    result = rollout.result or {}
    started, finished = _times(result, str(folder.root / "result.json"))
    status = STATUSES.get(str(result.get("status") or "").lower()) or (
        "failed" if result.get("error") else "completed"
    )
    registration = _registration(key, rollout, where)
    entries = [Entry(registration, started)]
    entries += [Entry(fact, finished or started) for fact in _outcome(key, result, where)]
    entries.append(
        Entry(
            build(
                f.RunFinished,
                where,
                run=key,
                status=status,
                started_at=started.isoformat() if started else None,
                finished_at=finished.isoformat() if finished else None,
                time_zone="recorded" if started else None,
            ),
            finished or started,
        )
    )
    evidence = build(
        f.EvidenceObserved,
        where,
        run=key,
        trial=registration.trial,
        review=review_rollout(rollout),
    )
    entries.append(Entry(evidence, finished or started))
    return RunPlan(key, path, entries)

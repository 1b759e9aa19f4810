"""Harbor trial directories (`result.json` with `trial_name` and `verifier_result`) -> run facts.

A trial is a run with no tree: its registration, its outcome, and how long it took. How Harbor's
rewards, verifier exceptions and times are read: docs/benchflow-formats.md §15 ("Times", "Harbor").
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

from ...domain import facts as f
from ...domain.application import Entry
from ...domain.errors import InvalidInput
from ..rundir import RunFolder, iso, parse_time, read_json_file
from .ctrf import read_ctrf
from .fields import Fields, build
from .keys import run_key
from .plan import RunPlan
from .run_evidence import atif_file, token_usage

PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")
#: Exceptions Harbor's verifier raises (harbor.verifier, and the trial's verifier timeout).
VERIFIER_EXCEPTIONS = frozenset(
    (
        "VerifierTimeoutError",
        "AddTestsDirError",
        "VerifierOutputParseError",
        "RewardParseError",
        "DownloadVerifierDirError",
        "RewardFileNotFoundError",
        "RewardFileEmptyError",
    )
)


def harbor_reward(rewards: Fields) -> float | None:
    """The trial's reward: the `reward` key, else the only value of a one-key dict (Harbor's own
    `Mean` metric reads a one-key dict that way), else none. `VerifierResult.rewards` is a dict of
    any keys: a task's verifier names them."""
    if rewards.raw("reward") is not None:
        return rewards.number("reward", required=True)
    if len(rewards.data) == 1:
        return rewards.number(next(iter(rewards.data)), required=True)
    return None


def outcome(key: str, folder: RunFolder, result: Fields) -> list[f.Fact]:
    """A reward -> `run.scored` with per-test outcomes from `verifier/ctrf.json`; a verifier
    exception (`VERIFIER_EXCEPTIONS`) -> `run.unscored` with `verifier_error` (the verifier failed,
    never a reward merely missing); several keys and none named `reward` -> `run.unscored` keeping
    the values. Any `exception_info` is also a `run.failed` (message, category = exception type)."""
    verifier = result.obj("verifier_result")
    rewards = verifier.obj("rewards") if verifier is not None else None
    exception = result.obj("exception_info")
    reward = harbor_reward(rewards) if rewards is not None else None
    facts: list[f.Fact] = []
    if reward is not None:
        assert rewards is not None
        facts.append(
            build(
                f.RunScored,
                rewards.where(),
                run=key,
                reward=reward,
                rewards=rewards.data,
                tests=read_ctrf(folder, "verifier/ctrf.json"),
            )
        )
    elif exception is not None and exception.string("exception_type") in VERIFIER_EXCEPTIONS:
        kind = exception.text("exception_type")
        message = exception.string("exception_message")
        facts.append(
            build(
                f.RunUnscored,
                exception.where(),
                run=key,
                reason=f"the verifier failed ({kind})",
                verifier_error=f"{kind}: {message}" if message else kind,
                rewards=rewards.data if rewards is not None else None,
            )
        )
    elif rewards is not None and rewards.data:
        facts.append(
            build(
                f.RunUnscored,
                rewards.where(),
                run=key,
                rewards=rewards.data,
                reason=f"the verifier result has several rewards and "
                f"none named 'reward' (keys: {sorted(rewards.data)})",
            )
        )
    elif verifier is not None and exception is None:
        facts.append(
            build(
                f.RunUnscored,
                verifier.where(),
                run=key,
                reason="the verifier result carries no 'reward'",
            )
        )
    if exception is not None:
        message = (
            exception.string("exception_message")
            or exception.string("exception_type")
            or "the trial raised"
        )
        facts.append(
            build(
                f.RunFailed,
                exception.where(),
                run=key,
                error=message,
                category=exception.string("exception_type"),
            )
        )
    return facts


def looks_like_trial(document: object) -> bool:
    """A directory with only `verifier/ctrf.json` is not a trial and is never imported."""
    return isinstance(document, dict) and "trial_name" in document and "verifier_result" in document


def import_harbor_trial(path: Path) -> RunPlan:
    """`run.registered` (task, agent, model, trial), its outcome and `_finish`; the directory Harbor
    recorded in `trial_uri`, when it is a `file://` URI, is a `run.located` of kind `recorded`."""
    path = Path(os.path.abspath(path))
    folder = RunFolder(path)
    key = run_key(path)
    result = Fields(folder.read_json("result.json"), str(path / "result.json"))
    config_doc = folder.read_json("config.json")
    config = (
        Fields(config_doc, str(path / "config.json"))
        if config_doc is not None
        else result.obj("config")
    )
    parts = [config.obj(name) if config is not None else None for name in _CONFIG_PARTS]
    uri = result.string("trial_uri")
    recorded_dir = unquote(urlparse(uri).path) if uri and uri.startswith("file://") else None
    started = _time(result, "started_at")
    finished = _time(result, "finished_at")
    registered = _registration(key, folder, result, parts, config_doc is not None)
    entries = [Entry(registered, started)]
    entries.extend(Entry(fact, finished or started) for fact in outcome(key, folder, result))
    if finished is not None:
        entries.extend(_finish(key, result, started, finished, atif_file(folder)))
    return RunPlan(key, path, entries, recorded_dir=recorded_dir)


def _time(doc: Fields, field: str) -> datetime | None:
    return parse_time(doc.raw(field), doc.where(field)) if doc.raw(field) else None


_CONFIG_PARTS = ("agent", "task", "environment")


def _registration(
    key: str, folder: RunFolder, result: Fields, parts: list[Fields | None], own_config: bool
) -> f.RunRegistered:
    agent, task, environment = parts
    return build(
        f.RunRegistered,
        result.where(),
        run=key,
        task=result.text("task_name"),
        task_path=task.string("path") if task else None,
        agent=agent.string("name") if agent else None,
        model=agent.string("model_name") if agent else None,
        trial=result.string("trial_name"),
        sandbox=environment.string("type") if environment else None,
        config_sha256=folder.sha256("config.json") if own_config else None,
    )


def _timing(result: Fields, started: datetime | None, finished: datetime) -> dict[str, float]:
    """Seconds per phase that has both ends, and the whole trial's when it has a start."""
    timing = {}
    for phase in PHASES:
        span = result.obj(phase)
        if span is not None and span.raw("started_at") and span.raw("finished_at"):
            begin = parse_time(span.raw("started_at"), span.where("started_at"))
            end = parse_time(span.raw("finished_at"), span.where("finished_at"))
            timing[phase] = round((end - begin).total_seconds(), 3)
    if started is not None:
        timing["total"] = round((finished - started).total_seconds(), 3)
    return timing


def _finish(
    key: str,
    result: Fields,
    started: datetime | None,
    finished: datetime,
    atif: f.TrajectoryFile | None,
) -> list[Entry]:
    """The finished trial: its run.finished with timing, and its release-gate evidence (the token
    usage from `agent_result`, and the timing). Harbor writes naive local times (`datetime.now()`):
    they are kept as written (`time_zone: unknown`), and durations come from naive subtraction, so a
    run across a DST change may have a negative or an hour-off one, recorded as written."""
    timing = _timing(result, started, finished)
    finished_fact = build(
        f.RunFinished,
        result.where("finished_at"),
        run=key,
        status="failed" if result.raw("exception_info") is not None else "completed",
        started_at=result.text("started_at").strip() if started else None,
        finished_at=result.text("finished_at").strip(),
        timing=timing,
    )
    # Release-gate evidence: Harbor writes no ACP/LLM trajectory or results.jsonl, so those stay
    # None (not missing).
    total = timing.get("total")
    evidence = build(
        f.EvidenceObserved,
        result.where(),
        run=key,
        token_usage=token_usage(result.obj("agent_result")),
        started_at=iso(started),
        finished_at=iso(finished),
        duration_sec=total if total is not None and total >= 0 else None,
        atif_trajectory=atif,
        folder=".",
    )
    return [Entry(finished_fact, finished), Entry(evidence, finished)]


def still_running(path: Path) -> str | None:
    """Harbor writes result.json as the trial goes and sets finished_at at its end. Discovery has
    read it as one JSON object already (`discovery.read_result`: one that cannot be read is a
    corrupt run, never one still running)."""
    try:
        document = read_json_file(path / "result.json")
    except InvalidInput:
        return None  # changed since discovery read it, over the cap, a special file: refused
    return (
        None
        if isinstance(document, dict) and document.get("finished_at")
        else "its result.json has no finished_at yet"
    )

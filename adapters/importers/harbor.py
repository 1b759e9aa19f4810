"""Harbor trial directories (`result.json` with `trial_name` and `verifier_result`) -> a plain run's facts.

A trial is a run with no tree: `run.registered` (task, agent, model, trial; the directory Harbor recorded in
`trial_uri`, when it is a `file://` URI, is a `run.located` of kind `recorded`), then its outcome: `verifier_result.rewards.reward` ->
`run.scored` with per-test outcomes from `verifier/ctrf.json`; an `exception_info` -> `run.failed`
(message, category = exception type); a verifier result without a reward -> `run.unscored`. `run.finished`
carries the per-phase durations (`environment_setup`, `agent_setup`, `agent_execution`, `verifier`, and
`total`) computed from Harbor's started/finished pairs; `run.evidence_observed` the token usage (`agent_result`)
and timing the release gate checks. Harbor writes naive ISO times; they are taken as UTC.
A directory with only `verifier/ctrf.json` is not a trial and is never imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlparse

from ...domain import facts as f
from ...domain.application import Entry
from ...domain.errors import InvalidInput, MalformedJSON
from .ctrf import read_ctrf
from .evidence import token_usage
from .fields import Fields, build
from .keys import run_key
from .plan import RunPlan
from .rundir import RunFolder, iso, parse_time, read_json_file

PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")


def looks_like_trial(document: object) -> bool:
    return isinstance(document, dict) and "trial_name" in document and "verifier_result" in document


def import_harbor_trial(path: Path) -> RunPlan:
    path = Path(os.path.abspath(path))
    folder = RunFolder(path)
    key = run_key(path)
    result = Fields(folder.read_json("result.json"), str(path / "result.json"))
    config_doc = folder.read_json("config.json")
    config = Fields(config_doc, str(path / "config.json")) if config_doc is not None else result.obj("config")
    agent = config.obj("agent") if config is not None else None
    task = config.obj("task") if config is not None else None
    environment = config.obj("environment") if config is not None else None
    uri = result.string("trial_uri")
    recorded_dir = unquote(urlparse(uri).path) if uri and uri.startswith("file://") else None
    started = parse_time(result.raw("started_at"), result.where("started_at")) if result.raw("started_at") else None
    finished = parse_time(result.raw("finished_at"), result.where("finished_at")) if result.raw("finished_at") else None
    entries = [Entry(build(
        f.RunRegistered, result.where(), run=key, task=result.text("task_name"),
        task_path=task.string("path") if task else None, agent=agent.string("name") if agent else None,
        model=agent.string("model_name") if agent else None, trial=result.string("trial_name"),
        sandbox=environment.string("type") if environment else None,
        config_sha256=folder.sha256("config.json") if config_doc is not None else None), started)]
    when = finished or started
    verifier = result.obj("verifier_result")
    rewards = verifier.obj("rewards") if verifier is not None else None
    exception = result.obj("exception_info")
    if rewards is not None and rewards.raw("reward") is not None:
        entries.append(Entry(build(f.RunScored, rewards.where(), run=key, reward=rewards.number("reward", required=True),
                                   rewards=rewards.data, tests=read_ctrf(folder, "verifier/ctrf.json")), when))
    elif verifier is not None and exception is None:
        entries.append(Entry(build(f.RunUnscored, verifier.where(), run=key,
                                   reason="the verifier result carries no 'reward'"), when))
    if exception is not None:
        message = exception.string("exception_message") or exception.string("exception_type") or "the trial raised"
        entries.append(Entry(build(f.RunFailed, exception.where(), run=key, error=message,
                                   category=exception.string("exception_type")), when))
    if finished is not None:
        timing = {}
        for phase in PHASES:
            span = result.obj(phase)
            if span is not None and span.raw("started_at") and span.raw("finished_at"):
                begin = parse_time(span.raw("started_at"), span.where("started_at"))
                end = parse_time(span.raw("finished_at"), span.where("finished_at"))
                timing[phase] = round((end - begin).total_seconds(), 3)
        if started is not None:
            timing["total"] = round((finished - started).total_seconds(), 3)
        entries.append(Entry(build(f.RunFinished, result.where("finished_at"), run=key,
                                   status="failed" if exception is not None else "completed",
                                   started_at=iso(started), finished_at=iso(finished), timing=timing), finished))
        # Release-gate evidence: Harbor writes no ACP/LLM trajectory or results.jsonl, so those stay None (not missing).
        total = timing.get("total")
        entries.append(Entry(build(f.EvidenceObserved, result.where(), run=key, token_usage=token_usage(result.obj("agent_result")),
                                   started_at=iso(started), finished_at=iso(finished),
                                   duration_sec=total if total is not None and total >= 0 else None), finished))
    return RunPlan(key, path, entries, recorded_dir=recorded_dir)


def still_running(path: Path) -> str | None:
    """Harbor writes result.json as the trial goes and sets finished_at at its end."""
    try:
        document = read_json_file(path / "result.json")
    except MalformedJSON:
        return "its result.json cannot be read yet"
    except InvalidInput:
        return None  # over the cap, or not a regular file: the import refuses it
    return None if isinstance(document, dict) and document.get("finished_at") else "its result.json has no finished_at yet"

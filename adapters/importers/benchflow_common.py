"""What every benchflow run directory says about the run itself: who ran what, and how the run
ended.

Shared by the PR-#1046 and main-line importers, which differ only in how they describe branches.
Registration reads `config.json` first and `result.json` second, because `config.json` is written
when the run starts and never rewritten, while `result.json` appears at the end and a continue-run
patches it (its `model` and `source.cut_point`); so a run imported while in progress and again when
finished registers with the same fields. Times are benchflow's `str(datetime.now())`: naive local
wall-clock times of a machine whose zone nobody recorded, so `run.finished` keeps them as written
with `time_zone: unknown`; only the envelope's `occurred_at`, which orders the log, reads them as
UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, get_args

from ...domain import facts as f
from ...domain.application import Entry
from ...domain.vocabulary import BENCHFLOW_TRAJECTORY_SOURCES, SkillMode
from ..rundir import RunFolder, parse_time
from .ctrf import read_ctrf
from .fields import Fields, build, invalid
from .recording import exchanges_recorded

SKILL_MODES = frozenset(get_args(SkillMode))


@dataclass
class RunFiles:
    """config.json and result.json of one run directory, either of which may be missing."""

    folder: RunFolder
    config: Fields | None
    result: Fields | None

    @classmethod
    def read(cls, folder: RunFolder) -> RunFiles:
        config, result = folder.read_json("config.json"), folder.read_json("result.json")
        return cls(
            folder,
            Fields(config, str(folder.root / "config.json"))
            if config is not None or folder.exists("config.json")
            else None,
            Fields(result, str(folder.root / "result.json"))
            if result is not None or folder.exists("result.json")
            else None,
        )

    def first(self, key: str) -> tuple[Fields, str] | None:
        """The file (config first, then result) that has `key` with a non-null value."""
        for doc in (self.config, self.result):
            if doc is not None and doc.raw(key) is not None:
                return doc, key
        return None

    def string(self, key: str) -> str | None:
        found = self.first(key)
        return found[0].string(key) if found else None

    def time(self, key: str) -> datetime | None:
        found = self.first(key)
        return parse_time(found[0].raw(key), found[0].where(key)) if found else None

    def started_at(self) -> datetime | None:
        if self.result is not None and self.result.raw("started_at") is not None:
            return parse_time(self.result.raw("started_at"), self.result.where("started_at"))
        return self.time("started_at")

    def finished_at(self) -> datetime | None:
        if self.result is None or self.result.raw("finished_at") is None:
            return None
        return parse_time(self.result.raw("finished_at"), self.result.where("finished_at"))

    def written_times(self) -> tuple[str | None, str | None]:
        """started_at and finished_at exactly as written (checked by `started_at()` /
        `finished_at()` first)."""
        self.started_at(), self.finished_at()
        found = (
            (self.result, "started_at")
            if self.result is not None and self.result.raw("started_at") is not None
            else self.first("started_at")
        )
        started = found[0].raw("started_at").strip() if found else None
        finished = self.result.raw("finished_at") if self.result is not None else None
        return started, finished.strip() if isinstance(finished, str) else None

    def source(self) -> Fields | None:
        """The run's `source` provenance block: result.json's if it has one, else config.json's."""
        for doc in (self.result, self.config):
            if doc is not None and doc.raw("source") is not None:
                return doc.obj("source")
        return None


def result_missing(path: Path) -> str | None:
    """Why a benchflow run may still be running, or None: benchflow writes result.json when the run
    is over."""
    return None if (path / "result.json").exists() else "it has no result.json yet"


def registration(
    files: RunFiles,
    key: str,
    *,
    task_fallback: str | None = None,
    sandbox_fallback: str | None = None,
    role: str = "root",
    parent_run: str | None = None,
    source: dict[str, Any] | None = None,
) -> Entry:
    task_path = files.string("task_path")
    task = (
        (PurePosixPath(task_path).name if task_path else None)
        or files.string("task_name")
        or task_fallback
    )
    where = str(files.folder.root / ("config.json" if files.config is not None else "result.json"))
    if not task:
        raise invalid(
            f"{where}: field task_path",
            "the task the run is for (config.json task_path or result.json task_name)",
        )
    skill_mode = files.string("skill_mode")
    if skill_mode is not None and skill_mode not in SKILL_MODES:
        found = files.first("skill_mode")
        assert found is not None
        raise invalid(
            found[0].where("skill_mode"), f"one of {sorted(SKILL_MODES)} or null", skill_mode
        )
    sandbox = files.config.raw("environment") if files.config is not None else None
    fact = build(
        f.RunRegistered,
        where,
        run=key,
        task=task,
        task_path=task_path,
        agent=files.string("agent"),
        model=files.string("model"),
        skill_mode=skill_mode,
        sandbox=sandbox if isinstance(sandbox, str) and sandbox else sandbox_fallback,
        role=role,
        parent_run=parent_run,
        source=source,
        config_sha256=files.folder.sha256("config.json") if files.config is not None else None,
    )
    return Entry(fact, files.started_at())


def outcome(files: RunFiles, key: str) -> list[Entry]:
    """run.scored / run.unscored / run.failed and run.finished from result.json (nothing while it is
    missing)."""
    result = files.result
    if result is None:
        return []
    when = files.finished_at() or files.started_at()
    out: list[Entry] = []
    error, category = result.string("error"), result.string("error_category")
    verifier_error = result.string("verifier_error")
    rewards = result.obj("rewards")
    if rewards is not None and rewards.raw("reward") is not None:
        reward = rewards.number("reward", required=True)
        tests = read_ctrf(files.folder, "verifier/ctrf.json")
        out.append(
            Entry(
                build(
                    f.RunScored,
                    result.where("rewards"),
                    run=key,
                    reward=reward,
                    rewards=rewards.data,
                    tests=tests,
                    verifier_error=verifier_error,
                ),
                when,
            )
        )
    elif rewards is not None:
        out.append(
            Entry(
                build(
                    f.RunUnscored,
                    result.where("rewards"),
                    run=key,
                    verifier_error=verifier_error,
                    rewards=rewards.data or None,
                    reason=f"result.json rewards carry no 'reward' (keys: {sorted(rewards.data)})",
                ),
                when,
            )
        )
    elif verifier_error:
        # The verifier failed (crashed, or timed out: `_verify_rollout` writes "verifier timed out
        # after Ns"), which is an unscored run with a verifier error, also when the agent's session
        # failed too.
        out.append(
            Entry(
                build(
                    f.RunUnscored,
                    result.where("verifier_error"),
                    run=key,
                    reason=verifier_error,
                    verifier_error=verifier_error,
                ),
                when,
            )
        )
    if error:
        out.append(
            Entry(
                build(f.RunFailed, result.where("error"), run=key, error=error, category=category),
                when,
            )
        )
    finished = files.finished_at()
    if finished is not None:
        timing = result.obj("timing")
        trajectory = result.string("trajectory_source")
        if trajectory is not None and trajectory not in BENCHFLOW_TRAJECTORY_SOURCES:
            raise invalid(
                result.where("trajectory_source"),
                f"one of {list(BENCHFLOW_TRAJECTORY_SOURCES)} or null",
                trajectory,
            )
        started_text, finished_text = files.written_times()
        out.append(
            Entry(
                build(
                    f.RunFinished,
                    result.where("finished_at"),
                    run=key,
                    status="failed" if error else "completed",
                    started_at=started_text,
                    finished_at=finished_text,
                    timing={k: timing.number(k) for k in timing.data if timing.raw(k) is not None}
                    if timing
                    else {},
                    trajectory=trajectory,
                    exchanges_recorded=exchanges_recorded(files.folder),
                ),
                finished,
            )
        )
    return out

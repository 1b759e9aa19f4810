"""`import_runs`: discover run directories, turn each into facts, record each run as one batch.

A run is imported whole or not at all: its facts go to `LineageApp.record` in one call, which
appends them in one transaction or raises before writing anything. Every run is read before any is
recorded, so the runs of both skill arms can name a task's skills that no run's own files name
(`batch_skills.infer_batch`). Re-importing appends nothing (every fact is already known); a later
state of a run appends only its new facts. Without `keep_going` the import fails closed: a run
refused while reading (a file that does not parse, a corrupt result.json, a link out) stops it
before anything is recorded, and one refused while recording (a contradiction with the log) stops
it there, the runs before it staying imported (each was its own batch); with it, rejected runs are
reported and the others imported. A store that cannot be reached always stops the import, since no
run could succeed. A run the harness may still be writing (`STILL_RUNNING`: no result.json yet; for
bench eval ablate, no ablation.json; for Harbor, no finished_at) is left out, unread, unless
`unfinished` asks for it: benchflow rewrites tree.json, the stage registry and the lineage files as
the run goes on, so what they show before the end could contradict the finished run (or not parse at
all), and importing it then would be refused. A result.json that exists but cannot be read is never
taken for one being written: discovery calls the run corrupt (`discovery.read_result`) and it is
refused like any run that cannot be read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from ...domain import facts as f
from ...domain.application import Entry, LineageApp, expand
from ...domain.errors import (
    CorruptRunFile,
    IntegrityFailure,
    InvalidInput,
    LineageError,
    StoreUnavailable,
)
from . import benchflow_mainline, harbor
from .batch_skills import infer_batch
from .benchflow_common import result_missing
from .benchflow_staged import staged_import as benchflow_staged
from .discovery import (
    CORRUPT,
    HARBOR,
    MAINLINE,
    ROLLOUT,
    STAGED,
    UNREADABLE,
    RunDir,
    Skipped,
    survey,
)
from .plan import RunPlan
from .rollout_folder import import_rollout_folder
from .sample_reading import add_sample

IMPORTERS: dict[str, Callable[[Path], RunPlan]] = {
    STAGED: benchflow_staged.import_staged_run,
    MAINLINE: benchflow_mainline.import_mainline_run,
    HARBOR: harbor.import_harbor_trial,
    ROLLOUT: import_rollout_folder,
}
#: Layouts whose run directory is a benchflow trial folder, which benchflow's solve rates count:
#: each plan also records what they read of it (`run.sample_observed`, sample_reading.py).
SAMPLED = frozenset({STAGED, MAINLINE})


def unclassified_still_running(path: Path) -> str | None:
    """A directory discovery could not classify (one of its files did not parse, its result.json
    did) may be a benchflow run caught mid-write: it waits while benchflow's signals say so (no
    result.json yet; for bench eval ablate, no ablation.json)."""
    return benchflow_staged.still_running(path)


def finished(path: Path) -> str | None:
    """A run whose result.json exists but cannot be read (`CORRUPT`) is over: it never waits."""
    return None


# Whether the harness may still be writing a run, from which files exist (and, for Harbor,
# result.json's finished_at), before the run's files are parsed.
STILL_RUNNING: dict[str, Callable[[Path], str | None]] = {
    STAGED: benchflow_staged.still_running,
    MAINLINE: result_missing,
    HARBOR: harbor.still_running,
    ROLLOUT: result_missing,
    UNREADABLE: unclassified_still_running,
    CORRUPT: finished,
}
Progress = Callable[[int, int, str], None]


@dataclass
class Rejection:
    path: str
    error: LineageError


@dataclass
class ImportSummary:
    """What an import did, counted by what the store holds: `runs` are distinct runs (a run read
    from several folders, such as copies of one run directory, is one run, merged), each new,
    known with new facts, or already known; `folders` are the run folders read."""

    runs: int = 0
    forks: int = 0
    children: int = 0
    events_appended: int = 0
    runs_new: int = 0  # registered by this import
    runs_updated: int = 0  # known before, with new facts now
    runs_skipped_known: int = 0  # known before, nothing new
    folders: int = 0  # run folders read and recorded
    runs_rejected: int = 0
    runs_unfinished: int = 0  # left out because the harness may still be writing them
    errors: list[Rejection] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)  # folders not read, each with the reason
    # dry run: what would be appended
    facts: list[tuple[f.Fact, datetime | None]] = field(default_factory=list)

    @property
    def corrupt(self) -> list[tuple[str, CorruptRunFile]]:
        """The rejected runs whose result.json exists but cannot be read: (run directory, error)."""
        return [(r.path, r.error) for r in self.errors if isinstance(r.error, CorruptRunFile)]

    @property
    def folders_merged(self) -> int:
        """Folders holding a run another folder of this import also holds."""
        return self.folders - self.runs

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "forks": self.forks,
            "children": self.children,
            "events_appended": self.events_appended,
            "runs_new": self.runs_new,
            "runs_updated": self.runs_updated,
            "runs_skipped_known": self.runs_skipped_known,
            "folders": self.folders,
            "folders_merged": self.folders_merged,
            "runs_rejected": self.runs_rejected,
            "runs_corrupt": len(self.corrupt),
            "runs_unfinished": self.runs_unfinished,
            "folders_skipped": len(self.skipped),
        }


@dataclass
class _Tally:
    """One run's share of the summary, over every folder that holds it."""

    forks: int = 0
    children: int = 0
    appended: int = 0
    registered: bool = False

    def count_into(self, summary: ImportSummary) -> None:
        summary.runs += 1
        summary.forks += self.forks
        summary.children += self.children
        summary.runs_new += self.registered
        summary.runs_updated += not self.registered and self.appended > 0
        summary.runs_skipped_known += self.appended == 0


def in_context(error: LineageError, run: RunDir) -> LineageError:
    """The error with the run it rejected named first (file-level errors already name their
    file)."""
    if isinstance(error, InvalidInput) and str(run.path) in error.message:
        return error
    named = type(error)(f"run {run.key!r} ({run.path}): {error.message}", hint=error.hint)
    named.__cause__ = error
    return named


def _occurred(
    entries: Iterable[Entry], new_facts: tuple[f.Fact, ...]
) -> list[tuple[f.Fact, datetime | None]]:
    when: dict[str, datetime | None] = {}
    for entry in entries:
        for expanded in expand(entry):
            when.setdefault(expanded.fact.model_dump_json(), expanded.occurred_at)
    return [(fact, when.get(fact.model_dump_json())) for fact in new_facts]


class Recording(Protocol):
    """The store the runs are recorded into (`rollout_lineage.bootstrap.Lineage` is one)."""

    @property
    def app(self) -> LineageApp: ...


def _rejection(exc: LineageError | OSError, run: RunDir) -> Rejection:
    if isinstance(exc, OSError):  # a file vanished or is unreadable mid-import
        exc = InvalidInput(f"{exc.filename or run.path}: cannot be read ({exc.strerror or exc})")
    return Rejection(str(run.path), in_context(exc, run))


Read = list[tuple[int, RunDir, RunPlan]]
Rejected = list[tuple[int, Rejection]]


def _read_plans(
    runs: list[RunDir],
    summary: ImportSummary,
    keep_going: bool,
    unfinished: bool,
    progress: Progress | None,
) -> tuple[Read, Rejected]:
    """Each run's plan, in order (with its index); without keep_going, none after the first
    rejected."""
    plans: Read = []
    rejected: Rejected = []
    for done, run in enumerate(runs):
        if progress:
            progress(done, len(runs), run.key)
        why = None if unfinished else STILL_RUNNING[run.kind](run.path)
        if why:
            summary.runs_unfinished += 1
            summary.warnings.append(
                f"{run.path}: left out, the run may still "
                f"be running ({why}); import it once it has "
                "finished, or now with --unfinished"
            )
            continue
        try:
            if run.problem is not None:
                raise run.problem
            plan = IMPORTERS[run.kind](run.path)
            if run.kind in SAMPLED:
                add_sample(plan)
            plans.append((done, run, plan))
        except (StoreUnavailable, IntegrityFailure):
            raise
        except (LineageError, OSError) as exc:
            rejected.append((done, _rejection(exc, run)))
            if not keep_going:
                break
    return plans, rejected


def _record_plans(
    lineage: Recording,
    plans: Read,
    rejected: Rejected,
    summary: ImportSummary,
    dry_run: bool,
    keep_going: bool,
) -> Rejected:
    """Record each plan as one batch; without keep_going, stop at the first refused, as if no later
    run had been read (a later run's read error is then not reported). Counted by run, not by
    folder (`_Tally`); a dry run counts a fact two folders would append once, as recording does."""
    tallies: dict[str, _Tally] = {}
    announced: set[str] = set()
    for done, run, plan in plans:
        try:
            batch = plan.batch()
            recorded = lineage.app.record(batch, dry_run=dry_run)
        except (StoreUnavailable, IntegrityFailure):
            raise
        except (LineageError, OSError) as exc:
            rejected = [r for r in rejected if keep_going or r[0] < done]
            rejected.append((done, _rejection(exc, run)))
            if not keep_going:
                break
            continue
        new_facts = recorded.new_facts
        if dry_run:
            new_facts = tuple(x for x in new_facts if x.model_dump_json() not in announced)
            announced.update(x.model_dump_json() for x in new_facts)
            summary.facts.extend(_occurred(batch, new_facts))
        appended = len(new_facts) if dry_run else recorded.appended
        tally = tallies.setdefault(plan.key, _Tally())
        tally.forks, tally.children = (
            max(tally.forks, plan.forks),
            max(tally.children, plan.children),
        )
        tally.appended += appended
        tally.registered |= any(isinstance(x, f.RunRegistered) for x in new_facts)
        summary.folders += 1
        summary.events_appended += appended
        summary.warnings.extend(plan.warnings)
    for tally in tallies.values():
        tally.count_into(summary)
    return rejected


def import_runs(
    lineage: Recording,
    paths: list[str | Path],
    *,
    dry_run: bool = False,
    keep_going: bool = False,
    unfinished: bool = False,
    progress: Progress | None = None,
) -> ImportSummary:
    found = survey(paths)
    runs = found.runs
    if not runs:
        left_out = "; ".join(f"{s.path}: {s.reason}" for s in found.skipped[:5])
        raise InvalidInput(
            f"found no run directories under "
            f"{', '.join(str(p) for p in paths)} (expected benchflow run "
            "directories with tree.json, stage_snapshots.json or config.json + "
            "result.json, or Harbor trial "
            "directories with result.json)" + (f"; skipped {left_out}" if left_out else ""),
            hint="name the jobs folder or a run directory",
        )
    summary = ImportSummary(skipped=found.skipped)
    # Every run is read before any is recorded, so the batch's arms can name the task skills that no
    # run's own files name (batch_skills.py); each run is still recorded as one batch of its own.
    plans, rejected = _read_plans(runs, summary, keep_going, unfinished, progress)
    if rejected and not keep_going:
        plans = []  # fail closed: a run refused while reading stops the import before any record
    infer_batch([plan for _, _, plan in plans])
    rejected = _record_plans(lineage, plans, rejected, summary, dry_run, keep_going)
    for _, rejection in sorted(rejected, key=lambda r: r[0]):
        summary.runs_rejected += 1
        summary.errors.append(rejection)
    if progress:
        progress(len(runs), len(runs), "")
    return summary

"""Finding run directories under the paths a user names, by the files they hold.

Each directory is classified by its own files (`classify`); a run is never descended into, and every
folder left out is named with the reason (`survey`): a run missing from an import is never silent.
`classify` is also where a folder whose result.json cannot be read is called corrupt (`CORRUPT`),
the one rule `lineage import` (which refuses the run) and `lineage audit PATH` (which calls it an
unhealthy run of its own) both follow.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...domain.errors import CorruptRunFile, InvalidInput, LineageError, MalformedJSON
from ..rundir import RunFolder
from .benchflow_mainline import MAINLINE_KIND
from .benchflow_staged.staged_import import containment_for
from .continuation import CONTINUE_KIND
from .harbor import looks_like_trial
from .keys import run_key
from .rollout_folder import looks_like_rollout_folder

STAGED, MAINLINE, HARBOR, UNREADABLE = "benchflow-pr", "benchflow-mainline", "harbor", "unreadable"
ROLLOUT, CORRUPT = "rollout-folder", "corrupt"


@dataclass(frozen=True)
class RunDir:
    path: Path
    kind: str
    continues: str | None = None  # the run key a continuation continues
    problem: LineageError | None = None

    @property
    def key(self) -> str:
        return run_key(self.path)


def _benchflow_result(document: object) -> bool:
    return isinstance(document, dict) and (
        "rollout_name" in document or ("task_name" in document and "rewards" in document)
    )


def _continues(folder: RunFolder) -> str | None:
    for name in ("config.json", "result.json"):
        document = folder.read_json(name)
        source = document.get("source") if isinstance(document, dict) else None
        if (
            isinstance(source, dict)
            and source.get("kind") == CONTINUE_KIND
            and isinstance(source.get("continued_from"), str)
        ):
            return run_key(source["continued_from"])
    return None


def classify(path: Path, names: set[str]) -> RunDir | None:
    """The kind of run `path` is, from the file `names` it holds, in this order:
    - corrupt: a `result.json` that exists but is not one JSON object (`read_result`);
    - benchflow main-line: `tree.json` whose `kind` is "benchflow-branch-tree";
    - benchflow PR-#1046 layout: `tree.json` without that kind, or `stage_snapshots.json`, or
      `result.json` plus `config.json` where `result.json` has benchflow's shape (`rollout_name`, or
      `task_name` with `rewards`);
    - Harbor trial: `result.json` with `trial_name` and `verifier_result`;
    - a rollout folder as the experiment-review skill's validator reads one: `result.json` with
      `trajectory/` or a run configuration (`run_config.json`, `config.json`, `metadata.json`).
    A directory that looks like a run but whose files cannot be read is still returned (UNREADABLE),
    with the problem, so the import can report it as rejected."""
    if not names & {"tree.json", "stage_snapshots.json", "result.json"}:
        return None
    folder = RunFolder(path, containment_for(path))
    try:
        result = read_result(folder) if "result.json" in names else None
        if "tree.json" in names:
            tree = folder.read_json("tree.json")
            if isinstance(tree, dict) and tree.get("kind") == MAINLINE_KIND:
                return RunDir(path, MAINLINE)
            return RunDir(path, STAGED, _continues(folder))
        if "stage_snapshots.json" in names:
            return RunDir(path, STAGED, _continues(folder))
        if looks_like_trial(result):
            return RunDir(path, HARBOR)
        if "config.json" in names and _benchflow_result(result):
            return RunDir(path, STAGED, _continues(folder))
        present = names | ({"trajectory"} if folder.is_dir("trajectory") else set())
        if looks_like_rollout_folder(present, result):
            return RunDir(path, ROLLOUT)
    except CorruptRunFile as exc:
        return RunDir(path, CORRUPT, problem=exc)
    except LineageError as exc:
        return RunDir(path, UNREADABLE, problem=exc)
    return None


#: What a JSON value that is not an object is, in words.
_SHAPES = {list: "a list", str: "a string", bool: "true or false", type(None): "null"}


def read_result(folder: RunFolder) -> dict[str, Any]:
    """The run's result.json, which must be one JSON object. benchflow writes it last, in one write,
    once the run is over (`_build_rollout_result`), so one that exists but does not decode, parse or
    hold an object is damaged, not being written: a `CorruptRunFile` naming the file and what is
    wrong, never "may still be running". A file over the size cap, a link out of the run or a
    special file stay the reader's own refusals (`RunFolder.read_json`)."""
    file = folder.root / "result.json"
    try:
        document = folder.read_json("result.json")
    except MalformedJSON as exc:
        raise _corrupt(file, exc.reason) from None
    if not isinstance(document, dict):
        raise _corrupt(
            file, f"expected a JSON object, found {_SHAPES.get(type(document), 'a number')}"
        )
    return document


def _corrupt(file: Path, reason: str) -> CorruptRunFile:
    return CorruptRunFile(
        f"{file} is corrupt: {reason}",
        hint="result.json is written once, when the run is over: waiting will not make it "
        "readable; nothing was appended for this run: restore the file or move the run out of the "
        "folder, and import again",
        file=str(file),
        reason=reason,
    )


@dataclass(frozen=True)
class Skipped:
    """A folder the import did not read, and why: named so that a run left out is never silent."""

    path: Path
    reason: str


@dataclass(frozen=True)
class Survey:
    runs: list[RunDir]
    skipped: list[Skipped]


#: Folders a trial or run directory holds: files found only there make their parent the folder to
#: name.
RUN_PARTS = frozenset({"verifier", "agent", "trajectory", "artifacts", "logs", "branches"})
#: How many of a skipped folder's files its reason names.
SHOWN_FILES = 3


def discover(paths: list[str | Path]) -> list[RunDir]:
    """Every run directory under `paths` (each path may itself be one), non-continuations first."""
    return survey(paths).runs


def survey(paths: list[str | Path]) -> Survey:
    """The run directories under `paths` (see `discover`) and every folder left out, with the
    reason: a hidden folder or a link (never searched), and each folder holding files that are no
    run (the highest such folder with no run in it, or the trial folder of a lone
    `verifier/ctrf.json`)."""
    found: dict[Path, RunDir] = {}
    skipped: list[Skipped] = []
    # folders not in a run: files each holds, how many
    holding: dict[Path, tuple[list[str], int]] = {}
    for given in paths:
        root = Path(os.path.abspath(given))
        if not root.is_dir():
            raise InvalidInput(
                f"{given}: expected a directory of runs, found "
                + ("a file" if root.exists() else "nothing"),
                hint="name a run directory or a folder that holds run directories",
            )
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(dirpath)
            # a result.json that is a folder (or a link to one) is still the run's result.json:
            # one that cannot be read, never a reason to look past the run
            run = classify(here, set(filenames) | ({"result.json"} & set(dirnames)))
            if run is not None:
                # never descended into: `branches/` holds its children (not runs of their own),
                # `agent/` and `artifacts/` what the agent wrote, which may well hold a result.json
                found.setdefault(here, run)
                dirnames[:] = []
                continue
            if filenames:
                holding[here] = (sorted(filenames)[:SHOWN_FILES], len(filenames))
            for name in sorted(dirnames):
                if (here / name).is_symlink():
                    skipped.append(
                        Skipped(
                            here / name,
                            "a link to a folder: links are not followed (name its target)",
                        )
                    )
                elif name.startswith("."):
                    skipped.append(Skipped(here / name, "a hidden folder: not searched (name it)"))
            dirnames[:] = sorted(
                d for d in dirnames if not d.startswith(".") and not (here / d).is_symlink()
            )
    runs = order(sorted(found.values(), key=lambda r: str(r.path)))
    roots = {Path(os.path.abspath(given)) for given in paths}
    left_out = [*skipped, *_no_runs(holding, set(found), roots)]
    return Survey(runs, sorted(left_out, key=lambda s: str(s.path)))


def _no_runs(
    holding: dict[Path, tuple[list[str], int]], runs: set[Path], roots: set[Path]
) -> list[Skipped]:
    """The folders whose files belong to no run: each folder holding files, named by its trial
    folder when it is a part of one (`verifier/`), unless a run lies below it (its files are then
    the runs' context, such as the ablation.json above `bench eval ablate`'s runs); a folder inside
    another one named is told as part of it. Never a folder above the paths given (`roots`)."""
    with_runs = {parent for run in runs for parent in run.parents}
    named: dict[Path, tuple[list[str], int]] = {}
    for folder in sorted(holding, key=lambda p: len(p.parts)):
        if folder in with_runs:
            continue
        shown = folder
        while shown.name in RUN_PARTS and shown not in roots and shown.parent not in with_runs:
            shown = shown.parent
        owner = next((top for top in (shown, *shown.parents) if top in named), shown)
        files, count = holding[folder]
        listed, total = named.get(owner, ([], 0))
        inside = folder.relative_to(owner)
        listed = (listed + [str(inside / name) for name in files])[:SHOWN_FILES]
        named[owner] = (listed, total + count)
    return [Skipped(folder, _why_not_a_run(*named[folder])) for folder in named]


def _why_not_a_run(files: list[str], count: int) -> str:
    names = {Path(f).name for f in files}
    more = count - len(files)
    shown = ", ".join(files) + (f" and {more} more files" if more > 0 else "")
    if "ctrf.json" in names and "result.json" not in names:
        return (
            f"not a run: test results ({shown}) but no "
            f"result.json to say which task, agent and trial "
            "they are of (a Harbor trial's has trial_name and verifier_result)"
        )
    if "result.json" in names:
        return (
            f"not a run: {shown}; that result.json is not a "
            f"Harbor trial's (trial_name, verifier_result), "
            "and a benchflow run directory also holds config.json"
        )
    return (
        f"not a run: {shown}; expected tree.json, "
        f"stage_snapshots.json, result.json with config.json "
        "(benchflow) or a Harbor trial's result.json"
    )


def order(runs: list[RunDir]) -> list[RunDir]:
    """Runs that continue nothing first; each continuation after the run it continues, when that is
    here too."""
    ordered = [r for r in runs if r.continues is None]
    pending = [r for r in runs if r.continues is not None]
    placed = {r.key for r in ordered}
    while pending:
        ready = [
            r
            for r in pending
            if r.continues in placed or r.continues not in {p.key for p in pending}
        ]
        if not ready:  # a cycle of continuations: keep the given order
            ready = pending[:1]
        for run in ready:
            ordered.append(run)
            placed.add(run.key)
            pending.remove(run)
    return ordered

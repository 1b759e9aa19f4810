"""Finding run directories under the paths a user names, by the files they hold.

- benchflow main-line: `tree.json` whose `kind` is "benchflow-branch-tree";
- benchflow PR-#1046 layout: `tree.json` without that kind, or `stage_snapshots.json`, or `result.json` plus
  `config.json` where `result.json` has benchflow's shape (`rollout_name`, or `task_name` with `rewards`);
- Harbor trial: `result.json` with `trial_name` and `verifier_result`;
- a rollout folder as the experiment-review skill's validator reads one: `result.json` with a run
  configuration (`run_config.json`, `config.json`, `metadata.json`) or `trajectory/` beside it.
A recognised run directory is not descended into: its `branches/` hold its children (not runs of their own)
and its `agent/`/`artifacts/` hold whatever the agent wrote, which may well contain a `result.json`. Links
to directories are never followed and hidden directories are skipped. A directory that looks like a run but
whose files cannot be read is still returned, with the problem, so the import can report it as rejected.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ...domain.errors import InvalidInput, LineageError
from .benchflow_mainline import MAINLINE_KIND
from .benchflow_staged import containment_for
from .continuation import CONTINUE_KIND
from .harbor import looks_like_trial
from .keys import run_key
from .rollout_folder import looks_like_rollout_folder
from .rundir import RunFolder

STAGED, MAINLINE, HARBOR, UNREADABLE = "benchflow-pr", "benchflow-mainline", "harbor", "unreadable"
ROLLOUT = "rollout-folder"


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
    if not names & {"tree.json", "stage_snapshots.json", "result.json"}:
        return None
    folder = RunFolder(path, containment_for(path))
    try:
        if "tree.json" in names:
            tree = folder.read_json("tree.json")
            if isinstance(tree, dict) and tree.get("kind") == MAINLINE_KIND:
                return RunDir(path, MAINLINE)
            return RunDir(path, STAGED, _continues(folder))
        if "stage_snapshots.json" in names:
            return RunDir(path, STAGED, _continues(folder))
        result = folder.read_json("result.json")
        if looks_like_trial(result):
            return RunDir(path, HARBOR)
        if "config.json" in names and _benchflow_result(result):
            return RunDir(path, STAGED, _continues(folder))
        present = names | ({"trajectory"} if folder.is_dir("trajectory") else set())
        if looks_like_rollout_folder(present, result):
            return RunDir(path, ROLLOUT)
    except LineageError as exc:
        return RunDir(path, UNREADABLE, problem=exc)
    return None


def discover(paths: list[str | Path]) -> list[RunDir]:
    """Every run directory under `paths` (each path may itself be one), non-continuations first."""
    found: dict[Path, RunDir] = {}
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
            run = classify(here, set(filenames))
            if run is not None:
                found.setdefault(here, run)
                dirnames[:] = []
                continue
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return order(sorted(found.values(), key=lambda r: str(r.path)))


def order(runs: list[RunDir]) -> list[RunDir]:
    """Runs that continue nothing first; each continuation after the run it continues, when that is here too."""
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

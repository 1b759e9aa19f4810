"""Run keys: the natural key of an imported run, derived from where benchflow or Harbor put it.

A run directory lives at `<jobs_dir>/<job name>/<rollout name>/`, so its key is `<job name>/<rollout
name>` (for Harbor: `<job dir>/<trial dir>`). `bench eval ablate` always names its job `ablation`
inside a per-invocation output directory (`jobs/ablate-<timestamp>/ablation/<task>/`), so two
ablations of one task would collide on `ablation/<task>`; their key keeps the output directory too:
`<out-dir name>/ablation/<task>`. The key depends only on the last two (or three) path components,
so a moved jobs tree keeps its keys, and a continuation's recorded `continued_from` path (an
absolute path of the machine that ran it) maps to the same key as the directory it names.
"""

from __future__ import annotations

import re
from pathlib import PurePath

ABLATE_JOB_NAME = "ablation"
ROLLOUT_SUFFIX = re.compile(r"__(?:[0-9a-f]{8}|continued)$")


def is_ablate_run(path: PurePath) -> bool:
    """`bench eval ablate`'s parent run: `<out-dir>/ablation/<task>/`. A rollout directory in a job
    that happens to be named `ablation` ends in `__<8 hex trial id>` or `__continued` (a task id
    itself may contain `__`)."""
    return path.parent.name == ABLATE_JOB_NAME and not ROLLOUT_SUFFIX.search(path.name)


def run_key_from_parts(parts: tuple[str, ...]) -> str:
    parts = tuple(p for p in parts if p not in ("", "/", "."))
    if not parts:
        raise ValueError("expected a path with at least one component")
    if len(parts) >= 3 and parts[-2] == ABLATE_JOB_NAME:
        return "/".join(parts[-3:])
    return "/".join(parts[-2:])


def run_key(path: PurePath | str) -> str:
    """The run key of a run directory (or of a path a run recorded for one)."""
    pure = PurePath(str(path).rstrip("/"))
    return run_key_from_parts(pure.parts)

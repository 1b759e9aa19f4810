"""Custody of a fork's mounted artifacts, as benchflow's `MountedArtifacts` (branch_artifacts.py)
leaves it on disk: hold, hand-off and release, each its own fact (docs/benchflow-formats.md §4 and
§15, "Custody"). A hand-off failure and a release failure of the same fork are two facts, never one.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from ....domain import facts as f
from ...rundir import RunFolder, file_size, sha256_file
from ..fields import build
from .tree import ForkGroup

MOUNTED = "mounted"
HAND_OFF = re.compile(r"branch could not capture a child's (\S+) output under (\S+) \(")
RELEASE = re.compile(
    r"branch could not restore the parent's |unexpected entries remain after release"
)


def child_dir(node: str, child: str) -> str:
    return f"branches/{node}/children/{child}"


def entries(folder: RunFolder, relative: str, warnings: list[str]) -> tuple[f.CustodyEntry, ...]:
    """Every regular file under `relative`, with its digest and size (links and special files are
    named, not kept)."""
    files, left_out = folder.regular_files(relative)
    if left_out:
        warnings.append(
            f"{folder.root / relative}: custody entries hold regular files only, so "
            f"{', '.join(left_out)} {'is' if len(left_out) == 1 else 'are'} not recorded; "
            f"recover {'it' if len(left_out) == 1 else 'them'} from there by hand if needed"
        )
    return tuple(
        build(f.CustodyEntry, str(path), path=name, sha256=sha256_file(path), size=file_size(path))
        for name, path in files
    )


def hand_off(
    folder: RunFolder, run: str, group: ForkGroup, index: int, warnings: list[str]
) -> f.CustodyHandedOff | None:
    """The child's `mounted/` archive as a hand-off, or None when the child has none (a
    fresh-rollout child that wrote nothing through the parent's mounts, or a run whose directory
    benchflow did not know).

    After each child (in the child loop's `finally`, so a child that raised has one too), what it
    wrote through the shared mounts moves to `branches/<node>/children/<child>/mounted/`."""
    location = f"{child_dir(group.node, group.children[index].id)}/{MOUNTED}"
    if not folder.is_dir(location):
        return None
    return build(
        f.CustodyHandedOff,
        str(folder.root / location),
        run=run,
        fork=group.fork_id,
        index=index,
        location=location,
        entries=entries(folder, location, warnings),
    )


def reported_messages(*errors: str | None) -> list[str]:
    """benchflow joins the guard's failures with "; "; each starts with "branch could not" or
    "unexpected"."""
    text = "; ".join(e for e in errors if e)
    starts = [
        m.start()
        for m in re.finditer(r"branch could not |unexpected entries remain after release", text)
    ]
    return [
        text[a:b].rstrip("; ").strip()
        for a, b in zip(starts, [*starts[1:], len(text)], strict=False)
    ]


def hand_off_failures(
    folder: RunFolder, run: str, group: ForkGroup, messages: list[str]
) -> list[f.CustodyFailed]:
    """One `custody.failed` in phase hand-off per reported capture failure of a child of this fork.

    benchflow records a failed move on the guard (`custody_failures`, never raised there) and
    `raise_pending()` raises it once the child's outcome is recorded, which ends the fork; its
    message, "branch could not capture a child's <dir> output under <child>/mounted (...)", reaches
    disk only in ablation.json's `error`. What did move is preserved in the child's `mounted/`."""
    children = {child.id: index for index, child in enumerate(group.children)}
    out = []
    for message in messages:
        found = HAND_OFF.search(message)
        if found is None:
            continue
        target = PurePosixPath(found.group(2))
        if (
            target.name != MOUNTED
            or target.parent.parent.name != "children"
            or target.parent.parent.parent.name != group.node
            or target.parent.name not in children
        ):
            continue  # another fork's hand-off
        index = children[target.parent.name]
        location = f"{child_dir(group.node, target.parent.name)}/{MOUNTED}"
        out.append(
            build(
                f.CustodyFailed,
                message,
                run=run,
                fork=group.fork_id,
                phase="hand-off",
                index=index,
                preserved_location=location if folder.is_dir(location) else None,
                error=message,
            )
        )
    return out


def release_error(messages: list[str], hold: str, held: int) -> str:
    """benchflow's own release message when the report carries it ("branch could not restore the
    parent's ..." or "unexpected entries remain after release ..."), else what the files show.

    After the last child the held entries move back, and the hold directory is removed only when
    every entry came back, so a hold still on disk is a release that failed."""
    reported = [m for m in messages if RELEASE.match(m)]
    if reported:
        return "; ".join(reported)
    return (
        f"the custody hold {hold} was left behind: the parent's mounted artifacts moved "
        f"there before the children ran were never moved back ({held} files remain there)"
    )

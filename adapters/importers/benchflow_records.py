"""A main-line fork and its children as benchflow's `tree.json` records them, as `fork.described`
and `fork.child_described` (docs/benchflow-formats.md §16.2, §16.3), and the fork's `labels.json`
checked against the tree (§16.4).

Written by `branch_lineage.ForkRecord` (benchflow bf6e8412) with fields set by
`rollout_branch.branch` and `checkpoint_retry.run_checkpoint_retry` (e0b5e2f6). Blocks benchflow's
branch view passes through whole are kept as written.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from ...domain import facts as f
from ..rundir import RunFolder
from .benchflow_trial import block, error_record, text_of
from .fields import Fields, build, invalid

LABELS_KIND = "benchflow-branch-labels"


def archive_of(child: Fields, fork_id: str) -> str:
    """The child's folder relative to the trial: its `artifacts.path`, else where benchflow puts
    it."""
    artifacts = child.obj("artifacts")
    path = text_of(artifacts, "path") if artifacts is not None else None
    return path or f"branches/{fork_id}/children/{child.text('node_id')}"


def describe_fork(fork: Fields, key: str, order: int) -> f.ForkDescribed:
    error, _ = error_record(fork, "error")
    restore_error, _ = error_record(fork, "parent_restore_error")
    artifact_error, _ = error_record(fork, "artifact_error")
    return build(
        f.ForkDescribed,
        fork.where(),
        run=key,
        fork=fork.text("id"),
        order=order,
        status=fork.string("status", required=True),
        requested_children=fork.integer("requested_children"),
        value=fork.number("value"),
        value_stderr=fork.number("value_stderr"),
        parent_restore=fork.string("parent_restore"),
        error=error,
        parent_restore_error=restore_error,
        artifact_error=artifact_error,
        children_mode=block(fork, "children_mode"),
        timing_sec=block(fork, "timing_sec"),
        cost=block(fork, "cost"),
        snapshot=_snapshot(fork),
    )


def _snapshot(fork: Fields) -> f.SnapshotRecord | None:
    snapshot = fork.obj("snapshot")
    if snapshot is None:
        return None
    sandbox = snapshot.obj("sandbox")
    environment = snapshot.raw("environment")
    delete_error, _ = error_record(snapshot, "delete_error")
    excluded = snapshot.raw("excluded")
    return build(
        f.SnapshotRecord,
        snapshot.where(),
        requested_layers=snapshot.items("requested_layers"),
        captured_layers=snapshot.items("captured_layers"),
        agent_session=text_of(snapshot, "agent_session"),
        retention=text_of(snapshot, "retention"),
        provider=text_of(sandbox, "provider") if sandbox is not None else None,
        digest=sandbox.string("digest") if sandbox is not None else None,
        reused=snapshot.raw("reused") is True,
        lifetime=text_of(snapshot, "lifetime"),
        restore_available=snapshot.boolean("restore_available"),
        excluded=excluded,
        environment=environment if isinstance(environment, dict) else None,
        delete_error=delete_error,
    )


def describe_child(
    folder: RunFolder, key: str, fork_id: str, index: int, child: Fields
) -> f.ChildDescribed:
    """The child as recorded, and which files of its archive were there (benchflow's view links an
    `observation.json` and an isolated child's own `result.json` when they exist)."""
    intervention = child.obj("intervention")
    artifacts = child.obj("artifacts")
    archive = text_of(artifacts, "path") if artifacts is not None else None
    error, _ = error_record(child, "error")
    cleanup_error, _ = error_record(child, "cleanup_error")
    retried_after, _ = error_record(child, "retried_after")
    return build(
        f.ChildDescribed,
        child.where(),
        run=key,
        fork=fork_id,
        index=index,
        node=child.string("node_id"),
        status=child.string("status", required=True),
        reward=child.number("reward"),
        reward_source=text_of(child, "reward_source"),
        label=text_of(intervention, "label") if intervention is not None else None,
        requested=text_of(intervention, "requested") if intervention is not None else None,
        execution=text_of(intervention, "execution") if intervention is not None else None,
        error=error,
        cleanup_error=cleanup_error,
        attempts=child.integer("attempts"),
        retried_after=retried_after,
        cost=block(child, "cost"),
        usage=block(child, "usage"),
        timing_sec=block(child, "timing_sec"),
        snapshot_start=block(child, "snapshot_start"),
        archive=archive,
        archive_status=text_of(artifacts, "status") if artifacts is not None else None,
        observation=_is_file(folder, archive, "observation.json"),
        result=_is_file(folder, archive, "result.json"),
    )


def _is_file(folder: RunFolder, archive: str | None, name: str) -> bool:
    if not archive:
        return False
    path = folder.resolve(f"{archive}/{name}")
    return path is not None and path.is_file()


def check_labels(folder: RunFolder, fork_id: str, children: list[Fields]) -> None:
    """`branches/<fork>/labels.json` is written with tree.json at every persist
    (`ForkRecord._write_labels`): each child's label, node, folder, status and reward must be the
    tree's."""
    relative = f"branches/{fork_id}/labels.json"
    document = folder.read_json(relative)
    if document is None:
        return
    labels = Fields(document, str(folder.root / relative))
    if labels.raw("kind") != LABELS_KIND or labels.raw("fork_id") != fork_id:
        raise invalid(
            labels.where(),
            f"kind {LABELS_KIND!r} and fork_id {fork_id!r}",
            {"kind": labels.raw("kind"), "fork_id": labels.raw("fork_id")},
        )
    entries = labels.objects("children", required=True)
    if len(entries) != len(children):
        raise invalid(
            labels.where("children"),
            f"{len(children)} children, as tree.json lists for fork {fork_id!r}",
            len(entries),
        )
    for entry, child in zip(entries, children, strict=True):
        intervention = child.obj("intervention")
        artifacts = child.obj("artifacts")
        path = text_of(artifacts, "path") if artifacts is not None else None
        expected = {
            "label": intervention.raw("label") if intervention is not None else None,
            "node_id": child.raw("node_id"),
            "folder": PurePosixPath(path).name if path else None,
            "status": child.raw("status"),
            "reward": child.raw("reward"),
        }
        found = {name: entry.raw(name) for name in expected}
        if found != expected:
            raise invalid(entry.where(), f"what tree.json records for the child: {expected}", found)

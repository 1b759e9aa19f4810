"""benchflow main-line branched trials (`tree.json` with `"kind": "benchflow-branch-tree"`) ->
facts.

A different schema from the PR layout (docs/benchflow-formats.md §12): every fork is a cursor fork
listed in `forks[]` with its snapshot, its children's statuses and V. Main-line trees are not
exported back, so what has no place in the facts is not recorded.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from ...domain import facts as f
from ..rundir import RunFolder
from .benchflow_common import RunFiles, outcome, registration
from .benchflow_records import archive_of, check_labels, describe_child, describe_fork
from .benchflow_trial import error_record, text_of, trial_description
from .ctrf import read_ctrf
from .fields import Fields, build, invalid
from .keys import run_key
from .plan import RunPlan, Timeline
from .run_evidence import benchflow_evidence

MAINLINE_KIND = "benchflow-branch-tree"
STATUSES = ("scored", "unscored", "failed", "cancelled", "not_started", "running")
FORK_KINDS = ("fork", "retry")


def import_mainline_run(path: Path) -> RunPlan:
    """Registration, `run.node_opened` for every node that is not a fork child (those come with
    `fork.opened`), each fork's facts in `tree.json` order, then the run's outcome and evidence and
    what its files say about its branches (`run.trial_described`). A node's `step_id` has no place
    in the facts and is not recorded."""
    path = Path(os.path.abspath(path))
    folder = RunFolder(path)
    key = run_key(path)
    files = RunFiles.read(folder)
    tree = Fields(folder.read_json("tree.json"), str(path / "tree.json"))
    tree.schema_version()
    if tree.raw("kind") != MAINLINE_KIND:
        raise invalid(tree.where("kind"), repr(MAINLINE_KIND), tree.raw("kind"))
    t0 = files.started_at()
    timeline = Timeline()
    timeline.add((-1,), registration(files, key).fact, t0)
    nodes = tree.objects("nodes", required=True)
    position = {}
    for index, node in enumerate(nodes):
        position[node.text("id")] = index
    forks = tree.objects("forks")
    # A child that never started has no node (benchflow attaches in-place children one at a time).
    fork_children = {
        child.string("node_id")
        for fork in forks
        for child in fork.objects("children", required=True)
    } - {None}
    for index, node in enumerate(nodes):
        node_id, parent = node.text("id"), node.string("parent")
        if parent is None:
            if node_id != "root" or index != 0:
                raise invalid(
                    node.where("id"), "the first node to be 'root' with parent null", node.data
                )
            continue
        if parent not in position or position[parent] >= index:
            raise invalid(node.where("parent"), "the id of a node listed before it", parent)
        if node_id not in fork_children:
            timeline.add(
                (index, 0),
                build(f.NodeOpened, node.where(), run=key, node=node_id, parent=parent),
                t0,
            )
    for order, fork in enumerate(forks):
        fork_facts(timeline, folder, key, fork, position, t0, order)
    for entry in outcome(files, key):
        timeline.add((1 << 40,), entry.fact, entry.occurred_at)
    evidence = benchflow_evidence(files, key)
    if evidence is not None:
        timeline.add((1 << 40, 1), evidence, files.finished_at())
    described = trial_description(files, key, always=True)
    assert described is not None
    timeline.add((1 << 40, 2), described.fact, described.occurred_at)
    return RunPlan(key, path, timeline.entries())


def snapshot_refs(fork: Fields) -> f.SnapshotRefs:
    snapshot = fork.obj("snapshot")
    if snapshot is None:
        return f.SnapshotRefs()
    sandbox = snapshot.obj("sandbox")
    environment = snapshot.raw("environment")
    if isinstance(environment, dict):
        environment = Fields(environment, snapshot.file, snapshot.where("environment")).string(
            "ref"
        )
    elif environment is not None:
        environment = snapshot.string("environment")
    return build(
        f.SnapshotRefs,
        snapshot.where(),
        sandbox=sandbox.string("ref") if sandbox else None,
        environment=environment,
    )


def fork_facts(
    timeline: Timeline,
    folder: RunFolder,
    key: str,
    fork: Fields,
    position: dict[str, int],
    t0: datetime | None,
    order: int = 0,
) -> None:
    """`fork.opened` with the children that started, `fork.described`, each child's
    `fork.child_described` and outcome, then `fork.closed`: completed with the fork's `value` when
    its status is "completed" and every child has an outcome, else partial with the fork's
    `error`."""
    fork_id, node = fork.text("id"), fork.text("parent_node")
    children = fork.objects("children", required=True)
    started = _started_children(fork, children, node, position)
    place = min(position[c.text("node_id")] for c in started) if started else position[node] + 1
    refs = snapshot_refs(fork)

    def add(sub: int, fact: f.Fact) -> None:
        timeline.add((place, -1 if sub < 0 else 0, sub), fact, t0)

    _snapshot_facts(add, fork, refs, key, node)
    add(0, _fork_opened(fork, key, node, refs, started))
    add(1, describe_fork(fork, key, order))
    complete = fork.raw("status") == "completed" and len(started) == len(children) > 0
    for index, child in enumerate(children):
        add(2 + 2 * index, describe_child(folder, key, fork_id, index, child))
        fact = _child_outcome(folder, key, fork_id, index, child)
        if fact is not None:
            add(3 + 2 * index, fact)
        if not isinstance(fact, (f.ChildScored, f.ChildUnscored)):
            complete = False
    check_labels(folder, fork_id, children)
    value = fork.number("value")
    _, error = error_record(fork, "error")
    add(
        1_000_000,
        build(
            f.ForkClosed,
            fork.where(),
            run=key,
            fork=fork_id,
            outcome="completed" if complete else "partial",
            value=value if complete else None,
            error=None if complete else error,
        ),
    )


def _started_children(
    fork: Fields, children: list[Fields], node: str, position: dict[str, int]
) -> list[Fields]:
    """The children that started, each a node of the tree, as is the node the fork is at. They come
    first: benchflow attaches in-place children one at a time (those after a fatal failure never
    get a node), isolated ones all before any runs."""
    if node not in position:
        raise invalid(
            fork.where("parent_node"), f"a node of the tree, one of {sorted(position)}", node
        )
    started: list[Fields] = []
    for index, child in enumerate(children):
        if child.raw("index", index) != index:
            raise invalid(
                child.where("index"), f"{index} (children in index order)", child.raw("index")
            )
        node_id = child.string("node_id")
        if node_id is None:
            continue
        if len(started) != index:
            raise invalid(
                child.where("node_id"),
                "no node after a child that never started (benchflow starts children in order)",
                node_id,
            )
        if node_id not in position:
            raise invalid(child.where("node_id"), "a node listed in tree.json nodes", node_id)
        started.append(child)
    return started


def _snapshot_facts(
    add: Callable[[int, f.Fact], None], fork: Fields, refs: f.SnapshotRefs, key: str, node: str
) -> None:
    """Each layer the fork snapshotted is captured before it (`snapshot.captured`, stage null, on
    the fork node); with retention "deleted" it is discarded after the fork closed. A fork that
    reused an existing image (`reused`: a kept checkpoint, perhaps another trial's) captured
    nothing."""
    snapshot = fork.obj("snapshot")
    if snapshot is not None and snapshot.raw("reused") is True:
        return
    for layer, ref in (("environment", refs.environment), ("sandbox", refs.sandbox)):
        if ref:
            add(
                -2,
                build(
                    f.SnapshotCaptured,
                    fork.where("snapshot"),
                    ref=ref,
                    layer=layer,
                    run=key,
                    node=node,
                ),
            )
            if snapshot is not None and snapshot.raw("retention") == "deleted":
                # Retention runs when the fork is done with the snapshot: after its children and its
                # closing.
                add(1_000_001, build(f.SnapshotDiscarded, snapshot.where("retention"), ref=ref))


def _fork_opened(
    fork: Fields, key: str, node: str, refs: f.SnapshotRefs, started: list[Fields]
) -> f.ForkOpened:
    """The fork with the children that started, in index order, each arm named by
    `intervention.label`, zero delta; a retry (`kind: "retry"`) with its reason and checkpoint."""
    layers = tuple(
        sorted(
            layer
            for layer, ref in (("environment", refs.environment), ("sandbox", refs.sandbox))
            if ref
        )
    )
    entries = []
    for index, child in enumerate(started):
        intervention = child.obj("intervention")
        entries.append(
            build(
                f.ForkChild,
                child.where(),
                index=index,
                node=child.text("node_id"),
                # an empty label names no arm (the child goes by its node)
                arm=text_of(intervention, "label") or None if intervention else None,
            )
        )
    kind = fork.raw("kind") or "fork"
    if kind not in FORK_KINDS:
        raise invalid(fork.where("kind"), f"one of {list(FORK_KINDS)} or absent", kind)
    return build(
        f.ForkOpened,
        fork.where(),
        run=key,
        fork=fork.text("id"),
        node=node,
        layers=layers,
        snapshot=refs if layers else None,
        children=tuple(entries),
        kind=kind,
        reason=fork.string("reason"),
        checkpoint=fork.string("checkpoint"),
        rollout=fork.string("rollout"),
    )


def _child_outcome(
    folder: RunFolder, key: str, fork_id: str, index: int, child: Fields
) -> f.Fact | None:
    """The child's scored, unscored or failed fact from its `status`; None for `cancelled`,
    `running` and `not_started`, which record no outcome and so close the fork as partial."""
    status = child.string("status")
    if status not in STATUSES:
        raise invalid(child.where("status"), f"one of {list(STATUSES)}", status)
    node = child.string("node_id")
    if node is None:
        if status != "not_started":
            raise invalid(child.where("node_id"), f"the node of a child {status}", None)
        return None
    base = {"run": key, "fork": fork_id, "index": index}
    directory = archive_of(child, fork_id)
    check_observation(folder, directory, child)
    tests = read_ctrf(
        folder, f"{directory}/verifier/ctrf.json", f"{directory}/mounted/verifier/ctrf.json"
    )
    _, error = error_record(child, "error")
    if status == "scored":
        return build(
            f.ChildScored,
            child.where(),
            **base,
            reward=child.number("reward", required=True),
            tests=tests,
        )
    if status == "unscored":
        return build(
            f.ChildUnscored,
            child.where(),
            **base,
            reason=error or "the child ran but produced no reward",
            tests=tests,
        )
    if status == "failed":
        return build(f.ChildFailed, child.where(), **base, error=error or "the child failed")
    return None


def check_observation(folder: RunFolder, directory: str, child: Fields) -> None:
    """A child's `observation.json` reward must agree with the tree."""
    relative = f"{directory}/observation.json"
    document = folder.read_json(relative)
    if document is None:
        return
    observation = Fields(document, str(folder.root / relative))
    reward = observation.number("reward")
    if reward != child.number("reward"):
        raise invalid(
            observation.where("reward"),
            f"{child.raw('reward')!r}, the reward tree.json records for node "
            f"{child.raw('node_id')!r}",
            reward,
        )

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
from .ctrf import read_ctrf
from .fields import Fields, build, invalid
from .keys import run_key
from .plan import RunPlan, Timeline
from .run_evidence import benchflow_evidence

MAINLINE_KIND = "benchflow-branch-tree"
STATUSES = ("scored", "unscored", "failed", "cancelled", "not_started")


def import_mainline_run(path: Path) -> RunPlan:
    """Registration, `run.node_opened` for every node that is not a fork child (those come with
    `fork.opened`), each fork's facts, then the run's outcome and evidence. `step_id`, usage, timing
    and intervention evidence have no place in the facts and are not recorded."""
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
    fork_children = {
        child.text("node_id") for fork in forks for child in fork.objects("children", required=True)
    }
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
    for fork in forks:
        fork_facts(timeline, folder, key, fork, position, t0)
    for entry in outcome(files, key):
        timeline.add((1 << 40,), entry.fact, entry.occurred_at)
    evidence = benchflow_evidence(files, key)
    if evidence is not None:
        timeline.add((1 << 40, 1), evidence, files.finished_at())
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
) -> None:
    """`fork.opened` and its children's outcomes, then `fork.closed`: completed with the fork's
    `value` when its status is "completed" and every child has an outcome, else partial with the
    fork's `error`."""
    fork_id, node = fork.text("id"), fork.text("parent_node")
    children = _fork_children(fork, node, position)
    order = min(position[c.text("node_id")] for c in children) if children else position[node] + 1
    refs = snapshot_refs(fork)

    def add(sub: int, fact: f.Fact) -> None:
        timeline.add((order, -1 if sub < 0 else 0, sub), fact, t0)

    _snapshot_facts(add, fork, refs, key, node)
    add(0, _fork_opened(fork, key, node, refs, children))
    complete = fork.raw("status") == "completed"
    for index, child in enumerate(children):
        fact = _child_outcome(folder, key, fork_id, index, child)
        if fact is not None:
            add(1 + index, fact)
        if not isinstance(fact, (f.ChildScored, f.ChildUnscored)):
            complete = False
    value = fork.number("value")
    add(
        10_000,
        build(
            f.ForkClosed,
            fork.where(),
            run=key,
            fork=fork_id,
            outcome="completed" if complete else "partial",
            value=value if complete else None,
            error=None if complete else fork.string("error"),
        ),
    )


def _fork_children(fork: Fields, node: str, position: dict[str, int]) -> list[Fields]:
    """The fork's children, each a node of the tree, as is the node it forks at."""
    if node not in position:
        raise invalid(
            fork.where("parent_node"), f"a node of the tree, one of {sorted(position)}", node
        )
    children = fork.objects("children", required=True)
    for child in children:
        if child.text("node_id") not in position:
            raise invalid(
                child.where("node_id"), "a node listed in tree.json nodes", child.raw("node_id")
            )
    return children


def _snapshot_facts(
    add: Callable[[int, f.Fact], None], fork: Fields, refs: f.SnapshotRefs, key: str, node: str
) -> None:
    """Each layer the fork snapshotted is captured before it (`snapshot.captured`, stage null, on
    the fork node); with retention "deleted" it is discarded after the fork closed."""
    snapshot = fork.obj("snapshot")
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
                add(10_001, build(f.SnapshotDiscarded, snapshot.where("retention"), ref=ref))


def _fork_opened(
    fork: Fields, key: str, node: str, refs: f.SnapshotRefs, children: list[Fields]
) -> f.ForkOpened:
    """The fork with its children in index order, each arm named by `intervention.label`, zero
    delta."""
    layers = tuple(
        sorted(
            layer
            for layer, ref in (("environment", refs.environment), ("sandbox", refs.sandbox))
            if ref
        )
    )
    entries = []
    for index, child in enumerate(children):
        if child.raw("index", index) != index:
            raise invalid(
                child.where("index"), f"{index} (children in index order)", child.raw("index")
            )
        intervention = child.obj("intervention")
        entries.append(
            build(
                f.ForkChild,
                child.where(),
                index=index,
                node=child.text("node_id"),
                arm=intervention.string("label") if intervention else None,
            )
        )
    return build(
        f.ForkOpened,
        fork.where(),
        run=key,
        fork=fork.text("id"),
        node=node,
        layers=layers,
        snapshot=refs if layers else None,
        children=tuple(entries),
    )


def _child_outcome(
    folder: RunFolder, key: str, fork_id: str, index: int, child: Fields
) -> f.Fact | None:
    """The child's scored, unscored or failed fact from its `status`; None for `cancelled` and
    `not_started`, which record no outcome and so close the fork as partial."""
    status = child.string("status")
    if status not in STATUSES:
        raise invalid(child.where("status"), f"one of {list(STATUSES)}", status)
    base = {"run": key, "fork": fork_id, "index": index}
    directory = f"branches/{fork_id}/children/{child.text('node_id')}"
    check_observation(folder, directory, child)
    tests = read_ctrf(
        folder, f"{directory}/verifier/ctrf.json", f"{directory}/mounted/verifier/ctrf.json"
    )
    error = child.string("error")
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

"""benchflow PR-#1046 `tree.json` (schema_version 1): its nodes, checked, and which ones form forks.

A node with a `delta` is a branch child, the others are the run's own linear steps
(docs/benchflow-formats.md §2). Nodes keep benchflow's creation order, in which facts are recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from ....domain import facts as f
from ....domain.vocabulary import ROOT_NODE, STAGES
from ..fields import Fields, build, invalid

NODE_FIELDS = (
    "id",
    "parent",
    "stage",
    "snapshot",
    "reward",
    "unscored",
    "value",
    "delta",
    "delta_execution",
)
NUMBERED = re.compile(r"^n([0-9]{1,9})$")


@dataclass
class TreeNode:
    id: str
    parent: str | None
    stage: str | None
    snapshot: f.SnapshotRefs | None
    reward: float | None
    unscored: str | None
    value: float | None
    delta: f.Delta | None
    delta_execution: str | None
    where: str
    order: int = 0
    has_value: bool = False


@dataclass
class ForkGroup:
    fork_id: str
    node: str
    children: list[TreeNode]
    last_at_node: bool = False


@dataclass
class Tree:
    nodes: list[TreeNode]
    file: str
    by_id: dict[str, TreeNode] = field(default_factory=dict)
    absent: bool = False  # no tree.json: the run never branched, and only root is known

    def __post_init__(self) -> None:
        self.by_id = {node.id: node for node in self.nodes}

    def under_fork(self, node_id: str) -> bool:
        """Whether a node is a branch child or below one (its stage tags belong to a child, not the
        run)."""
        node = self.by_id.get(node_id)
        while node is not None:
            if node.delta is not None:
                return True
            node = self.by_id.get(node.parent) if node.parent else None
        return False

    def _delta_runs(
        self, parent: TreeNode, fork_point: Callable[[TreeNode], Hashable]
    ) -> list[list[TreeNode]]:
        """The parent's children with a delta, cut into runs of consecutive siblings with one fork
        point.

        Children of one fork are siblings with a `delta` listed one after another under their fork
        node; a run ends at a sibling without a delta or where the children's provenance names a
        different fork point (stage or snapshot). Runs with the same fork point are split further by
        `fork_split`."""
        siblings = [n for n in self.nodes if n.parent == parent.id]
        runs: list[list[TreeNode]] = []
        run: list[TreeNode] = []
        for node in [*siblings, None]:
            if run and (
                node is None or node.delta is None or fork_point(node) != fork_point(run[0])
            ):
                runs.append(run)
                run = []
            if node is not None and node.delta is not None:
                run.append(node)
        return runs

    def group_forks(
        self,
        fork_point: Callable[[TreeNode], Hashable],
        *,
        known: frozenset[str] = frozenset(),
        unreleased: frozenset[str] = frozenset(),
    ) -> list[ForkGroup]:
        """The forks of the tree in node order: runs of delta siblings with one fork point, each cut
        into the forks benchflow made (`fork_split`); `known` are the children of the fork
        ablation.json describes, `unreleased` the nodes whose last fork may have failed after its
        children (a custody hold left behind, or the report's branch error).

        The first fork at a node takes the node id as its fork id, later ones `<node>.2`,
        `<node>.3`, ... in attachment order, so ids stay deterministic as a tree grows."""
        from .fork_split import NodeForks, split_forks

        groups: list[ForkGroup] = []
        for parent in self.nodes:
            runs = self._delta_runs(parent, fork_point)
            if not runs:
                continue
            forks = NodeForks(
                parent,
                [child for run in runs for child in run],
                [index for index, run in enumerate(runs) for _ in run],
                known if any(c.id in known for run in runs for c in run) else frozenset(),
                parent.id in unreleased or not parent.has_value,
            )
            for index, children in enumerate(split_forks(forks, runs, self.file)):
                fork_id = parent.id if index == 0 else f"{parent.id}.{index + 1}"
                groups.append(ForkGroup(fork_id, parent.id, children))
        for group in groups:
            group.last_at_node = group is [g for g in groups if g.node == group.node][-1]
        return groups


def refs(doc: Fields | None) -> f.SnapshotRefs | None:
    if doc is None:
        return None
    doc.only(("environment", "sandbox"))
    return build(
        f.SnapshotRefs,
        doc.where(),
        environment=doc.string("environment"),
        sandbox=doc.string("sandbox"),
    )


def parse_tree(document: object, file: str) -> Tree:
    """The checked nodes, each with its creation `order`: ids are `root` and `n<k>` from one
    counter, so `k` orders nodes as benchflow created them (not the file's pre-order); a tree with
    other ids keeps the file's order."""
    top = Fields(document, file)
    top.schema_version()
    top.only(("schema_version", "cut_point", "nodes"))
    if top.raw("cut_point") is not None:
        raise invalid(
            top.where("cut_point"),
            "null (benchflow never writes a tree-level cut point; the continue-run "
            "source block carries it)",
            top.raw("cut_point"),
        )
    nodes: list[TreeNode] = []
    seen: set[str] = set()
    for doc in top.objects("nodes", required=True):
        nodes.append(parse_node(doc, seen, first=not nodes))
        seen.add(nodes[-1].id)
    numbered = all(n.id == ROOT_NODE or NUMBERED.match(n.id) for n in nodes)
    for index, node in enumerate(nodes):
        match = NUMBERED.match(node.id)
        node.order = (int(match.group(1)) if match else 0) if numbered else index
    return Tree(nodes, file)


def parse_node(doc: Fields, seen: set[str], *, first: bool) -> TreeNode:
    """One tree.json node, placed after the nodes already read (`seen`)."""
    doc.only(NODE_FIELDS)
    node_id = doc.text("id")
    parent = doc.string("parent")
    check_placement(doc, node_id, parent, seen, first=first)
    stage = doc.string("stage")
    if stage is not None and stage not in STAGES:
        raise invalid(doc.where("stage"), f"one of {list(STAGES)} or null", stage)
    delta = doc.obj("delta")
    delta_execution = doc.string("delta_execution")
    if delta_execution is not None and (delta is None or delta_execution != "fresh-rollout"):
        raise invalid(
            doc.where("delta_execution"),
            "'fresh-rollout', and only on a branch child (a node with a delta)",
            delta_execution,
        )
    reward, unscored = child_outcome(doc, branch=delta is not None)
    return TreeNode(
        id=node_id,
        parent=parent,
        stage=stage,
        snapshot=refs(doc.obj("snapshot")),
        reward=reward,
        unscored=unscored,
        value=doc.number("value"),
        has_value=doc.raw("value") is not None,
        delta=build(f.Delta, doc.where("delta"), **delta.data) if delta is not None else None,
        delta_execution=delta_execution,
        where=doc.where(),
    )


def check_placement(
    doc: Fields, node_id: str, parent: str | None, seen: set[str], *, first: bool
) -> None:
    """Ids are used once; the first node is the root, every other one hangs under a node listed
    before it."""
    if node_id in seen:
        raise invalid(doc.where("id"), "a node id used once", node_id)
    if first:
        if parent is not None or node_id != ROOT_NODE:
            raise invalid(
                doc.where("id"),
                f"the first node to be {ROOT_NODE!r} with parent null",
                doc.data,
            )
    elif parent is None or parent not in seen:
        raise invalid(
            doc.where("parent"),
            f"the id of a node listed before it, one of {sorted(seen)}",
            parent,
        )


def child_outcome(doc: Fields, *, branch: bool) -> tuple[float | None, str | None]:
    """(reward, unscored): at most one of them, and only on a branch child."""
    reward, unscored = doc.number("reward"), doc.string("unscored")
    if (reward is not None or unscored is not None) and not branch:
        raise invalid(
            doc.where("reward" if reward is not None else "unscored"),
            "an outcome only on a branch child (a node with a delta)",
            doc.data,
        )
    if reward is not None and unscored is not None:
        raise invalid(doc.where("unscored"), "either reward or unscored, never both", doc.data)
    return reward, unscored


def root_only() -> Tree:
    """The tree of a run that never branched (benchflow writes tree.json only after a branch)."""
    return Tree(
        [TreeNode(ROOT_NODE, None, None, None, None, None, None, None, None, "tree.json (absent)")],
        "tree.json",
        absent=True,
    )

"""`lineage history NODE`: a node's ancestry from the root run down, with what shaped each step.

Ancestry crosses runs (a continuation continues its parent's), and each event is shown on the step
it shaped. Everything is read from the read models, so `--as-of` works.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ...domain.errors import UnknownSubject
from .history_text import as_json, summarise
from .run_list import LIST_RUNS_HINT

if TYPE_CHECKING:
    from ...adapters.duckdb_store import ReadModelDB

FORK_LEVEL = {
    "fork.opened",
    "fork.closed",
    "fork.described",
    "custody.held",
    "custody.released",
    "custody.failed",
}
CHILD_LEVEL = {
    "fork.child_described",
    "fork.child_restored",
    "fork.child_scored",
    "fork.child_unscored",
    "fork.child_failed",
    "custody.handed_off",
}


@dataclass(frozen=True)
class NodeRef:
    run: str
    node: str
    fork: str | None = None
    child_index: int | None = None
    arm: str | None = None

    @property
    def address(self) -> str:
        return self.run if self.node == "root" else f"{self.run}:{self.node}"


@dataclass
class Step:
    ref: NodeRef
    kind: str  # root | linear | child
    events: list[dict[str, Any]] = field(default_factory=list)


def utc(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z") if moment else None


def resolve_node(db: ReadModelDB, address: str) -> NodeRef:
    """The node an address names (shared with `lineage diff`): `RUN` (the run's root node),
    `RUN:NODE` (a node of RUN's tree) or `RUN:FORK/ARM` (the child of fork FORK whose arm label is
    ARM, or `RUN:FORK/#I` for child index I). Run keys may hold `/` and arm labels `:` and `/`, so
    an address is resolved against what the log holds, not split blindly: the run is the longest
    recorded run key followed by `:`."""
    if db.scalar("SELECT count(*) FROM runs WHERE run = ?", [address]):
        return NodeRef(address, "root")
    runs = [
        r["run"]
        for r in db.rows(
            "SELECT run FROM runs WHERE starts_with(?, run || ':') ORDER BY length(run) DESC",
            [address],
        )
    ]
    if not runs:
        raise UnknownSubject(
            f"expected RUN, RUN:NODE or RUN:FORK/ARM naming a recorded run, found {address!r}",
            hint=LIST_RUNS_HINT,
        )
    run = runs[0]
    rest = address[len(run) + 1 :]
    node = db.rows(
        "SELECT node, fork, child_index FROM nodes WHERE run = ? AND node = ?", [run, rest]
    )
    if node:
        return _child_ref(db, run, node[0]["node"], node[0]["fork"], node[0]["child_index"])
    for cut in (i for i, char in enumerate(rest) if char == "/"):
        fork, arm = rest[:cut], rest[cut + 1 :]
        index = int(arm[1:]) if arm.startswith("#") and arm[1:].isdigit() else None
        match = db.rows(
            "SELECT node, child_index FROM fork_children c JOIN nodes n USING (run, fork, node) "
            "WHERE run = ? AND fork = ? AND (c.arm = ? OR c.idx = ?)",
            [run, fork, arm, index],
        )
        if match:
            return _child_ref(db, run, match[0]["node"], fork, match[0]["child_index"])
    nodes = [
        r["node"]
        for r in db.rows(
            "SELECT node FROM nodes WHERE run = ? ORDER BY position, child_index", [run]
        )
    ]
    arms = [
        f"{r['fork']}/{r['arm']}"
        for r in db.rows(
            "SELECT fork, arm FROM children WHERE run = ? ORDER BY fork, child_index", [run]
        )
    ]
    raise UnknownSubject(
        f"run {run!r} has no node or fork arm {rest!r}; found nodes {nodes} and arms {arms}",
        hint="address a node as RUN:NODE or a fork child as RUN:FORK/ARM (or RUN:FORK/#INDEX)",
    )


def _child_ref(
    db: ReadModelDB, run: str, node: str, fork: str | None, index: int | None
) -> NodeRef:
    arm = (
        db.scalar(
            "SELECT arm FROM fork_children WHERE run = ? AND fork = ? AND idx = ?",
            [run, fork, index],
        )
        if fork
        else None
    )
    return NodeRef(run, node, fork, index, arm)


def ancestry(db: ReadModelDB, target: NodeRef, seen: frozenset[str] = frozenset()) -> list[Step]:
    """Steps from the root of the oldest ancestor run down to `target`.

    A run registered with a `parent_run` (a continuation, or a fork child recorded as its own run)
    continues its parent's ancestry at `parent_node`, else at the node of the cut point's stage,
    else at the parent's root."""
    rows = db.rows(
        "SELECT a.node, n.kind, n.fork, n.child_index, c.arm FROM ancestors(?, ?) a "
        "JOIN nodes n ON n.run = ? AND n.node = a.node "
        "LEFT JOIN fork_children c ON c.run = n.run AND c.fork = n.fork AND c.idx = n.child_index "
        "ORDER BY a.depth DESC",
        [target.run, target.node, target.run],
    )
    steps = [
        Step(NodeRef(target.run, r["node"], r["fork"], r["child_index"], r["arm"]), r["kind"])
        for r in rows
    ]
    parent = db.rows(
        "SELECT r.parent_run, r.parent_node, c.stage FROM runs r LEFT JOIN "
        "cut_points c ON c.run = r.run WHERE r.run = ? AND r.parent_run IS NOT NULL",
        [target.run],
    )
    if not parent or parent[0]["parent_run"] in seen | {target.run}:
        return steps
    source = parent[0]["parent_run"]
    candidates = [
        parent[0]["parent_node"],
        db.scalar(
            "SELECT node FROM stages WHERE run = ? AND stage = ?", [source, parent[0]["stage"]]
        ),
        "root",
    ]
    for node in candidates:
        if node and db.scalar(
            "SELECT count(*) FROM nodes WHERE run = ? AND node = ?", [source, node]
        ):
            return ancestry(db, NodeRef(source, node), seen | {target.run}) + steps
    return steps


def _placements(
    event: dict[str, Any],
    fact: dict[str, Any],
    child_nodes: dict[tuple[str, str, int], str],
    ref_home: dict[str, tuple[str, str]],
) -> list[tuple[str, str]]:
    """The steps an event shaped: a capture on its node, a snapshot's other events (its lifetime) on
    the node it was captured on, else where a fork on the path opened at it or a child restored it;
    node openings, stage marks and evidence on their node; a fork's opening, closing and custody on
    the fork node (kept there by `_shapes` only when the path goes through that fork, or the node
    is the one asked about), and its opening on each child too (the child's delta); a child's
    restore, outcome and custody hand-off on the child; every other run-level fact on the root."""
    kind = event["type"]
    if kind.startswith("snapshot."):
        home = (
            (fact["run"], fact["node"])
            if kind == "snapshot.captured"
            else ref_home.get(fact["ref"])
        )
        return [home] if home else []
    run: str = fact["run"]  # every fact but a snapshot's names its run
    if kind in ("run.node_opened", "stage.marked", "run.evidence_observed"):
        return [(run, fact["node"])]
    if kind == "fork.opened":
        return [(run, fact["node"])] + [(run, child["node"]) for child in fact["children"]]
    if kind in CHILD_LEVEL:
        node = child_nodes.get((run, fact["fork"], fact["index"]))
        return [(run, node)] if node else []
    if kind in FORK_LEVEL:
        node = child_nodes.get((run, fact["fork"], -1))
        return [(run, node)] if node else []
    return [(run, "root")]


def history(db: ReadModelDB, address: str) -> tuple[NodeRef, list[Step]]:
    target = resolve_node(db, address)
    steps = ancestry(db, target)
    at = {(s.ref.run, s.ref.node): i for i, s in enumerate(steps)}
    runs = sorted({s.ref.run for s in steps})
    child_nodes: dict[tuple[str, str, int], str] = {}
    for row in db.rows(
        "SELECT run, fork, idx, node FROM fork_children WHERE run IN (SELECT unnest(?))", [runs]
    ):
        child_nodes[(row["run"], row["fork"], row["idx"])] = row["node"]
    for row in db.rows(
        "SELECT run, fork, node FROM fork_openings WHERE run IN (SELECT unnest(?))", [runs]
    ):
        child_nodes[(row["run"], row["fork"], -1)] = row["node"]
    ref_home: dict[str, tuple[str, str]] = {}
    for row in db.rows(
        """SELECT run, node, sandbox_ref, environment_ref FROM (
                              SELECT c.run, c.node, r.sandbox_ref, r.environment_ref, r.position FROM child_restores r
                              JOIN fork_children c USING (run, fork, idx)
                              UNION ALL SELECT run, node, sandbox_ref, environment_ref, position FROM fork_openings)
                          WHERE run IN (SELECT unnest(?)) ORDER BY position DESC""",  # noqa: E501
        [runs],
    ):
        for ref in (row["sandbox_ref"], row["environment_ref"]):
            if ref and (row["run"], row["node"]) in at:
                ref_home[ref] = (row["run"], row["node"])
    for row in db.rows(
        "SELECT ref, run, node FROM snapshot_events WHERE "
        "kind = 'captured' AND run IN (SELECT unnest(?))",
        [runs],
    ):
        ref_home[row["ref"]] = (row["run"], row["node"])
    events = db.rows(
        "SELECT position, type, occurred_at, recorded_at, actor, fact FROM "
        "events WHERE fact->>'run' IN (SELECT unnest(?)) OR (starts_with(type, "
        "'snapshot.') AND subject IN (SELECT unnest(?))) ORDER BY position",
        [runs, sorted(ref_home)],
    )
    for event in events:
        fact = as_json(event["fact"])
        for place in _placements(event, fact, child_nodes, ref_home):
            index = at.get(place)
            if index is None or not _shapes(event["type"], fact, steps, index, target, child_nodes):
                continue
            steps[index].events.append(
                {
                    "position": event["position"],
                    "type": event["type"],
                    "occurred_at": utc(event["occurred_at"]),
                    "recorded_at": utc(event["recorded_at"]),
                    "actor": event["actor"],
                    "summary": summarise(event["type"], fact, steps[index].ref),
                    "fact": {k: v for k, v in fact.items() if k != "type"},
                }
            )
    return target, steps


def _shapes(
    kind: str,
    fact: dict[str, Any],
    steps: list[Step],
    index: int,
    target: NodeRef,
    child_nodes: dict[tuple[str, str, int], str],
) -> bool:
    """A fork's own events belong on its node only if the path runs through that fork (or stops at
    its node)."""
    step = steps[index]
    if kind not in FORK_LEVEL or (kind == "fork.opened" and step.ref.node != fact["node"]):
        return True
    if (step.ref.run, step.ref.node) == (target.run, target.node):
        return True
    following = steps[index + 1] if index + 1 < len(steps) else None
    return (
        following is not None
        and following.ref.run == step.ref.run
        and following.ref.fork == fact["fork"]
    )


def history_document(db: ReadModelDB, address: str, position: int) -> dict[str, Any]:
    target, steps = history(db, address)
    return {
        "address": address,
        "run": target.run,
        "node": target.node,
        "position": position,
        "steps": [
            {
                "run": s.ref.run,
                "node": s.ref.node,
                "kind": s.kind,
                "fork": s.ref.fork,
                "child_index": s.ref.child_index,
                "arm": s.ref.arm,
                "events": s.events,
            }
            for s in steps
        ],
    }

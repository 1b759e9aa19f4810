"""`lineage tree RUN`: the fork tree as a person wants to see it, in the terminal or as a picture.
One model (`tree_model`) is read from the read models and rendered three ways: an indented terminal
tree, a Mermaid `flowchart TD` and a Graphviz `digraph`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..read_models.outcome_words import (
    STATUS_WORDS,
    V_MEANING,
    outcome_text,
    reward_text,
    run_reason,
    run_status,
)
from .branch_view import cost_text, fork_kind_text
from .exports.exports import require_run
from .history_text import ZERO_DELTA, delta_label
from .text_lines import one_line

if TYPE_CHECKING:
    from ...adapters.duckdb_store import ReadModelDB


@dataclass
class TreeNode:
    id: str
    parent: str | None = None
    details: list[str] = field(default_factory=list)
    forks: list[str] = field(default_factory=list)
    children: list[TreeNode] = field(default_factory=list)
    #: The word of `outcome_words` for the run's root and fork children; None for a step without one
    #: of its own.
    status: str | None = None
    reward: float | None = None
    reason: str | None = None
    #: `outcome_text` of the above: what the tree, the report and the JSON print for this node.
    result: str | None = None
    #: A fork child's arm (or its delta when it has none); the stages captured on the node.
    label: str | None = None
    stages: list[str] = field(default_factory=list)
    #: The node whose outcome this one's trajectory ends in: itself, the fork child above it, or the
    #: root.
    owner: str | None = None
    #: The fork this node is a child of (its arm), None for a step of a run's own cursor.
    fork: str | None = None
    #: `forks`' fork ids, in the same order (the text tree draws each fork's children under it).
    fork_ids: list[str] = field(default_factory=list)


@dataclass
class TreeModel:
    run: str
    header: str
    roots: list[TreeNode]
    #: The run a continuation replays (its `parent_run`), and where it was cut, for the picture's
    #: link.
    continues: str | None = None
    continues_from: str | None = None
    #: Every node in tree order (position, then child index), as `nodes` holds them.
    nodes: list[TreeNode] = field(default_factory=list)
    fork_rows: list[dict[str, Any]] = field(default_factory=list)
    run_row: dict[str, Any] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """`tree --format json`: the run, its forks and every node with what the text tree prints
        for it."""
        run = self.run_row
        return {
            "run": self.run,
            "task": run.get("task"),
            "status": run_status(run),
            "reward": run.get("reward"),
            "continues": self.continues,
            "continues_from": self.continues_from,
            "forks": self.fork_rows,
            "nodes": [
                {
                    "node": n.id,
                    "parent": n.parent,
                    "status": n.status,
                    "reward": n.reward,
                    "reason": n.reason,
                    "result": n.result,
                    "label": n.label,
                    "stages": n.stages,
                    "owner": n.owner,
                    "details": n.details,
                    "forks": n.forks,
                }
                for n in self.nodes
            ],
        }


#: Fill colours of the picture formats, one per status word (colour-blind safe; text stays black on
#: all of them).
OUTCOME_COLOURS = {
    "pass": "#b7e1a1",
    "fail": "#f4a6a6",
    "error": "#f7c873",
    "skipped": "#d9d9d9",
    "pending": "#a9cdf0",
}
assert set(OUTCOME_COLOURS) == set(STATUS_WORDS)


def run_outcome(row: dict[str, Any]) -> str:
    return outcome_text(run_status(row), row["reward"], run_reason(row))


def fork_value(fork: dict[str, Any], children: list[dict[str, Any]]) -> str:
    """V, or why there is none (benchflow: V exists only when every child was scored)."""
    if fork["value"] is not None:
        return f"V={reward_text(fork['value'])}"
    why = [
        f"child {c['child_index']} {c['status']}"
        for c in children
        if c["status"] in ("error", "skipped")
    ]
    if fork["outcome"] == "open":
        why.append("fork still open")
    elif fork["outcome"] == "partial":
        why.insert(0, "partial" + (f": {fork['error']}" if fork["error"] else ""))
    return "V undefined" + (f" ({'; '.join(why)})" if why else "")


Refs = Callable[[str | None, str | None], str]


def _refs(db: ReadModelDB, run: str) -> Refs:
    """How a node's snapshot refs read: each with what became of it (the `snapshots` view's
    lifetime: captured, exported, discarded, imported, adopted or rejected; "not recorded" for a
    ref the log has no fact of), so a reader sees at once whether it can be restored."""
    lifetime = {
        r["ref"]: r["lifetime"]
        for r in db.rows(
            "SELECT ref, lifetime FROM snapshots WHERE ref IN (SELECT "
            "sandbox_ref FROM stages WHERE run = ? UNION SELECT environment_ref "
            "FROM stages WHERE run = ? UNION SELECT sandbox_ref FROM forks WHERE "
            "run = ? UNION SELECT environment_ref FROM forks WHERE run = ?)",
            [run] * 4,
        )
    }

    def refs(sandbox: str | None, environment: str | None) -> str:
        shown = [
            f"{layer} {ref} ({lifetime.get(ref, 'not recorded')})"
            for layer, ref in (("sandbox", sandbox), ("environment", environment))
            if ref
        ]
        return ", ".join(shown) or "no snapshot"

    return refs


def _outcomes(
    nodes: dict[str, TreeNode], children: list[dict[str, Any]], run_row: dict[str, Any]
) -> None:
    """Each fork child's label and outcome from the `children` view, the root's from the `runs`
    view."""
    for child in children:
        node = nodes[child["node"]]
        node.label = f"arm {child['label']}" if child["label"] else _delta_text(child["delta"])
        node.status, node.reward, node.reason = child["status"], child["reward"], child["reason"]
    if "root" in nodes:
        root = nodes["root"]
        root.status, root.reward = run_status(run_row), run_row["reward"]
        root.reason = run_reason(run_row)


def _delta_text(delta: Any) -> str:
    """An arm without a label, by its delta: `delta skill_mode=...`, or `zero delta` (not "delta
    zero delta")."""
    said = delta_label(delta)
    return said if said == ZERO_DELTA else f"delta {said}"


def _forks(
    nodes: dict[str, TreeNode],
    forks: list[dict[str, Any]],
    children: list[dict[str, Any]],
    refs: Refs,
) -> list[dict[str, Any]]:
    """One line per fork on its node (where, how it closed, V), and the forks as rows for the
    document."""
    fork_rows = []
    by_fork: dict[Any, list[dict[str, Any]]] = {}  # each fork's children, found once, not per fork
    for child in children:
        by_fork.setdefault(child["fork"], []).append(child)
    for fork in forks:
        at = (
            f"at {fork['stage']}"
            if fork["stage"]
            else f"at cursor:{fork['node']} from "
            f"{refs(fork['sandbox_ref'], fork['environment_ref'])}"
        )
        value = fork_value(fork, by_fork.get(fork["fork"], []))
        cost = cost_text(fork)
        line = f"fork {fork['fork']} {at}, {fork['outcome']}: {value}"
        if fork.get("kind") == "retry":
            # a re-run of the finished trial from a checkpoint, beside its reward: no arm, no V
            line = f"{fork_kind_text(fork)}: {fork['fork']} {at}, {fork['outcome']}; not an arm"
        nodes[fork["node"]].forks.append(line + (f" · {cost}" if cost else ""))
        nodes[fork["node"]].fork_ids.append(fork["fork"])
        fork_rows.append(
            {
                "fork": fork["fork"],
                "node": fork["node"],
                "kind": fork.get("kind") or "fork",
                "outcome": fork["outcome"],
                "value": fork["value"],
                "value_text": value,
            }
        )
    return fork_rows


def _link(nodes: dict[str, TreeNode], order: list[dict[str, Any]]) -> list[TreeNode]:
    """Children under their parents (the roots returned), each node's result text and owner."""
    roots: list[TreeNode] = []
    for row in order:
        node = nodes[row["node"]]
        parent = nodes.get(row["parent"]) if row["parent"] is not None else None
        (parent.children if parent is not None else roots).append(node)
        if node.status is not None:
            node.result = outcome_text(node.status, node.reward, node.reason)
            node.owner = node.id
        elif parent is not None:
            node.owner = parent.owner  # `nodes` lists a parent before its children
        node.details += [part for part in (node.label, node.result) if part]
    return roots


def tree_model(db: ReadModelDB, run: str) -> TreeModel:
    """Each node with the stages captured on it and their snapshot refs, a fork child's arm label
    (or its delta when it has no label) and its reward or the reason it has none, and one line
    per fork opened at the node with V or why V is undefined."""
    header_row = require_run(db, run)
    refs = _refs(db, run)
    order = db.rows(
        "SELECT node, parent, fork, child_index FROM nodes "
        "WHERE run = ? ORDER BY position, child_index",
        [run],
    )
    nodes = {row["node"]: TreeNode(row["node"], row["parent"], fork=row["fork"]) for row in order}
    for stage in db.rows("SELECT * FROM stages WHERE run = ? ORDER BY position", [run]):
        node = nodes[stage["node"]]
        node.stages.append(stage["stage"])
        node.details.append(
            f"[{stage['stage']}] {refs(stage['sandbox_ref'], stage['environment_ref'])}"
        )
    children = db.rows(
        "SELECT c.*, fc.arm AS label FROM children c JOIN fork_children "
        "fc ON fc.run = c.run AND fc.fork = c.fork AND fc.idx = "
        "c.child_index WHERE c.run = ? ORDER BY c.fork, c.child_index",
        [run],
    )
    _outcomes(nodes, children, header_row)
    forks = db.rows("SELECT * FROM forks WHERE run = ? ORDER BY position", [run])
    fork_rows = _forks(nodes, forks, children, refs)
    roots = _link(nodes, order)
    cut = db.rows("SELECT source_run, stage FROM cut_points WHERE run = ?", [run])
    continues = header_row["parent_run"] or (cut[0]["source_run"] if cut else None)
    return TreeModel(
        run,
        f"{run}  task {header_row['task']} · {run_outcome(header_row)}",
        roots,
        continues=continues,
        continues_from=cut[0]["stage"] if cut and cut[0]["stage"] else None,
        nodes=[nodes[row["node"]] for row in order],
        fork_rows=fork_rows,
        run_row=header_row,
    )


def _continuation_label(model: TreeModel) -> str:
    at = f" at {model.continues_from}" if model.continues_from else ""
    return f"continues {model.continues}{at}"


def _label(node: TreeNode) -> str:
    return "  ".join([node.id, " · ".join(node.details)]) if node.details else node.id


#: The text tree's guides: a branch, the last branch, and what continues below each.
BRANCH, LAST, BELOW, BELOW_LAST = "├── ", "└── ", "│   ", "    "
#: The narrowest a folded line's text gets, however deep the tree (deeper lines run past the width).
MIN_FOLD = 24


def render_text(model: TreeModel, width: int | None = None) -> str:
    """The indented tree; every line is one line whatever the recorded ids hold (`one_line`). A
    node's own cursor steps are its branches; each fork it opened is a branch too, with that fork's
    children (its arms) under it, so a step is never drawn as an arm. A continuation says which run
    it continues, and where, as mermaid and JSON do. With `width` (a terminal's), a longer line is
    folded at spaces under its own guides, so the terminal never wraps it across them."""
    lines: list[tuple[str, str, str]] = [("", "", one_line(model.header))]
    if model.continues:
        lines.append(("", "", one_line(_continuation_label(model))))

    def items(node: TreeNode) -> list[tuple[str, Any]]:
        """The node's branches in tree order: cursor steps, and each fork where its first child
        is."""
        found: list[tuple[str, Any]] = []
        for child in node.children:
            if child.fork is None or child.fork not in node.fork_ids:
                found.append(("node", child))
            elif not any(kind == "fork" and value == child.fork for kind, value in found):
                found.append(("fork", child.fork))
        found += [("fork", f) for f in node.fork_ids if ("fork", f) not in found]
        return found

    def walk(node: TreeNode, prefix: str, branch: str, below: str) -> None:
        inner = prefix + below
        below_me = items(node)
        lines.append(
            (prefix + branch, inner + (BELOW if below_me else BELOW_LAST), one_line(_label(node)))
        )
        for i, (kind, value) in enumerate(below_me):
            last = i == len(below_me) - 1
            if kind == "node":
                walk(value, inner, LAST if last else BRANCH, BELOW_LAST if last else BELOW)
                continue
            arms = [c for c in node.children if c.fork == value]
            text = node.forks[node.fork_ids.index(value)]
            under = inner + (BELOW_LAST if last else BELOW)
            lines.append(
                (
                    inner + (LAST if last else BRANCH),
                    under + (BELOW if arms else BELOW_LAST),
                    one_line(text),
                )
            )
            for j, arm in enumerate(arms):
                end = j == len(arms) - 1
                walk(arm, under, LAST if end else BRANCH, BELOW_LAST if end else BELOW)

    for root in model.roots:
        walk(root, "", "", "")
    if model.fork_rows:
        lines.append(("", "", V_MEANING))
    return "".join(
        line + "\n" for first, rest, text in lines for line in _fold(first, rest, text, width)
    )


def _fold(first: str, rest: str, text: str, width: int | None) -> list[str]:
    """`first + text`, or on a terminal of `width` columns its lines: folded at spaces (a word
    longer than a line is split), each after the guides `rest`."""
    if width is None or len(first) + len(text) <= width:
        return [first + text]
    import textwrap

    room = max(MIN_FOLD, width - max(len(first), len(rest)))
    parts = textwrap.wrap(text, room, break_on_hyphens=False) or [text]
    return [first + parts[0], *(rest + part for part in parts[1:])]


def _walk(roots: list[TreeNode]) -> list[tuple[TreeNode, TreeNode | None]]:
    out: list[tuple[TreeNode, TreeNode | None]] = []
    stack: list[tuple[TreeNode, TreeNode | None]] = [(root, None) for root in reversed(roots)]
    while stack:
        node, parent = stack.pop()
        out.append((node, parent))
        stack.extend((child, node) for child in reversed(node.children))
    return out


def mermaid_id(node_id: str, taken: set[str]) -> str:
    """A node id sanitised to `[A-Za-z0-9_]` and made unique: picture formats never trust a node id
    as an identifier. Every label is escaped too (`mermaid_text`, `dot_text`), because arm labels
    carry quotes and braces."""
    base = "n_" + re.sub(r"[^A-Za-z0-9_]", "_", node_id)
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}_{n}", n + 1
    taken.add(candidate)
    return candidate


def mermaid_text(text: str) -> str:
    """Mermaid entity codes for every character that could end a quoted label or start markup."""
    for char, code in (("#", "#35;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;"), ("`", "#96;")):
        text = text.replace(char, code)
    return text


def render_mermaid(model: TreeModel) -> str:
    """A flowchart with each node in its outcome's class (`classDef`), and a continuation's source
    run as a dotted link into its root."""
    taken: set[str] = set()
    ids: dict[int, str] = {}
    lines = ["flowchart TD"]
    edges = []
    classes: dict[str, list[str]] = {}
    for node, parent in _walk(model.roots):
        ids[id(node)] = mermaid_id(node.id, taken)
        label = "<br/>".join(
            mermaid_text(one_line(part)) for part in [node.id, *node.details, *node.forks]
        )
        lines.append(f'    {ids[id(node)]}["{label}"]')
        if node.status:
            classes.setdefault(node.status, []).append(ids[id(node)])
        if parent is not None:
            edges.append(f"    {ids[id(parent)]} --> {ids[id(node)]}")
    if model.continues and model.roots:
        source = mermaid_id("continues", taken)
        lines.append(f'    {source}(["{mermaid_text(_continuation_label(model))}"])')
        edges.append(f"    {source} -.-> {ids[id(model.roots[0])]}")
    styles = [f"    classDef {name} fill:{colour}" for name, colour in OUTCOME_COLOURS.items()]
    styles += [f"    class {','.join(members)} {name}" for name, members in classes.items()]
    return "\n".join(lines + edges + styles) + "\n"


def dot_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_dot(model: TreeModel) -> str:
    lines = [
        f"digraph {dot_text(model.run)} {{",
        "    rankdir=TB;",
        '    node [shape=box, fontname="monospace"];',
    ]
    edges = []
    for node, parent in _walk(model.roots):
        label = dot_text(chr(10).join([node.id, *node.details, *node.forks]))
        fill = (
            f', style=filled, fillcolor="{OUTCOME_COLOURS[node.status]}", class="{node.status}"'
            if node.status
            else ""
        )
        lines.append(f"    {dot_text(node.id)} [label={label}{fill}];")
        if parent is not None:
            edges.append(f"    {dot_text(parent.id)} -> {dot_text(node.id)};")
    if model.continues and model.roots:
        source = dot_text(f"source:{model.continues}")
        lines.append(f"    {source} [label={dot_text(_continuation_label(model))}, shape=ellipse];")
        edges.append(f"    {source} -> {dot_text(model.roots[0].id)} [style=dashed];")
    return "\n".join(lines + edges + ["}"]) + "\n"


RENDERERS = {"text": render_text, "mermaid": render_mermaid, "dot": render_dot}

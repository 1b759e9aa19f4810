"""`lineage tree RUN`: the fork tree as a person wants to see it, in the terminal or as a picture.

One model (`tree_model`) is read from the read models and rendered three ways: an indented terminal tree
(`text`), a Mermaid `flowchart TD` and a Graphviz `digraph`. Each node shows the stages captured on it with
their snapshot refs and what became of them (captured / exported / discarded / imported / adopted, so a
reader sees at once whether it can be restored), a fork child's arm label (or its delta when it has no
label) and its reward or the reason it has none, and one line per fork opened at the node with V or why V is
undefined. Picture formats never trust a node id as an identifier: Mermaid ids are sanitised to
`[A-Za-z0-9_]` (made unique) and every label is escaped, because arm labels carry quotes and braces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .exports import require_run
from .history_text import delta_label

if TYPE_CHECKING:
    from ..adapters.duckdb_store import ReadModelDB


@dataclass
class TreeNode:
    id: str
    details: list[str] = field(default_factory=list)
    forks: list[str] = field(default_factory=list)
    children: list[TreeNode] = field(default_factory=list)
    #: pass / fail / unscored / error / pending for the run's root and fork children; None for linear steps.
    outcome: str | None = None


@dataclass
class TreeModel:
    run: str
    header: str
    roots: list[TreeNode]
    #: The run a continuation replays (its `parent_run`), and where it was cut, for the picture's link.
    continues: str | None = None
    continues_from: str | None = None


#: Fill colours of the picture formats, one per outcome (colour-blind safe; text stays black on all of them).
OUTCOME_COLOURS = {
    "pass": "#b7e1a1",
    "fail": "#f4a6a6",
    "unscored": "#d9d9d9",
    "error": "#f7c873",
    "pending": "#a9cdf0",
}


def node_outcome(kind: str | None, reward: float | None, ended: bool = False) -> str:
    """One word for what became of a run or fork child: scored is pass (reward >= 1, benchflow's rule) or fail;
    failed is error; no outcome is pending (`ended`: skipped because its fork ended partial, also unscored)."""
    if kind == "scored":
        return "pass" if reward is not None and reward >= 1.0 else "fail"
    if kind == "failed":
        return "error"
    if kind == "unscored" or ended:
        return "unscored"
    return "pending"


def _num(value: float) -> str:
    return f"{value:g}"


def run_outcome(row: dict[str, Any]) -> str:
    if row["outcome"] == "scored":
        return f"reward {_num(row['reward'])}"
    if row["outcome"] == "unscored":
        return f"unscored: {row['unscored_reason']}"
    if row["outcome"] == "failed":
        return f"failed: {row['error']}"
    return "pending (no outcome yet)"


def child_outcome(child: dict[str, Any], fork_outcome: str) -> str:
    if child["outcome"] == "scored":
        return f"reward {_num(child['reward'])}"
    if child["outcome"] in ("unscored", "failed"):
        return f"{child['outcome']}: {child['reason']}"
    return (
        "skipped (the fork ended partial)"
        if fork_outcome == "partial"
        else "pending (no outcome yet)"
    )


def fork_value(fork: dict[str, Any], children: list[dict[str, Any]]) -> str:
    """V, or why there is none (benchflow: V exists only when every child was scored)."""
    if fork["value"] is not None:
        return f"V={_num(fork['value'])}"
    why = [
        f"child {c['child_index']} {c['outcome']}"
        for c in children
        if c["outcome"] in ("unscored", "failed")
    ]
    if fork["outcome"] == "open":
        why.append("fork still open")
    elif fork["outcome"] == "partial":
        why.insert(0, "partial" + (f": {fork['error']}" if fork["error"] else ""))
    return "V undefined" + (f" ({'; '.join(why)})" if why else "")


def tree_model(db: ReadModelDB, run: str) -> TreeModel:
    header_row = require_run(db, run)
    lifetime = {
        r["ref"]: r["lifetime"]
        for r in db.rows(
            "SELECT ref, lifetime FROM snapshots WHERE ref IN (SELECT sandbox_ref FROM stages WHERE run = ? UNION "
            "SELECT environment_ref FROM stages WHERE run = ? UNION SELECT sandbox_ref FROM forks WHERE run = ? UNION "
            "SELECT environment_ref FROM forks WHERE run = ?)",
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

    nodes: dict[str, TreeNode] = {}
    order = db.rows(
        "SELECT node, parent, fork, child_index FROM nodes WHERE run = ? ORDER BY position, child_index",
        [run],
    )
    for row in order:
        nodes[row["node"]] = TreeNode(row["node"])
    for stage in db.rows("SELECT * FROM stages WHERE run = ? ORDER BY position", [run]):
        nodes[stage["node"]].details.append(
            f"[{stage['stage']}] {refs(stage['sandbox_ref'], stage['environment_ref'])}"
        )
    forks = db.rows("SELECT * FROM forks WHERE run = ? ORDER BY position", [run])
    fork_outcome = {f["fork"]: f["outcome"] for f in forks}
    children = db.rows(
        "SELECT c.*, fc.arm AS label FROM children c JOIN fork_children fc ON fc.run = c.run AND fc.fork = c.fork "
        "AND fc.idx = c.child_index WHERE c.run = ? ORDER BY c.fork, c.child_index",
        [run],
    )
    for child in children:
        label = (
            f"arm {child['label']}" if child["label"] else f"delta {delta_label(child['delta'])}"
        )
        node = nodes[child["node"]]
        node.details += [label, child_outcome(child, fork_outcome[child["fork"]])]
        node.outcome = node_outcome(
            child["outcome"], child["reward"], fork_outcome[child["fork"]] == "partial"
        )
    for fork in forks:
        at = (
            f"at {fork['stage']}"
            if fork["stage"]
            else f"at cursor:{fork['node']} from {refs(fork['sandbox_ref'], fork['environment_ref'])}"
        )
        mine = [c for c in children if c["fork"] == fork["fork"]]
        nodes[fork["node"]].forks.append(
            f"fork {fork['fork']} {at}, {fork['outcome']}: {fork_value(fork, mine)}"
        )
    roots: list[TreeNode] = []
    for row in order:
        (nodes[row["parent"]].children if row["parent"] in nodes else roots).append(
            nodes[row["node"]]
        )
    if "root" in nodes:
        nodes["root"].outcome = node_outcome(header_row["outcome"], header_row["reward"])
    cut = db.rows("SELECT source_run, stage FROM cut_points WHERE run = ?", [run])
    continues = header_row["parent_run"] or (cut[0]["source_run"] if cut else None)
    return TreeModel(
        run,
        f"{run}  task {header_row['task']} · {run_outcome(header_row)}",
        roots,
        continues=continues,
        continues_from=cut[0]["stage"] if cut and cut[0]["stage"] else None,
    )


def _continuation_label(model: TreeModel) -> str:
    at = f" at {model.continues_from}" if model.continues_from else ""
    return f"continues {model.continues}{at}"


def _label(node: TreeNode) -> str:
    return "  ".join([node.id, " · ".join(node.details)]) if node.details else node.id


def render_text(model: TreeModel) -> str:
    lines = [model.header]

    def walk(node: TreeNode, prefix: str, branch: str, below: str) -> None:
        lines.append(prefix + branch + _label(node))
        inner = prefix + below
        lines.extend(inner + ("│ " if node.children else "  ") + fork for fork in node.forks)
        for i, child in enumerate(node.children):
            last = i == len(node.children) - 1
            walk(child, inner, "└── " if last else "├── ", "    " if last else "│   ")

    for root in model.roots:
        walk(root, "", "", "")
    return "\n".join(lines) + "\n"


def _walk(roots: list[TreeNode]) -> list[tuple[TreeNode, TreeNode | None]]:
    out: list[tuple[TreeNode, TreeNode | None]] = []
    stack: list[tuple[TreeNode, TreeNode | None]] = [(root, None) for root in reversed(roots)]
    while stack:
        node, parent = stack.pop()
        out.append((node, parent))
        stack.extend((child, node) for child in reversed(node.children))
    return out


def mermaid_id(node_id: str, taken: set[str]) -> str:
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
    """A flowchart with each node in its outcome's class (`classDef`), and a continuation's source run as a
    dotted link into its root."""
    taken: set[str] = set()
    ids: dict[int, str] = {}
    lines = ["flowchart TD"]
    edges = []
    classes: dict[str, list[str]] = {}
    for node, parent in _walk(model.roots):
        ids[id(node)] = mermaid_id(node.id, taken)
        label = "<br/>".join(mermaid_text(part) for part in [node.id, *node.details, *node.forks])
        lines.append(f'    {ids[id(node)]}["{label}"]')
        if node.outcome:
            classes.setdefault(node.outcome, []).append(ids[id(node)])
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
            f', style=filled, fillcolor="{OUTCOME_COLOURS[node.outcome]}", class="{node.outcome}"'
            if node.outcome
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

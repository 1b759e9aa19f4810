"""`lineage report`: one self-contained HTML file an auditor can open anywhere, offline.

No script, no network: the style sheet is inline, each fork tree is inline SVG, and the only links
are anchors inside the file (a finding links to the node it is about). Every value from the log is
untrusted input (a run or arm name can hold markup), so each one goes through `esc` before it
reaches the page, and no recorded name is ever used as an element id: nodes get ids of our own
(`r0-n3`), and the recorded name is only text.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from ..read_models.outcome_words import STATUS_WORDS, V_MEANING
from .arms.arms import FIXED_COLUMNS
from .branch_view import UNKNOWN_USD, cost_text, fork_kind_text, retry_text
from .report import OUTCOMES, ReportNode, RunReport
from .tree_view import OUTCOME_COLOURS

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 170, 46, 20, 34, 10
LABEL_CHARS = 24
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;"
    "margin:.5em 0 1.5em}table{max-width:100%}td,th{border:1px solid #ccc;padding:.2em "
    ".5em;font-size:.9em;text-align:left;vertical-align:top;overflow-wrap:anywhere}"
    "th{overflow-wrap:normal}div.tree{max-width:100%;overflow-x:auto}svg "
    "line.continues{stroke-dasharray:4 3}svg g.continues rect{fill:#fff;stroke-dasharray:4 3}svg "
    "a text{fill:#0645ad;text-decoration:underline}code,.mono{font-family:ui-monospace,monospace}"
    "section.run{border-top:3px solid "
    "#444;margin-top:2em}td.flip{font-weight:bold;background:#fff3cd}svg "
    "text{font-family:ui-monospace,monospace;font-size:11px;fill:#111}svg "
    "rect{stroke:#555;stroke-width:1;fill:#fff}svg "
    "line{stroke:#888;stroke-width:1.5}.verdict{font-weight:bold}"
    ".finding-not-publishable{color:#b71c1c}.finding-quarantine{color:#e65100}"
    + "".join(
        f"svg g.outcome-{name} rect{{fill:{colour}}}"
        f".legend .outcome-{name}{{background:{colour};padding:0 .4em}}"
        for name, colour in OUTCOME_COLOURS.items()
    )
)


def _visible(ch: str) -> str:
    """Control and invisible format characters (a right-to-left override that would show
    `evil<RLO>gnp.exe` as `evilexe.png`, line separators) shown as escapes rather than obeyed, as
    the terminal printer shows them."""
    hidden = unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") and ch not in "\n\t"
    return f"\\u{ord(ch):04x}" if hidden else ch


def esc(value: Any) -> str:
    """Text for the page, escaped (quotes too, so it is safe inside attributes)."""
    if value is None:
        return ""
    if isinstance(value, (bool, list, dict)):  # true / false as the row printer and JSON spell them
        value = json.dumps(value, sort_keys=True)
    elif not isinstance(value, str):
        value = str(value)
    if not value.isprintable():
        value = "".join(_visible(ch) for ch in value)
    return html.escape(value, quote=True)


def _short(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def heading(name: str) -> str:
    """A column name, escaped, that may wrap after each `_` or `.` and nowhere else: a table of
    many columns (arms with their costs and tests) fits the window, and a name never breaks
    letter by letter."""
    return re.sub(r"([_.])", r"\1<wbr>", esc(name))


def _table(columns: Sequence[str], rows: Iterable[Sequence[Any]], css: str = "") -> str:
    head = "".join(f"<th>{heading(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _layout(nodes: list[ReportNode]) -> dict[str, tuple[float, int]]:
    """(x, depth) per node: leaves side by side in tree order, a parent centred over its
    children."""
    below: dict[str | None, list[str]] = {}
    known = {n.node for n in nodes}
    for n in nodes:
        below.setdefault(n.parent if n.parent in known else None, []).append(n.node)
    place: dict[str, tuple[float, int]] = {}
    next_leaf = 0.0
    # iterative post-order, so a 10,000-deep chain does not exhaust the recursion limit
    stack: list[tuple[str, int, bool]] = [
        (root, 0, False) for root in reversed(below.get(None, []))
    ]
    while stack:
        node, depth, done = stack.pop()
        kids = below.get(node, [])
        if not kids:
            place[node] = (next_leaf, depth)
            next_leaf += 1
        elif done:
            xs = [place[k][0] for k in kids]
            place[node] = ((xs[0] + xs[-1]) / 2, depth)
        else:
            stack.append((node, depth, True))
            stack.extend((k, depth + 1, False) for k in reversed(kids))
    return place


def node_id(index: int, position: int) -> str:
    return f"r{index}-n{position}"


def _continuation_box(report: RunReport, x: float, sections: dict[str, int]) -> str:
    """The run this one continues, above its root: a link to that run's section when the page has
    it."""
    source = report.continues or ""
    at = f"at {report.continues_from}" if report.continues_from else "(cut point not recorded)"
    name = f'<text x="{x + 6:.0f}" y="{PAD + 28:.0f}">{esc(_short(source))}</text>'
    if source in sections:
        name = f'<a href="#run-{sections[source]}">{name}</a>'
    return (
        f'<g class="continues"><title>{esc(f"continues {source} {at}")}</title>'
        f'<rect x="{x:.0f}" y="{PAD}" width="{BOX_W}" height="{BOX_H}" rx="5"/>'
        f'<text x="{x + 6:.0f}" y="{PAD + 15:.0f}">continues</text>{name}'
        f'<text x="{x + 6:.0f}" y="{PAD + 41:.0f}">{esc(_short(at))}</text></g>'
    )


def tree_svg(report: RunReport, index: int, sections: dict[str, int] | None = None) -> str:
    """The fork tree; a continuation's source run is drawn above its root, joined by a dashed
    line."""
    place = _layout(report.nodes)
    ids = {n.node: node_id(index, i) for i, n in enumerate(report.nodes)}
    top = BOX_H + GAP_Y if report.continues and report.nodes else 0
    width = (max((x for x, _ in place.values()), default=0) + 1) * (BOX_W + GAP_X) + PAD
    height = (max((d for _, d in place.values()), default=0) + 1) * (BOX_H + GAP_Y) + PAD + top

    def corner(node: str) -> tuple[float, float]:
        x, depth = place[node]
        return PAD + x * (BOX_W + GAP_X), PAD + top + depth * (BOX_H + GAP_Y)

    edges, boxes = [], []
    if top:
        rx, ry = corner(report.nodes[0].node)
        boxes.append(_continuation_box(report, rx, sections or {}))
        edges.append(
            f'<line class="continues" x1="{rx + BOX_W / 2:.0f}" y1="{PAD + BOX_H:.0f}" '
            f'x2="{rx + BOX_W / 2:.0f}" y2="{ry:.0f}"/>'
        )
    for n in report.nodes:
        x, y = corner(n.node)
        if n.parent in place:
            px, py = corner(n.parent)
            edges.append(
                f'<line x1="{px + BOX_W / 2:.0f}" y1="{py + BOX_H:.0f}" '
                f'x2="{x + BOX_W / 2:.0f}" y2="{y:.0f}"/>'
            )
        # the box's three lines are cut to fit; the hover title holds them whole
        title = f"{n.node} · {n.label} · {n.detail}" if n.label else f"{n.node} · {n.detail}"
        boxes.append(
            f'<g class="node outcome-{n.outcome}" id="{ids[n.node]}" data-node="{esc(n.node)}">'
            f"<title>{esc(title)}</title>"
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="5"/>'
            f'<text x="{x + 6:.0f}" y="{y + 15:.0f}">{esc(_short(n.node))}</text>'
            f'<text x="{x + 6:.0f}" y="{y + 28:.0f}">{esc(_short(n.label))}</text>'
            f'<text x="{x + 6:.0f}" y="{y + 41:.0f}">{esc(_short(n.detail))}</text></g>'
        )
    return (
        f'<div class="tree"><svg class="tree" width="{width:.0f}" height="{height:.0f}" viewBox="0 '
        f'0 {width:.0f} {height:.0f}" role="img">{"".join(edges)}{"".join(boxes)}</svg></div>'
    )


def _cell(row: dict[str, Any], column: str) -> Any:
    """An arms row's value; USD not reported reads "unknown" where tokens were counted."""
    if column == "usd" and row["usd"] is None and row["tokens"] is not None:
        return UNKNOWN_USD
    return row[column]


def _arms(report: RunReport) -> str:
    table = report.arms
    if len(table.rows) <= 1:
        return "<p>No forks.</p>"
    head = "".join(f"<th>{heading(c)}</th>" for c in (*table.columns[:-1],))
    body = []
    for row in table.rows:
        cells = [f"<td>{esc(_cell(row, c))}</td>" for c in FIXED_COLUMNS]
        for test in table.tests:
            flip = ' class="test flip"' if test in row["flips"] else ' class="test"'
            cells.append(f"<td{flip}>{esc(row[test])}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    differing = "; ".join(
        f"fork {esc(fork)}: {esc(', '.join(names) or 'none')}"
        for fork, names in table.differing.items()
    )
    retries = (
        f" Checkpoint retries, which are no arms: {esc(', '.join(table.retries))}."
        if table.retries
        else ""
    )
    return (
        f'<table class="arms"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
        f"<p>Highlighted: differs from {esc(table.baseline)}. "
        f"Tests that differ between arms: {differing}.{retries}</p>"
    )


def _ranged(value: float | None, low: float | None, high: float | None) -> str | None:
    """`0.600 [0.231, 0.882]`: a value with its 95% interval (none printed for too few trials)."""
    if value is None:
        return None
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{value:.3f}{interval}"


def _arm_stats(report: RunReport) -> str:
    """The task's arms over its repeated trials (`lineage arms --stats`), each against the baseline
    arm."""
    table = report.arm_stats
    if table is None:
        return "<p>No named arms.</p>"
    rows = (
        (
            r["arm"],
            r["trials"],
            r["passes"],
            _ranged(r["pass_rate"], r["pass_low"], r["pass_high"]),
            _ranged(r["mean_reward"], r["reward_low"], r["reward_high"]),
            r["unscored"],
            r["pairs"],
            None if r["p_value"] is None else f"{r['p_value']:.3g}",
            _ranged(r["reward_diff"], r["diff_low"], r["diff_high"]),
            r["verdict"],
        )
        for r in table.rows
    )
    columns = ("arm", "trials", "passes", "pass rate", "mean reward", "unscored", "pairs", "p")
    return _table((*columns, "reward difference", "verdict"), rows, "arm-stats") + (
        f'<p class="arm-stats-scope">{esc(table.title)}.</p>'
    )


def _stages(report: RunReport) -> str:
    if not report.stages:
        return "<p>No stages recorded.</p>"
    return _table(
        ("stage", "node", "exchanges", "layers", "sandbox", "lifetime", "environment", "lifetime"),
        (
            (
                s["stage"],
                s["node"],
                s["exchanges_completed"],
                ", ".join(s["layers"] or []),
                s["sandbox_ref"],
                s["sandbox_lifetime"],
                s["environment_ref"],
                s["environment_lifetime"],
            )
            for s in report.stages
        ),
        "stages",
    )


def _forks_and_custody(report: RunReport) -> str:
    forks = _table(
        ("fork", "kind", "node", "branch point", "children", "outcome", "V", "error", "cost"),
        (
            (
                f["fork"],
                fork_kind_text(f),
                f["node"],
                f["branch_point"],
                f["n_children"],
                f["outcome"],
                f["value"],
                f["error"],
                cost_text(f),
            )
            for f in report.forks
        ),
        "forks",
    )
    custody = _table(
        (
            "fork",
            "hold",
            "entries",
            "handed off",
            "released",
            "failures",
            "preserved at",
            "conserved",
        ),
        (
            (
                c["fork"],
                c["hold_location"],
                c["held_entries"],
                c["handed_off"],
                c["released"],
                c["failures"],
                c["preserved_location"],
                c["conserved"],
            )
            for c in report.custody
        ),
        "custody",
    )
    return f"<h3>Forks</h3>{forks}<h3>Custody</h3>{custody if report.custody else '<p>None.</p>'}"


CUT_COLUMNS = (
    "run",
    "source_run",
    "stage",
    "accounting",
    "configured_k",
    "served_k",
    "n_divergences",
    "recorded_request_digest",
    "served_request_digest",
)


#: The `cut_points` columns as headers that can wrap between words (the table fits a 1,280 px
#: window).
CUT_HEADERS = tuple(column.replace("_", " ") for column in CUT_COLUMNS)


def _cut_points(report: RunReport) -> str:
    parts = []
    if report.cut_point is not None:
        parts.append(_table(CUT_HEADERS, [[report.cut_point[c] for c in CUT_COLUMNS]], "cut-point"))
        parts.append(
            _table(
                ("exchange", "served digest", "recorded digest", "messages served", "recorded"),
                (
                    (
                        d["exchange_index"],
                        d["served_request_digest"],
                        d["recorded_request_digest"],
                        d["n_messages_served"],
                        d["n_messages_recorded"],
                    )
                    for d in report.divergences
                ),
                "divergences",
            )
        )
    if report.continuations:
        parts.append("<p>Continuations of this run:</p>")
        parts.append(
            _table(CUT_HEADERS, ([c[col] for col in CUT_COLUMNS] for c in report.continuations))
        )
    return "".join(parts) or "<p>Not a continuation, and none continues it.</p>"


def _audit(report: RunReport, index: int) -> str:
    ids = {n.node: node_id(index, i) for i, n in enumerate(report.nodes)}
    run = report.run["run"]
    items = []
    for finding in report.audit["findings"]:
        where = esc(finding["subject"])
        if finding["run"] == run and finding["node"] in ids:
            where = f'<a href="#{ids[finding["node"]]}">{esc(finding["address"])}</a>'
        items.append(
            f'<li class="finding finding-{esc(finding["level"])}">'
            f"<b>{esc(finding['level'])}</b> [{esc(finding['check'])}] {where}: "
            f"{esc(finding['message'])}</li>"
        )
    return (
        f'<p class="verdict">verdict: {esc(report.audit["verdict"])}</p>'
        f'<ul class="findings">{"".join(items) or "<li>no findings</li>"}</ul>'
    )


def _run_section(report: RunReport, index: int, sections: dict[str, int]) -> str:
    run = report.run
    summary = _table(
        ("task", "agent", "model", "outcome", "reward", "retry", "role", "parent run", "run dir"),
        [
            [
                run["task"],
                run["agent"],
                run["model"],
                run["outcome"],
                run["reward"],
                retry_text(run),
                run["role"],
                run["parent_run"],
                run["run_dir"],
            ]
        ],
        "summary",
    )
    return (
        f'<section class="run" id="run-{index}"><h2>{esc(run["run"])}</h2>{summary}'
        f"<h3>Fork tree</h3>{tree_svg(report, index, sections)}"
        f"<h3>Arms × tests</h3>{_arms(report)}"
        f"<h3>Arm statistics</h3>{_arm_stats(report)}"
        f"<h3>Stage snapshots</h3>{_stages(report)}"
        f"{_forks_and_custody(report)}"
        f"<h3>Cut point and divergences</h3>{_cut_points(report)}"
        f"<h3>Audit</h3>{_audit(report, index)}</section>"
    )


def render(reports: list[RunReport], head: str | None, integrity: dict[str, Any]) -> str:
    legend = "; ".join(
        f'<span class="outcome-{name}">{name}</span> {esc(STATUS_WORDS[name])}' for name in OUTCOMES
    )
    legend += "; white: a step, whose outcome is that of the node it names. " + esc(V_MEANING) + "."
    sections = {r.run["run"]: i for i, r in enumerate(reports)}
    index = "".join(
        f'<li><a href="#run-{i}">{esc(r.run["run"])}</a> ({esc(r.audit["verdict"])})</li>'
        for i, r in enumerate(reports)
    )
    chain = (
        f"intact, {esc(integrity['events'])} events"
        if integrity["intact"]
        else f"BROKEN at position {esc(integrity['first_bad_position'])}: "
        f"{esc(integrity['problem'])}"
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'\">"
        f"<title>rollout-lineage report</title><style>{STYLE}</style></head><body>"
        "<h1>rollout-lineage report</h1>"
        f'<p>Built from log head <code class="head">{esc(head or "(empty log)")}</code>; '
        f"hash chain {chain}.</p>"
        f'<p class="legend">Node status: {legend}</p><ul class="runs">{index}</ul>'
        + "".join(_run_section(r, i, sections) for i, r in enumerate(reports))
        + "</body></html>\n"
    )

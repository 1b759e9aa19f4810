"""`lineage audit` for people: the report `audit_report.audit_report` builds, as lines of text.

Kept beside the audit it renders, so the CLI only chooses between this text and the report's JSON or
rows. Counts per class come first and the verdict line names counts and a few runs, so a batch of
thousands reads in a screen; the runs, slots and findings listed are a page of `audit_view.view_of`.
"""

from __future__ import annotations

from typing import Any

from ..text_lines import one_line
from .audit_view import PAGE_SIZE, AuditView, verdict_line, view_of
from .checks import SLOT_FIELDS, slot_label


def render_audit(report: dict[str, Any]) -> str:
    """The text of a report, or of the view `view_of` made of it (a report alone: its first
    page)."""
    if "view" not in report:
        report = view_of(report, AuditView(size=PAGE_SIZE))
    counts, view = report["counts"], report["view"]
    lines = [f"audit at log position {report['position']}: {counts['runs']} run(s)"]
    lines.append(_counts_line(counts))
    if "slot" in counts:
        lines.append("slots: " + _named(counts["slot"]))
    shown = _shown(report)
    if shown:
        lines.append(shown)
    if "groups" in report:
        lines += _group_lines(report["groups"], view["group_by"])
    else:
        lines += [_run_line(row) for row in report["runs"]]
    if report["matrix"]:
        lines.append("matrix slots:")
        lines += [
            f"  {slot['status']:<9}  "
            f"{slot_label(tuple(slot[k] for k in SLOT_FIELDS))}  {slot['detail']}"
            for slot in report["matrix"]
        ]
    lines.append("findings:" if report["findings"] else "findings: none")
    lines += [_finding_line(finding) for finding in report["findings"]]
    integrity = report["integrity"]
    lines.append(
        (
            f"log integrity: intact, {integrity['events']} events, head {integrity['head']}"
            if integrity["head"]
            else "log integrity: intact, and empty (no event yet, so no head)"
        )
        if integrity["intact"]
        else f"log integrity: BROKEN at position "
        f"{integrity['first_bad_position']}: {integrity['problem']}"
    )
    lines.append(verdict_line(report))
    return "\n".join(one_line(line) for line in lines) + "\n"  # a recorded newline draws no line


def _named(tally: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in tally.items()) or "none"


def _counts_line(counts: dict[str, Any]) -> str:
    line = "classes: " + _named(counts["class"])
    return line + (f"; oracle lane: {counts['oracle']} run(s)" if counts["oracle"] else "")


def _shown(report: dict[str, Any]) -> str | None:
    """What of the report this page lists, when that is not simply every run."""
    view = report["view"]
    filters = "; ".join(f"{name} {', '.join(values)}" for name, values in view["filters"].items())
    if not filters and view["pages"] == 1 and view["group_by"] is None:
        return None
    matched = view["matched"]
    if view["group_by"] is not None:
        total, noun, listed = matched["groups"], "group(s)", len(report["groups"])
    else:
        total, noun, listed = matched["runs"], "run(s)", len(report["runs"])
    first = (view["page"] - 1) * (view["page_size"] or 0) + 1
    span = f"{first}-{first + listed - 1} of {total}" if listed else f"0 of {total}"
    line = f"showing {span} {'matching ' if filters else ''}{noun}"
    line += f" ({filters})" if filters else ""
    if view["group_by"] is not None:
        line += f" by {view['group_by']}"
    if view["pages"] > 1:
        line += f"; page {view['page']} of {view['pages']}"
        if view["page"] < view["pages"]:
            line += f", --page {view['page'] + 1} for the next"
    return line


def _group_lines(groups: list[dict[str, Any]], name: str) -> list[str]:
    width = max([len(name), *(len(str(g[name] or "-")) for g in groups)])
    lines = [f"  {name:<{width}}  {'runs':>6}  {'withheld':>8}  classes"]
    for group in groups:
        slots = f" (slots {group['slots']})" if "slots" in group else ""
        lines.append(
            f"  {group[name] or '-':<{width}}  {group['runs']:>6}  {group['withheld']:>8}  "
            f"{_named(group['classes'])}{slots}"
        )
    return lines


def _run_line(row: dict[str, Any]) -> str:
    detail = row["result"] if row["health"] == "healthy" else "; ".join(row["reasons"])
    detail += f" (superseded by {row['superseded_by']})" if row["superseded_by"] else ""
    detail += " (oracle lane, reported apart)" if row["lane"] == "oracle" else ""
    detail += f" [{row['preservation']}]" if row["preservation"] else ""
    return f"  {row['status']:<11}  {row['health']:<9}  {row['run']}  {detail}"


def _finding_line(finding: dict[str, Any]) -> str:
    at = finding["address"]
    shown = at not in (None, finding["subject"], f"{finding['subject']}:root")
    return (
        f"  {finding['level']:<15}  {finding['check']:<21}  "
        f"{finding['subject']}: {finding['message']}" + (f" (at {at})" if shown else "")
    )

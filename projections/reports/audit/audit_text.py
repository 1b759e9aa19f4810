"""`lineage audit` for people: the report `audit_report.audit_report` builds, as lines of text.

Kept beside the audit it renders, so the CLI only chooses between this text and the report's JSON or
rows.
"""

from __future__ import annotations

from typing import Any

from ..text_lines import one_line
from .checks import SLOT_FIELDS, slot_label


def render_audit(report: dict[str, Any]) -> str:
    lines = [f"audit at log position {report['position']}: {len(report['runs'])} run(s)"]
    lines += [_run_line(row) for row in report["runs"]]
    if report["matrix"] is not None:
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
    named = f" (quarantined: {', '.join(report['quarantined'])})" if report["quarantined"] else ""
    lines.append(f"verdict: {report['verdict']}{named}")
    return "\n".join(one_line(line) for line in lines) + "\n"  # a recorded newline draws no line


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

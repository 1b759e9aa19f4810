"""What `lineage audit` shows of a report at scale: counts per class first, the runs filtered by
class, task, agent, model, skill mode and matrix-slot state, or grouped by one of them, a page at a
time, and a verdict line that names counts and a few runs.

Design decision: a view never changes the verdict. `audit_report` judges the selection (`--run`,
`--task`, `--since`, `--matrix`); `view_of` only chooses what of that report is listed, so `lineage
audit --class leakage` shows the leakage runs of a batch whose verdict stays the batch's. Pure: it
reads the report's own document, so the CLI and a page can both use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ....domain.errors import InvalidInput
from .audit_gate import CLASS_ORDER, ORACLE
from .checks import BLOCKER, QUARANTINE, SLOT_FIELDS, WARNING, slot_label

#: A run's class, in the order counts are given: SKILL.md's healthy results, then its unhealthy
#: classes in the order the first that applies is chosen.
CLASSES = ("pass", "fail", "normal_timeout", *CLASS_ORDER)
#: A matrix slot's state (`checks.classify_slots`); `outside` is a run that fills no slot.
SLOT_STATES = ("healthy", "missing", "duplicate", "stale", "unhealthy", "outside")
#: What runs can be filtered and grouped by: a field of each run, and `slot`, its slot's state.
FIELDS = ("class", "task", "agent", "model", "skill_mode", "slot")
#: How many runs the verdict line names; `--format json` names every one.
NAMED = 3
#: Runs (or groups) a text page lists unless told.
PAGE_SIZE = 50


@dataclass(frozen=True)
class AuditView:
    """What to list: runs whose fields are among `filters` (field -> accepted values; a field left
    out accepts all), or their groups by `group_by`, page `page` of `size` (None: everything)."""

    filters: dict[str, tuple[str, ...]] = field(default_factory=dict)
    group_by: str | None = None
    page: int = 1
    size: int | None = None


def run_slots(report: dict[str, Any]) -> dict[str, str]:
    """Each run's slot state: the state of the slot it fills, `outside` when it fills none (only
    with a matrix)."""
    if report.get("matrix") is None:
        return {}
    states = {run: slot["status"] for slot in report["matrix"] for run in slot["runs"]}
    return {row["run"]: states.get(row["run"], "outside") for row in report["runs"]}


def _value(row: dict[str, Any], name: str, slots: dict[str, str]) -> str | None:
    if name == "slot":
        return slots.get(row["run"])
    value = row.get(name)
    return None if value is None else str(value)


def _tally(values: Any, order: tuple[str, ...] = ()) -> dict[str, int]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    known = [k for k in order if k in counted]
    return {k: counted[k] for k in known + sorted((k for k in counted if k not in order), key=str)}


def counts(report: dict[str, Any]) -> dict[str, Any]:
    """Counts over the whole report: model runs per class, runs per standing in the verdict, the
    oracle lane's runs, findings per level, blockers by check, what is quarantined by why
    (`_reasons`), matrix slots per state."""
    model = [row for row in report["runs"] if row["lane"] != ORACLE]
    standing = ("ok", "warned", "quarantined", "blocked")
    levels = (BLOCKER, QUARANTINE, WARNING)
    out: dict[str, Any] = {
        "runs": len(report["runs"]),
        "class": _tally((row["class"] for row in model), CLASSES),
        "status": _tally((row["status"] for row in model), standing),
        "oracle": len(report["runs"]) - len(model),
        "findings": _tally((f["level"] for f in report["findings"]), levels),
        "blockers": _tally(f["check"] for f in report["findings"] if f["level"] == BLOCKER),
        "quarantined": _reasons(report),
    }
    if report.get("matrix") is not None:
        out["slot"] = _tally((slot["status"] for slot in report["matrix"]), SLOT_STATES)
    return out


def _slot_matches(slot: dict[str, Any], filters: dict[str, tuple[str, ...]]) -> bool:
    """A slot has no class; it matches the rest of the filters by its own fields and state."""
    if filters.get("class"):
        return False
    wanted = {**{name: slot.get(name) for name in SLOT_FIELDS}, "slot": slot["status"]}
    return all(
        not accepted or (wanted.get(name) is not None and str(wanted.get(name)) in accepted)
        for name, accepted in filters.items()
    )


def _page(items: list[Any], page: int, size: int | None) -> list[Any]:
    return items if size is None else items[(page - 1) * size : page * size]


def _groups(
    runs: list[dict[str, Any]], name: str, slots: dict[str, str], matrix: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per value of `name`: its runs, how many the verdict withholds, and per class."""
    grouped: dict[str | None, list[dict[str, Any]]] = {}
    for row in runs:
        grouped.setdefault(_value(row, name, slots), []).append(row)
    if name == "slot":  # a state no run is in (missing slots) is still a group
        for slot in matrix:
            grouped.setdefault(slot["status"], [])
    order = SLOT_STATES if name == "slot" else CLASSES if name == "class" else ()
    keys = sorted(
        grouped,
        key=lambda k: (k is None, order.index(k) if k in order else len(order), k or ""),
    )
    return [
        {
            name: key,
            "runs": len(grouped[key]),
            "withheld": sum(r["status"] in ("quarantined", "blocked") for r in grouped[key]),
            "classes": _tally((r["class"] for r in grouped[key]), CLASSES),
            **({"slots": sum(s["status"] == key for s in matrix)} if name == "slot" else {}),
        }
        for key in keys
    ]


def _refuse_unknown(report: dict[str, Any], view: AuditView) -> None:
    unknown = sorted(set(view.filters) - set(FIELDS))
    if unknown or (view.group_by is not None and view.group_by not in FIELDS):
        raise InvalidInput(
            f"expected filters and a grouping among {', '.join(FIELDS)}, "
            f"found {', '.join(unknown) or view.group_by}"
        )
    if (view.filters.get("slot") or view.group_by == "slot") and report.get("matrix") is None:
        raise InvalidInput(
            "expected --matrix with a slot filter or grouping, found no matrix",
            hint="slot states come from the slots a --matrix file expects",
        )


def _pages(view: AuditView, rows: int) -> int:
    """How many pages `rows` take; a page past the last is refused, never shown empty."""
    pages = max(1, math.ceil(rows / view.size)) if view.size else 1
    if view.page > pages:
        raise InvalidInput(
            f"expected --page from 1 to {pages}, found {view.page}",
            hint=f"{rows} row(s) match, {view.size} a page",
        )
    return pages


def view_of(report: dict[str, Any], view: AuditView) -> dict[str, Any]:
    """The report as `view` lists it: the same verdict, counts and integrity; runs, matrix slots and
    findings filtered and paged (or runs grouped), and `view` saying what was shown of how many."""
    _refuse_unknown(report, view)
    slots = run_slots(report)
    wanted = {name: accepted for name, accepted in view.filters.items() if accepted}
    runs = [
        row
        for row in report["runs"]
        if all(_value(row, name, slots) in accepted for name, accepted in wanted.items())
    ]
    matrix = [s for s in report.get("matrix") or [] if _slot_matches(s, wanted)]
    grouped = view.group_by is not None
    groups = _groups(runs, view.group_by, slots, matrix) if view.group_by is not None else []
    pages = _pages(view, len(groups) if grouped else max(len(runs), len(matrix)))
    shown_runs = [] if grouped else _page(runs, view.page, view.size)
    shown_slots = [] if grouped else _page(matrix, view.page, view.size)
    document = {
        **report,
        "counts": counts(report),
        "runs": shown_runs,
        "matrix": shown_slots if report.get("matrix") is not None else None,
        "findings": _findings(report, shown_runs, shown_slots, grouped),
        "view": {
            "filters": {name: list(values) for name, values in wanted.items()},
            "group_by": view.group_by,
            "page": view.page,
            "pages": pages,
            "page_size": view.size,
            "matched": {
                "runs": len(runs),
                "slots": len(matrix),
                "groups": len(groups) if grouped else None,
            },
        },
    }
    if grouped:
        document["groups"] = _page(groups, view.page, view.size)
    return document


def _findings(
    report: dict[str, Any],
    runs: list[dict[str, Any]],
    slots: list[dict[str, Any]],
    grouped: bool,
) -> list[dict[str, Any]]:
    """The findings about the listed runs and slots, and those about the batch as a whole (no listed
    run or slot: the log, the selection, a directory that could not be read), which every page
    shows; grouped, only the latter."""
    everyone = {row["run"] for row in report["runs"]}
    every_slot = {slot_label(tuple(s[k] for k in SLOT_FIELDS)) for s in report.get("matrix") or []}
    listed = {row["run"] for row in runs}
    listed_slots = {slot_label(tuple(s[k] for k in SLOT_FIELDS)) for s in slots}
    kept = []
    for finding in report["findings"]:
        run, subject = finding.get("run"), finding["subject"]
        if run in everyone:
            keep = not grouped and run in listed
        elif subject in every_slot and run is None:
            keep = not grouped and subject in listed_slots
        else:
            keep = True
        if keep:
            kept.append(finding)
    return kept


def verdict_line(report: dict[str, Any]) -> str:
    """`verdict: ...` naming counts and at most `NAMED` of what is withheld, never a list as long as
    the batch: blockers by check, quarantines by the class of their run (or their check). A view's
    document carries the whole report's counts, so every page says the batch's verdict."""
    line = f"verdict: {report['verdict']}"
    tally = report["counts"] if "counts" in report else counts(report)
    blockers = tally["blockers"]
    withheld = report["quarantined"]
    parts = []
    if blockers:
        total = sum(blockers.values())
        parts.append(f"{total} blocker(s) ({_listed(blockers)})")
    if withheld:
        named = ", ".join(withheld[:NAMED]) + (
            f" and {len(withheld) - NAMED} more (--format json lists them all)"
            if len(withheld) > NAMED
            else ""
        )
        parts.append(f"{len(withheld)} quarantined ({_listed(tally['quarantined'])}): {named}")
    return line + (": " + "; ".join(parts) if parts else "")


def _listed(tally: dict[str, int]) -> str:
    return ", ".join(f"{name} {n}" for name, n in tally.items())


def _reasons(report: dict[str, Any]) -> dict[str, int]:
    """Why each quarantined subject is withheld: an unhealthy run's class; otherwise the check of
    its first quarantine finding (a fork's arm, a matrix slot, a directory that could not be
    read)."""
    classes = {r["run"]: r["class"] for r in report["runs"] if r["health"] == "unhealthy"}
    checks: dict[str, str] = {}
    for finding in report["findings"]:
        if finding["level"] == QUARANTINE:
            checks.setdefault(finding.get("run") or finding["subject"], finding["check"])
    return _tally(
        (classes.get(subject) or checks.get(subject, "other") for subject in report["quarantined"]),
        CLASSES,
    )

"""`lineage audit PATH...` and `lineage audit --parity A B`: run directories audited where they are.

Both import the directories into a log held in memory, with read models in a temporary folder that
is removed afterwards, so nothing is written to any store, as the experiment-review skill's
validator reads a folder without recording it. A directory that cannot be read is an unhealthy run
of its own, never skipped: a corrupt result.json (`discovery.read_result`) is a `corrupt-run`
finding, any other file that cannot be read a `run-directory` one. The import's "may still be
running" rule does not decide an audit: a run it would wait for is read as it is (`unfinished`), so
one that has not finished is judged, and withheld, rather than left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..bootstrap import Lineage
from ..domain.errors import LineageError
from ..projections.reports.audit.audit_parity import compare_batches
from ..projections.reports.audit.audit_report import audit_report
from ..projections.reports.audit.checks import (
    BLOCKER,
    EXIT_CODES,
    NOT_PUBLISHABLE,
    PUBLISHABLE,
    Finding,
)
from ..projections.reports.history_text import as_json
from .output import note


@contextmanager
def _scratch(paths: list[Path]) -> Iterator[tuple[Any, Lineage, list[tuple[str, LineageError]]]]:
    """PATHS imported into a log held in memory (read models in a temporary folder), thrown away
    after; with the run directories that could not be read (a corrupt result.json among them), each
    with why. Folders that hold no run are named on stderr, as `lineage import` names them."""
    import tempfile

    from ..adapters.importers.service import import_runs
    from ..bootstrap import in_memory
    from ..projections.engine.runner import open_read_models

    with tempfile.TemporaryDirectory(prefix="lineage-audit-") as home:
        scratch = in_memory(home, actor="lineage audit")
        summary = import_runs(scratch, list(paths), keep_going=True, unfinished=True)
        for skipped in summary.skipped:
            note(f"skipped {skipped.path}: {skipped.reason}")
        for warning in summary.warnings:
            note(f"warning: {warning}")
        models = open_read_models(scratch)
        try:
            yield models, scratch, [(r.path, r.error) for r in summary.errors]
        finally:
            models.close()


def audit_directories(paths: list[Path], selection: dict[str, Any]) -> dict[str, Any]:
    """Audit PATHS where they are: nothing touches a store."""
    with _scratch(paths) as (models, scratch, unreadable):
        return audit_report(
            models.db,
            scratch.verify().summary(),
            position=models.position,
            unreadable=unreadable,
            **selection,
        )


def _parity_side(path: Path) -> tuple[list[dict[str, Any]], list[tuple[str, LineageError]]]:
    """Each run of one batch as the parity check compares it: its audit row, evidence and file
    schema."""
    from ..adapters.rundir import RunFolder

    with _scratch([path]) as (models, scratch, unreadable):
        report = audit_report(models.db, scratch.verify().summary(), position=models.position)
        extra = {
            r["run"]: r
            for r in models.db.rows(
                "SELECT r.run, l.path AS run_dir, e.acp_present, e.llm_present, e.results_present, "
                "e.review FROM runs r LEFT JOIN evidence e ON e.run = r.run AND e.node = 'root' "
                "LEFT JOIN (SELECT run, max(path) AS path FROM run_locations WHERE kind = 'read' "
                "GROUP BY run) l ON l.run = r.run"
            )
        }
    rows = []
    for run in report["runs"]:
        more = extra[run["run"]]
        issues = {i["check"] for i in (as_json(more["review"]) or {}).get("issues", ())}
        folder = RunFolder(Path(more["run_dir"]))
        rows.append(
            {
                **run,
                **{k: more[k] for k in ("acp_present", "llm_present", "results_present")},
                "tokens": "result.token_usage" not in issues,
                "timed": "result.timing" not in issues,
                "schema": artifact_schema(folder),
            }
        )
    return rows, unreadable


def artifact_schema(folder: Any) -> list[str]:
    """The rollout's artifact files (top level and trajectory/) and result.json's top-level keys."""
    names = _files(folder.root, "") + _files(folder.root / "trajectory", "trajectory")
    result = folder.read_json("result.json") if folder.exists("result.json") else None
    keys = sorted(f"result.json:{k}" for k in result) if isinstance(result, dict) else []
    return sorted(names) + keys


def _files(where: Path, prefix: str) -> list[str]:
    if not where.is_dir():
        return []
    return [f"{prefix}/{p.name}" if prefix else p.name for p in where.iterdir() if p.is_file()]


def parity_report(a: Path, b: Path) -> dict[str, Any]:
    left, unreadable_a = _parity_side(a)
    right, unreadable_b = _parity_side(b)
    slots, findings = compare_batches(left, right)
    findings += [
        Finding("parity", BLOCKER, path, f"the run directory cannot be read: {why}", path)
        for path, why in unreadable_a + unreadable_b
    ]
    if not slots:
        findings.append(Finding("parity", BLOCKER, "batches", f"no runs found under {a} or {b}"))
    outcome = NOT_PUBLISHABLE if findings else PUBLISHABLE
    return {
        "a": str(a),
        "b": str(b),
        "slots": slots,
        "findings": [f.as_dict() for f in findings],
        "verdict": "parity holds" if not findings else "parity broken",
        "exit_code": EXIT_CODES[outcome],
    }


def render_parity(report: dict[str, Any]) -> str:
    lines = [f"parity: A {report['a']}  B {report['b']}", f"slots ({len(report['slots'])}):"]
    lines += [
        f"  {'same   ' if not s['differs'] else 'differs'}  "
        f"{s['slot']}  A {s['a'] or '-'}  B {s['b'] or '-'}"
        for s in report["slots"]
    ]
    lines.append("blockers:" if report["findings"] else "blockers: none")
    lines += [f"  {f['message']}" for f in report["findings"]]
    lines.append(f"verdict: {report['verdict']}")
    return "\n".join(lines) + "\n"

"""`lineage audit`'s report: the read-model rows of the selected runs, every check of `checks.py`
run over them, and the verdict.

Design decision: the checks and the policy they apply stay pure functions over rows in `checks.py`
(so states the domain refuses can still be tested there); this module is the one that asks the read
models, runs the checks, and assembles the document the CLI prints as text (`audit_text.py`), JSON
or rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ....domain.errors import CorruptRunFile, InvalidInput, LineageError
from .. import cut_point
from ..history_text import as_json
from ..run_list import resolve_run
from . import audit_gate as gate
from .checks import (
    BLOCKER,
    EXIT_CODES,
    QUARANTINE,
    WARNING,
    Finding,
    Slot,
    check_branch_starts,
    check_custody,
    check_forks,
    check_snapshots,
    classify_run,
    classify_slots,
    run_slot,
    run_standing,
    verdict,
)

if TYPE_CHECKING:
    from ....adapters.duckdb_store import ReadModelDB


def _in(column: str) -> str:
    return f"{column} IN (SELECT unnest($runs))"


def _presented(db: ReadModelDB, runs: list[str]) -> list[dict[str, Any]]:
    """Refs each fork (its stage's refs, limited to its layers, unless it names its own) and each
    restore relied on."""
    presented = []
    for o in db.rows(
        f"SELECT o.*, s.sandbox_ref AS stage_sandbox, s.environment_ref "
        f"AS stage_environment FROM fork_openings o LEFT JOIN stages s "
        f"ON s.run = o.run AND s.stage = o.stage WHERE {_in('o.run')}",
        {"runs": runs},
    ):
        own = o["sandbox_ref"] or o["environment_ref"]
        layers = o["layers"] or ["sandbox", "environment"]
        refs = (
            [o["sandbox_ref"], o["environment_ref"]]
            if own
            else [
                o["stage_sandbox"] if "sandbox" in layers else None,
                o["stage_environment"] if "environment" in layers else None,
            ]
        )
        what = f"fork {o['fork']} of {o['run']} (at {o['stage'] or 'cursor:' + o['node']})"
        presented += [
            {
                "run": o["run"],
                "node": o["node"],
                "what": what,
                "ref": ref,
                "position": o["position"],
                "occurred_at": o["occurred_at"],
            }
            for ref in refs
            if ref
        ]
    for r in db.rows(
        f"SELECT r.*, c.node FROM child_restores r LEFT JOIN "
        f"fork_children c USING (run, fork, idx) WHERE {_in('r.run')}",
        {"runs": runs},
    ):
        what = f"child {r['idx']} of fork {r['fork']} of {r['run']} (restore)"
        presented += [
            {
                "run": r["run"],
                "node": r["node"],
                "what": what,
                "ref": ref,
                "position": r["position"],
                "occurred_at": r["occurred_at"],
            }
            for ref in (r["sandbox_ref"], r["environment_ref"])
            if ref
        ]
    return presented


def _resolve_selection(db: ReadModelDB, run: str | None, task: str | None) -> str | None:
    """`--run` resolved as every command resolves a run (an id or a unique prefix); an unknown run
    or task is refused with what exists, rather than audited as an empty selection."""
    if run is not None:
        run = resolve_run(db, run)
        if not db.scalar("SELECT count(*) FROM runs WHERE run = ?", [run]):
            raise InvalidInput(
                f"expected a recorded run for --run, found "
                f"{run!r}, which no run's id, trial or last "
                "path part starts with",
                hint="`lineage runs` lists the runs",
            )
    if task is not None and not db.scalar("SELECT count(*) FROM runs WHERE task = ?", [task]):
        tasks = [
            r["task"]
            for r in db.rows("SELECT DISTINCT task FROM runs WHERE task IS NOT NULL ORDER BY task")
        ]
        shown = ", ".join(tasks[:10]) + (f" and {len(tasks) - 10} more" if len(tasks) > 10 else "")
        raise InvalidInput(
            f"expected a task some run recorded for --task, "
            f"found {task!r}; recorded tasks: {shown or 'none'}",
            hint="`lineage runs` lists each run's task",
        )
    return run


def _selected_runs(
    db: ReadModelDB, run: str | None, task: str | None, since: datetime | None
) -> list[dict[str, Any]]:
    """The runs to audit; a benchflow run's trial (its rollout name) comes from its evidence when
    its registration, recorded by an earlier version, has none."""
    return db.rows(
        "SELECT r.* REPLACE (coalesce(r.trial, e.trial) AS trial) FROM runs r "
        "LEFT JOIN evidence e ON e.run = r.run AND e.node = 'root' "
        "WHERE ($run IS NULL OR r.run = $run) AND ($task IS NULL OR r.task = $task) "
        "AND ($since IS NULL OR r.registered_at >= $since) ORDER BY r.position",
        {"run": run, "task": task, "since": since},
    )


def _run_reasons(
    row: dict[str, Any], health: dict[str, Any], evidence: dict[str, Any] | None, oracle: bool
) -> list[gate.Reason]:
    """(check, class, reason) for each way the run is unhealthy: its outcome, then the skill's
    review (as recorded at import) or, for evidence read by an earlier version, the counts it
    recorded."""
    reasons = [("run-health", gate.INFRASTRUCTURE, reason) for reason in health["reasons"]]
    review = as_json(evidence.get("review")) if evidence is not None else None
    skill_mode = (evidence or {}).get("skill_mode") or row["skill_mode"]
    if review is not None:
        passed = health["result"] == "pass"
        if evidence is not None and evidence["partial_trajectory"]:
            # SKILL.md is stricter than its validator: a partial trajectory is not a normal timeout.
            reasons.append(
                (
                    "trajectory-gate",
                    gate.INFRASTRUCTURE,
                    "the trajectory is partial (partial_trajectory "
                    "is true): not a complete attempt",
                )
            )
        return reasons + gate.review_reasons(review, skill_mode, oracle=oracle, passed=passed)
    reasons += [(c, gate.INFRASTRUCTURE, r) for c, r in gate.gate_reasons(evidence, oracle=oracle)]
    skills = None if oracle else gate.skill_problem(skill_mode, evidence)
    klass = gate.LEAKAGE if skill_mode == "no-skill" else gate.FIDELITY
    return reasons + ([("skill-loading", klass, skills)] if skills else [])


def _health_findings(row: dict[str, Any], evidence: dict[str, Any] | None) -> list[Finding]:
    """Classify one run (its outcome and the skill's evidence checks) into `row`; the findings that
    follow."""
    oracle = gate.is_oracle(row["agent"])
    health = classify_run(row)
    checks = _run_reasons(row, health, evidence, oracle)
    if checks and health["health"] == "healthy":
        health = {"health": "unhealthy", "result": None, "reasons": []}
    health["reasons"] = [reason for _, _, reason in checks]
    health["class"] = gate.headline_class([klass for _, klass, _ in checks]) or health["result"]
    row.update(health, lane=gate.ORACLE if oracle else "model")
    # A superseded run is not a candidate for publication (its continuation is), so its health is
    # only noted; an oracle lane is reward-only evidence, reported apart from the model runs.
    level, note = (
        (WARNING, f" (superseded by {row['superseded_by']})")
        if row["superseded_by"]
        else (QUARANTINE, "")
    )
    if oracle:
        return [
            Finding(
                "oracle-lane",
                WARNING,
                row["run"],
                f"oracle run, reported apart from the model runs: unhealthy: {reason}",
                row["run"],
                "root",
            )
            for _, _, reason in checks
        ]
    return [
        Finding(
            check,
            level,
            row["run"],
            f"unhealthy ({gate.CLASS_WORDS[klass]}): {reason}{note}",
            row["run"],
            "root",
        )
        for check, klass, reason in checks
    ]


def _arm_reasons(child: dict[str, Any] | None, evidence: dict[str, Any]) -> list[gate.Reason]:
    review = as_json(evidence.get("review"))
    if review is None:
        return [(c, gate.INFRASTRUCTURE, r) for c, r in gate.gate_reasons(evidence, oracle=False)]
    passed = child is not None and (child.get("reward") or 0) >= 1.0
    return gate.review_reasons(review, None, oracle=False, passed=passed)


def _arm_findings(
    db: ReadModelDB,
    runs: list[dict[str, Any]],
    evidence: dict[tuple[str, str], dict[str, Any]],
    params: dict[str, Any],
) -> list[Finding]:
    """Each fork arm of a model run: the skill's review of a fresh-rollout arm's own directory,
    skill loading for with-skill arms and leakage for no-skill ones (a run's own are part of its
    health)."""
    model = {r["run"] for r in runs if r["lane"] == "model"}
    children = db.rows(
        f"SELECT * FROM children WHERE {_in('run')} ORDER BY run, fork, child_index", params
    )
    by_node = {(c["run"], c["node"]): c for c in children}
    findings = [
        Finding(
            check,
            QUARANTINE,
            f"{key}:{node}",
            f"arm at node {node} unhealthy ({gate.CLASS_WORDS[klass]}): {reason}",
            key,
            node,
        )
        for (key, node), row in sorted(evidence.items())
        if node != "root" and key in model
        for check, klass, reason in _arm_reasons(by_node.get((key, node)), row)
    ]
    for c in children:
        if c["run"] not in model or c["skill_mode"] is None:
            continue
        own = evidence.get((c["run"], c["node"]))
        review = as_json(own.get("review")) if own is not None else None
        problems = (
            [r for _, _, r in gate.skill_reasons(c["skill_mode"], review)]
            if review is not None
            else [p for p in [gate.skill_problem(c["skill_mode"], own)] if p]
        )
        findings += [
            Finding(
                "skill-loading",
                QUARANTINE,
                f"{c['run']}:{c['fork']}/{c['arm']}",
                problem,
                c["run"],
                c["node"],
            )
            for problem in problems
        ]
    return findings


def _changed_evidence_findings(evidence: dict[tuple[str, str], dict[str, Any]]) -> list[Finding]:
    return [
        Finding(
            "evidence-changed",
            WARNING,
            f"{key}:{node}",
            f"its files were read {row['observations']} times with "
            "different contents (the latest is judged): a run read while "
            "benchflow still wrote results.jsonl, or files changed after the run",
            key,
            node,
        )
        for (key, node), row in sorted(evidence.items())
        if row["observations"] > 1
    ]


def _preservation_findings(
    db: ReadModelDB, params: dict[str, Any]
) -> tuple[list[Finding], dict[str, str]]:
    receipts = db.rows(f"SELECT * FROM receipts WHERE {_in('run')} ORDER BY position", params)
    levels = {"blocker": BLOCKER, "quarantine": QUARANTINE}
    findings = [
        Finding("preservation", levels[level], key, message, key, "root")
        for level, key, message in gate.preservation_problems(receipts)
    ]
    states = {
        r["run"]: "preserved, unqualified" if r["result"] == "sealed" else "preservation failed"
        for r in receipts
    }
    return findings, states


REPORTED_RUN_FIELDS = (
    "run",
    "task",
    "agent",
    "model",
    "skill_mode",
    "trial",
    "role",
    "lane",
    "outcome",
    "reward",
    "health",
    "result",
    "class",
    "reasons",
    "superseded_by",
)


def _nothing_left(
    model_runs: list[dict[str, Any]], findings: list[Finding], matrix: list[dict[str, Any]] | None
) -> list[Finding]:
    """A verdict that follows its findings: when no model run (or no matrix slot) is left to publish
    once the quarantines are taken out, the batch is not publishable, whatever else holds."""
    withheld = {f.run or f.subject for f in findings if f.level in (BLOCKER, QUARANTINE)}
    candidates = [r for r in model_runs if not r["superseded_by"]]
    left = [r for r in candidates if r["run"] not in withheld]
    problems = []
    if candidates and not left:
        problems.append(
            Finding(
                "selection",
                BLOCKER,
                "store",
                f"no healthy model run remains: all {len(candidates)} "
                f"current model run(s) are quarantined",
            )
        )
    if matrix and not any(slot["status"] == "healthy" for slot in matrix):
        problems.append(
            Finding(
                "selection",
                BLOCKER,
                "matrix",
                f"no matrix slot is healthy: {len(matrix)} expected, "
                + ", ".join(f"{n} {s}" for s, n in _counts(slot["status"] for slot in matrix)),
            )
        )
    return problems


def _counts(values: Any) -> list[tuple[str, int]]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    return sorted(counted.items())


def _selection_findings(
    runs: list[dict[str, Any]], model_runs: list[dict[str, Any]]
) -> list[Finding]:
    if model_runs:
        return []
    oracle = f" ({len(runs)} oracle run(s) are reported apart)" if runs else ""
    return [
        Finding(
            "selection",
            BLOCKER,
            "store",
            f"no model run matched the selection{oracle}, so there is nothing to publish",
        )
    ]


def _fork_and_custody_findings(db: ReadModelDB, params: dict[str, Any]) -> list[Finding]:
    findings = check_forks(
        db.rows(f"SELECT * FROM forks WHERE {_in('run')} ORDER BY position", params),
        db.rows(f"SELECT * FROM children WHERE {_in('run')}", params),
    )
    closed = {
        (r["run"], r["fork"])
        for r in db.rows(f"SELECT run, fork FROM fork_closures WHERE {_in('run')}", params)
    }
    findings += check_branch_starts(
        db.rows(f"SELECT * FROM child_descriptions WHERE {_in('run')} ORDER BY position", params)
    )
    return findings + check_custody(
        db.rows(
            f"SELECT e.*, o.node FROM custody_events e LEFT JOIN fork_openings o USING (run, fork) "
            f"WHERE {_in('e.run')}",
            params,
        ),
        closed,
    )


def _cut_point_findings(db: ReadModelDB, params: dict[str, Any]) -> list[Finding]:
    cut_rows = db.rows(
        "SELECT c.*, s.exchanges_completed AS registry_k, "
        "s.stage IS NOT NULL AS stage_recorded FROM cut_points c "
        f"LEFT JOIN stages s ON s.run = c.source_run AND s.stage = c.stage WHERE {_in('c.run')}",
        params,
    )
    for row in cut_rows:
        row["divergences"] = as_json(row["divergences"])
    return [
        Finding("cut-point", BLOCKER if severe else QUARANTINE, key, message, key, "root")
        for severe, key, message in cut_point.cut_point_problems(cut_rows)
    ]


LEVEL_ORDER = {BLOCKER: 0, QUARANTINE: 1, WARNING: 2}


def _unreadable_finding(path: str, error: LineageError) -> Finding:
    """A run directory audited in place that could not be read: an unhealthy run of its own,
    withheld. A corrupt result.json (discovery's rule, `discovery.read_result`) is a finding of its
    own class, `corrupt-run`, naming the file and what is wrong; the skill's validator says the same
    of it (`result.parse`)."""
    if isinstance(error, CorruptRunFile):
        return Finding(
            "corrupt-run",
            QUARANTINE,
            path,
            f"unhealthy (infrastructure): {error.file} is corrupt: {error.reason} [result.parse]",
            path,
        )
    return Finding(
        "run-directory",
        QUARANTINE,
        path,
        f"unhealthy (infrastructure): the run directory cannot be read: {error}",
        path,
    )


def _chosen_slots(
    slots: list[Slot], run: str | None, task: str | None, runs: list[dict[str, Any]]
) -> list[Slot]:
    """The matrix slots the selection covers: of the task asked for, and filled by the run asked
    for."""
    return [
        s
        for s in slots
        if (task is None or s[0] == task) and (run is None or any(run_slot(r) == s for r in runs))
    ]


def audit_report(
    db: ReadModelDB,
    integrity: dict[str, Any],
    *,
    position: int,
    run: str | None = None,
    task: str | None = None,
    since: datetime | None = None,
    slots: list[Slot] | None = None,
    unreadable: Sequence[tuple[str, LineageError]] = (),
) -> dict[str, Any]:
    """The audit of the selected runs. `unreadable` lists run directories (audited in place) that
    could not be read, each with why: an unhealthy run of its own, so it can never pass unseen."""
    run = _resolve_selection(db, run, task)
    runs = _selected_runs(db, run, task, since)
    keys = [r["run"] for r in runs]
    params = {"runs": keys}
    evidence = {
        (e["run"], e["node"]): e
        for e in db.rows(f"SELECT * FROM evidence WHERE {_in('run')}", params)
    }
    findings: list[Finding] = []
    superseded = {
        r["parent_run"]: r["run"]
        for r in db.rows("SELECT run, parent_run FROM runs WHERE role = 'continuation'")
    }
    for row in runs:
        row["superseded_by"] = superseded.get(row["run"])
        findings += _health_findings(row, evidence.get((row["run"], "root")))
    model_runs = [r for r in runs if r["lane"] == "model"]
    findings += _selection_findings(runs, model_runs)
    findings += _arm_findings(db, runs, evidence, params)
    findings += _changed_evidence_findings(evidence)
    receipt_findings, preservation = _preservation_findings(db, params)
    findings += receipt_findings
    findings += _fork_and_custody_findings(db, params)
    findings += check_snapshots(
        _presented(db, keys),
        db.rows("SELECT ref, kind, position, occurred_at, tar_path FROM snapshot_events"),
        report_adopted=run is None and task is None and since is None,
    )
    findings += _cut_point_findings(db, params)
    matrix = None
    if slots is not None:
        chosen = _chosen_slots(slots, run, task, runs)
        # oracle lanes fill no slot
        matrix, slot_findings = classify_slots(chosen, model_runs, superseded)
        findings += slot_findings
    findings += [_unreadable_finding(path, error) for path, error in unreadable]
    findings += _nothing_left(model_runs, findings, matrix)
    if not integrity["intact"]:
        findings.append(
            Finding("integrity", BLOCKER, "log", f"the log is not intact: {integrity['problem']}")
        )
    outcome, quarantined = verdict(findings)
    standing = run_standing(findings)
    return {
        "position": position,
        "filters": {"run": run, "task": task, "since": since.isoformat() if since else None},
        "runs": [
            {
                **{k: row[k] for k in REPORTED_RUN_FIELDS},
                "preservation": preservation.get(row["run"]),
                # What the verdict does with the run (its health is only one of the checks behind
                # it).
                "status": standing.get(row["run"], "ok"),
            }
            for row in runs
        ],
        "lanes": {lane: sum(r["lane"] == lane for r in runs) for lane in ("model", gate.ORACLE)},
        "matrix": matrix,
        "integrity": integrity,
        "findings": [f.as_dict() for f in sorted(findings, key=lambda f: LEVEL_ORDER[f.level])],
        "verdict": outcome,
        "quarantined": quarantined,
        "exit_code": EXIT_CODES[outcome],
    }

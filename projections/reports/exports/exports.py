"""Exports in benchflow's own schemas: `tree.json`, `stage_snapshots.json` and `ablation.json`.

Built only from the read models, so the same log prefix always gives the same bytes (see
`vocabulary.canonical_json`). Field semantics follow `docs/benchflow-formats.md` §2, §3 and §5;
the derived ablation fields come from `attribution.py`.
"""

from __future__ import annotations

import json
from typing import Any

from ....adapters.duckdb_store import ReadModelDB
from ....domain.errors import UnknownSubject
from ....domain.vocabulary import STAGES
from ..arms import attribution as attr
from ..run_list import LIST_RUNS_HINT


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _delta(value: Any) -> dict[str, Any]:
    delta = _json(value) or {}
    if delta.get("config_override_keys") is None:
        delta.pop("config_override_keys", None)
    return delta


def require_run(db: ReadModelDB, run: str) -> dict[str, Any]:
    rows = db.rows("SELECT * FROM runs WHERE run = ?", [run])
    if not rows:
        known = [
            r["run"]
            for r in db.rows(
                "SELECT run FROM runs WHERE run ILIKE ? ORDER BY run LIMIT 5",
                [f"%{run.split('/')[-1]}%"],
            )
        ]
        raise UnknownSubject(
            f"expected a recorded run {run!r}, found none"
            + (f"; similar: {known}" if known else ""),
            hint=LIST_RUNS_HINT,
        )
    return rows[0]


def tree_document(db: ReadModelDB, run: str) -> dict[str, Any]:
    require_run(db, run)
    nodes = db.rows(
        "SELECT node, parent, fork, child_index, kind FROM "
        "nodes WHERE run = ? ORDER BY position, child_index",
        [run],
    )
    # Stages captured on one node come in lifecycle order and its tag is the last of them.
    rank = f"list_position({list(STAGES)!r}, stage)"
    stage_of = {
        r["node"]: r
        for r in db.rows(
            f"SELECT node, arg_max(stage, {rank}) AS stage, "
            f"arg_max(sandbox_ref, {rank}) AS sandbox, arg_max(environment_ref, "
            f"{rank}) AS environment FROM stages WHERE run = ? GROUP BY node",
            [run],
        )
    }
    marks = {
        r["stage"]: r
        for r in db.rows(
            "SELECT stage, sandbox_ref AS sandbox, environment_ref AS environment "
            "FROM stages WHERE run = ?",
            [run],
        )
    }
    # A checkpoint no registry entry explains (a branch child's own verify(), a bare checkpoint) is
    # a snapshot.captured on its node: that is the node's tag, over any mark placed there.
    for row in db.rows(
        "SELECT node, arg_max(stage, position) AS stage, arg_max(ref, position) "
        "FILTER (WHERE layer = 'sandbox') AS sandbox, arg_max(ref, position) FILTER "
        "(WHERE layer = 'environment') AS environment FROM snapshot_events WHERE kind "
        "= 'captured' AND run = ? AND ref NOT IN (SELECT sandbox_ref FROM stage_marks "
        "WHERE run = ? AND sandbox_ref IS NOT NULL UNION SELECT environment_ref FROM "
        "stage_marks WHERE run = ? AND environment_ref IS NOT NULL) GROUP BY node",
        [run, run, run],
    ):
        stage_of[row["node"]] = {
            **row,
            "stage": row["stage"] or (stage_of.get(row["node"]) or {}).get("stage"),
        }
    forks_at: dict[str, dict[str, Any]] = {}
    for row in db.rows(
        "SELECT node, stage, sandbox_ref AS sandbox, environment_ref AS "
        "environment, value, outcome FROM forks WHERE run = ? ORDER BY position",
        [run],
    ):
        forks_at[row["node"]] = {**row, "value": node_value(forks_at.get(row["node"]), row)}
        # A fork replaces the node's checkpoint: branch_at_stage adopts the stage's (re-tagging the
        # node with it), a cursor branch takes a fresh one without a stage
        # (docs/benchflow-formats.md §13.1).
        mark = marks.get(row["stage"]) if row["stage"] else None
        stage_of[row["node"]] = {
            "stage": row["stage"],
            **(
                {"sandbox": mark["sandbox"], "environment": mark["environment"]}
                if mark
                else {"sandbox": row["sandbox"], "environment": row["environment"]}
            ),
        }
    children = {
        (r["fork"], r["child_index"]): r
        for r in db.rows("SELECT * FROM children WHERE run = ?", [run])
    }
    below: dict[str | None, list[dict[str, Any]]] = {}
    for node in nodes:
        below.setdefault(node["parent"], []).append(node)

    out: list[dict[str, Any]] = []

    def visit(node: dict[str, Any]) -> None:
        out.append(
            _tree_node(
                node,
                stage_of.get(node["node"]),
                forks_at.get(node["node"]),
                children.get((node["fork"], node["child_index"])),
            )
        )
        for child in below.get(node["node"], []):
            visit(child)

    for root in below.get(None, []):
        visit(root)
    return {"schema_version": 1, "cut_point": None, "nodes": out}


def node_value(earlier: dict[str, Any] | None, fork: dict[str, Any]) -> float | None:
    """The V tree.json shows on a node after this fork: benchflow sets it when a fork completes
    (popping it when a child was unscored) and leaves it as it was when a fork raised (partial)."""
    if fork["outcome"] == "completed":
        return fork["value"]
    return earlier["value"] if earlier else None


def _tree_node(
    node: dict[str, Any],
    stage: dict[str, Any] | None,
    fork: dict[str, Any] | None,
    child: dict[str, Any] | None,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": node["node"],
        "parent": node["parent"],
        "stage": stage["stage"] if stage else None,
        "snapshot": None,
    }
    if stage and (stage["sandbox"] or stage["environment"]):
        entry["snapshot"] = {"environment": stage["environment"], "sandbox": stage["sandbox"]}
    if fork and fork["value"] is not None:
        entry["value"] = fork["value"]
    if child:
        entry["delta"] = _delta(child["delta"])
        if child["delta_execution"]:
            entry["delta_execution"] = child["delta_execution"]
        if child["outcome"] == "scored":
            entry["reward"] = child["reward"]
        elif child["outcome"] == "unscored":
            entry["unscored"] = child["reason"]
    return entry


def stage_entries(db: ReadModelDB, run: str) -> dict[str, dict[str, Any]]:
    stages = db.rows("SELECT * FROM stages WHERE run = ? ORDER BY position", [run])
    snapshots = {
        r["ref"]: r
        for r in db.rows(
            "SELECT * FROM snapshots WHERE ref IN (SELECT sandbox_ref FROM stages WHERE run = ? "
            "UNION SELECT environment_ref FROM stages WHERE run = ?)",
            [run, run],
        )
    }
    entries = {}
    for stage in stages:
        entry: dict[str, Any] = {
            "environment_ref": stage["environment_ref"],
            "sandbox_ref": stage["sandbox_ref"],
            "layers": sorted(stage["layers"] or []),
            "exchanges_completed": stage["exchanges_completed"],
        }
        snapshot = snapshots.get(stage["sandbox_ref"] or stage["environment_ref"])
        if snapshot and (
            snapshot["exports"] or snapshot["discarded"] or snapshot["export_failures"]
        ):
            exported = (
                {
                    "path": snapshot["export_path"],
                    "sha256": snapshot["export_sha256"],
                    "image_id": snapshot["export_image_id"],
                }
                if snapshot["exports"]
                else None
            )
            entry["ephemeral"] = exported is None
            entry["exported"] = exported
            if exported is None and snapshot["export_error"]:
                entry["export_error"] = snapshot["export_error"]
        entries[stage["stage"]] = entry
    return entries


def stages_document(db: ReadModelDB, run: str) -> dict[str, Any]:
    require_run(db, run)
    return {"schema_version": 1, "stages": stage_entries(db, run)}


def ablation_document(db: ReadModelDB, run: str, fork: str) -> dict[str, Any]:
    """The report `bench eval ablate` wrote for the fork (docs/benchflow-formats.md §5): the arms'
    rows from the fork facts, and what the report itself said (`value`, `error`, the parent block)
    as written, never recomputed."""
    parent = require_run(db, run)
    reports = db.rows(
        "SELECT * FROM ablation_reports WHERE run = ? ORDER BY position DESC LIMIT 1", [run]
    )
    forks = db.rows("SELECT * FROM forks WHERE run = ? AND fork = ?", [run, fork])
    report = reports[0] if reports and reports[0]["fork"] == (fork if forks else None) else None
    if not forks:
        if report is not None and fork == _report_node(db, run, report["stage"]):
            return _forkless_document(db, parent, report)
        known = [
            r["fork"]
            for r in db.rows("SELECT fork FROM forks WHERE run = ? ORDER BY position", [run])
        ]
        raise UnknownSubject(f"expected fork {fork!r} of run {run!r}, found forks {known}")
    fork_row = forks[0]
    if fork_row["kind"] == "retry":
        raise UnknownSubject(
            f"expected a fork of arms, found fork {fork!r} of run {run!r} a checkpoint retry "
            "(one re-run of the finished trial, beside its own reward): it has no arms to ablate",
            hint=f"`lineage export branch-view {run}` shows the retry",
        )
    ablation = (
        _json(
            db.scalar("SELECT ablation FROM fork_openings WHERE run = ? AND fork = ?", [run, fork])
        )
        or {}
    )
    children = db.rows(
        "SELECT * FROM children WHERE run = ? AND fork = ? ORDER BY child_index", [run, fork]
    )
    environments = {
        row["idx"]: _json(row["environment"])
        for row in db.rows(
            "SELECT idx, environment FROM fork_children WHERE run = ? AND fork = ?", [run, fork]
        )
    }
    run_dir = parent["run_dir"]
    described = [
        {
            "name": child["arm"],
            "kind": child["arm_kind"],
            "delta": _delta(child["delta"]),
            "delta_execution": child["delta_execution"],
            "source": child["source"],
            "wall_clock_sec": child["wall_clock_sec"],
            "environment": environments.get(child["child_index"]),
            "node": child["node"],
            "artifacts": f"{run_dir}/branches/{fork_row['node']}/children/{child['node']}"
            if run_dir
            else None,
        }
        for child in children
    ]
    arms = [_arm_outcome(child, fork_row["outcome"]) for child in children]
    # Arms that never ran have no node, so they are not fork children; the importer keeps them with
    # the fork.
    for skipped in ablation.get("skipped_arms", []):
        described.append(
            {
                **skipped,
                "delta": _delta(skipped.get("delta")),
                "wall_clock_sec": None,
                "node": None,
                "artifacts": None,
            }
        )
        arms.append(attr.ArmOutcome(skipped["name"], None, ran=False))
    # branch_at_stage returns V only when the fork completed; a fork that raised leaves the report's
    # value null.
    value = fork_row["value"] if fork_row["outcome"] == "completed" else None
    # _finalize_report: the branch error goes on the report only when no arm carries an error.
    error = fork_row["error"] if all(arm.error is None for arm in arms) else None
    stage = fork_row["stage"] or f"cursor:{fork_row['node']}"
    return _report(
        db,
        parent,
        report,
        ablation,
        stage=stage,
        stage_name=fork_row["stage"],
        layers=sorted(fork_row["layers"] or []),
        described=described,
        arms=arms,
        value=value,
        error=error,
    )


def _report_node(db: ReadModelDB, run: str, stage: str) -> str:
    """Where a report whose arms never ran would have forked: the node its stage was captured on,
    else root."""
    node = db.scalar("SELECT node FROM stages WHERE run = ? AND stage = ?", [run, stage])
    return node or "root"


def _forkless_document(
    db: ReadModelDB, parent: dict[str, Any], report: dict[str, Any]
) -> dict[str, Any]:
    """A report whose fork never happened (a request-global parent failure): every arm skipped."""
    written = _json(report["report"]) or {}
    described = [
        {
            **arm,
            "delta": _delta(arm.get("delta")),
            "wall_clock_sec": None,
            "node": None,
            "artifacts": None,
        }
        for arm in written.get("arms", [])
    ]
    arms = [attr.ArmOutcome(arm["name"], None, ran=False) for arm in described]
    return _report(
        db,
        parent,
        report,
        written,
        stage=report["stage"],
        stage_name=report["stage"],
        layers=list(written.get("snapshot_layers") or []),
        described=described,
        arms=arms,
        value=None,
        error=report["error"],
    )


def _report(
    db: ReadModelDB,
    parent: dict[str, Any],
    report: dict[str, Any] | None,
    ablation: dict[str, Any],
    *,
    stage: str,
    stage_name: str | None,
    layers: list[str],
    described: list[dict[str, Any]],
    arms: list[attr.ArmOutcome],
    value: float | None,
    error: str | None,
) -> dict[str, Any]:
    run_dir = parent["run_dir"]
    parent_reward, parent_error = parent["reward"], parent["error"]
    if report is not None:  # the parent block and the error as the report wrote them
        parent_reward, parent_error, error = (
            report["parent_reward"],
            report["parent_error"],
            report["error"],
        )
    tests = attr.normalise_test_names(arms)
    references = attr.arm_references(arms, parent_reward)
    verdicts = attr.arm_verdicts(arms, stage, parent_reward, tests)
    arm_rows = []
    for row, arm, arm_tests, reference, verdict in zip(
        described, arms, tests, references, verdicts, strict=True
    ):
        arm_rows.append(
            {
                **row,
                "name": arm.name,
                "reward": arm.reward,
                "status": attr.arm_status(arm),
                "node": row["node"] if arm.ran else None,
                "artifacts": row["artifacts"] if arm.ran else None,
                "tests": arm_tests,
                "error": arm.error,
                "reference": reference,
                "verdict": verdict,
            }
        )
    stage_snapshot = stage_entries(db, parent["run"]).get(stage_name) if stage_name else None
    return {
        "schema_version": 1,
        "task": ablation.get("task") or {"id": parent["task"], "path": parent["task_path"]},
        "stage": stage,
        "snapshot_layers": ablation.get("snapshot_layers") or layers,
        "stage_snapshot": stage_snapshot,
        "agent": ablation.get("agent", parent["agent"]),
        "model": ablation.get("model", parent["model"]),
        "sandbox": ablation.get("sandbox", parent["sandbox"]),
        "environment": ablation.get("environment"),
        "parent": {"reward": parent_reward, "error": parent_error, "run_dir": run_dir},
        "value": value,
        "error": error,
        "arms": arm_rows,
        "test_attribution": attr.test_attribution(arms, tests),
    }


def _arm_outcome(child: dict[str, Any], fork_outcome: str) -> attr.ArmOutcome:
    name = child["arm"]
    # benchflow's artifact_test_outcomes: a report naming no test is not observed
    tests = _json(child["tests"]) or None
    if child["outcome"] is None:
        if fork_outcome == "partial":
            return attr.ArmOutcome(name, None, ran=False)
        # Still running at the point asked about: pending, never an error (benchflow has no such
        # arm, since it writes the report only at the end; a point-in-time export is this tool's own
        # question).
        return attr.ArmOutcome(name, None, pending=True)
    return attr.ArmOutcome(name, child["reward"], error=child["reason"], tests=tests)

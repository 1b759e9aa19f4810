"""What `lineage report` shows for each run, gathered from the read models (rendered by
`report_html`).

One `RunReport` per run: its tree with an outcome per node, the arms x tests table (`arms`), its
arms' statistics over its task's repeated trials (`arm_stats`), stage snapshots with their
lifetimes, forks with V, custody, its cut point and divergences (a continuation) and the cut points
of its continuations, and the audit of that run alone with its findings. Everything here is data
from the log; the renderer escapes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...adapters.duckdb_store import ReadModelDB
from .arms.arm_stats import ArmStats, arm_stats, has_named_arms
from .arms.arms import ArmsTable, arms_table
from .audit.audit_report import audit_report
from .branch_view import branch_page, branch_view
from .exports.exports import require_run
from .tree_view import OUTCOME_COLOURS, TreeModel, tree_model

#: The status words a node is drawn in, as `lineage tree` colours them; a node without one is a
#: `step`.
OUTCOMES = tuple(OUTCOME_COLOURS)
STEP = "step"


@dataclass
class ReportNode:
    node: str
    parent: str | None
    outcome: str
    label: str  # the arm, or the stage(s) captured on it
    detail: str  # the tree's outcome text, or whose step it is


@dataclass
class RunReport:
    run: dict[str, Any]
    nodes: list[ReportNode]
    arms: ArmsTable
    stages: list[dict[str, Any]]
    forks: list[dict[str, Any]]
    custody: list[dict[str, Any]]
    cut_point: dict[str, Any] | None
    divergences: list[dict[str, Any]]
    continuations: list[dict[str, Any]]
    audit: dict[str, Any] = field(default_factory=dict)
    #: The run this one continues (and the stage it was cut at), linked from its tree as in Mermaid.
    continues: str | None = None
    continues_from: str | None = None
    #: Its arms pooled over every run of its task (`lineage arms RUN --stats`); None: no named arms.
    arm_stats: ArmStats | None = None
    #: benchflow's branch view of the trial (`lineage export branch-view`) as the run page shows it:
    #: forks by depth, retries apart, costs; None for a run without benchflow branch records.
    branches: dict[str, Any] | None = None


def _nodes(model: TreeModel) -> list[ReportNode]:
    """The tree's nodes as `lineage tree` decides them: one status, reward and text per node, from
    one place."""
    nodes = []
    for node in model.nodes:
        label = node.label or ", ".join(node.stages)
        if node.result is not None:
            detail = node.result
        elif node.owner is not None:
            detail = f"step of {node.owner}"
        else:
            detail = STEP
        nodes.append(ReportNode(node.id, node.parent, node.status or STEP, label, detail))
    return nodes


def _stages(db: ReadModelDB, run: str) -> list[dict[str, Any]]:
    return db.rows(
        """SELECT s.stage, s.node, s.exchanges_completed, s.layers, s.sandbox_ref, s.environment_ref,
                  sb.lifetime AS sandbox_lifetime, env.lifetime AS environment_lifetime
           FROM stages s LEFT JOIN snapshots sb ON sb.ref = s.sandbox_ref
           LEFT JOIN snapshots env ON env.ref = s.environment_ref
           WHERE s.run = ? ORDER BY s.position""",  # noqa: E501
        [run],
    )


def built_from(db: ReadModelDB) -> str | None:
    """POSITION:HASH of the log head these read models were built from (checked against the chain as
    they were)."""
    rows = db.rows("SELECT position, head_hash FROM lineage_tracking WHERE name = 'lineage'")
    if not rows or not rows[0]["head_hash"]:
        return None
    return f"{rows[0]['position']}:{rows[0]['head_hash']}"


def run_report(db: ReadModelDB, run: str, integrity: dict[str, Any], position: int) -> RunReport:
    run_row = require_run(db, run)
    model = tree_model(db, run)
    continuations = db.rows(
        "SELECT c.* FROM cut_points c JOIN runs r USING "
        "(run) WHERE r.parent_run = ? ORDER BY c.run",
        [run],
    )
    cut = db.rows("SELECT * FROM cut_points WHERE run = ?", [run])
    return RunReport(
        run=run_row,
        nodes=_nodes(model),
        arms=arms_table(db, run),
        stages=_stages(db, run),
        forks=db.rows("SELECT * FROM forks WHERE run = ? ORDER BY position", [run]),
        custody=db.rows("SELECT * FROM custody WHERE run = ? ORDER BY fork", [run]),
        cut_point=cut[0] if cut else None,
        divergences=db.rows(
            "SELECT * FROM divergences WHERE run = ? ORDER BY exchange_index", [run]
        ),
        continuations=continuations,
        audit=audit_report(db, integrity, position=position, run=run),
        continues=model.continues,
        continues_from=model.continues_from,
        arm_stats=arm_stats(db, run) if has_named_arms(db, run) else None,
        branches=branch_page(branch_view(db, run))
        if db.scalar("SELECT count(*) FROM trials WHERE run = ?", [run])
        else None,
    )

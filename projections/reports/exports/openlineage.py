"""`lineage export openlineage`: the rollout trees as OpenLineage RunEvents, for tools that read
them.

Every node of a run's tree is an OpenLineage run of the task's job, with stable ids, so exporting
twice names the same runs; what OpenLineage has no words for travels in three custom run facets
(`run_events`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ....adapters.duckdb_store import ReadModelDB
from ...read_models.outcome_words import run_reason, run_status
from .exports import require_run

RUN_EVENT_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
PARENT_SCHEMA = "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet"
#: Our facets (see `run_events`) are named by URNs, without pretending to host their schemas.
FACET_SCHEMA = "urn:rollout-lineage:facet:{name}:1"
RUN_IDS = uuid.UUID("6f1c3a52-8d0e-5b7a-9c4e-2a1d7b3e5f60")  # the uuid5 namespace of node run ids
# A node's status (`outcome_words`) -> its terminal event: FAIL for an error (unscored or raised),
# ABORT for skipped (an arm its fork ended before, a run scored only by its fork's aggregate).
TERMINAL = {
    "pass": "COMPLETE",
    "fail": "COMPLETE",
    "error": "FAIL",
    "skipped": "ABORT",
}


def run_id(run: str, node: str) -> str:
    """A node's OpenLineage run id: a uuid5 of (run, node), the same on every export."""
    return str(uuid.uuid5(RUN_IDS, f"{run}\x00{node}"))


def _json(value: Any) -> Any:
    """A JSON column (delta, tests) as the value it holds."""
    return json.loads(value) if isinstance(value, str) else value


def _clean(value: Any) -> Any:
    """Nulls dropped, as the OpenLineage client leaves them out."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value if v is not None]
    return value


def _time(moment: datetime) -> str:
    return moment.isoformat()


class Emitter:
    """Builds events for one export: one namespace and one producer; a task is a job (namespace,
    task name)."""

    def __init__(self, namespace: str, producer: str) -> None:
        self.namespace = namespace
        self.producer = producer

    def facet(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "_producer": self.producer,
            "_schemaURL": FACET_SCHEMA.format(name=name),
            **_clean(body),
        }

    def parent(self, task: str, run: str, node: str, root_run: str) -> dict[str, Any]:
        # empty `facets` where the client writes them, so its models serialise these events byte for
        # byte
        job = {"namespace": self.namespace, "name": task, "facets": {}}
        return {
            "_producer": self.producer,
            "_schemaURL": PARENT_SCHEMA,
            "run": {"runId": run_id(run, node), "facets": {}},
            "job": job,
            "root": {"run": {"runId": run_id(root_run, "root"), "facets": {}}, "job": job},
        }

    def snapshots(self, refs: list[str], side: str) -> list[dict[str, Any]]:
        """Snapshot refs as datasets (namespace `<namespace>.snapshots`), so lineage tools join a
        fork's children to the snapshot they restored."""
        return [
            {"namespace": f"{self.namespace}.snapshots", "name": ref, "facets": {}, side: {}}
            for ref in refs
        ]

    def event(
        self,
        kind: str,
        when: datetime,
        task: str,
        node_run: str,
        facets: dict[str, Any],
        inputs: list[str] = (),  # type: ignore[assignment]
        outputs: list[str] = (),  # type: ignore[assignment]
    ) -> dict[str, Any]:
        return {
            "eventTime": _time(when),
            "producer": self.producer,
            "schemaURL": RUN_EVENT_SCHEMA,
            "eventType": kind,
            "run": {"runId": node_run, "facets": facets},
            "job": {"namespace": self.namespace, "name": task, "facets": {}},
            "inputs": self.snapshots(list(inputs), "inputFacets"),
            "outputs": self.snapshots(list(outputs), "outputFacets"),
        }


def _node_rows(db: ReadModelDB, run: str) -> list[dict[str, Any]]:
    """Each node with when it started and, for a fork child, its arm, delta and outcome."""
    return db.rows(
        """SELECT n.node, n.parent, n.fork, n.child_index, e.occurred_at AS started_at,
                  c.arm, c.arm_kind, c.delta, c.delta_execution, c.status, c.outcome, c.reward, c.reason,
                  c.tests, coalesce(c.outcome_at, cl.occurred_at) AS ended_at,
                  list_filter([coalesce(c.restored_sandbox_ref, f.sandbox_ref),
                               coalesce(c.restored_environment_ref, f.environment_ref)], lambda r: r IS NOT NULL)
                      AS restored
           FROM nodes n JOIN events e USING (position)
           LEFT JOIN children c ON c.run = n.run AND c.fork = n.fork AND c.child_index = n.child_index
           LEFT JOIN fork_closures cl ON cl.run = n.run AND cl.fork = n.fork
           LEFT JOIN forks f ON f.run = n.run AND f.fork = n.fork
           WHERE n.run = ? ORDER BY n.position, n.child_index""",  # noqa: E501
        [run],
    )


def _snapshots(db: ReadModelDB, run: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for row in db.rows(
        """SELECT s.node, s.stage, s.exchanges_completed, s.sandbox_ref, s.environment_ref,
                  sb.lifetime AS sandbox_lifetime, env.lifetime AS environment_lifetime
           FROM stages s LEFT JOIN snapshots sb ON sb.ref = s.sandbox_ref
           LEFT JOIN snapshots env ON env.ref = s.environment_ref
           WHERE s.run = ? ORDER BY s.position""",
        [run],
    ):
        node = row.pop("node")
        found.setdefault(node, []).append(row)
    return found


def _run_outcome(db: ReadModelDB, run_row: dict[str, Any]) -> tuple[str, datetime | None, dict]:
    status = run_status(run_row)
    ended = db.scalar(
        "SELECT max(occurred_at) FROM run_outcomes WHERE run = ? AND kind <> 'finished'",
        [run_row["run"]],
    )
    tests = db.scalar(
        "SELECT tests FROM run_outcomes WHERE run = ? AND kind = 'scored'", [run_row["run"]]
    )
    body = {
        "status": status,
        "outcome": run_row["outcome"],
        "reward": run_row["reward"],
        "reason": run_reason(run_row),
        "tests": _json(tests),
    }
    return status, ended, body


def _start_facets(row: dict[str, Any], run_row: dict[str, Any], emit: Emitter) -> dict[str, Any]:
    """The standard `parent` facet (a linear step's previous node, a fork child's fork node, or for
    a continuation's root the node of the run it continues; the tree's root as `root`) and a fork
    child's arm and delta (`rolloutLineage_delta`)."""
    run, task = run_row["run"], run_row["task"]
    facets: dict[str, Any] = {}
    if row["parent"] is not None:
        facets["parent"] = emit.parent(task, run, row["parent"], run)
    elif run_row["parent_run"]:
        source = run_row["parent_run"]
        facets["parent"] = emit.parent(task, source, run_row["parent_node"] or "root", source)
    if row["fork"] is not None:
        delta = {
            "fork": row["fork"],
            "index": row["child_index"],
            "arm": row["arm"],
            "kind": row["arm_kind"],
            "delta": _json(row["delta"]),
            "delta_execution": row["delta_execution"],
        }
        facets["rolloutLineage_delta"] = emit.facet("DeltaRunFacet", delta)
    return facets


def _child_outcome(row: dict[str, Any]) -> tuple[str, datetime | None, dict[str, Any]]:
    status = _child_status(row)
    body = {
        "status": status,
        "outcome": row["outcome"],
        "reward": row["reward"],
        "reason": row["reason"],
        "tests": _json(row["tests"]),
    }
    return status, row["ended_at"] if status != "pending" else None, body


def run_events(db: ReadModelDB, run: str, emit: Emitter) -> Iterator[dict[str, Any]]:
    """START and terminal events for every node of RUN, in tree order.

    START is when the run was registered, the node opened or its fork opened; it names the snapshots
    a fork child restored as inputs. Once the node has an outcome, one terminal event (`TERMINAL`)
    carries `rolloutLineage_outcome` (status, reward or reason, per-test outcomes) and, when stages
    were captured on the node, `rolloutLineage_snapshots` (their refs and lifetimes), with those
    refs as outputs. A node still without an outcome (`pending`) gets a RUNNING event with the same
    facets instead. A linear step ends with the outcome of the fork child above it, or of the run
    when none is."""
    run_row = require_run(db, run)
    task = run_row["task"]
    own = _run_outcome(db, run_row)  # the root, and a step the run's own trajectory ends in
    ends_in: dict[str, tuple[str, datetime | None, dict[str, Any]]] = {}
    snapshots = _snapshots(db, run)
    for row in _node_rows(db, run):
        node_run = run_id(run, row["node"])
        # a step ends in the outcome of the fork child above it (as `lineage tree` names its owner),
        # else the run's
        ends_in[row["node"]] = (
            _child_outcome(row) if row["fork"] is not None else ends_in.get(row["parent"], own)
        )
        status, end, body = ends_in[row["node"]]
        start_facets = _start_facets(row, run_row, emit)
        yield emit.event(
            "START", row["started_at"], task, node_run, start_facets, row["restored"] or []
        )
        end_facets = {"rolloutLineage_outcome": emit.facet("OutcomeRunFacet", body)}
        captured = snapshots.get(row["node"], [])
        if captured:
            end_facets["rolloutLineage_snapshots"] = emit.facet(
                "SnapshotsRunFacet", {"stages": captured}
            )
        refs = [
            r for stage in captured for r in (stage["sandbox_ref"], stage["environment_ref"]) if r
        ]
        if status in TERMINAL and end is not None:
            yield emit.event(TERMINAL[status], end, task, node_run, end_facets, outputs=refs)
        else:  # still running: what is known so far, without closing the run
            yield emit.event("RUNNING", row["started_at"], task, node_run, end_facets, outputs=refs)


def _child_status(row: dict[str, Any]) -> str:
    return row["status"] if row["status"] in TERMINAL else "pending"


def all_runs(db: ReadModelDB) -> list[str]:
    return [row["run"] for row in db.rows("SELECT run FROM runs ORDER BY position")]

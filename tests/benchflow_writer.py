"""Run directories built the way benchflow's writer code builds them (docs/benchflow-formats.md).

Each method mirrors one writer function of benchflow PR #1046 and is named after it; the steps and
their order are the writer's, the code is ours. Tests drive a `WriterRun` through the same calls a
real run makes (`start`, `execute`, `verify`, `branch_at_stage`, ...) and then compare `lineage
export` with the files it left.

What is mirrored, by benchflow function:
- `RolloutTree.advance`/`attach`/`populate`: one counter for `n<k>` ids, pending children filled in
  place;
- `Rollout._commit_acp_execution` + `_build_step_batch`: one node per ACP event, at least one per
  execute;
- `branch_policy.capture_stage`: the checkpoint goes on the cursor node (its stage tag replaced),
  the registry entry is replaced, `stage_snapshots.json` is rewritten;
- `Rollout.verify`: `pre-verify`, then the verifier, then `post-verify`, on one cursor;
- `rollout_branch.branch` / `_run_children`: `adopt_checkpoint` on the stage's node, the custody
  hold, children attached one at a time, `_LinearState` restored around each (so a second
  `branch_at_stage(S)` forks the same node again), V aggregated or popped, lineage written on both
  the success and the raising path, and a custody release that fails closed leaving
  `branches/<node>/parent/` behind;
- `branch_lineage.serialize_tree` / `stage_snapshots_payload` / `child_provenance` /
  `write_branch_artifacts`;
- `branch_report.outcomes_for_arms` + `AblationReport.to_dict` (+
  `ablate._branch_into_arms`/`_finalize_report`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ZERO_DELTA = {
    "config_override_sha256": None,
    "environment_ref": None,
    "injected_prompt_sha256": None,
    "skill_mode": None,
}
FRESH = "fresh-rollout"


def dump(path: Path, payload: Any) -> None:
    """benchflow's lineage writers: sorted keys, indent 2, trailing newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, sort_keys=True, indent=2) + "\n")


@dataclass
class Node:
    id: str
    parent: str | None
    state: dict[str, Any] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)


@dataclass
class Child:
    """One child of a fork: its delta, how many ACP events it produces, and how it ends."""

    delta: dict[str, Any] = field(default_factory=lambda: dict(ZERO_DELTA))
    events: int = 1
    reward: float | None = None
    unscored: str | None = None
    raises: str | None = None  # the exception text when the child raises
    # what its verifier leaves in verifier/ctrf.json (bytes, or a JSON value), None = no file
    ctrf: Any = None
    verify_refs: dict[str, dict[str, str | None]] | None = (
        None  # refs its own verify() captures (default: new)
    )


class ChildRaised(Exception):
    pass


class WriterRun:
    def __init__(
        self, run_dir: Path, *, snapshot_stages: set[str], parent_rollout: str | None = None
    ) -> None:
        self.run_dir = run_dir
        self.snapshot_stages = snapshot_stages
        self.parent_rollout = parent_rollout or str(run_dir)
        self.nodes: dict[str, Node] = {"root": Node("root", None)}
        self.count = 0
        self.cursor = "root"
        self.registry: dict[str, dict[str, Any]] = {}
        self.stage_nodes: dict[str, str] = {}
        self.exchanges = 0

    # RolloutTree ----------------------------------------------------------------------------------
    def advance(self, parent: str) -> str:
        self.count += 1
        node = Node(f"n{self.count}", parent)
        self.nodes[node.id] = node
        self.nodes[parent].children.append(node.id)
        return node.id

    attach = (
        advance  # a pending node: same id counter, filled in place by the child's first execute
    )

    # Rollout._commit_acp_execution ----------------------------------------------------------------
    def execute(self, events: int, node: str | None = None) -> None:
        steps = max(events, 1)  # an execute with no event still adds one Step
        self.exchanges += events
        if node is not None:
            self.cursor = node  # populate: the first step lands on the pending child itself
            steps -= 1
        for _ in range(steps):
            self.cursor = self.advance(self.cursor)

    # branch_policy.capture_stage ------------------------------------------------------------------
    def capture_stage(
        self, stage: str, refs: dict[str, str | None], exchanges: int | None = None
    ) -> None:
        snapshot = {
            "environment": refs.get("environment"),
            "sandbox": refs.get("sandbox"),
            "stage": stage,
        }
        self.nodes[self.cursor].state["snapshot"] = (
            snapshot  # checkpoint_composed: the node's one checkpoint
        )
        self.registry[stage] = {
            "environment_ref": snapshot["environment"],
            "sandbox_ref": snapshot["sandbox"],
            "exchanges_completed": exchanges,
        }
        self.stage_nodes[stage] = self.cursor
        self.write_stage_snapshots()

    def start(self, refs: dict[str, str | None]) -> None:
        """Rollout.start(): env-ready, before any step, so on root."""
        if "env-ready" in self.snapshot_stages:
            self.capture_stage("env-ready", refs, None)

    def verify(self, refs: dict[str, dict[str, str | None]]) -> None:
        """Rollout.verify(): pre-verify, the verifier, post-verify, all on the current cursor."""
        for stage in ("pre-verify", "post-verify"):
            if stage in self.snapshot_stages:
                self.capture_stage(stage, refs[stage], self.exchanges)

    # branch_lineage -------------------------------------------------------------------------------
    def stage_payload(self) -> dict[str, Any]:
        out = {}
        for stage, entry in self.registry.items():
            layers = sorted(
                k
                for k, v in (
                    ("environment", entry["environment_ref"]),
                    ("sandbox", entry["sandbox_ref"]),
                )
                if v is not None
            )
            out[stage] = {**entry, "layers": layers}
        return out

    def write_stage_snapshots(self) -> None:
        dump(
            self.run_dir / "stage_snapshots.json",
            {"schema_version": 1, "stages": self.stage_payload()},
        )

    def serialize_tree(self) -> dict[str, Any]:
        nodes: list[dict[str, Any]] = []

        def visit(node_id: str) -> None:
            node = self.nodes[node_id]
            snap = node.state.get("snapshot")
            entry: dict[str, Any] = {
                "id": node.id,
                "parent": node.parent,
                "stage": snap["stage"] if snap else None,
                "snapshot": {"environment": snap["environment"], "sandbox": snap["sandbox"]}
                if snap
                else None,
            }
            for key in ("reward", "unscored", "value", "delta", "delta_execution"):
                if key in node.state:
                    entry[key] = node.state[key]
            nodes.append(entry)
            for child in node.children:
                visit(child)

        visit("root")
        payload = {"schema_version": 1, "cut_point": None, "nodes": nodes}
        dump(self.run_dir / "tree.json", payload)
        return payload

    def write_branch_artifacts(self, parent: str, children: list[str]) -> None:
        snap = self.nodes[parent].state.get("snapshot")
        branch_stage = snap["stage"] if snap and snap["stage"] else f"cursor:{parent}"
        self.serialize_tree()
        for child_id in children:
            child = self.nodes[child_id]
            directory = self.child_dir(parent, child_id)
            provenance = {
                "kind": "benchflow-branch",
                "parent_rollout": self.parent_rollout,
                "branch_stage": branch_stage,
                "snapshot_ref": {
                    "sandbox": snap["sandbox"] if snap else None,
                    "environment": snap["environment"] if snap else None,
                },
                "cut_point": None,
                "delta": child.state["delta"],
            }
            if "delta_execution" in child.state:
                provenance["delta_execution"] = child.state["delta_execution"]
            dump(directory / "provenance.json", provenance)
            if "reward" in child.state:
                (directory / "reward.json").write_text(
                    json.dumps({"reward": float(child.state["reward"])}) + "\n"
                )

    def child_dir(self, parent: str, child: str) -> Path:
        return self.run_dir / "branches" / parent / "children" / child

    # rollout_branch.branch ------------------------------------------------------------------------
    def branch(self, children: list[Child], refs: dict[str, str | None]) -> float | None:
        """Rollout.branch(): a fresh checkpoint at the cursor (checkpoint_composed, no stage),
        children in place."""
        self.nodes[self.cursor].state["snapshot"] = {**refs, "stage": None}
        return self._fork(self.cursor, children, fresh=False)

    def branch_at_stage(
        self, stage: str, children: list[Child], *, release_fails: str | None = None
    ) -> float | None:
        """Returns V, or raises ChildRaised (a child raised, or the custody release failed
        closed)."""
        parent = self.stage_nodes[stage]
        entry = self.registry[stage]
        # adopt_checkpoint: the stage's snapshot becomes the node's checkpoint, re-tagging it
        self.nodes[parent].state["snapshot"] = {
            "environment": entry["environment_ref"],
            "sandbox": entry["sandbox_ref"],
            "stage": stage,
        }
        return self._fork(parent, children, fresh=stage == "env-ready", release_fails=release_fails)

    def _fork(
        self, parent: str, children: list[Child], *, fresh: bool, release_fails: str | None = None
    ) -> float | None:
        saved = (self.cursor, dict(self.registry), dict(self.stage_nodes), self.exchanges)
        attached: list[str] = []
        try:
            for child in children:
                node = self.attach(parent)
                self.nodes[node].state["delta"] = child.delta
                if fresh:
                    self.nodes[node].state["delta_execution"] = FRESH
                attached.append(node)
                self.cursor, self.exchanges = node, saved[3]
                try:
                    self.run_child(node, child, fresh)
                finally:
                    self.hand_off(parent, node, child)
                if child.unscored is not None:
                    self.nodes[node].state["unscored"] = child.unscored
                else:
                    self.nodes[node].state["reward"] = float(child.reward)  # type: ignore[arg-type]
                self.restore(saved)
            if release_fails is not None:
                # MountedArtifacts.release failing closed, in the finally: the hold stays with what
                # did not move
                self.leave_hold(parent)
                raise ChildRaised(release_fails)
        except ChildRaised:
            self.restore(saved)
            self.write_lineage(parent, attached)
            raise
        self.restore(saved)
        if any("unscored" in self.nodes[c].state for c in attached):
            value = None
            self.nodes[parent].state.pop("value", None)
        else:
            value = sum(self.nodes[c].state["reward"] for c in attached) / len(attached)
            self.nodes[parent].state["value"] = value
        self.write_lineage(parent, attached)
        return value

    def run_child(self, node: str, child: Child, fresh: bool) -> None:
        if fresh:  # a fresh rollout: its own tree and registry, its own run directory
            return self._raise_if(child)
        self.execute(child.events, node=node)  # make_default_runner: execute(node=child), verify()
        self._raise_if(child)
        # The child's verify() captures the run's configured verify stages on its own cursor, with
        # refs of its own.
        self.verify(
            child.verify_refs
            or {
                stage: {"environment": None, "sandbox": f"bf-snap-child-{node}-{stage}"}
                for stage in ("pre-verify", "post-verify")
            }
        )

    @staticmethod
    def _raise_if(child: Child) -> None:
        if child.raises is not None:
            raise ChildRaised(child.raises)

    def hand_off(self, parent: str, node: str, child: Child) -> None:
        """MountedArtifacts.hand_off (in a finally): an in-place child's verifier output under
        mounted/; a fresh child downloads into its own run directory."""
        if child.ctrf is None:
            return
        root = (
            self.child_dir(parent, node)
            if self.nodes[node].state.get("delta_execution")
            else self.child_dir(parent, node) / "mounted"
        )
        path = root / "verifier" / "ctrf.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(
            child.ctrf if isinstance(child.ctrf, bytes) else json.dumps(child.ctrf).encode()
        )

    def leave_hold(self, parent: str) -> None:
        """MountedArtifacts.release when an entry cannot move back: `branches/<node>/parent/` stays,
        holding the parent's mounted output that did not come back (here its verifier's
        reward.txt)."""
        held = self.run_dir / "branches" / parent / "parent" / "verifier" / "reward.txt"
        held.parent.mkdir(parents=True, exist_ok=True)
        held.write_text("1\n")

    def restore(self, saved: tuple) -> None:
        """_LinearState.restore_onto: cursor and stage registry back to the parent's."""
        self.cursor, self.registry, self.stage_nodes = saved[0], dict(saved[1]), dict(saved[2])

    def write_lineage(self, parent: str, children: list[str]) -> None:
        self.write_branch_artifacts(parent, children)
        if self.registry:
            self.write_stage_snapshots()

    # the run's own files --------------------------------------------------------------------------
    def cleanup(self) -> None:
        """Rollout.cleanup() without --keep-snapshots (and ablate.retain_stage_snapshot before it):
        every stage image dies with the sandbox, so each registry entry is annotated ephemeral,
        never exported."""
        for entry in self.registry.values():
            entry.setdefault("ephemeral", True)
            entry.setdefault("exported", None)
        if self.registry:
            self.write_stage_snapshots()

    def write_run_files(self, task: str, *, rewards: dict | None, error: str | None = None) -> None:
        """Cleanup, then Rollout._build_result: config.json (written at start) and result.json."""
        self.cleanup()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        config = {
            "task_path": f"tasks/{task}",
            "agent": "claude-agent-acp",
            "model": "claude-sonnet-4-5",
            "environment": "docker",
            "skill_mode": "no-skill",
            "started_at": "2026-11-02 10:15:03.412907",
        }
        (self.run_dir / "config.json").write_text(json.dumps(config, indent=2))
        result = {
            "task_name": task,
            "rollout_name": self.run_dir.name,
            "rewards": rewards,
            "agent": "claude-agent-acp",
            "model": "claude-sonnet-4-5",
            "error": error,
            "verifier_error": None,
            "started_at": "2026-11-02 10:15:03.412907",
            "finished_at": "2026-11-02 10:31:44.100000",
            "timing": {"total": 1000.7},
            "trajectory_source": "acp",
        }
        (self.run_dir / "result.json").write_text(json.dumps(result, indent=2))


# bench eval ablate --------------------------------------------------------------------------------


@dataclass
class Arm:
    name: str
    kind: str
    delta: dict[str, Any] = field(default_factory=lambda: dict(ZERO_DELTA))
    source: str | None = None
    wall_clock_sec: float = 100.0


def display_test_name(raw: str) -> str:
    """cli/_failure_evidence._display_test_name."""
    head, bracket, param = raw.partition("[")
    return head.rsplit("::", 1)[-1] + bracket + param


def artifact_test_outcomes(root: Path) -> dict[str, str] | None:
    """cli/_failure_evidence.artifact_test_outcomes: None when the report is missing, broken or
    lists no test."""
    path = root / "verifier" / "ctrf.json"
    if not path.is_file():
        return None
    try:
        if path.stat().st_size > 64 * 1024:
            return None
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
        if not isinstance(data, dict):
            return None
        tests = [t for t in ((data.get("results") or {}).get("tests") or []) if isinstance(t, dict)]
    except Exception:
        return None
    named = [
        (str(t["name"]), str(t["status"]))
        for t in tests
        if isinstance(t.get("name"), str)
        and t["name"].strip()
        and isinstance(t.get("status"), str)
        and t["status"].strip()
    ]
    display = {raw: display_test_name(raw) for raw, _ in named}
    injective = len(set(display.values())) == len(set(display))
    outcomes: dict[str, str] = {}
    for raw, status in named:
        outcomes.setdefault(display[raw] if injective else raw, status)
    return dict(sorted(outcomes.items())) or None


def child_test_outcomes(child_dir: Path) -> dict[str, str] | None:
    """branch_report._child_test_outcomes over branch_artifacts.child_artifact_roots."""
    for root in (child_dir, child_dir / "mounted"):
        outcomes = artifact_test_outcomes(root)
        if outcomes is not None:
            return outcomes
    return None


def ablation_report(
    run: WriterRun,
    *,
    task: str,
    stage: str,
    arms: list[Arm],
    parent_reward: float | None,
    parent_error: str | None,
    value: float | None,
    branch_error: str | None,
    tree_written: bool = True,
) -> dict[str, Any]:
    """ablate._finalize_report + branch_report.outcomes_for_arms + AblationReport.to_dict.

    `reference`, `verdict` and `test_attribution` are derived by `attribute`/`sub_test_attribution`
    from the rows built here; the project's own attribution module computes them (it is tested
    against benchflow's rules in tests/unit/test_attribution.py), so a comparison with an export
    exercises everything else.
    """
    from rollout_lineage.projections.reports.arms import attribution as attr

    children = [n for n in _preorder(run) if "delta" in run.nodes[n].state] if tree_written else []
    rows, outcomes = [], []
    for index, arm in enumerate(arms):
        node_id = children[index] if index < len(children) else None
        row: dict[str, Any] = {
            "name": arm.name,
            "kind": arm.kind,
            "delta": arm.delta,
            "delta_execution": None,
            "source": arm.source,
            "reward": None,
            "wall_clock_sec": None,
            "node": None,
            "artifacts": None,
            "tests": None,
            "error": None,
            "environment": None,
        }
        if node_id is not None:
            node = run.nodes[node_id]
            child_dir = run.child_dir(node.parent, node_id)  # type: ignore[arg-type]
            row.update(
                node=node_id,
                delta_execution=node.state.get("delta_execution"),
                wall_clock_sec=arm.wall_clock_sec,
                artifacts=str(child_dir),
                tests=child_test_outcomes(child_dir),
            )
            if node.state.get("reward") is None:
                row["error"] = (
                    node.state.get("unscored")
                    or branch_error
                    or "the branch ended without a reward"
                )
            else:
                row["reward"] = float(node.state["reward"])
        rows.append(row)
        outcomes.append(
            attr.ArmOutcome(
                arm.name,
                row["reward"],
                error=row["error"],
                ran=node_id is not None,
                tests=row["tests"],
            )
        )
    tests = [row["tests"] for row in rows]
    references = attr.arm_references(outcomes, parent_reward)
    verdicts = attr.arm_verdicts(outcomes, stage, parent_reward, tests)
    for row, outcome, reference, verdict in zip(rows, outcomes, references, verdicts, strict=False):
        row.update(status=attr.arm_status(outcome), reference=reference, verdict=verdict)
    error = (
        branch_error
        if branch_error is not None and all(row["error"] is None for row in rows)
        else None
    )
    entry = run.stage_payload().get(stage)
    return {
        "schema_version": 1,
        "task": {"id": task, "path": f"tasks/{task}"},
        "stage": stage,
        "snapshot_layers": ["sandbox"],
        "stage_snapshot": entry,
        "agent": "claude-agent-acp",
        "model": "claude-sonnet-4-5",
        "sandbox": "docker",
        "environment": None,
        "parent": {"reward": parent_reward, "error": parent_error, "run_dir": str(run.run_dir)},
        "value": value,
        "error": error,
        "arms": rows,
        "test_attribution": attr.test_attribution(outcomes, tests),
    }


def _preorder(run: WriterRun) -> list[str]:
    out: list[str] = []

    def visit(node_id: str) -> None:
        out.append(node_id)
        for child in run.nodes[node_id].children:
            visit(child)

    visit("root")
    return out

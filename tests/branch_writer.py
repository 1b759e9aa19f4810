"""Branched trials laid out the way benchflow's main-line writers lay them out today (facts in
docs/benchflow-formats.md §16).

Each method mirrors one writer function and is named after it; the steps, the keys and their order
are the writer's, the code is ours. Commits (benchflow-ai/benchflow):
- `branch_lineage.ForkRecord.__init__` / `captured` / `artifacts` / `persist` / `_write_labels`,
  `child_cost`, `fork_cost`, `cost_totals`, `branch_summary`, `error_record`, `child_status`
  (bf6e8412);
- `rollout_branch.branch` (in place and `isolate_children`), `_run_isolated_children`, `_stderr`,
  `_make_sub_rollout` (e0b5e2f6);
- `checkpoint_retry.run_checkpoint_retry` and `_publish` (e0b5e2f6);
- `checkpoints.after_prompt` / `_write` (e0b5e2f6), `branch_run.run_branch_trial`'s
  `checkpoint_source.json` (76b96d1b), `branch_result.write_child_observation` (e0b5e2f6);
- `RolloutTree.attach` / `nodes` (pre-order from the root, children in attach order);
- `rollout/_results._build_rollout_result(branches=...)` (e0b5e2f6).

Seconds are given, not measured: a test says how long each phase took. Fork ids are `uuid4().hex`
in benchflow; here the trial's id and a count (`a1b2c3d4` + `00…01`), unique across trials.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.writer_runs import write_config, write_result

USAGE_COUNTERS = (
    "n_input_tokens",
    "n_output_tokens",
    "n_cache_read_tokens",
    "n_cache_creation_tokens",
    "total_tokens",
)
EXCLUDED = [
    "agent_session",
    "process_memory",
    "mounted_contents",
    "external_services",
    "physical_state",
]
#: `error_record`'s codes, by what the child raised.
CODES = {
    "UnscoredChildError": "missing_verifier_reward",
    "NonfiniteChildReward": "nonfinite_reward",
    "CancelledError": "cancelled",
}


def write_json_atomic(path: Path, payload: Any) -> None:
    """`review.persistence.write_json_atomic`: indent 2, keys in insertion order, newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


def error_record(exc: str) -> dict[str, str]:
    """`branch_lineage.error_record`: the exception's class name and a code, never its message."""
    return {"type": exc, "code": CODES.get(exc, "execution_failed")}


def child_status(exc: str) -> str:
    """`branch_lineage.child_status`."""
    return {"CancelledError": "cancelled", "UnscoredChildError": "unscored"}.get(exc, "failed")


def native_usage(total: int, cost_usd: float | None = None) -> dict[str, Any]:
    """A child's `_native_usage_metrics` (what `child_cost` reads), token classes adding up."""
    return {
        "n_input_tokens": 10,
        "n_output_tokens": total // 10,
        "n_cache_read_tokens": total - 10 - total // 10 - 200,
        "n_cache_creation_tokens": 200,
        "total_tokens": total,
        "cost_usd": cost_usd,
        "usage_source": "agent_native_acp",
        "price_source": None,
        "usage_details": {"thought_tokens": 0},
    }


def child_cost(usage: dict[str, Any] | None, timing: dict[str, Any], seconds: float | None) -> dict:
    """`branch_lineage.child_cost`: cost, usage and timing_sec of one child for tree.json."""
    usage = usage or {}
    total = usage.get("total_tokens")
    usd = usage.get("cost_usd")
    return {
        "cost": {
            "tokens": int(total) if isinstance(total, int) and not isinstance(total, bool) else 0,
            "usd": float(usd) if isinstance(usd, (int, float)) and math.isfinite(usd) else None,
            "sandbox_seconds": None if seconds is None else round(seconds, 3),
        },
        "usage": {
            key: int(usage.get(key) or 0)
            for key in USAGE_COUNTERS
            if isinstance(usage.get(key) or 0, int)
        },
        "timing_sec": {key: round(float(value), 3) for key, value in timing.items()},
    }


def fork_cost(record: dict[str, Any], *, wall_seconds: float, isolated: bool) -> dict[str, Any]:
    """`branch_lineage.fork_cost`."""
    costs = [child.get("cost") or {} for child in record["children"]]
    usds = [cost.get("usd") for cost in costs]
    children_seconds = (
        sum(cost.get("sandbox_seconds") or 0.0 for cost in costs) if isolated else 0.0
    )
    known = bool(usds) and all(usd is not None for usd in usds)
    wall = round(wall_seconds, 3)
    return {
        "tokens": sum(cost.get("tokens") or 0 for cost in costs),
        "usd": round(math.fsum(u for u in usds if u is not None), 6) if known else None,
        "usd_known": known,
        "wall_seconds": wall,
        "parent_sandbox_seconds": wall,
        "children_sandbox_seconds": round(children_seconds, 3),
        "sandbox_seconds": round(wall + children_seconds, 3),
    }


def cost_totals(forks: list[dict[str, Any]]) -> dict[str, Any]:
    """`branch_lineage.cost_totals`: a nested fork's parent sandbox is already its child's."""
    child_nodes = {child["node_id"] for fork in forks for child in fork["children"]}
    costs = [(fork, fork.get("cost") or {}) for fork in forks]
    usds = [cost.get("usd") for _, cost in costs]
    known = bool(usds) and all(usd is not None for usd in usds)
    seconds = 0.0
    for fork, cost in costs:
        seconds += cost.get("children_sandbox_seconds") or 0.0
        if fork.get("rollout") not in child_nodes:
            seconds += cost.get("parent_sandbox_seconds") or 0.0
    return {
        "tokens": sum(cost.get("tokens") or 0 for _, cost in costs),
        "usd": round(math.fsum(u for u in usds if u is not None), 6) if known else None,
        "usd_known": known,
        "sandbox_seconds": round(seconds, 3),
    }


def branch_summary(forks: list[dict[str, Any]]) -> dict[str, Any] | None:
    """`branch_lineage.branch_summary`: result.json's `branches` block; None when never branched."""
    if not forks:
        return None
    children = [child for fork in forks for child in fork["children"]]
    usage = dict.fromkeys(USAGE_COUNTERS, 0)
    timing: dict[str, float] = {}
    for child in children:
        for key, value in (child.get("usage") or {}).items():
            usage[key] = usage.get(key, 0) + value
        for key, value in (child.get("timing_sec") or {}).items():
            timing[key] = round(timing.get(key, 0.0) + value, 3)
    child_nodes = {child["node_id"] for child in children}
    discarded = any(
        fork.get("parent_restore") == "skipped"
        for fork in forks
        if fork.get("rollout") not in child_nodes
    )
    return {
        "tree": "tree.json",
        "parent": "discarded" if discarded else "kept",
        "forks": [
            {
                "id": fork["id"],
                "status": fork["status"],
                "value": fork["value"],
                "children": len(fork["children"]),
                "scored": sum(c["status"] == "scored" for c in fork["children"]),
                "parent_node": fork["parent_node"],
                "parent_restore": fork["parent_restore"],
                "cost": fork.get("cost"),
                "nodes": [
                    {
                        "index": child["index"],
                        "node_id": child["node_id"],
                        "label": child["intervention"]["label"],
                        "status": child["status"],
                        "reward": child["reward"],
                        "reward_source": child["reward_source"],
                        "path": child["artifacts"]["path"],
                    }
                    for child in fork["children"]
                ],
            }
            for fork in forks
        ],
        "children": len(children),
        "cost": cost_totals(forks),
        "child_usage": usage,
        "child_timing_sec": timing,
    }


def stderr(rewards: list[float]) -> float | None:
    """`rollout_branch._stderr`: sample std of the rewards / sqrt(n), rounded 6; None below 2."""
    n = len(rewards)
    if n < 2:
        return None
    mean = math.fsum(rewards) / n
    variance = math.fsum((r - mean) ** 2 for r in rewards) / (n - 1)
    return round(math.sqrt(variance / n), 6)


@dataclass
class Child:
    """One child: what its runner does and how it ends. `raises` is the class name of what it
    raised (`UnscoredChildError` makes it unscored, `CancelledError` cancelled, anything else
    failed); `retried_after` a first attempt that failed before its agent did anything."""

    label: str | None = None
    requested: str | None = None
    reward: float | None = 1.0
    reward_source: str = "verifier"
    raises: str | None = None
    steps: int = 3
    usage: dict[str, Any] | None = field(default_factory=lambda: native_usage(5000))
    timing: dict[str, float] = field(
        default_factory=lambda: {"agent_setup": 6.0, "agent_execution": 30.0, "verifier": 20.0}
    )
    seconds: float = 60.0  # the sandbox it held: the parent's in place, its own when isolated
    retried_after: str | None = None
    cleanup_error: dict[str, str] | None = None
    snapshot_start: dict[str, str] | None = field(
        default_factory=lambda: {
            "agent": "reused",
            "verifier_baseline": "inherited",
            "setup_commands": "skipped",
        }
    )
    #: forks this child's own rollout makes after its steps (isolated children only)
    forks: list[Fork] = field(default_factory=list)


@dataclass
class Fork:
    children: list[Child]
    isolated: bool = False
    concurrency: int = 1
    restore_parent: bool = True
    retain: bool = False
    resume_session: bool = False
    child_retries: int = 0
    continue_after_child_failure: bool = False
    checkpoint_raises: str | None = None
    reuse_ref: str | None = None  # `reuse_snapshot`: a kept checkpoint's image
    wall: float = 150.0
    checkpoint_seconds: float = 42.0
    restore_seconds: float = 2.0


@dataclass
class Node:
    id: str
    parent: Node | None
    step_id: str | None = None
    children: list[Node] = field(default_factory=list)


class BranchTrial:
    """A trial folder `<jobs>/<job>/<task>__<id>/` and its rollout tree."""

    def __init__(
        self,
        jobs: Path,
        job: str = "2026-12-01__10-00-00",
        task: str = "fix-bug",
        trial_id: str = "a1b2c3d4",
        *,
        model: str = "claude-sonnet-4-6",
        provider: str = "daytona",
    ) -> None:
        self.name = f"{task}__{trial_id}"
        self.trial_id = trial_id
        self.task = task
        self.dir = jobs / job / self.name
        self.model = model
        self.provider = provider
        self.root = Node("root", None)
        self.by_id = {"root": self.root}
        self.count = 0
        self.steps = 0
        self.cursor = self.root
        self.forks: list[dict[str, Any]] = []  # the trial's `_branch_forks`, nested ones too
        self.fork_ids = 0
        self.checkpoint_rows: list[dict[str, Any]] = []
        self.reward: float | None = None
        self.discarded = False
        write_config(self.dir, model=model, environment=provider)

    # RolloutTree ----------------------------------------------------------------------------------
    def attach(self, parent: Node) -> Node:
        self.count += 1
        node = Node(f"n{self.count}", parent)
        parent.children.append(node)
        self.by_id[node.id] = node
        return node

    def execute(self, steps: int, node: Node | None = None) -> Node:
        """`Rollout.execute`: one node per ACP event; a pending child's first step lands on it."""
        cursor = node or self.cursor
        kinds = ("user_message", "agent_thought", "tool_call", "agent_message")
        for i in range(steps):
            if node is not None and i == 0:
                target = node
            else:
                target = self.attach(cursor)
            target.step_id = f"step-{self.steps}-{kinds[self.steps % 4]}"
            self.steps += 1
            cursor = target
        if node is None:
            self.cursor = cursor
        return cursor

    def nodes(self) -> list[Node]:
        out: list[Node] = []
        stack = [self.root]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children))
        return out

    # branch_lineage.ForkRecord --------------------------------------------------------------------
    def fork_record(
        self,
        rollout: str,
        parent: Node,
        layers: list[str],
        n: int,
        labels: list[str | None] | None,
        requests: list[str | None] | None,
    ) -> dict[str, Any]:
        self.fork_ids += 1
        record: dict[str, Any] = {
            # uuid4().hex in benchflow: unique across trials; here the trial's id and a count
            "id": f"{self.trial_id}{self.fork_ids:024x}",
            "rollout": rollout,
            "parent_node": parent.id,
            "requested_children": n,
            "snapshot": {
                "requested_layers": sorted(layers),
                "captured_layers": [],
                "environment": None,
                "sandbox": None,
                "excluded": list(EXCLUDED),
                "agent_session": "fresh",
                "lifetime": "provider_local",
                "restore_available": None,
                "retention": None,
            },
            "status": "running",
            "parent_restore": "not_attempted",
            "timing_sec": {
                "checkpoint": None,
                "child_restore": [],
                "children": None,
                "parent_restore": None,
            },
            "value": None,
            "error": None,
            "parent_restore_error": None,
            "artifact_error": None,
            "children": [
                {
                    "index": index,
                    "node_id": None,
                    "status": "not_started",
                    "reward": None,
                    "reward_source": None,
                    "error": None,
                    "cleanup_error": None,
                    "intervention": {
                        "label": labels[index] if labels else None,
                        "requested": requests[index] if requests else None,
                        "execution": "runner"
                        if requests and requests[index] is not None
                        else "unspecified",
                        "evidence": None,
                    },
                    "artifacts": {"status": "unavailable", "path": None},
                }
                for index in range(n)
            ],
        }
        self.forks.append(record)
        return record

    def persist(self, record: dict[str, Any]) -> None:
        """`ForkRecord.persist`: the whole tree.json, then this fork's labels.json."""
        write_json_atomic(
            self.dir / "tree.json",
            {
                "schema_version": 1,
                "kind": "benchflow-branch-tree",
                "nodes": [
                    {
                        "id": node.id,
                        "parent": node.parent.id if node.parent else None,
                        "step_id": node.step_id,
                    }
                    for node in self.nodes()
                ],
                "forks": json.loads(json.dumps(self.forks)),
            },
        )
        self.write_labels(record)

    def write_labels(self, record: dict[str, Any]) -> None:
        """`ForkRecord._write_labels`: once a child has an archive and the fork folder exists."""
        paths = [c["artifacts"]["path"] for c in record["children"] if c["artifacts"]["path"]]
        fork_dir = self.dir / "branches" / record["id"]
        if not paths or not fork_dir.is_dir():
            return
        write_json_atomic(
            fork_dir / "labels.json",
            {
                "kind": "benchflow-branch-labels",
                "fork_id": record["id"],
                "children": [
                    {
                        "label": child["intervention"]["label"],
                        "node_id": child["node_id"],
                        "folder": Path(child["artifacts"]["path"]).name
                        if child["artifacts"]["path"]
                        else None,
                        "status": child["status"],
                        "reward": child["reward"],
                    }
                    for child in record["children"]
                ],
            },
        )

    # rollout_branch.branch ------------------------------------------------------------------------
    def branch(self, fork: Fork, *, rollout: str | None = None, at: Node | None = None) -> dict:
        """`rollout_branch.branch` at the cursor of the trial (or of an isolated child's own
        rollout, named by its node id: a nested fork)."""
        parent = at or self.cursor
        n = len(fork.children)
        labels = [c.label for c in fork.children]
        requests = [c.requested for c in fork.children]
        record = self.fork_record(
            rollout or self.name,
            parent,
            ["sandbox"],
            n,
            labels if any(label is not None for label in labels) else None,
            requests if any(r is not None for r in requests) else None,
        )
        record["children_mode"] = {
            "isolated": fork.isolated,
            "concurrency": fork.concurrency,
            "prewarm": fork.concurrency if fork.isolated else 0,
            "child_retries": fork.child_retries,
            "continue_after_child_failure": fork.continue_after_child_failure or fork.isolated,
        }
        if fork.resume_session:
            record["snapshot"]["agent_session"] = "resumed"
            record["snapshot"]["excluded"].remove("agent_session")
        self.persist(record)
        timing = record["timing_sec"]
        failures: list[str] = []
        if fork.checkpoint_raises:
            record["status"] = "failed"
            record["error"] = error_record(fork.checkpoint_raises)
            self.persist(record)
            return record
        ref = fork.reuse_ref or f"bf-snap-{record['id']}"
        if fork.reuse_ref:
            record["snapshot"]["reused"] = True
        timing["checkpoint"] = round(fork.checkpoint_seconds, 3)
        record["snapshot"]["sandbox"] = {"provider": self.provider, "ref": ref, "digest": None}
        record["snapshot"]["captured_layers"] = ["sandbox"]
        self.persist(record)
        fork_dir = self.dir / "branches" / record["id"]
        fork_dir.mkdir(parents=True)
        if fork.isolated:
            failures = self.run_isolated_children(record, parent, fork, fork_dir)
        else:
            failures = self.run_in_place_children(record, parent, fork, fork_dir)
        if failures:
            # `_combined_failure`: one failure as it is, a cancellation over the others, else a
            # group
            record["error"] = error_record(
                "CancelledError"
                if "CancelledError" in failures
                else failures[0]
                if len(failures) == 1
                else "ExceptionGroup"
            )
        timing["children"] = round(sum(c.seconds for c in fork.children), 3)
        if not fork.restore_parent:
            record["parent_restore"] = "skipped"
            self.discarded = rollout is None
        else:
            timing["parent_restore"] = round(fork.restore_seconds, 3)
            record["parent_restore"] = "restored"
        retained = fork.retain or fork.reuse_ref is not None
        record["snapshot"]["retention"] = "kept" if retained else "deleted"
        if not retained:
            record["snapshot"]["restore_available"] = False
        record["cost"] = fork_cost(record, wall_seconds=fork.wall, isolated=fork.isolated)
        statuses = [child["status"] for child in record["children"]]
        if failures:
            record["status"] = (
                "cancelled"
                if "cancelled" in statuses or "CancelledError" in failures
                else "partial"
                if any(status != "not_started" for status in statuses)
                else "failed"
            )
        else:
            record["status"] = "completed"
            record["value"] = math.fsum(c["reward"] / n for c in record["children"])
            record["value_stderr"] = stderr([c["reward"] for c in record["children"]])
        self.persist(record)
        return record

    def run_in_place_children(
        self, record: dict, parent: Node, fork: Fork, fork_dir: Path
    ) -> list[str]:
        """In place: children attached one at a time; a child that raised stops the rest unless
        `continue_after_child_failure` (then the failures are raised together)."""
        failures: list[str] = []
        for index, spec in enumerate(fork.children):
            node = self.attach(parent)
            observation = record["children"][index]
            observation["node_id"] = node.id
            record["timing_sec"]["child_restore"].append(round(fork.restore_seconds, 3))
            child_dir = fork_dir / "children" / node.id
            child_dir.mkdir(parents=True)
            observation["status"] = "running"
            self.persist(record)
            attempt = 1
            if spec.retried_after:
                attempt = 2
                observation["retried_after"] = error_record(spec.retried_after)
            observation["attempts"] = attempt
            if spec.raises:
                observation.update(
                    status=child_status(spec.raises), error=error_record(spec.raises)
                )
                if spec.steps:
                    self.execute(spec.steps, node)
            else:
                self.execute(spec.steps, node)
                observation.update(
                    status="scored", reward=spec.reward, reward_source=spec.reward_source
                )
            if spec.cleanup_error:
                observation["cleanup_error"] = spec.cleanup_error
            self.write_child_observation(child_dir, node, record, index, spec)
            self.hand_off(child_dir)
            observation["artifacts"] = {
                "status": "available",
                "path": child_dir.relative_to(self.dir).as_posix(),
            }
            observation.update(child_cost(spec.usage, spec.timing, spec.seconds))
            self.persist(record)
            if spec.raises:
                failures.append(spec.raises)
                if not fork.continue_after_child_failure or spec.raises == "CancelledError":
                    break
        return failures

    def hand_off(self, child_dir: Path) -> None:
        """`MountedArtifacts.hand_off`: the parent's mounted output moves into the child."""
        (child_dir / "mounted" / "verifier").mkdir(parents=True)
        (child_dir / "mounted" / "verifier" / "reward.txt").write_text("1\n")

    def run_isolated_children(
        self, record: dict, parent: Node, fork: Fork, fork_dir: Path
    ) -> list[str]:
        """`_run_isolated_children`: every node attached first, each child a sub-rollout with its
        own folder and result.json, its own sandbox from the snapshot; siblings always run."""
        n = len(fork.children)
        nodes = [self.attach(parent) for _ in range(n)]
        for index, node in enumerate(nodes):
            record["children"][index]["node_id"] = node.id
        record["timing_sec"]["child_restore"] = [None] * n
        failures: list[str] = []
        for index, (node, spec) in enumerate(zip(nodes, fork.children, strict=True)):
            observation = record["children"][index]
            attempts = 2 if spec.retried_after else 1
            for attempt in range(1, attempts + 1):
                observation["status"] = "running"
                self.persist(record)
                child_dir = fork_dir / "children" / node.id
                child_dir.mkdir(parents=True)
                record["timing_sec"]["child_restore"][index] = 20.5
                first_failed = attempt < attempts
                if first_failed:
                    observation.update(
                        status=child_status(spec.retried_after or ""),
                        error=error_record(spec.retried_after or ""),
                    )
                elif spec.raises:
                    observation.update(
                        status=child_status(spec.raises), error=error_record(spec.raises)
                    )
                    if spec.steps:
                        self.execute(spec.steps, node)
                else:
                    self.execute(spec.steps, node)
                    observation.update(
                        status="scored", reward=spec.reward, reward_source=spec.reward_source
                    )
                self.write_child_observation(child_dir, node, record, index, spec)
                observation.update(child_cost(spec.usage, spec.timing, None))
                self.finalize_child(child_dir, node, spec, failed=first_failed)
                observation["cost"]["sandbox_seconds"] = round(spec.seconds, 3)
                observation["timing_sec"].update(
                    {"sandbox_from_snapshot": 20.5, "install_agent": 6.0, "finalize": 2.0}
                )
                observation["snapshot_start"] = spec.snapshot_start
                observation["artifacts"] = {
                    "status": "available",
                    "path": child_dir.relative_to(self.dir).as_posix(),
                }
                self.persist(record)
                observation["attempts"] = attempt
                if first_failed:
                    observation["retried_after"] = error_record(spec.retried_after or "")
                    observation.update(status="running", error=None, cleanup_error=None)
                    child_dir.rename(child_dir.with_name(f"{child_dir.name}.attempt-{attempt}"))
                    continue
            for nested in spec.forks:
                cursor = self.by_id[node.id]
                while cursor.children:
                    cursor = cursor.children[-1]
                self.branch(nested, rollout=node.id, at=cursor)
            if spec.raises:
                failures.append(spec.raises)
        return failures

    def finalize_child(self, child_dir: Path, node: Node, spec: Child, *, failed: bool) -> None:
        """The sub-rollout's `finalize()`: its own result.json in its folder
        (`_make_sub_rollout`: job `children`, rollout name = node id)."""
        rewards = None if failed or spec.raises else {"reward": spec.reward}
        write_result(
            child_dir,
            task_name=self.task,
            rollout_name=node.id,
            rewards=rewards,
            model=self.model,
        )

    def write_child_observation(
        self, child_dir: Path, node: Node, record: dict, index: int, spec: Child
    ) -> None:
        """`branch_result.write_child_observation`: every child that started, error as text."""
        failed = spec.raises is not None
        write_json_atomic(
            child_dir / "observation.json",
            {
                "kind": "branch-child",
                "node_id": node.id,
                "lineage": {
                    "parent_rollout": record["rollout"],
                    "fork_id": record["id"],
                    "parent_node": record["parent_node"],
                    "index": index,
                    "label": spec.label,
                },
                "reward": None if failed else spec.reward,
                "error": f"{spec.raises}: the child failed" if failed else None,
                "verifier_error": None,
                "export_error": None,
                "timing": spec.timing,
                "native_usage": spec.usage,
                "trajectory": [],
            },
        )

    # checkpoints.after_prompt ---------------------------------------------------------------------
    def after_prompt(
        self, prompt: int, *, status: str = "kept", keep: int = 3, every: bool = False
    ) -> dict[str, Any]:
        row = {
            "id": f"prompt:{prompt}",
            "after_prompt": prompt,
            "node_id": self.cursor.id,
            "trajectory_events": self.steps,
            "agent_session_id": "sess-1",
            "provider": None,
            "ref": None,
            "created_at": "2026-12-01T10:02:00.000000+00:00",
            "seconds": None,
            "status": "failed",
            "error": None,
        }
        if status == "kept":
            row.update(
                provider=self.provider,
                ref=f"bf-snap-{self.trial_id}-ckpt-{prompt}",
                status="kept",
                seconds=9.5,
            )
        else:
            row["error"] = {"type": "RuntimeError", "code": "snapshot_failed"}
        self.checkpoint_rows.append(row)
        write_json_atomic(
            self.dir / "checkpoints.json",
            {
                "schema_version": 1,
                "kind": "benchflow-checkpoints",
                "rollout": self.name,
                "policy": {"every": every, "after": [] if every else [prompt], "keep": keep},
                "checkpoints": self.checkpoint_rows,
            },
        )
        return row

    # rollout/_results._build_rollout_result -------------------------------------------------------
    def finalize(self, reward: float | None, **result: Any) -> dict[str, Any]:
        """The trial's result.json: its own rewards (null when its parent was discarded: it is
        finalized unverified), and `branches` when it forked."""
        self.reward = reward
        branches = branch_summary(self.forks)
        overrides: dict[str, Any] = {
            "rewards": None if self.discarded else {"reward": reward},
            "model": self.model,
        }
        if branches is not None:
            overrides["branches"] = branches
        return write_result(self.dir, **overrides, **result)

    # checkpoint_retry.run_checkpoint_retry + _publish ---------------------------------------------
    def retry(
        self,
        child: Child,
        *,
        reason: str = "failure",
        prompt: str | None = None,
        tool_calls: int | None = 7,
        wall: float = 95.0,
    ) -> dict[str, Any] | None:
        kept = [row for row in self.checkpoint_rows if row["status"] == "kept" and row["ref"]]
        if not kept:
            self.publish({"status": "no_checkpoint", "reason": reason})
            return None
        row = kept[-1]
        parent = self.by_id.get(row["node_id"], self.root)
        request = (
            f"retry prompt ({len(prompt)} characters, sha256:000000000abc)"
            if prompt
            else "prompts after the checkpoint (1)"
        )
        child.label = "retry"
        record = self.fork_record(self.name, parent, ["sandbox"], 1, ["retry"], [request])
        record.update(
            kind="retry",
            reason=reason,
            checkpoint=row["id"],
            children_mode={"isolated": True, "concurrency": 1, "prewarm": 1},
            parent_restore="not_needed",
        )
        record["snapshot"].update(
            captured_layers=["sandbox"],
            sandbox={"provider": row["provider"], "ref": row["ref"], "digest": None},
            retention="kept",
            agent_session="fresh",
        )
        self.persist(record)
        fork_dir = self.dir / "branches" / record["id"]
        fork_dir.mkdir(parents=True)
        self.run_isolated_children(record, parent, Fork([child], isolated=True), fork_dir)
        [recorded] = record["children"]
        record["cost"] = fork_cost(record, wall_seconds=wall, isolated=True)
        record["cost"].update(
            parent_sandbox_seconds=0.0, sandbox_seconds=record["cost"]["children_sandbox_seconds"]
        )
        record["status"] = "completed" if recorded["status"] == "scored" else "failed"
        record["value"] = recorded["reward"]
        self.persist(record)
        self.publish(
            {
                "status": record["status"],
                "reason": reason,
                "checkpoint": row["id"],
                "fork_id": record["id"],
                "reward": recorded["reward"],
                "original_reward": self.reward,
                "path": recorded["artifacts"]["path"],
                "tool_calls": tool_calls,
                "no_work": tool_calls == 0,
            }
        )
        return record

    def publish(self, block: dict[str, Any]) -> None:
        """`checkpoint_retry._publish`: the retry block, and `branches` rewritten."""
        path = self.dir / "result.json"
        document = json.loads(path.read_text())
        document["retry"] = block
        branches = branch_summary(self.forks)
        if branches is not None:
            document["branches"] = branches
        write_json_atomic(path, document)

    # branch_run.run_branch_trial ------------------------------------------------------------------
    def started_from_checkpoint(
        self, source: str, checkpoint: str, *, prefix_events: int | None = 5
    ) -> None:
        write_json_atomic(
            self.dir / "checkpoint_source.json",
            {
                "trial": source,
                "trial_path": f"/jobs/2026-11-30__09-00-00/{source}",
                "fork_id": checkpoint,
                "provider": self.provider,
                "ref": "bf-snap-secret",
                "prefix_events": prefix_events,
                "snapshot_start": {
                    "agent": "installed",
                    "verifier_baseline": "inherited",
                    "setup_commands": "skipped",
                },
            },
        )

"""Branch records: what benchflow's main-line writers record about a branched trial beyond the
outcomes (docs/benchflow-formats.md §16). Part of the vocabulary in `facts.py`, which re-exports
them.

`fork.opened`, the children's outcomes and `fork.closed` say what happened; these say how benchflow
recorded it: a fork's status and parent restore as written, its timings, cost and snapshot; a
child's status, intervention, errors as `{type, code}`, attempts, cost, token usage and where its
archive is; and the trial's own `branches` summary, checkpoint-retry block, checkpoint list and the
checkpoint it started from. Blocks benchflow's branch view passes through whole (`timing_sec`,
`cost`, `usage`, `children_mode`, `snapshot_start`, `retry`) are kept as written, so the view is
rebuilt from the log exactly.
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from ..vocabulary import Layer
from .fact_base import Count, Digest, Fact, JsonObject, Key, Model, Number, Text

#: benchflow's fork `status` (`ForkRecord`): `running` until the children are done.
ForkStatus = Literal["running", "completed", "partial", "failed", "cancelled"]
#: A fork's `parent_restore`: `skipped` is `--parent discard` (the trial is discarded by design),
#: `not_needed` a checkpoint retry (the trial had finished), `not_attempted` a failed checkpoint.
ParentRestore = Literal["not_attempted", "restored", "skipped", "deferred", "failed", "not_needed"]
#: A child's `status` (`ForkRecord` children, `branch_lineage.child_status`).
ChildStatus = Literal["not_started", "running", "scored", "unscored", "failed", "cancelled"]
#: result.json `branches.parent`: `discarded` when a top-level fork skipped the parent restore.
ParentFate = Literal["discarded", "kept"]


class ErrorCode(Model):
    """benchflow's error record: the exception's class name and a short code, never a message."""

    type: Text | None = None
    code: Text | None = None


class SnapshotRecord(Model):
    """A fork's `snapshot` block, its provider ref aside (refs are in `fork.opened`)."""

    requested_layers: tuple[Layer, ...] = ()
    captured_layers: tuple[Layer, ...] = ()
    agent_session: Text | None = None  # fresh | resumed
    retention: Text | None = None  # kept | deleted | deferred | delete_failed
    provider: Text | None = None
    digest: Digest | None = None
    reused: bool = False  # the fork adopted a kept checkpoint's image instead of taking one
    lifetime: Text | None = None
    restore_available: bool | None = None
    excluded: tuple[Text, ...] | None = None
    environment: JsonObject | None = None  # {id, kind, paths} of the environment layer
    delete_error: ErrorCode | None = None


class ForkDescribed(Fact):
    """A fork as benchflow's `tree.json` records it (`branch_lineage.ForkRecord`). `order` is its
    place in the file's `forks` list (creation order), `status` and `value` as written; `cost`,
    `timing_sec` and `children_mode` whole."""

    type: Literal["fork.described"] = "fork.described"
    run: Key
    fork: Key
    order: Count
    status: ForkStatus
    requested_children: Count | None = None
    value: Number | None = None
    value_stderr: Number | None = None
    parent_restore: ParentRestore | None = None
    error: ErrorCode | None = None
    parent_restore_error: ErrorCode | None = None
    artifact_error: ErrorCode | None = None
    children_mode: JsonObject | None = None
    timing_sec: JsonObject | None = None
    cost: JsonObject | None = None
    snapshot: SnapshotRecord | None = None


class ChildDescribed(Fact):
    """One child of a fork as `tree.json` records it. `node` is null for a child that never started;
    `reward` is set only when it was scored, never 0 for a missing verdict. `archive` is the child's
    folder relative to the trial; `observation` / `result` say whether its `observation.json` and
    `result.json` (an isolated child's own run) were there when the trial was imported."""

    type: Literal["fork.child_described"] = "fork.child_described"
    run: Key
    fork: Key
    index: Count
    node: Key | None = None
    status: ChildStatus
    reward: Number | None = None
    reward_source: Text | None = None
    label: Text | None = None
    requested: Text | None = None
    execution: Text | None = None
    error: ErrorCode | None = None
    cleanup_error: ErrorCode | None = None
    attempts: Count | None = None
    retried_after: ErrorCode | None = None
    cost: JsonObject | None = None
    usage: JsonObject | None = None
    timing_sec: JsonObject | None = None
    snapshot_start: JsonObject | None = None
    archive: Text | None = None
    archive_status: Text | None = None
    observation: bool = False
    result: bool = False

    @model_validator(mode="after")
    def _started_or_not(self) -> ChildDescribed:
        if self.node is None and self.status != "not_started":
            raise ValueError(
                f"expected a node for a child with status {self.status!r} (only a child that "
                "never started has none)"
            )
        if self.reward is not None and self.status != "scored":
            raise ValueError(
                f"expected a reward only on a scored child, found {self.reward!r} on a child "
                f"with status {self.status!r}"
            )
        return self


class CheckpointSource(Model):
    """`checkpoint_source.json`: the kept checkpoint a trial was started from (`bench eval branch
    --from-checkpoint`). `checkpoint` is the source fork id or `prompt:N`."""

    trial: Text | None = None
    trial_path: Text | None = None
    checkpoint: Text | None = None
    provider: Text | None = None
    ref: Text | None = None
    prefix_events: Count | None = None
    snapshot_start: JsonObject | None = None


class CheckpointRow(Model):
    """One row of `checkpoints.json`: an automatic checkpoint after prompt N."""

    id: Key
    after_prompt: Count | None = None
    node: Text | None = None
    trajectory_events: Count | None = None
    agent_session_id: Text | None = None
    provider: Text | None = None
    ref: Text | None = None
    created_at: Text | None = None
    seconds: Number | None = None
    status: Key
    error: ErrorCode | None = None


class CheckpointList(Model):
    """`checkpoints.json`: the checkpoint policy and every checkpoint taken (`--checkpoints`)."""

    rollout: Text | None = None
    policy: JsonObject | None = None
    checkpoints: tuple[CheckpointRow, ...] = ()


class TrialDescribed(Fact):
    """What a benchflow trial's own files say about its branches beyond the outcome: result.json's
    names, its `branches.parent` and `branches.cost`, its checkpoint-retry block (`retry`, beside
    the trial's own reward, never replacing it), and `checkpoint_source.json` / `checkpoints.json`.

    `checkpoint_retry` rewrites result.json after the trial finished, so one trial may be read
    twice, before and after its retry: each different reading is kept and readers take the latest.
    """

    type: Literal["run.trial_described"] = "run.trial_described"
    run: Key
    folder: Key
    rollout_name: Text | None = None
    task_name: Text | None = None
    parent: ParentFate | None = None
    cost: JsonObject | None = None
    retry: JsonObject | None = None
    checkpoint_source: CheckpointSource | None = None
    checkpoints: CheckpointList | None = None

"""Fork facts: a fork opened with its children's deltas, each child's restore and outcome, the
fork's close and ablation report, and the custody of the parent's mounted artifacts. Part of the
vocabulary in `facts.py`, which re-exports them."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ..vocabulary import ArmKind, BranchSkillMode, CtrfStatus, ForkKind, Layer, Stage
from .fact_base import (
    Count,
    Digest,
    Fact,
    JsonObject,
    Key,
    Model,
    Number,
    Seconds,
    Text,
)

# --- forks ----------------------------------------------------------------------------------------


class Delta(Model):
    """benchflow's BranchDelta provenance dict (§1.4): raw prompt text never appears, only
    digests."""

    environment_ref: Text | None = None
    skill_mode: BranchSkillMode | None = None
    config_override_sha256: Digest | None = None
    injected_prompt_sha256: Digest | None = None
    config_override_keys: tuple[Text, ...] | None = None

    def provenance(self) -> dict[str, Any]:
        out = self.model_dump(mode="json")
        if out["config_override_keys"] is None:
            out.pop("config_override_keys")
        return out


class ForkChild(Model):
    index: Count
    node: Key
    arm: Text | None = None
    kind: ArmKind | None = None
    source: Text | None = None
    delta: Delta = Delta()
    delta_execution: Literal["fresh-rollout"] | None = None
    environment: JsonObject | None = None


class SnapshotRefs(Model):
    sandbox: Text | None = None
    environment: Text | None = None


class ForkOpened(Fact):
    """Children branched from `node`. `kind` is `fork` (arms compared with each other) or `retry`
    (benchflow's checkpoint retry: one child re-running a finished trial from a kept checkpoint,
    for `reason` failure or timeout, from `checkpoint` `prompt:N`; never an arm). `rollout` is the
    rollout that forked as benchflow names it: the trial, or a child's node id for a fork that child
    made (a nested fork)."""

    type: Literal["fork.opened"] = "fork.opened"
    run: Key
    fork: Key
    node: Key
    stage: Stage | None = None
    layers: tuple[Layer, ...] = ()
    snapshot: SnapshotRefs | None = None
    children: tuple[ForkChild, ...]
    ablation: JsonObject | None = None
    kind: ForkKind = "fork"
    reason: Text | None = None
    checkpoint: Text | None = None
    rollout: Text | None = None

    @model_validator(mode="after")
    def _children_are_a_vector(self) -> ForkOpened:
        # benchflow asks for n >= 2 children, but attaches them one by one: when the first one
        # raises, the tree holds that one only, and when the checkpoint fails none started. Such a
        # fork is on record as it happened; it can never close completed.
        if self.kind == "retry" and len(self.children) > 1:
            raise ValueError(f"a retry runs one child, found {len(self.children)} children")
        if self.kind == "fork" and (self.reason is not None or self.checkpoint is not None):
            raise ValueError(
                "expected reason and checkpoint only on a retry (kind 'retry'), found them on "
                "a fork"
            )
        indices = [child.index for child in self.children]
        if indices != list(range(len(indices))):
            raise ValueError(
                f"child indices must be 0..{len(indices) - 1} in order, found {indices}"
            )
        nodes = [child.node for child in self.children]
        if len(set(nodes)) != len(nodes) or self.node in nodes:
            raise ValueError(
                f"child nodes must be distinct and differ from the fork node, found {nodes}"
            )
        return self


class ChildRestored(Fact):
    type: Literal["fork.child_restored"] = "fork.child_restored"
    run: Key
    fork: Key
    index: Count
    layers: tuple[Layer, ...] = ()
    snapshot: SnapshotRefs = SnapshotRefs()


class ChildScored(Fact):
    type: Literal["fork.child_scored"] = "fork.child_scored"
    run: Key
    fork: Key
    index: Count
    reward: Number
    tests: dict[Text, CtrfStatus] | None = None
    wall_clock_sec: Seconds | None = None


class ChildUnscored(Fact):
    type: Literal["fork.child_unscored"] = "fork.child_unscored"
    run: Key
    fork: Key
    index: Count
    reason: Key
    tests: dict[Text, CtrfStatus] | None = None
    wall_clock_sec: Seconds | None = None


class ChildFailed(Fact):
    """A child that raised. Its verifier may still have written a CTRF report (benchflow hands a
    child's mounted output off in a `finally`), and benchflow mines it like any other child's, so
    `tests` is recorded here too."""

    type: Literal["fork.child_failed"] = "fork.child_failed"
    run: Key
    fork: Key
    index: Count
    error: Key
    wall_clock_sec: Seconds | None = None
    tests: dict[Text, CtrfStatus] | None = None


class ForkClosed(Fact):
    type: Literal["fork.closed"] = "fork.closed"
    run: Key
    fork: Key
    outcome: Literal["completed", "partial"]
    value: Number | None = None
    error: Text | None = None


class AblationReported(Fact):
    """What a `bench eval ablate` report says that the fork facts cannot hold
    (docs/benchflow-formats.md §13.3).

    `parent_reward`/`parent_error` are the report's parent block: the reward (or error) the parent
    run's verifier gave, kept even where the run's result.json says otherwise (benchflow may later
    null that reward and record an API error there). A report whose fork never happened (a
    request-global parent failure skips every arm, and no tree.json is written) has `fork` null
    and keeps its request-level fields and arm definitions in `report`. `error` is the report's
    own error as written.
    """

    # This docstring is `lineage schema`'s description, so it names no benchflow internals: the
    # parent block is what `ablate._run_parent` saw `verify()` return; `_build_result` runs
    # `_maybe_classify_api_error` after it (docs/benchflow-formats.md §13.3).

    type: Literal["ablation.reported"] = "ablation.reported"
    run: Key
    stage: Stage
    fork: Key | None = None
    parent_reward: Number | None = None
    parent_error: Text | None = None
    error: Text | None = None
    report: JsonObject | None = None


# --- custody --------------------------------------------------------------------------------------


class CustodyEntry(Model):
    path: Key
    sha256: Digest
    size: Annotated[int, Field(ge=0, le=2**63 - 1)]


class CustodyHeld(Fact):
    type: Literal["custody.held"] = "custody.held"
    run: Key
    fork: Key
    location: Key
    entries: tuple[CustodyEntry, ...]


class CustodyHandedOff(Fact):
    type: Literal["custody.handed_off"] = "custody.handed_off"
    run: Key
    fork: Key
    index: Count
    location: Text | None = None
    entries: tuple[CustodyEntry, ...] = ()


class CustodyReleased(Fact):
    type: Literal["custody.released"] = "custody.released"
    run: Key
    fork: Key
    entries: tuple[CustodyEntry, ...]


class CustodyFailed(Fact):
    """A custody step failed. `index`: the child whose hand-off failed (phase hand-off); a hand-off
    failure and a release failure of one fork are separate facts."""

    type: Literal["custody.failed"] = "custody.failed"
    run: Key
    fork: Key
    phase: Literal["hold", "hand-off", "release"]
    preserved_location: Text | None = None
    error: Key
    entries: tuple[CustodyEntry, ...] = ()
    index: Count | None = None

    @model_validator(mode="after")
    def _index_names_a_hand_off(self) -> CustodyFailed:
        if self.index is not None and self.phase != "hand-off":
            raise ValueError(
                f"expected index only on a hand-off failure (it "
                f"names the child), found it on phase {self.phase!r}"
            )
        return self

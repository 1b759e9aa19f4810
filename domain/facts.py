"""Facts: the vocabulary of things that happen to a branched rollout.

A fact is what a harness (or an importer) says happened; the log stores each one inside an event envelope
(`events.py`) that adds when it happened, when it was recorded and by whom. Facts are frozen pydantic models
with `extra="forbid"`, so the same classes validate the Python API, `lineage ingest` lines and the JSON
Schema that `lineage schema` publishes. Each fact names its subject: the run (whose aggregate also holds the
run's forks, custody and cut points, because their invariants span the whole rollout tree) or the snapshot.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from .vocabulary import ArmKind, CtrfStatus, Layer, RunRole, SkillMode, Stage

Key = Annotated[str, Field(min_length=1, max_length=512)]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, found {value!r}")
    return value


Reward = Annotated[float, AfterValidator(_finite)]


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Fact(Model):
    """Base of every fact. `type` is the stable name used in JSON lines and event topics."""

    subject_kind: ClassVar[str] = "run"

    def subject_key(self) -> str:
        return self.run  # type: ignore[attr-defined]


# --- runs ---------------------------------------------------------------------------------------------


class RunRegistered(Fact):
    type: Literal["run.registered"] = "run.registered"
    run: Key
    task: Key
    task_path: str | None = None
    agent: str | None = None
    model: str | None = None
    skill_mode: SkillMode | None = None
    sandbox: str | None = None
    trial: str | None = None
    role: RunRole = "root"
    parent_run: str | None = None
    parent_node: str | None = None
    run_dir: str | None = None
    source: dict[str, Any] | None = None
    config_sha256: Digest | None = None

    @model_validator(mode="after")
    def _role_needs_parent(self) -> RunRegistered:
        if self.role != "root" and not self.parent_run:
            raise ValueError(f"a run with role {self.role!r} needs parent_run (the run it comes from)")
        return self


class NodeOpened(Fact):
    """The run's own cursor moved onto a new node of its rollout tree (benchflow's RolloutTree step)."""

    type: Literal["run.node_opened"] = "run.node_opened"
    run: Key
    node: Key
    parent: Key


class StageMarked(Fact):
    type: Literal["stage.marked"] = "stage.marked"
    run: Key
    stage: Stage
    node: Key = "root"
    exchanges_completed: int | None = Field(default=None, ge=0)
    layers: tuple[Layer, ...] = ()
    sandbox_ref: str | None = None
    environment_ref: str | None = None
    workspace_digest: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _layers_match_refs(cls, data: Any) -> Any:
        """`layers` is derived from the non-null refs (benchflow's rule); a given list must agree."""
        if not isinstance(data, dict):
            return data
        captured = sorted(layer for layer, key in (("environment", "environment_ref"), ("sandbox", "sandbox_ref"))
                          if data.get(key))
        given = data.get("layers")
        if given and sorted(given) != captured:
            raise ValueError(f"layers {list(given)} do not match the non-null refs, which give {captured}")
        return {**data, "layers": captured}


class RunScored(Fact):
    type: Literal["run.scored"] = "run.scored"
    run: Key
    reward: Reward
    rewards: dict[str, Any] | None = None
    tests: dict[str, CtrfStatus] | None = None
    verifier_error: str | None = None


class RunUnscored(Fact):
    type: Literal["run.unscored"] = "run.unscored"
    run: Key
    reason: Key


class RunFailed(Fact):
    type: Literal["run.failed"] = "run.failed"
    run: Key
    error: Key
    category: str | None = None
    request_global: bool = False


class RunFinished(Fact):
    type: Literal["run.finished"] = "run.finished"
    run: Key
    status: Literal["completed", "failed", "timeout", "cancelled"]
    started_at: str | None = None
    finished_at: str | None = None
    timing: dict[str, float] = Field(default_factory=dict)
    trajectory: Literal["acp", "llm", "both", "none"] | None = None


# --- forks --------------------------------------------------------------------------------------------


class Delta(Model):
    """benchflow's BranchDelta provenance dict (§1.4): raw prompt text never appears, only digests."""

    environment_ref: str | None = None
    skill_mode: SkillMode | None = None
    config_override_sha256: Digest | None = None
    injected_prompt_sha256: Digest | None = None
    config_override_keys: tuple[str, ...] | None = None

    def provenance(self) -> dict[str, Any]:
        out = self.model_dump(mode="json")
        if out["config_override_keys"] is None:
            out.pop("config_override_keys")
        return out


class ForkChild(Model):
    index: int = Field(ge=0)
    node: Key
    arm: str | None = None
    kind: ArmKind | None = None
    source: str | None = None
    delta: Delta = Delta()
    delta_execution: Literal["fresh-rollout"] | None = None
    environment: dict[str, Any] | None = None


class SnapshotRefs(Model):
    sandbox: str | None = None
    environment: str | None = None


class ForkOpened(Fact):
    type: Literal["fork.opened"] = "fork.opened"
    run: Key
    fork: Key
    node: Key
    stage: Stage | None = None
    layers: tuple[Layer, ...] = ()
    snapshot: SnapshotRefs | None = None
    children: tuple[ForkChild, ...]
    ablation: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _children_are_a_vector(self) -> ForkOpened:
        if len(self.children) < 2:
            raise ValueError(f"a fork needs at least 2 children, found {len(self.children)}")
        indices = [child.index for child in self.children]
        if indices != list(range(len(indices))):
            raise ValueError(f"child indices must be 0..{len(indices) - 1} in order, found {indices}")
        nodes = [child.node for child in self.children]
        if len(set(nodes)) != len(nodes) or self.node in nodes:
            raise ValueError(f"child nodes must be distinct and differ from the fork node, found {nodes}")
        return self


class ChildRestored(Fact):
    type: Literal["fork.child_restored"] = "fork.child_restored"
    run: Key
    fork: Key
    index: int = Field(ge=0)
    layers: tuple[Layer, ...] = ()
    snapshot: SnapshotRefs = SnapshotRefs()


class ChildScored(Fact):
    type: Literal["fork.child_scored"] = "fork.child_scored"
    run: Key
    fork: Key
    index: int = Field(ge=0)
    reward: Reward
    tests: dict[str, CtrfStatus] | None = None
    wall_clock_sec: float | None = None


class ChildUnscored(Fact):
    type: Literal["fork.child_unscored"] = "fork.child_unscored"
    run: Key
    fork: Key
    index: int = Field(ge=0)
    reason: Key
    tests: dict[str, CtrfStatus] | None = None
    wall_clock_sec: float | None = None


class ChildFailed(Fact):
    type: Literal["fork.child_failed"] = "fork.child_failed"
    run: Key
    fork: Key
    index: int = Field(ge=0)
    error: Key
    wall_clock_sec: float | None = None


class ForkClosed(Fact):
    type: Literal["fork.closed"] = "fork.closed"
    run: Key
    fork: Key
    outcome: Literal["completed", "partial"]
    value: Reward | None = None
    error: str | None = None


# --- custody ------------------------------------------------------------------------------------------


class CustodyEntry(Model):
    path: Key
    sha256: Digest
    size: int = Field(ge=0)


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
    index: int = Field(ge=0)
    location: str | None = None
    entries: tuple[CustodyEntry, ...] = ()


class CustodyReleased(Fact):
    type: Literal["custody.released"] = "custody.released"
    run: Key
    fork: Key
    entries: tuple[CustodyEntry, ...]


class CustodyFailed(Fact):
    type: Literal["custody.failed"] = "custody.failed"
    run: Key
    fork: Key
    phase: Literal["hold", "hand-off", "release"]
    preserved_location: str | None = None
    error: Key
    entries: tuple[CustodyEntry, ...] = ()


# --- replay cut points --------------------------------------------------------------------------------


class Divergence(Model):
    exchange_index: int = Field(ge=0)
    served_request_digest: str | None = None
    recorded_request_digest: str | None = None
    n_messages_served: int | None = None
    n_messages_recorded: int | None = None


class CutPointServed(Fact):
    """A continuation run replayed its source run up to a cut point (benchflow's `cut_point` block)."""

    type: Literal["cut_point.served"] = "cut_point.served"
    run: Key
    source_run: Key
    accounting: Literal["configured", "served"]
    configured_k: int | None = Field(default=None, ge=0)
    served_k: int = Field(ge=0)
    recorded_request_digest: str | None = None
    served_request_digest: str | None = None
    request_digest_basis: str | None = None
    divergences: tuple[Divergence, ...] | None = None
    workspace_digest: dict[str, Any] | None = None
    workspace_digest_reason: str | None = None
    stage: Stage | None = None


# --- snapshots ----------------------------------------------------------------------------------------


class SnapshotFact(Fact):
    subject_kind: ClassVar[str] = "snapshot"

    def subject_key(self) -> str:
        return self.ref  # type: ignore[attr-defined]


class SnapshotCaptured(SnapshotFact):
    type: Literal["snapshot.captured"] = "snapshot.captured"
    ref: Key
    layer: Layer
    run: Key
    stage: Stage | None = None
    node: Key = "root"


class SnapshotExported(SnapshotFact):
    type: Literal["snapshot.exported"] = "snapshot.exported"
    ref: Key
    path: Key
    sha256: Digest
    image_id: Digest | None = None


class SnapshotExportFailed(SnapshotFact):
    type: Literal["snapshot.export_failed"] = "snapshot.export_failed"
    ref: Key
    error: Key


class SnapshotDiscarded(SnapshotFact):
    type: Literal["snapshot.discarded"] = "snapshot.discarded"
    ref: Key


class SnapshotImported(SnapshotFact):
    type: Literal["snapshot.imported"] = "snapshot.imported"
    ref: Key
    engine: Key
    image_id: Digest
    tar_sha256: Digest
    tar_path: str | None = None


class SnapshotImportRejected(SnapshotFact):
    type: Literal["snapshot.import_rejected"] = "snapshot.import_rejected"
    ref: Key
    tar_sha256: Digest | None = None
    tar_path: str | None = None
    reason: Key


class SnapshotAdopted(SnapshotFact):
    """A tar that matches no recorded export, taken in on purpose: its provenance is unknown."""

    type: Literal["snapshot.adopted"] = "snapshot.adopted"
    ref: Key
    tar_sha256: Digest
    image_id: Digest | None = None
    tar_path: str | None = None


FACT_TYPES: tuple[type[Fact], ...] = (
    RunRegistered, NodeOpened, StageMarked, RunScored, RunUnscored, RunFailed, RunFinished,
    ForkOpened, ChildRestored, ChildScored, ChildUnscored, ChildFailed, ForkClosed,
    CustodyHeld, CustodyHandedOff, CustodyReleased, CustodyFailed,
    CutPointServed,
    SnapshotCaptured, SnapshotExported, SnapshotExportFailed, SnapshotDiscarded,
    SnapshotImported, SnapshotImportRejected, SnapshotAdopted,
)

FACT_BY_TYPE: dict[str, type[Fact]] = {cls.model_fields["type"].default: cls for cls in FACT_TYPES}


def fact_type(cls: type[Fact]) -> str:
    return cls.model_fields["type"].default

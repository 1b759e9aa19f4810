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

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, model_validator

from .vocabulary import ArmKind, CtrfStatus, Layer, RunRole, SkillMode, Stage

MAX_JSON_DEPTH = 32
MAX_COUNT = 2**31 - 1  # counts and indexes are 32-bit in the read models


def _text(value: str) -> str:
    """Every string must survive UTF-8 (a lone surrogate from a JSON escape would not)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("expected text that can be stored as UTF-8, found a lone surrogate escape") from None
    return value


def _plain_json(value: Any, depth: int = 0) -> Any:
    """Free-form values (provenance, rewards, timing) must be plain, finite, shallow JSON, or the log could not
    store them faithfully (NaN turns into null, deep nesting cannot be serialised)."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"expected JSON nested at most {MAX_JSON_DEPTH} levels deep")
    if isinstance(value, dict):
        return {_text(str(k)) if isinstance(k, str) else k: _plain_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_json(item, depth + 1) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, found {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        raise ValueError(f"expected an integer within 64 bits, found {value}")
    if isinstance(value, str):
        _text(value)
    return value


Text = Annotated[str, AfterValidator(_text)]
Key = Annotated[str, Field(min_length=1, max_length=512), AfterValidator(_text)]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
JsonObject = Annotated[dict[str, Any], AfterValidator(_plain_json)]
#: Strict: `true` is not a reward and "1" is not a number (lax pydantic would turn both into 1.0); 1 still is.
Number = Annotated[float, Strict()]
Seconds = Annotated[float, Strict(), Field(ge=0)]


class Model(BaseModel):
    # allow_inf_nan=False: a NaN reward or duration is refused, never stored as null.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Fact(Model):
    """Base of every fact. `type` is the stable name used in JSON lines and event topics."""

    subject_kind: ClassVar[str] = "run"
    #: Set on facts that assert a check rollout-lineage performed itself (a tar verified, an image loaded): only
    #: the code that performed it may record them; `ingest` and the Python API refuse them (see `LineageApp.record`).
    verified_here: ClassVar[str | None] = None

    def subject_key(self) -> str:
        return self.run  # type: ignore[attr-defined]


# --- runs ---------------------------------------------------------------------------------------------


class RunRegistered(Fact):
    type: Literal["run.registered"] = "run.registered"
    run: Key
    task: Key
    task_path: Text | None = None
    agent: Text | None = None
    model: Text | None = None
    skill_mode: SkillMode | None = None
    sandbox: Text | None = None
    trial: Text | None = None
    role: RunRole = "root"
    parent_run: Text | None = None
    parent_node: Text | None = None
    run_dir: Text | None = None  # accepted for convenience; recorded as a run.located of kind recorded
    source: JsonObject | None = None
    config_sha256: Digest | None = None

    @model_validator(mode="after")
    def _role_needs_parent(self) -> RunRegistered:
        if self.role != "root" and not self.parent_run:
            raise ValueError(f"a run with role {self.role!r} needs parent_run (the run it comes from)")
        return self


class RunLocated(Fact):
    """A place the run's directory is known by. `read`: an importer read the run's files at `path` (a run can
    move, archived or copied to another machine; each place is recorded once). `recorded`: the harness wrote
    `path` as the run's directory in its own artifacts (benchflow's `parent_rollout` or ablation `parent.run_dir`,
    Harbor's `trial_uri`), which exports give back."""

    type: Literal["run.located"] = "run.located"
    run: Key
    path: Text
    kind: Literal["read", "recorded"] = "read"


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
    exchanges_completed: Count | None = None
    layers: tuple[Layer, ...] = ()
    sandbox_ref: Text | None = None
    environment_ref: Text | None = None
    workspace_digest: JsonObject | None = None

    @model_validator(mode="before")
    @classmethod
    def _layers_match_refs(cls, data: Any) -> Any:
        """`layers` is derived from the non-null refs (benchflow's rule); a given list must agree."""
        if not isinstance(data, dict):
            return data
        captured = sorted(layer for layer, key in (("environment", "environment_ref"), ("sandbox", "sandbox_ref"))
                          if data.get(key))
        given = data.get("layers")
        if given is not None and not (isinstance(given, (list, tuple)) and all(isinstance(x, str) for x in given)):
            return data  # not a list of names: the field's own validation says what is wrong
        if given and sorted(given) != captured:
            raise ValueError(f"layers {list(given)} do not match the non-null refs, which give {captured}")
        return {**data, "layers": captured}


class RunScored(Fact):
    type: Literal["run.scored"] = "run.scored"
    run: Key
    reward: Number
    rewards: JsonObject | None = None
    tests: dict[Text, CtrfStatus] | None = None
    verifier_error: Text | None = None


class RunUnscored(Fact):
    type: Literal["run.unscored"] = "run.unscored"
    run: Key
    reason: Key


class RunFailed(Fact):
    type: Literal["run.failed"] = "run.failed"
    run: Key
    error: Key
    category: Text | None = None
    request_global: bool = False


class RunFinished(Fact):
    type: Literal["run.finished"] = "run.finished"
    run: Key
    status: Literal["completed", "failed", "timeout", "cancelled"]
    started_at: Text | None = None
    finished_at: Text | None = None
    timing: Annotated[dict[str, Seconds], AfterValidator(_plain_json)] = Field(default_factory=dict)
    trajectory: Literal["acp", "llm", "both", "none"] | None = None


# --- forks --------------------------------------------------------------------------------------------


class Delta(Model):
    """benchflow's BranchDelta provenance dict (§1.4): raw prompt text never appears, only digests."""

    environment_ref: Text | None = None
    skill_mode: SkillMode | None = None
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
    type: Literal["fork.opened"] = "fork.opened"
    run: Key
    fork: Key
    node: Key
    stage: Stage | None = None
    layers: tuple[Layer, ...] = ()
    snapshot: SnapshotRefs | None = None
    children: tuple[ForkChild, ...]
    ablation: JsonObject | None = None

    @model_validator(mode="after")
    def _children_are_a_vector(self) -> ForkOpened:
        # benchflow asks for n >= 2 children, but attaches them one by one: when the first one raises, the tree
        # holds that one only. Such a fork is on record as it happened; it can never close completed.
        if not self.children:
            raise ValueError("a fork needs at least 1 child (the children that were started), found none")
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
    """A child that raised. Its verifier may still have written a CTRF report (benchflow hands a child's mounted
    output off in a `finally`), and benchflow mines it like any other child's, so `tests` is recorded here too."""

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
    """What a `bench eval ablate` report says that the fork facts cannot hold (docs/benchflow-formats.md §13.3).

    `parent_reward`/`parent_error` are the parent block as `_run_parent` saw `verify()`, kept when result.json says
    otherwise (`_maybe_classify_api_error` rewrites it later). A report whose fork never happened (a request-global
    parent failure skips every arm, and no tree.json is written) has `fork` null and keeps its request-level fields
    and arm definitions in `report`. `error` is the report's own error as written.
    """

    type: Literal["ablation.reported"] = "ablation.reported"
    run: Key
    stage: Stage
    fork: Key | None = None
    parent_reward: float | None = None
    parent_error: Text | None = None
    error: Text | None = None
    report: JsonObject | None = None


# --- custody ------------------------------------------------------------------------------------------


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
    type: Literal["custody.failed"] = "custody.failed"
    run: Key
    fork: Key
    phase: Literal["hold", "hand-off", "release"]
    preserved_location: Text | None = None
    error: Key
    entries: tuple[CustodyEntry, ...] = ()


# --- replay cut points --------------------------------------------------------------------------------


class Divergence(Model):
    exchange_index: Count
    served_request_digest: Text | None = None
    recorded_request_digest: Text | None = None
    n_messages_served: Count | None = None
    n_messages_recorded: Count | None = None


class CutPointServed(Fact):
    """A continuation run replayed its source run up to a cut point (benchflow's `cut_point` block)."""

    type: Literal["cut_point.served"] = "cut_point.served"
    run: Key
    source_run: Key
    accounting: Literal["configured", "served"]
    configured_k: Count | None = None
    served_k: Count
    recorded_request_digest: Text | None = None
    served_request_digest: Text | None = None
    request_digest_basis: Text | None = None
    divergences: tuple[Divergence, ...] | None = None
    workspace_digest: JsonObject | None = None
    workspace_digest_reason: Text | None = None
    stage: Stage | None = None


# --- release-gate evidence (the experiment-review skill) ----------------------------------------------


Size = Annotated[int, Field(ge=0, le=2**63 - 1)]


class TrajectoryFile(Model):
    """One JSONL trajectory file as it was read: present or not, its size, and what its lines held."""

    present: bool
    size: Size = 0
    records: Count = 0  # lines that parse as JSON objects
    malformed: Count = 0  # non-blank lines that do not
    agent_events: Count | None = None  # ACP: events outside the verifier phase
    requests: Count | None = None  # LLM: request records with a body
    responses: Count | None = None  # LLM: response records with a body
    responses_with_usage: Count | None = None  # LLM: response bodies carrying positive token usage


class ResultsRow(Model):
    """The rollout's trainer-facing `results.jsonl`: how many rows, and whether its row is training-ready."""

    present: bool
    rows: Count = 0
    malformed: Count = 0
    training_ready: bool | None = None
    training_ready_reason: Text | None = None
    rows_without_usage: Count = 0  # training-ready rows without positive token usage
    unlisted_tool_calls: Count = 0  # rows whose assistant messages call tools but that list no tool_defs/tools


class TokenUsage(Model):
    input_tokens: Size | None = None
    output_tokens: Size | None = None
    total_tokens: Size | None = None
    source: Text | None = None


class SkillLoading(Model):
    """What the run's files say about skills: the mode they ran in, where skills were put in the sandbox, how
    often the agent invoked one, and how many trajectory lines name skill resources (SKILL.md, skill roots)."""

    skill_mode: SkillMode | None = None
    skills_dir: Text | None = None
    invocations: Count | None = None
    marker_lines: Count = 0


class EvidenceObserved(Fact):
    """What a run's (or a fresh-rollout arm's) directory held as release-gate evidence when it was imported.

    A field left None is evidence the layout does not write (Harbor writes no ACP trajectory), never a file
    that is missing: a missing file is `present: false`. `trial` is the trial the run fills, from its own files."""

    type: Literal["run.evidence_observed"] = "run.evidence_observed"
    run: Key
    node: Key = "root"
    trial: Text | None = None
    acp_trajectory: TrajectoryFile | None = None
    llm_trajectory: TrajectoryFile | None = None
    results: ResultsRow | None = None
    token_usage: TokenUsage | None = None
    started_at: Text | None = None
    finished_at: Text | None = None
    duration_sec: Annotated[float, Field(ge=0)] | None = None
    tool_calls: Count | None = None
    partial_trajectory: bool | None = None
    skills: SkillLoading | None = None


# --- terminal preservation receipts (EdgeBench #8593) -------------------------------------------------


class ScorerDrained(Fact):
    """The run's native scorer finished grading (its drain receipt): the digest of its final scorer history."""

    type: Literal["scorer.drained"] = "scorer.drained"
    run: Key
    history_digest: Digest


class PreservationReceipted(Fact):
    """The one attempt made to seal a run's scorer on its own after the worker failed, and its result.

    `history_run` and `history_digest` name the scorer history the attempt sealed; both must be the run's own
    (its `scorer.drained`). A sealed scorer is evidence for a receiver, not a qualified recovery."""

    type: Literal["scorer.preservation_receipted"] = "scorer.preservation_receipted"
    run: Key
    history_run: Key
    history_digest: Digest
    result: Literal["sealed", "failed"]
    checkpoint: Text | None = None  # the sealed artifact's reference
    error: Text | None = None
    attempted_at: Text | None = None

    @model_validator(mode="after")
    def _result_explained(self) -> PreservationReceipted:
        if self.result == "failed" and not self.error:
            raise ValueError("a failed preservation attempt needs its error")
        if self.result == "sealed" and self.error:
            raise ValueError(f"a sealed preservation attempt carries no error, found {self.error!r}")
        return self


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
    verified_here: ClassVar[str | None] = "`lineage snapshots import` (it verifies the tar, loads it and checks the image id)"
    type: Literal["snapshot.imported"] = "snapshot.imported"
    ref: Key
    engine: Key
    image_id: Digest
    tar_sha256: Digest
    tar_path: Text | None = None


class SnapshotImportRejected(SnapshotFact):
    verified_here: ClassVar[str | None] = "`lineage snapshots import` (a rejection is the result of its verification)"
    type: Literal["snapshot.import_rejected"] = "snapshot.import_rejected"
    ref: Key
    tar_sha256: Digest | None = None
    tar_path: Text | None = None
    reason: Key


class SnapshotAdopted(SnapshotFact):
    """A tar that matches no recorded export, taken in on purpose: its provenance is unknown."""

    verified_here: ClassVar[str | None] = "`lineage snapshots import --adopt` (it verifies the tar before adopting it)"
    type: Literal["snapshot.adopted"] = "snapshot.adopted"
    ref: Key
    tar_sha256: Digest
    image_id: Digest | None = None
    tar_path: Text | None = None


FACT_TYPES: tuple[type[Fact], ...] = (
    RunRegistered, RunLocated, NodeOpened, StageMarked, RunScored, RunUnscored, RunFailed, RunFinished,
    ForkOpened, ChildRestored, ChildScored, ChildUnscored, ChildFailed, ForkClosed, AblationReported,
    CustodyHeld, CustodyHandedOff, CustodyReleased, CustodyFailed,
    CutPointServed,
    EvidenceObserved, ScorerDrained, PreservationReceipted,
    SnapshotCaptured, SnapshotExported, SnapshotExportFailed, SnapshotDiscarded,
    SnapshotImported, SnapshotImportRejected, SnapshotAdopted,
)

FACT_BY_TYPE: dict[str, type[Fact]] = {cls.model_fields["type"].default: cls for cls in FACT_TYPES}


def fact_type(cls: type[Fact]) -> str:
    return cls.model_fields["type"].default

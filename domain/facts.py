"""Facts: the vocabulary of things that happen to a branched rollout.

A fact is what a harness (or an importer) says happened; the log stores each one inside an event envelope
(`events.py`) that adds when it happened, when it was recorded and by whom. Facts are frozen pydantic models
with `extra="forbid"`, so the same classes validate the Python API, `lineage ingest` lines and the JSON
Schema that `lineage schema` publishes. Each fact names its subject: the run (whose aggregate also holds the
run's forks, custody and cut points, because their invariants span the whole rollout tree) or the snapshot.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from .fact_base import (
    Count,
    Digest,
    JsonObject,
    Key,
    Number,
    Seconds,
    Text,
    _plain_json,
    as_utc,
    time_zone_of,
)
from .fact_base import Fact as Fact  # re-exported: `facts.Fact` is the API's name for the base
from .fact_base import Model as Model
from .vocabulary import (
    BRANCH_AGGREGATE,
    REQUEST_GLOBAL,
    ArmKind,
    BranchSkillMode,
    CtrfStatus,
    Layer,
    RewardBasis,
    RunRole,
    SkillMode,
    Stage,
    TrajectorySource,
)

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
    run_dir: Text | None = (
        None  # accepted for convenience; recorded as a run.located of kind recorded
    )
    source: JsonObject | None = None
    config_sha256: Digest | None = None

    @model_validator(mode="after")
    def _role_needs_parent(self) -> RunRegistered:
        if self.role != "root" and not self.parent_run:
            raise ValueError(
                f"a run with role {self.role!r} needs parent_run (the run it comes from)"
            )
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
        captured = sorted(
            layer
            for layer, key in (("environment", "environment_ref"), ("sandbox", "sandbox_ref"))
            if data.get(key)
        )
        given = data.get("layers")
        if given is not None and not (
            isinstance(given, (list, tuple)) and all(isinstance(x, str) for x in given)
        ):
            return data  # not a list of names: the field's own validation says what is wrong
        if given and sorted(given) != captured:
            raise ValueError(
                f"layers {list(given)} do not match the non-null refs, which give {captured}"
            )
        return {**data, "layers": captured}


def _reward_source(rewards: Any) -> Any:
    return rewards.get("source") if isinstance(rewards, dict) else None


class RunScored(Fact):
    """A reward in the run's result. `basis` says whose: `verified` (the run's own verifier) or `branch_aggregate`
    (benchflow's `rewards.source`: a branched parent that never verified itself reports its fork's V)."""

    type: Literal["run.scored"] = "run.scored"
    class_version: ClassVar[int] = 2
    run: Key
    reward: Number
    rewards: JsonObject | None = None
    tests: dict[Text, CtrfStatus] | None = None
    verifier_error: Text | None = None
    basis: RewardBasis = "verified"

    @model_validator(mode="before")
    @classmethod
    def _basis_from_rewards(cls, data: Any) -> Any:
        if isinstance(data, dict) and _reward_source(data.get("rewards")) == BRANCH_AGGREGATE:
            if data.get("basis", BRANCH_AGGREGATE) != BRANCH_AGGREGATE:
                raise ValueError(
                    f"expected basis {BRANCH_AGGREGATE!r} (the rewards say source {BRANCH_AGGREGATE!r}), "
                    f"found {data['basis']!r}"
                )
            return {**data, "basis": BRANCH_AGGREGATE}
        return data

    @staticmethod
    def upcast_v1_v2(fact: dict[str, Any]) -> None:
        """Version 1 took a branch aggregate for the run's own score; its rewards still say which it was."""
        fact["basis"] = (
            BRANCH_AGGREGATE
            if _reward_source(fact.get("rewards")) == BRANCH_AGGREGATE
            else "verified"
        )


class RunUnscored(Fact):
    """The run produced no reward. `verifier_error` when its verifier failed (crashed, timed out) rather than
    scoring nothing; `rewards` when the verifier wrote values none of which is the run's reward."""

    type: Literal["run.unscored"] = "run.unscored"
    run: Key
    reason: Key
    verifier_error: Text | None = None
    rewards: JsonObject | None = None


class RunFailed(Fact):
    """The run raised. `request_global`: a configuration error of the whole request (benchflow's error_category
    `request_global`), which every arm and retry would repeat."""

    type: Literal["run.failed"] = "run.failed"
    class_version: ClassVar[int] = 2
    run: Key
    error: Key
    category: Text | None = None
    request_global: bool = False

    @model_validator(mode="before")
    @classmethod
    def _request_global_category(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("category") == REQUEST_GLOBAL:
            if data.get("request_global") is False:
                raise ValueError(
                    f"expected request_global true with category {REQUEST_GLOBAL!r}, found false"
                )
            return {**data, "request_global": True}
        return data

    @staticmethod
    def upcast_v1_v2(fact: dict[str, Any]) -> None:
        """Version 1 recorded benchflow's `request_global` category without setting the flag."""
        fact["request_global"] = (
            bool(fact.get("request_global")) or fact.get("category") == REQUEST_GLOBAL
        )


class RunFinished(Fact):
    """How and when the run ended. Times are kept as the harness wrote them: benchflow and Harbor write naive
    local times (`datetime.now()`), whose zone nobody recorded, so `time_zone` says `unknown`; `recorded` when the
    text carries an offset; `utc-assumed` on a fact stored by version 1, which read naive times as UTC."""

    type: Literal["run.finished"] = "run.finished"
    class_version: ClassVar[int] = 2
    run: Key
    status: Literal["completed", "failed", "timeout", "cancelled"]
    started_at: Text | None = None
    finished_at: Text | None = None
    time_zone: Literal["unknown", "recorded", "utc-assumed"] | None = None
    # Number, not Seconds: benchflow subtracts naive local times, so a run across a DST fall-back has a negative total.
    timing: Annotated[dict[str, Number], AfterValidator(_plain_json)] = Field(default_factory=dict)
    trajectory: TrajectorySource | None = None
    #: LLM exchanges in the run's recording (`trajectory/llm_trajectory.jsonl`): what a replay of it can serve.
    exchanges_recorded: Count | None = None

    @model_validator(mode="after")
    def _zone_of_the_times(self) -> RunFinished:
        written = [t for t in (self.started_at, self.finished_at) if t is not None]
        if self.time_zone == "utc-assumed" or not written:
            return self
        zones = {time_zone_of(t) for t in written}
        if len(zones) > 1:
            raise ValueError(
                f"expected started_at and finished_at both with or both without a UTC offset, found {written}"
            )
        zone = zones.pop()
        if self.time_zone not in (None, zone):
            raise ValueError(
                f"expected time_zone {zone!r} (what the times give), found {self.time_zone!r}"
            )
        object.__setattr__(
            self, "time_zone", zone
        )  # derived, like stage layers: one spelling per fact
        return self

    @staticmethod
    def upcast_v1_v2(fact: dict[str, Any]) -> None:
        """Version 1 rewrote naive times as UTC (`+00:00`): it says so instead of passing them as recorded."""
        fact["time_zone"] = (
            "utc-assumed" if fact.get("started_at") or fact.get("finished_at") else None
        )

    def same_run_end_as(self, legacy: RunFinished) -> bool:
        """Whether `legacy`, stored by version 1, records this same end: the same times read as UTC, and no
        trajectory where version 1 had no word for this one."""
        if legacy.time_zone != "utc-assumed" or self.time_zone == "utc-assumed":
            return False
        same_times = all(
            as_utc(mine) == as_utc(theirs)
            for mine, theirs in (
                (self.started_at, legacy.started_at),
                (self.finished_at, legacy.finished_at),
            )
        )
        same_trajectory = legacy.trajectory == self.trajectory or (
            legacy.trajectory is None
            and self.trajectory in ("scraped", "partial_acp", "hosted_env")
        )
        same_count = legacy.exchanges_recorded in (
            None,
            self.exchanges_recorded,
        )  # version 1 did not count them
        return (
            same_times
            and same_trajectory
            and same_count
            and (legacy.status, legacy.timing) == (self.status, self.timing)
        )


# --- forks --------------------------------------------------------------------------------------------


class Delta(Model):
    """benchflow's BranchDelta provenance dict (§1.4): raw prompt text never appears, only digests."""

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
            raise ValueError(
                "a fork needs at least 1 child (the children that were started), found none"
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
    parent_reward: Number | None = None
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
    """A custody step failed. `index`: the child whose hand-off failed (phase hand-off); a hand-off failure and a
    release failure of one fork are separate facts."""

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
                f"expected index only on a hand-off failure (it names the child), found it on phase {self.phase!r}"
            )
        return self


# --- replay cut points --------------------------------------------------------------------------------


class Divergence(Model):
    exchange_index: Count
    served_request_digest: Text | None = None
    recorded_request_digest: Text | None = None
    n_messages_served: Count | None = None
    n_messages_recorded: Count | None = None


class CutPointServed(Fact):
    """A continuation run replayed its source run up to a cut point (benchflow's `cut_point` block).

    `configured_k`, when given, is the K the replay was configured with, which benchflow validates as
    `0 < K <= n_recorded` (`validate_max_exchanges`), so it is at least 1; `served_k` may be 0 (the agent asked
    nothing). `cut_point_digest` is the PR-head block's digest: sha256 over the canonical JSON of the whole
    recorded request body at the last replayed exchange (`request_body_digest`), not comparable with the later
    `recorded_request_digest` / `served_request_digest`, which digest only `{messages, tools}`.
    """

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
    cut_point_digest: Digest | None = None

    @model_validator(mode="after")
    def _configured_k_is_a_cut(self) -> CutPointServed:
        if self.configured_k == 0:
            raise ValueError(
                "expected configured K >= 1 (benchflow validates 0 < K <= n_recorded), found 0"
            )
        return self


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
    unlisted_tool_calls: Count = (
        0  # rows whose assistant messages call tools but that list no tool_defs/tools
    )


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
    duration_sec: Seconds | None = None
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
            raise ValueError(
                f"a sealed preservation attempt carries no error, found {self.error!r}"
            )
        return self


# --- snapshots ----------------------------------------------------------------------------------------


class SnapshotFact(Fact):
    subject_kind: ClassVar[str] = "snapshot"

    def subject_key(self) -> str:
        # Each snapshot fact declares `ref`; this base class declares no fields.
        return str(self.ref)  # type: ignore[attr-defined]


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
    verified_here: ClassVar[str | None] = (
        "`lineage snapshots import` (it verifies the tar, loads it and checks the image id)"
    )
    type: Literal["snapshot.imported"] = "snapshot.imported"
    ref: Key
    engine: Key
    image_id: Digest
    tar_sha256: Digest
    tar_path: Text | None = None


class SnapshotImportRejected(SnapshotFact):
    verified_here: ClassVar[str | None] = (
        "`lineage snapshots import` (a rejection is the result of its verification)"
    )
    type: Literal["snapshot.import_rejected"] = "snapshot.import_rejected"
    ref: Key
    tar_sha256: Digest | None = None
    tar_path: Text | None = None
    reason: Key


class SnapshotAdopted(SnapshotFact):
    """A tar that matches no recorded export, taken in on purpose: its provenance is unknown."""

    verified_here: ClassVar[str | None] = (
        "`lineage snapshots import --adopt` (it verifies the tar before adopting it)"
    )
    type: Literal["snapshot.adopted"] = "snapshot.adopted"
    ref: Key
    tar_sha256: Digest
    image_id: Digest | None = None
    tar_path: Text | None = None


FACT_TYPES: tuple[type[Fact], ...] = (
    RunRegistered,
    RunLocated,
    NodeOpened,
    StageMarked,
    RunScored,
    RunUnscored,
    RunFailed,
    RunFinished,
    ForkOpened,
    ChildRestored,
    ChildScored,
    ChildUnscored,
    ChildFailed,
    ForkClosed,
    AblationReported,
    CustodyHeld,
    CustodyHandedOff,
    CustodyReleased,
    CustodyFailed,
    CutPointServed,
    EvidenceObserved,
    ScorerDrained,
    PreservationReceipted,
    SnapshotCaptured,
    SnapshotExported,
    SnapshotExportFailed,
    SnapshotDiscarded,
    SnapshotImported,
    SnapshotImportRejected,
    SnapshotAdopted,
)

FACT_BY_TYPE: dict[str, type[Fact]] = {cls.model_fields["type"].default: cls for cls in FACT_TYPES}


def fact_type(cls: type[Fact]) -> str:
    return str(cls.model_fields["type"].default)

"""Facts: the vocabulary of things that happen to a branched rollout.

A fact is what a harness (or an importer) says happened; the log stores each one inside an event
envelope (`events.py`) that adds when it happened, when it was recorded and by whom. Facts are
frozen pydantic models with `extra="forbid"`, so the same classes validate the Python API, `lineage
ingest` lines and the JSON Schema that `lineage schema` publishes. Each fact names its subject: the
run (whose aggregate also holds the run's forks, custody and cut points, because their invariants
span the whole rollout tree) or the snapshot.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from ..vocabulary import (
    BRANCH_AGGREGATE,
    REQUEST_GLOBAL,
    CtrfStatus,
    Layer,
    RewardBasis,
    RunRole,
    SkillMode,
    Stage,
    TrajectorySource,
)
from .branch_facts import CheckpointList as CheckpointList
from .branch_facts import CheckpointRow as CheckpointRow
from .branch_facts import CheckpointSource as CheckpointSource
from .branch_facts import ChildDescribed as ChildDescribed
from .branch_facts import ErrorCode as ErrorCode
from .branch_facts import ForkDescribed as ForkDescribed
from .branch_facts import SnapshotRecord as SnapshotRecord
from .branch_facts import TrialDescribed as TrialDescribed
from .fact_base import (
    Count,
    Digest,
    JsonObject,
    Key,
    Number,
    Text,
    as_utc,
    plain_json,
    time_zone_of,
)
from .fact_base import Fact as Fact  # re-exported: `facts.Fact` is the API's name for the base
from .fact_base import Model as Model
from .fork_facts import AblationReported as AblationReported
from .fork_facts import ChildFailed as ChildFailed
from .fork_facts import ChildRestored as ChildRestored
from .fork_facts import ChildScored as ChildScored
from .fork_facts import ChildUnscored as ChildUnscored
from .fork_facts import CustodyEntry as CustodyEntry
from .fork_facts import CustodyFailed as CustodyFailed
from .fork_facts import CustodyHandedOff as CustodyHandedOff
from .fork_facts import CustodyHeld as CustodyHeld
from .fork_facts import CustodyReleased as CustodyReleased

# Re-exported: every fact is reachable as `facts.<Name>`, whichever module defines it.
from .fork_facts import Delta as Delta
from .fork_facts import ForkChild as ForkChild
from .fork_facts import ForkClosed as ForkClosed
from .fork_facts import ForkOpened as ForkOpened
from .fork_facts import SnapshotRefs as SnapshotRefs
from .gate_facts import EvidenceObserved as EvidenceObserved
from .gate_facts import PreservationReceipted as PreservationReceipted
from .gate_facts import ResultsRow as ResultsRow
from .gate_facts import ScorerDrained as ScorerDrained
from .gate_facts import SkillLoading as SkillLoading
from .gate_facts import TokenUsage as TokenUsage
from .gate_facts import TrajectoryFile as TrajectoryFile
from .sample_facts import SampleObserved as SampleObserved
from .snapshot_facts import SnapshotAdopted as SnapshotAdopted
from .snapshot_facts import SnapshotCaptured as SnapshotCaptured
from .snapshot_facts import SnapshotDiscarded as SnapshotDiscarded
from .snapshot_facts import SnapshotExported as SnapshotExported
from .snapshot_facts import SnapshotExportFailed as SnapshotExportFailed
from .snapshot_facts import SnapshotFact as SnapshotFact
from .snapshot_facts import SnapshotImported as SnapshotImported
from .snapshot_facts import SnapshotImportRejected as SnapshotImportRejected

# --- runs -----------------------------------------------------------------------------------------


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
    """A place the run's directory is known by. `read`: an importer read the run's files at `path`
    (a run can move, archived or copied to another machine; each place is recorded once).
    `recorded`: the harness wrote `path` as the run's directory in its own artifacts (benchflow's
    `parent_rollout` or ablation `parent.run_dir`, Harbor's `trial_uri`), which exports give
    back."""

    type: Literal["run.located"] = "run.located"
    run: Key
    path: Text
    kind: Literal["read", "recorded"] = "read"


class NodeOpened(Fact):
    """The run's own cursor moved onto a new node of its rollout tree (benchflow's RolloutTree
    step)."""

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
        """`layers` is derived from the non-null refs (benchflow's rule); a given list must
        agree."""
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
    """A reward in the run's result. `basis` says whose: `verified` (the run's own verifier) or
    `branch_aggregate` (benchflow's `rewards.source`: a branched parent that never verified itself
    reports its fork's V)."""

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
                    f"expected basis {BRANCH_AGGREGATE!r} (the rewards say "
                    f"source {BRANCH_AGGREGATE!r}), found {data['basis']!r}"
                )
            return {**data, "basis": BRANCH_AGGREGATE}
        return data

    @staticmethod
    def upcast_v1_v2(fact: dict[str, Any]) -> None:
        """Version 1 took a branch aggregate for the run's own score; its rewards still say which it
        was."""
        fact["basis"] = (
            BRANCH_AGGREGATE
            if _reward_source(fact.get("rewards")) == BRANCH_AGGREGATE
            else "verified"
        )


class RunUnscored(Fact):
    """The run produced no reward. `verifier_error` when its verifier failed (crashed, timed out)
    rather than scoring nothing; `rewards` when the verifier wrote values none of which is the run's
    reward."""

    type: Literal["run.unscored"] = "run.unscored"
    run: Key
    reason: Key
    verifier_error: Text | None = None
    rewards: JsonObject | None = None


class RunFailed(Fact):
    """The run raised. `request_global`: a configuration error of the whole request (benchflow's
    error_category `request_global`), which every arm and retry would repeat."""

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
    """How and when the run ended. Times are kept as the harness wrote them: benchflow and Harbor
    write naive local times (`datetime.now()`), whose zone nobody recorded, so `time_zone` says
    `unknown`; `recorded` when the text carries an offset; `utc-assumed` on a fact stored by version
    1, which read naive times as UTC."""

    type: Literal["run.finished"] = "run.finished"
    class_version: ClassVar[int] = 2
    run: Key
    status: Literal["completed", "failed", "timeout", "cancelled"]
    started_at: Text | None = None
    finished_at: Text | None = None
    time_zone: Literal["unknown", "recorded", "utc-assumed"] | None = None
    # Number, not Seconds: benchflow subtracts naive local times, so a run across a DST fall-back
    # has a negative total.
    timing: Annotated[dict[str, Number], AfterValidator(plain_json)] = Field(default_factory=dict)
    trajectory: TrajectorySource | None = None
    #: LLM exchanges in the run's recording (`trajectory/llm_trajectory.jsonl`): what a replay of it
    #: can serve.
    exchanges_recorded: Count | None = None

    @model_validator(mode="after")
    def _zone_of_the_times(self) -> RunFinished:
        written = [t for t in (self.started_at, self.finished_at) if t is not None]
        if self.time_zone == "utc-assumed" or not written:
            return self
        zones = {time_zone_of(t) for t in written}
        if len(zones) > 1:
            raise ValueError(
                f"expected started_at and finished_at both with "
                f"or both without a UTC offset, found {written}"
            )
        zone = zones.pop()
        if self.time_zone not in (None, zone):
            raise ValueError(
                f"expected time_zone {zone!r} (what the times give), found {self.time_zone!r}"
            )
        # derived, like stage layers: one spelling per fact
        object.__setattr__(self, "time_zone", zone)
        return self

    @staticmethod
    def upcast_v1_v2(fact: dict[str, Any]) -> None:
        """Version 1 rewrote naive times as UTC (`+00:00`): it says so instead of passing them as
        recorded."""
        fact["time_zone"] = (
            "utc-assumed" if fact.get("started_at") or fact.get("finished_at") else None
        )

    def same_run_end_as(self, legacy: RunFinished) -> bool:
        """Whether `legacy`, stored by version 1, records this same end: the same times read as UTC,
        and no trajectory where version 1 had no word for this one."""
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
        # version 1 did not count them
        same_count = legacy.exchanges_recorded in (
            None,
            self.exchanges_recorded,
        )
        return (
            same_times
            and same_trajectory
            and same_count
            and (legacy.status, legacy.timing) == (self.status, self.timing)
        )


# --- replay cut points ----------------------------------------------------------------------------


class Divergence(Model):
    exchange_index: Count
    served_request_digest: Text | None = None
    recorded_request_digest: Text | None = None
    n_messages_served: Count | None = None
    n_messages_recorded: Count | None = None


class CutPointServed(Fact):
    """A continuation run replayed its source run up to a cut point (benchflow's `cut_point` block).

    `configured_k`, when given, is the K the replay was configured with, which benchflow validates
    as `0 < K <= n_recorded` (`validate_max_exchanges`), so it is at least 1; `served_k` may be 0
    (the agent asked nothing). `cut_point_digest` is the PR-head block's digest: sha256 over the
    canonical JSON of the whole recorded request body at the last replayed exchange
    (`request_body_digest`), not comparable with the later `recorded_request_digest` /
    `served_request_digest`, which digest only `{messages, tools}`.
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
    SampleObserved,
    ScorerDrained,
    PreservationReceipted,
    SnapshotCaptured,
    SnapshotExported,
    SnapshotExportFailed,
    SnapshotDiscarded,
    SnapshotImported,
    SnapshotImportRejected,
    SnapshotAdopted,
    ForkDescribed,
    ChildDescribed,
    TrialDescribed,
)

FACT_BY_TYPE: dict[str, type[Fact]] = {cls.model_fields["type"].default: cls for cls in FACT_TYPES}


def fact_type(cls: type[Fact]) -> str:
    return str(cls.model_fields["type"].default)

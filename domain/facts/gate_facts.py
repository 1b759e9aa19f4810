"""Facts the release gate judges: what a run's files held when imported (the experiment-review
skill), and terminal preservation receipts (EdgeBench #8593). Part of the vocabulary in `facts.py`,
which re-exports them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ..vocabulary import (
    SkillMode,
)
from .fact_base import (
    Count,
    Digest,
    Fact,
    Key,
    Model,
    Seconds,
    Text,
)
from .review_facts import ReviewObservation

# --- release-gate evidence (the experiment-review skill) ------------------------------------------


Size = Annotated[int, Field(ge=0, le=2**63 - 1)]


class TrajectoryFile(Model):
    """One JSONL trajectory file as it was read: present or not, its size, and what its lines
    held."""

    present: bool
    size: Size = 0
    records: Count = 0  # lines that parse as JSON objects
    malformed: Count = 0  # non-blank lines that do not
    agent_events: Count | None = None  # ACP: events outside the verifier phase
    requests: Count | None = None  # LLM: request records with a body
    responses: Count | None = None  # LLM: response records with a body
    responses_with_usage: Count | None = None  # LLM: response bodies carrying positive token usage
    #: The file's SHA-256 as read at import (None: recorded before digests were, or not present):
    #: `lineage serve` shows the file only while it still has this digest and `size`.
    sha256: Digest | None = None


class ResultsRow(Model):
    """The rollout's trainer-facing `results.jsonl`: how many rows, and whether its row is
    training-ready."""

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
    """What the run's files say about skills: the mode they ran in, where skills were put in the
    sandbox, how often the agent invoked one, and how many trajectory lines name skill resources
    (SKILL.md, skill roots)."""

    skill_mode: SkillMode | None = None
    skills_dir: Text | None = None
    invocations: Count | None = None
    marker_lines: Count = 0


class EvidenceObserved(Fact):
    """What a run's (or a fresh-rollout arm's) directory held as release-gate evidence when it was
    imported.

    A field left None is evidence the layout does not write (Harbor writes no ACP trajectory), never
    a file that is missing: a missing file is `present: false`. `trial` is the trial the run fills,
    from its own files."""

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
    review: ReviewObservation | None = (
        None  # the skill's judges on these files (None: read before they ran)
    )
    #: Harbor's ATIF trajectory (`agent/trajectory.json`; `records` counts its steps). None: the
    #: layout writes none, or recorded before it was read.
    atif_trajectory: TrajectoryFile | None = None
    #: Where the node's files were read, relative to the run's directory ("." for the run's own,
    #: `branches/<node>/children/<arm>` for a fresh-rollout arm). None: recorded before it was.
    folder: Text | None = None


# --- terminal preservation receipts (EdgeBench #8593) ---------------------------------------------


class ScorerDrained(Fact):
    """The run's native scorer finished grading (its drain receipt): the digest of its final scorer
    history."""

    type: Literal["scorer.drained"] = "scorer.drained"
    run: Key
    history_digest: Digest


class PreservationReceipted(Fact):
    """The one attempt made to seal a run's scorer on its own after the worker failed, and its
    result.

    `history_run` and `history_digest` name the scorer history the attempt sealed; both must be the
    run's own (its `scorer.drained`). A sealed scorer is evidence for a receiver, not a qualified
    recovery."""

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

"""The Run aggregate: one rollout and its whole tree (nodes, stage registry, outcome, forks, cut
point).

Forks and custody live inside the run rather than in aggregates of their own because their
invariants span the tree: a fork's node must exist, its children's node ids must be new in the tree,
a stage fork needs the stage recorded on that node. One stream per run also gives concurrent writers
to one fork a clean optimistic-concurrency conflict to retry on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventsourcing.domain import BaseAggregate

from . import facts as f
from .decisions import Handlers, is_new_or_same
from .errors import InvariantViolated, StageNotRecorded, UnknownSubject
from .fork import FORK_HANDLERS, Fork, check_deltas
from .preservation import decide_drain, decide_receipt
from .vocabulary import ROOT_NODE, STAGES, stage_rank

#: The facts a fork decides: the run finds the fork and hands them over.
FORK_FACTS = tuple(FORK_HANDLERS.deciders)
RUN_HANDLERS: Handlers[Run] = Handlers("Run")


@dataclass
class Node:
    id: str
    parent: str | None
    fork: str | None = None  # the fork that created this node, for fork children
    stage: str | None = None  # the most recent stage captured on this node


class Run(BaseAggregate[Any]):
    def __init__(self) -> None:
        self.registration: f.RunRegistered | None = None
        self.locations: list[f.RunLocated] = []
        self.nodes: dict[str, Node] = {}
        self.stages: dict[str, f.StageMarked] = {}
        self.scored: f.RunScored | f.RunUnscored | None = None
        self.failed: f.RunFailed | None = None
        self.finished: f.RunFinished | None = None
        self.forks: dict[str, Fork] = {}
        self.cut_points: dict[str, f.CutPointServed] = {}  # by accounting basis
        # by node, each different observation once
        self.evidence: dict[str, list[f.EvidenceObserved]] = {}
        # each different observation of the trial folder once, in log order
        self.samples: list[f.SampleObserved] = []
        self.drained: f.ScorerDrained | None = None
        self.receipt: f.PreservationReceipted | None = None
        self.report: f.AblationReported | None = None  # a bench eval ablate report's own fields
        # each different reading of a benchflow trial's branch files, in log order
        self.trial_descriptions: list[f.TrialDescribed] = []

    @classmethod
    def blank(cls) -> Run:
        run = cls.__new__(cls)
        cls.__init__(run)
        return run

    # --- deciding ---------------------------------------------------------------------------------

    def decide(self, fact: f.Fact) -> bool:
        decider = RUN_HANDLERS.deciders.get(type(fact))
        if decider is None:
            raise TypeError(f"not a run fact: {fact!r}")
        if self.registration is None and decider is not Run._decide_registration:
            # Every fact with a decider here declares `run`; their base `Fact` does not, hence the
            # ignore.
            raise UnknownSubject(
                f"expected run {fact.run!r} to be registered before {fact.type}, found no registration",  # type: ignore[attr-defined]  # noqa: E501
                hint="record run.registered for it first",
            )
        return decider(self, fact)

    @RUN_HANDLERS.decides(f.RunRegistered)
    def _decide_registration(self, fact: f.RunRegistered) -> bool:
        recorded = self.registration
        if recorded is not None and fact.run_dir is None and recorded.run_dir is not None:
            # run_dir now arrives as run.located (see `expand`); a registration without it does not
            # contradict one recorded with it by an earlier version.
            fact = fact.model_copy(update={"run_dir": recorded.run_dir})
        return is_new_or_same(recorded, fact, f"registration of run {fact.run!r}")

    @RUN_HANDLERS.decides(f.RunLocated)
    def _decide_location(self, fact: f.RunLocated) -> bool:
        # the harness keeps a run in one directory; another one is another run
        if fact.kind == "recorded":
            recorded = next((where for where in self.locations if where.kind == "recorded"), None)
            # where earlier versions kept it
            legacy = self.registration.run_dir if self.registration else None
            if recorded is None and legacy is not None:
                recorded = f.RunLocated(run=fact.run, path=legacy, kind="recorded")
            return is_new_or_same(
                recorded, fact, f"directory the harness recorded for run {fact.run!r}"
            )
        # each place read once, so re-importing from a known place appends nothing
        return fact not in self.locations

    @RUN_HANDLERS.decides(f.NodeOpened)
    def _decide_node(self, fact: f.NodeOpened) -> bool:
        self._require_node(fact.parent)
        existing = self.nodes.get(fact.node)
        if existing is not None and (existing.parent, existing.fork) != (fact.parent, None):
            raise InvariantViolated(
                f"run {fact.run!r}: node {fact.node!r} already exists under "
                f"{existing.parent!r}; found it opened under {fact.parent!r}"
            )
        return existing is None

    @RUN_HANDLERS.decides(f.RunScored, f.RunUnscored)
    def _decide_score(self, fact: f.RunScored | f.RunUnscored) -> bool:
        if self.scored is not None and type(self.scored) is not type(fact):
            raise InvariantViolated(
                f"run {fact.run!r} is already recorded as {self.scored.type}; found {fact.type}",
                hint="a run is either scored or unscored",
            )
        if (
            isinstance(self.scored, f.RunUnscored)
            and isinstance(fact, f.RunUnscored)
            and self.scored.verifier_error is None
            and self.scored.rewards is None
            and self.scored.reason == fact.reason
        ):
            # recorded before unscored runs kept their verifier error and values: the same statement
            return False
        return is_new_or_same(self.scored, fact, f"score of run {fact.run!r}")

    @RUN_HANDLERS.decides(f.RunFailed)
    def _decide_failure(self, fact: f.RunFailed) -> bool:
        return is_new_or_same(self.failed, fact, f"failure of run {fact.run!r}")

    @RUN_HANDLERS.decides(f.RunFinished)
    def _decide_finish(self, fact: f.RunFinished) -> bool:
        if self.finished is not None and fact.same_run_end_as(self.finished):
            return (
                False  # version 1 recorded this end with its times read as UTC: nothing new to say
            )
        return is_new_or_same(self.finished, fact, f"finish of run {fact.run!r}")

    @RUN_HANDLERS.decides(f.EvidenceObserved)
    def _decide_evidence(self, fact: f.EvidenceObserved) -> bool:
        # An observation of what the node's files held when read: benchflow writes results.jsonl
        # after result.json, so a run read between the two is observed again, differently, later.
        # Each observation is kept (the audit judges the latest and warns that the files changed),
        # so re-reading appends nothing and never conflicts.
        # An observation recorded before file digests and folders were (issue #36) says the same as
        # one that adds them to identical contents: reading the same files again is nothing new.
        self._require_node(fact.node)
        recorded = self.evidence.get(fact.node, [])
        if fact in recorded:
            return False
        earlier = [e for e in recorded if e.folder is None]
        return not earlier or _without_digests(fact) not in [_without_digests(e) for e in earlier]

    @RUN_HANDLERS.decides(f.SampleObserved)
    def _decide_sample(self, fact: f.SampleObserved) -> bool:
        # What benchflow's solve rates read of the trial folder when it was read: a folder read
        # again after it changed (moved, its result.json rewritten) is observed again, differently;
        # re-reading it unchanged appends nothing, and never conflicts.
        self._require_node(ROOT_NODE)
        return fact not in self.samples

    @RUN_HANDLERS.decides(f.ScorerDrained)
    def _decide_drain(self, fact: f.ScorerDrained) -> bool:
        return decide_drain(self.drained, fact)

    @RUN_HANDLERS.decides(f.PreservationReceipted)
    def _decide_receipt(self, fact: f.PreservationReceipted) -> bool:
        return decide_receipt(self.drained, self.receipt, fact)

    @RUN_HANDLERS.decides(f.AblationReported)
    def _decide_report(self, fact: f.AblationReported) -> bool:
        if fact.fork is not None:
            self._fork(fact.fork)
        return is_new_or_same(self.report, fact, f"ablation report of run {fact.run!r}")

    @RUN_HANDLERS.decides(f.TrialDescribed)
    def _decide_trial_description(self, fact: f.TrialDescribed) -> bool:
        # benchflow's checkpoint retry rewrites result.json after the trial finished (its `retry`
        # and `branches`), so a trial read before and after it says two things, both true when
        # read: each is kept, readers take the latest, and re-reading appends nothing.
        return fact not in self.trial_descriptions

    @RUN_HANDLERS.decides(*FORK_FACTS)
    def _decide_in_fork(self, fact: f.Fact) -> bool:
        # Routed here only for fork facts, each of which declares `fork` (the base `Fact` does not).
        return self._fork(fact.fork).decide(fact)  # type: ignore[attr-defined]

    def _require_node(self, node: str) -> Node:
        if node not in self.nodes:
            raise UnknownSubject(
                f"run {self.key!r}: expected node {node!r} in "
                f"its tree, found nodes {sorted(self.nodes)}",
                hint="record run.node_opened (or the fork that creates it) first",
            )
        return self.nodes[node]

    def _fork(self, fork: str) -> Fork:
        if fork not in self.forks:
            raise UnknownSubject(
                f"run {self.key!r}: expected fork {fork!r}, found forks {sorted(self.forks)}",
                hint="record fork.opened first",
            )
        return self.forks[fork]

    @RUN_HANDLERS.decides(f.StageMarked)
    def _decide_stage(self, fact: f.StageMarked) -> bool:
        self._require_node(fact.node)
        if self._replaces_root_fallback(fact):
            return True
        if not is_new_or_same(
            self.stages.get(fact.stage), fact, f"stage {fact.stage!r} of run {fact.run!r}"
        ):
            return False
        later = [stage for stage in self.stages if stage_rank(stage) > stage_rank(fact.stage)]
        if later:
            raise InvariantViolated(
                f"run {fact.run!r}: stage {fact.stage!r} arrives after {later}; "
                f"stages are marked in lifecycle order {' < '.join(STAGES)}"
            )
        return True

    def _replaces_root_fallback(self, fact: f.StageMarked) -> bool:
        """Whether `fact` places a stage that earlier importers put on root for want of a tree node
        explaining it.

        benchflow moves stage tags (verify() captures two stages on one node, branch_at_stage
        re-tags the node it adopts), and importers before the writer-order placement fell back to
        root for the stage left untagged. The same mark on its node is a correction, not a conflict:
        recorded, and readers take the latest mark per stage (the `stages` view). `env-ready` is
        never corrected, because benchflow captures it on root.
        """
        recorded = self.stages.get(fact.stage)
        return (
            recorded is not None
            and recorded.node == ROOT_NODE != fact.node
            and fact.stage != "env-ready"
            and recorded.model_copy(update={"node": fact.node}) == fact
        )

    @RUN_HANDLERS.decides(f.ForkOpened)
    def _decide_fork(self, fact: f.ForkOpened) -> bool:
        if not is_new_or_same(
            self.forks[fact.fork].opened if fact.fork in self.forks else None,
            fact,
            f"fork {fact.fork!r} of run {fact.run!r}",
        ):
            return False
        self._require_node(fact.node)
        taken = sorted(child.node for child in fact.children if child.node in self.nodes)
        if taken:
            raise InvariantViolated(
                f"run {fact.run!r}: fork {fact.fork!r} would "
                f"create nodes {taken}, which already exist"
            )
        if fact.stage is not None:
            entry = self.stages.get(fact.stage)
            if entry is None:
                raise StageNotRecorded(
                    f"run {fact.run!r}: expected stage {fact.stage!r} recorded before forking "
                    f"at it, found recorded stages {[s for s in STAGES if s in self.stages]}"
                )
            if entry.node != fact.node:
                raise InvariantViolated(
                    f"run {fact.run!r}: stage {fact.stage!r} was captured on node {entry.node!r}, "
                    f"found the fork at node {fact.node!r}"
                )
            if not entry.layers:
                raise InvariantViolated(
                    f"run {fact.run!r}: stage {fact.stage!r} "
                    f"captured no layers, so nothing can be restored"
                )
        check_deltas(fact)
        return True

    @RUN_HANDLERS.decides(f.CutPointServed)
    def _decide_cut_point(self, fact: f.CutPointServed) -> bool:
        assert self.registration is not None
        if self.registration.role != "continuation":
            raise InvariantViolated(
                f"run {fact.run!r}: expected a continuation run to serve "
                f"a cut point, found role {self.registration.role!r}"
            )
        if fact.source_run != self.registration.parent_run:
            raise InvariantViolated(
                f"run {fact.run!r} continues {self.registration.parent_run!r}; "
                f"found a cut point from {fact.source_run!r}"
            )
        if fact.configured_k is not None and fact.served_k > fact.configured_k:
            raise InvariantViolated(
                f"run {fact.run!r}: served K {fact.served_k} "
                f"is above configured K {fact.configured_k}"
            )
        # benchflow writes the configured-basis block first and, in host proxy mode, reconciles it
        # into a served-basis one after the run: one of each basis, the served one final, both about
        # the same cut.
        if not is_new_or_same(
            self.cut_points.get(fact.accounting),
            fact,
            f"{fact.accounting} cut point of run {fact.run!r}",
        ):
            return False
        configured, served = (
            self.cut_points.get("configured", fact),
            self.cut_points.get("served", fact),
        )
        if configured is not served:
            self._check_reconciliation(configured, served)
        return True

    def _check_reconciliation(self, configured: f.CutPointServed, served: f.CutPointServed) -> None:
        where = f"run {served.run!r}: the served cut point reconciles the configured one"
        if served.stage != configured.stage:
            raise InvariantViolated(
                f"{where}; expected the same stage, found {configured.stage!r} configured and "
                f"{served.stage!r} served"
            )
        if served.served_k > configured.served_k:
            raise InvariantViolated(
                f"{where}; expected at most the configured K {configured.served_k} served, found "
                f"{served.served_k}"
            )
        if served.configured_k is not None and served.configured_k != configured.served_k:
            raise InvariantViolated(
                f"{where}; expected its configured K {served.configured_k} to be the configured "
                f"block's K, found {configured.served_k}"
            )

    # --- evolving (replayed: deterministic, never raises) -----------------------------------------

    def when(self, fact: f.Fact) -> None:
        RUN_HANDLERS.evolvers[type(fact)](self, fact)

    @RUN_HANDLERS.evolves(f.RunRegistered)
    def _registered(self, fact: f.RunRegistered) -> None:
        self.registration = fact
        self.nodes[ROOT_NODE] = Node(ROOT_NODE, None)

    @RUN_HANDLERS.evolves(f.RunLocated)
    def _located(self, fact: f.RunLocated) -> None:
        self.locations.append(fact)

    @RUN_HANDLERS.evolves(f.NodeOpened)
    def _node_opened(self, fact: f.NodeOpened) -> None:
        self.nodes[fact.node] = Node(fact.node, fact.parent)

    @RUN_HANDLERS.evolves(f.StageMarked)
    def _stage_marked(self, fact: f.StageMarked) -> None:
        self.stages[fact.stage] = fact
        self.nodes[fact.node].stage = fact.stage

    @RUN_HANDLERS.evolves(f.RunScored, f.RunUnscored)
    def _score_recorded(self, fact: f.RunScored | f.RunUnscored) -> None:
        self.scored = fact

    @RUN_HANDLERS.evolves(f.RunFailed)
    def _run_failed(self, fact: f.RunFailed) -> None:
        self.failed = fact

    @RUN_HANDLERS.evolves(f.RunFinished)
    def _run_finished(self, fact: f.RunFinished) -> None:
        self.finished = fact

    @RUN_HANDLERS.evolves(f.ForkOpened)
    def _fork_opened(self, fact: f.ForkOpened) -> None:
        self.forks[fact.fork] = Fork(fact)
        for child in fact.children:
            self.nodes[child.node] = Node(child.node, fact.node, fork=fact.fork)

    @RUN_HANDLERS.evolves(f.EvidenceObserved)
    def _evidence_observed(self, fact: f.EvidenceObserved) -> None:
        self.evidence.setdefault(fact.node, []).append(fact)

    @RUN_HANDLERS.evolves(f.SampleObserved)
    def _sample_observed(self, fact: f.SampleObserved) -> None:
        self.samples.append(fact)

    @RUN_HANDLERS.evolves(f.ScorerDrained)
    def _scorer_drained(self, fact: f.ScorerDrained) -> None:
        self.drained = fact

    @RUN_HANDLERS.evolves(f.PreservationReceipted)
    def _preservation_receipted(self, fact: f.PreservationReceipted) -> None:
        self.receipt = fact

    @RUN_HANDLERS.evolves(*FORK_FACTS)
    def _in_fork(self, fact: f.Fact) -> None:
        # Routed here only for fork facts, each of which declares `fork` (the base `Fact` does not).
        self.forks[fact.fork].when(fact)  # type: ignore[attr-defined]

    @RUN_HANDLERS.evolves(f.TrialDescribed)
    def _trial_described(self, fact: f.TrialDescribed) -> None:
        self.trial_descriptions.append(fact)

    @RUN_HANDLERS.evolves(f.AblationReported)
    def _reported(self, fact: f.AblationReported) -> None:
        self.report = fact

    @RUN_HANDLERS.evolves(f.CutPointServed)
    def _cut_point_served(self, fact: f.CutPointServed) -> None:
        self.cut_points[fact.accounting] = fact

    @property
    def key(self) -> str:
        return self.registration.run if self.registration else "?"


def _without_digests(fact: f.EvidenceObserved) -> f.EvidenceObserved:
    """The observation as a version before issue #36 recorded it: no file digests, ATIF file or
    folder."""

    def bare(file: f.TrajectoryFile | None) -> f.TrajectoryFile | None:
        return file.model_copy(update={"sha256": None}) if file is not None else None

    return fact.model_copy(
        update={
            "acp_trajectory": bare(fact.acp_trajectory),
            "llm_trajectory": bare(fact.llm_trajectory),
            "atif_trajectory": None,
            "folder": None,
        }
    )

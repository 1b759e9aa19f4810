"""A fork: children branched from one node of a rollout tree, each with a delta, each with one
outcome.

Rules follow benchflow's branching lifecycle (`docs/benchflow-formats.md` §11.2, §13): deltas that
need a fresh rollout (skill mode, config override, environment swap) exist only at `env-ready`; a
child has at most one outcome (scored, unscored or failed); V is the mean of the children's rewards
and exists only when every child was scored; a partial fork has no V.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import facts as f
from .custody import Custody
from .decisions import Handlers, is_new_or_same
from .errors import ConflictingFact, InvariantViolated
from .vocabulary import FRESH_ONLY_DELTA_KEYS

Outcome = f.ChildScored | f.ChildUnscored | f.ChildFailed
MIN_COMPLETED_CHILDREN = 2
CUSTODY_FACTS = (f.CustodyHeld, f.CustodyHandedOff, f.CustodyReleased, f.CustodyFailed)
FORK_HANDLERS: Handlers[Fork] = Handlers("Fork")


def check_deltas(opened: f.ForkOpened) -> None:
    if opened.stage == "env-ready":
        return
    where = (
        f"fork {opened.fork!r} of run {opened.run!r} at {opened.stage or 'cursor ' + opened.node}"
    )
    for child in opened.children:
        fresh_keys = [key for key in FRESH_ONLY_DELTA_KEYS if getattr(child.delta, key) is not None]
        if fresh_keys or child.delta_execution is not None:
            raise InvariantViolated(
                f"{where}: child {child.index} carries "
                f"{fresh_keys or ['delta_execution']}, which need a fresh "
                "rollout; expected them only at stage env-ready",
                hint="fork at env-ready, or keep only injected_prompt for in-place children",
            )


@dataclass
class Fork:
    opened: f.ForkOpened
    restored: dict[int, f.ChildRestored] = field(default_factory=dict)
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    closed: f.ForkClosed | None = None
    custody: Custody = field(default_factory=Custody)
    described: f.ForkDescribed | None = None
    children_described: dict[int, f.ChildDescribed] = field(default_factory=dict)

    @property
    def n_children(self) -> int:
        return len(self.opened.children)

    def where(self) -> str:
        return f"fork {self.opened.fork!r} of run {self.opened.run!r}"

    def expected_value(self) -> float | None:
        """V: the mean of the children's rewards, defined only when every child was scored."""
        rewards = [o.reward for o in self.outcomes.values() if isinstance(o, f.ChildScored)]
        if not rewards or len(rewards) != self.n_children:
            return None
        return math.fsum(rewards) / len(rewards)

    def decide(self, fact: f.Fact) -> bool:
        return FORK_HANDLERS.deciders[type(fact)](self, fact)

    @FORK_HANDLERS.decides(*CUSTODY_FACTS)
    def _decide_custody(self, fact: f.Fact) -> bool:
        new = self.custody.decide(fact, self.n_children)
        # A hand-off only says where a child's mounted output was archived (before the fork closed);
        # a store written before hand-offs were imported learns of them after the close, which
        # changes nothing the close decided.
        if new and self.closed is not None and not isinstance(fact, f.CustodyHandedOff):
            raise InvariantViolated(
                f"{self.where()} is closed ({self.closed.outcome}); "
                f"found new custody ({fact.type})",
                hint="custody is held, handed off and released (or fails) before fork.closed",
            )
        return new

    def _require_child(self, index: int) -> None:
        if index >= self.n_children:
            raise InvariantViolated(
                f"{self.where()}: expected a child index below {self.n_children}, found {index}"
            )

    @FORK_HANDLERS.decides(f.ChildRestored)
    def _decide_restore(self, fact: f.ChildRestored) -> bool:
        self._require_child(fact.index)
        new = is_new_or_same(
            self.restored.get(fact.index), fact, f"{self.where()}, restore of child {fact.index}"
        )
        if new and self.closed is not None:
            raise InvariantViolated(
                f"{self.where()} is closed ({self.closed.outcome}); "
                f"found a restore of child {fact.index}",
                hint="record child restores before fork.closed",
            )
        return new

    @FORK_HANDLERS.decides(f.ChildScored, f.ChildUnscored, f.ChildFailed)
    def _decide_outcome(self, fact: Outcome) -> bool:
        index = fact.index
        self._require_child(index)
        existing = self.outcomes.get(index)
        if existing is not None and type(existing) is not type(fact):
            self._refuse_second_outcome(existing, fact)
        if (
            existing is not None
            and (existing.tests is None) != (fact.tests is None)
            and existing.model_copy(update={"tests": None})
            == fact.model_copy(update={"tests": None})
        ):
            # The same outcome read by an earlier importer: before a failed child carried tests, or
            # before a CTRF report that is empty or over benchflow's 64 KiB read limit meant "not
            # observed". What is recorded stands.
            return False
        new = is_new_or_same(existing, fact, f"{self.where()}, outcome of child {index}")
        if new and self.closed is not None:
            raise InvariantViolated(
                f"{self.where()} is closed ({self.closed.outcome}); "
                f"found a new outcome for child {index}",
                hint="record child outcomes before fork.closed",
            )
        return new

    def _refuse_second_outcome(self, existing: Outcome, incoming: Outcome) -> None:
        raise ConflictingFact(
            f"{self.where()}, child {incoming.index}: already recorded as {existing.type} "
            f"({existing.model_dump(mode='json', exclude={'type', 'run', 'fork', 'index'})}), "
            f"now {incoming.type} "
            f"({incoming.model_dump(mode='json', exclude={'type', 'run', 'fork', 'index'})})",
            hint="a child has exactly one outcome",
        )

    @FORK_HANDLERS.decides(f.ForkClosed)
    def _decide_close(self, fact: f.ForkClosed) -> bool:
        if not is_new_or_same(self.closed, fact, f"closing of {self.where()}"):
            return False
        expected = self.expected_value()
        if fact.outcome == "completed":
            # A retry re-runs the trial once from a checkpoint: its one child is all it has.
            least = 1 if self.opened.kind == "retry" else MIN_COMPLETED_CHILDREN
            if self.n_children < least:
                raise InvariantViolated(
                    f"{self.where()}: expected at least {least} "
                    f"children to close it completed ("
                    + (
                        "a retry runs one child"
                        if least == 1
                        else "a fork compares arms, benchflow asks for n >= 2"
                    )
                    + f"), found {self.n_children}; the others never started",
                    hint="close it as partial",
                )
            pending = [
                i
                for i in range(self.n_children)
                if not isinstance(self.outcomes.get(i), (f.ChildScored, f.ChildUnscored))
            ]
            if pending:
                raise InvariantViolated(
                    f"{self.where()}: expected every child scored or unscored to close "
                    f"it completed, found children {pending} without such an outcome",
                    hint="close it as partial",
                )
        else:
            expected = None
        if (fact.value is None) != (expected is None) or (
            expected is not None
            and fact.value is not None
            and not math.isclose(fact.value, expected, abs_tol=1e-9)
        ):
            raise InvariantViolated(
                f"{self.where()}: expected value {expected!r} (V is the "
                f"mean of the children's rewards, only when every child "
                f"was scored and the fork completed), found {fact.value!r}"
            )
        return True

    @FORK_HANDLERS.decides(f.ForkDescribed)
    def _decide_description(self, fact: f.ForkDescribed) -> bool:
        # How benchflow recorded the fork; it may arrive after the close (a store that holds the
        # fork from before descriptions were imported learns of them later), and changes nothing
        # the close decided.
        return is_new_or_same(self.described, fact, f"description of {self.where()}")

    @FORK_HANDLERS.decides(f.ChildDescribed)
    def _decide_child_description(self, fact: f.ChildDescribed) -> bool:
        # The started children are the fork's children; one that never started has no node.
        started = self.opened.children[fact.index].node if fact.index < self.n_children else None
        if fact.node != started:
            raise InvariantViolated(
                f"{self.where()}: expected child {fact.index} described with node {started!r} "
                f"(its node in fork.opened, or none for a child that never started), found "
                f"{fact.node!r}"
            )
        return is_new_or_same(
            self.children_described.get(fact.index),
            fact,
            f"{self.where()}, description of child {fact.index}",
        )

    def when(self, fact: f.Fact) -> None:
        FORK_HANDLERS.evolvers[type(fact)](self, fact)

    @FORK_HANDLERS.evolves(f.ForkDescribed)
    def _described(self, fact: f.ForkDescribed) -> None:
        self.described = fact

    @FORK_HANDLERS.evolves(f.ChildDescribed)
    def _child_described(self, fact: f.ChildDescribed) -> None:
        self.children_described[fact.index] = fact

    @FORK_HANDLERS.evolves(f.ChildRestored)
    def _restored(self, fact: f.ChildRestored) -> None:
        self.restored[fact.index] = fact

    @FORK_HANDLERS.evolves(f.ChildScored, f.ChildUnscored, f.ChildFailed)
    def _outcome_recorded(self, fact: Outcome) -> None:
        self.outcomes[fact.index] = fact

    @FORK_HANDLERS.evolves(f.ForkClosed)
    def _closed(self, fact: f.ForkClosed) -> None:
        self.closed = fact

    @FORK_HANDLERS.evolves(*CUSTODY_FACTS)
    def _custody_changed(self, fact: f.Fact) -> None:
        self.custody.when(fact)

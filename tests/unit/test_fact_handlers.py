"""Each fact is decided and evolved by methods registered next to it (`domain/decisions.Handlers`).

A new fact is its class in `facts.FACT_TYPES` and two decorated methods on its aggregate; these
tests fail when a fact has no decider or no evolver, or when two methods claim one fact. They also
fail when a fact has no line of history (`SUMMARIES`), where it would show as its bare type.
"""

from __future__ import annotations

import pytest

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.decisions import Handlers
from rollout_lineage.domain.fork import FORK_HANDLERS
from rollout_lineage.domain.run import FORK_FACTS, RUN_HANDLERS
from rollout_lineage.domain.snapshot import SNAPSHOT_HANDLERS
from rollout_lineage.projections.reports.history_text import SUMMARIES

AGGREGATES = (RUN_HANDLERS, SNAPSHOT_HANDLERS)


def test_every_fact_is_decided_and_evolved_by_exactly_one_aggregate() -> None:
    for cls in f.FACT_TYPES:
        deciding = [h.aggregate for h in AGGREGATES if cls in h.deciders]
        evolving = [h.aggregate for h in AGGREGATES if cls in h.evolvers]
        assert len(deciding) == 1 and deciding == evolving, (cls.__name__, deciding, evolving)
    registered = {cls for h in AGGREGATES for cls in h.deciders}
    assert registered == set(f.FACT_TYPES)


def test_every_fact_reads_as_a_line_of_history() -> None:
    types = [f.fact_type(cls) for cls in f.FACT_TYPES]
    missing = [name for name in types if name not in SUMMARIES]
    assert not missing, (
        f"expected a line in SUMMARIES (projections/reports/history_text.py) for every fact type, "
        f"found none for {missing}: `lineage history` would print the bare type"
    )
    assert set(SUMMARIES) <= set(types), set(SUMMARIES) - set(types)


@pytest.mark.parametrize("handlers", [RUN_HANDLERS, FORK_HANDLERS, SNAPSHOT_HANDLERS])
def test_each_aggregate_evolves_exactly_what_it_decides(handlers: Handlers[object]) -> None:
    assert set(handlers.deciders) == set(handlers.evolvers)


def test_the_run_hands_every_fork_fact_to_its_fork() -> None:
    assert set(FORK_FACTS) == set(FORK_HANDLERS.deciders)
    assert {RUN_HANDLERS.deciders[cls].__name__ for cls in FORK_FACTS} == {"_decide_in_fork"}
    assert {RUN_HANDLERS.evolvers[cls].__name__ for cls in FORK_FACTS} == {"_in_fork"}


def test_a_second_handler_for_one_fact_is_refused_naming_both() -> None:
    handlers: Handlers[object] = Handlers("Thing")

    @handlers.decides(f.RunScored)
    def first(thing: object, fact: f.RunScored) -> bool:
        return True

    with pytest.raises(
        TypeError, match=r"Thing: expected one decider for RunScored, found .*first.*second"
    ):

        @handlers.decides(f.RunUnscored, f.RunScored)
        def second(thing: object, fact: f.RunScored) -> bool:
            return True

    assert handlers.deciders == {f.RunScored: first}  # the refused one added nothing

"""Terminal preservation receipts (EdgeBench #8593): deciding a run's scorer drain and its one
sealing attempt.

When a worker fails after its native scorer has drained, one attempt may seal the scorer's final
history on its own; the receipt says what that attempt did. The rules live here, apart from the
run's tree: a run has one drained history (its digest is the run's own), and one receipt, which must
be about that history. A repeated notification of the same receipt appends nothing; a different
receipt for the same run would be a reseal, so it is a conflict naming both. A receipt is refused
unless the run's drained history is recorded first, because only then can its digest be checked.
"""

from __future__ import annotations

from . import facts as f
from .decisions import is_new_or_same
from .errors import InvariantViolated, UnknownSubject


def decide_drain(recorded: f.ScorerDrained | None, fact: f.ScorerDrained) -> bool:
    return is_new_or_same(recorded, fact, f"scorer history digest of run {fact.run!r}")


def decide_receipt(
    drained: f.ScorerDrained | None,
    recorded: f.PreservationReceipted | None,
    fact: f.PreservationReceipted,
) -> bool:
    if fact.history_run != fact.run:
        raise InvariantViolated(
            f"run {fact.run!r}: expected a preservation receipt for its "
            f"own scorer history, found one for run {fact.history_run!r}",
            hint=f"record the receipt on run {fact.history_run!r}, or fix its history_run",
        )
    if drained is None:
        raise UnknownSubject(
            f"run {fact.run!r}: expected its scorer history digest "
            f"(scorer.drained) before a preservation receipt, "
            "found none",
            hint="record the run's scorer.drained first, so the receipt's digest can be checked",
        )
    if fact.history_digest != drained.history_digest:
        raise InvariantViolated(
            f"run {fact.run!r}: expected the preservation receipt to seal its "
            f"scorer history {drained.history_digest}, found {fact.history_digest}",
            hint="the receipt is about another history; check "
            "that it was written by this run's scorer",
        )
    if recorded is not None and recorded != fact:
        is_new_or_same(
            recorded,
            fact,
            f"preservation receipt of run {fact.run!r} (one attempt per run; it cannot reseal)",
        )
    return recorded is None

"""Terminal preservation receipts: each run's drained scorer history and the one attempt to seal it
after a worker failure. A sealed scorer is evidence for a receiver, never a qualified recovery, so
the view says `qualified` false for every receipt: nothing recorded can qualify one."""

from __future__ import annotations

from .base import ACTOR, OCCURRED_AT, POSITION, RECORDED_AT, Columns, Projection, facts

DRAINS = Columns.of(
    "scorer_drains",
    ["scorer.drained"],
    POSITION,
    facts("run", "history_digest"),
    OCCURRED_AT,
)
RECEIPTS = Columns.of(
    "preservation_receipts",
    ["scorer.preservation_receipted"],
    POSITION,
    facts("run", "history_run", "history_digest", "result", "checkpoint", "error", "attempted_at"),
    OCCURRED_AT,
    RECORDED_AT,
    ACTOR,
)

PROJECTION = Projection.of(
    name="preservation",
    version=1,
    columns=(DRAINS, RECEIPTS),
    views={
        "receipts": """
            SELECT p.run, p.result, p.history_digest, d.history_digest AS drained_digest, p.checkpoint, p.error,
                   p.attempted_at, false AS qualified, p.occurred_at, p.recorded_at, p.actor, p.position
            FROM preservation_receipts p LEFT JOIN scorer_drains d USING (run)""",  # noqa: E501
    },
    docs={
        "receipts": "one row per terminal preservation receipt: the run, the result "
        "of its one sealing attempt (sealed / failed), the scorer history digest it "
        "sealed beside the run's drained one, the checkpoint or error, and qualified "
        "(always false: a preserved scorer is evidence, not a qualified recovery)",
        "scorer_drains": "scorer.drained facts: each run's final native scorer history digest",
        "preservation_receipts": "scorer.preservation_receipted facts",
    },
)

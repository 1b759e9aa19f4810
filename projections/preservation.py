"""Terminal preservation receipts: each run's drained scorer history and the one attempt to seal it after a worker
failure. A sealed scorer is evidence for a receiver, never a qualified recovery, so the view says `qualified` false
for every receipt: nothing recorded can qualify one."""

from __future__ import annotations

from .base import Projection, facts_of

RECEIPT = {
    "run": "VARCHAR",
    "history_run": "VARCHAR",
    "history_digest": "VARCHAR",
    "result": "VARCHAR",
    "checkpoint": "VARCHAR",
    "error": "VARCHAR",
    "attempted_at": "VARCHAR",
}

PROJECTION = Projection(
    name="preservation",
    version=1,
    tables={
        "scorer_drains": "position BIGINT, run VARCHAR, history_digest VARCHAR, occurred_at TIMESTAMPTZ",
        "preservation_receipts": "position BIGINT, run VARCHAR, history_run VARCHAR, history_digest VARCHAR, result VARCHAR, "
        "checkpoint VARCHAR, error VARCHAR, attempted_at VARCHAR, occurred_at TIMESTAMPTZ, "
        "recorded_at TIMESTAMPTZ, actor VARCHAR",
    },
    apply=(
        f"""INSERT INTO scorer_drains SELECT position, j.run, j.history_digest, occurred_at
            FROM {facts_of("'scorer.drained'", {"run": "VARCHAR", "history_digest": "VARCHAR"})}""",
        f"""INSERT INTO preservation_receipts SELECT position, j.run, j.history_run, j.history_digest, j.result, j.checkpoint,
            j.error, j.attempted_at, occurred_at, recorded_at, actor
            FROM {facts_of("'scorer.preservation_receipted'", RECEIPT)}""",
    ),
    views={
        "receipts": """
            SELECT p.run, p.result, p.history_digest, d.history_digest AS drained_digest, p.checkpoint, p.error,
                   p.attempted_at, false AS qualified, p.occurred_at, p.recorded_at, p.actor, p.position
            FROM preservation_receipts p LEFT JOIN scorer_drains d USING (run)""",
    },
    docs={
        "receipts": "one row per terminal preservation receipt: the run, the result of its one sealing attempt (sealed / "
        "failed), the scorer history digest it sealed beside the run's drained one, the checkpoint or error, "
        "and qualified (always false: a preserved scorer is evidence, not a qualified recovery)",
        "scorer_drains": "scorer.drained facts: each run's final native scorer history digest",
        "preservation_receipts": "scorer.preservation_receipted facts",
    },
)

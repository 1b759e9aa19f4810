"""`--occurred-before TIME`: what had happened by then, by the harness's own clocks (each event's
`occurred_at`). A run imported today happened last week: by recording time (`--as-of`, a prefix of
the log) "before last Friday" shows nothing of it, by occurrence time it shows as it stood then.
"""

from __future__ import annotations

from datetime import datetime

from ...adapters.duckdb_store import ReadModelDB
from ..read_models import event_rows
from ..read_models.registry import PROJECTIONS
from .runner import drop_owned
from .shadows import creating_in_file


def keep_only_occurred_before(db: ReadModelDB, moment: datetime, position: int) -> None:
    """Rebuild `db`'s read models from its events that occurred before `moment` (`db` is a scratch
    database).

    Those events are a selection of the log, not a prefix, so the answer is built in a database of
    its own: the log (or its `--as-of` prefix) is copied in and chain-checked as usual, the events
    that happened at or after `moment` are deleted, and every other read model is rebuilt from what
    is left, with the same SQL a catch-up runs. An event without an occurrence time counts at its
    recording time."""
    derived = [p for p in PROJECTIONS if p is not event_rows.PROJECTION]
    with creating_in_file(db), db.transaction():
        for projection in reversed(derived):
            drop_owned(db, projection)
        db.execute("DELETE FROM events WHERE coalesce(occurred_at, recorded_at) >= ?", [moment])
        for projection in derived:
            for statement in projection.create_statements():
                db.execute(statement)
            for statement in projection.apply:
                db.execute(statement, {"lo": 0, "hi": position})

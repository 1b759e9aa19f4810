"""`lineage runs`: one row per run with what people filter on (task, agent, model, outcome, when)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..adapters.duckdb_store import ReadModelDB

COLUMNS = ("run", "task", "agent", "model", "outcome", "reward", "forks", "registered_at")


def list_runs(
    db: ReadModelDB,
    *,
    task: str | None = None,
    agent: str | None = None,
    outcome: str | None = None,
    since: datetime | None = None,
) -> list[dict[str, Any]]:
    """Runs in registration order; each filter is an exact match (`since`: registered at or after it)."""
    return db.rows(
        """SELECT r.run, r.task, r.agent, r.model, coalesce(r.outcome, 'pending') AS outcome, r.reward,
                  coalesce(f.forks, 0) AS forks, r.registered_at
           FROM runs r LEFT JOIN (SELECT run, count(*) AS forks FROM fork_openings GROUP BY run) f USING (run)
           WHERE ($task IS NULL OR r.task = $task) AND ($agent IS NULL OR r.agent = $agent)
             AND ($outcome IS NULL OR coalesce(r.outcome, 'pending') = $outcome)
             AND ($since IS NULL OR r.registered_at >= $since)
           ORDER BY r.position""",
        {"task": task, "agent": agent, "outcome": outcome, "since": since},
    )

"""`lineage runs`: one row per run with what people filter on (task, agent, model, outcome, when)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ..adapters.duckdb_store import ReadModelDB
from ..domain.errors import InvalidInput

COLUMNS = ("run", "task", "agent", "model", "outcome", "reward", "forks", "registered_at")
#: What every "no such run" error suggests: the command that lists them, not an SQL query to type.
LIST_RUNS_HINT = "`lineage runs` lists the recorded runs; any unique prefix of an id names one"


def list_runs(
    db: ReadModelDB,
    *,
    task: str | None = None,
    agent: str | None = None,
    outcome: str | None = None,
    since: datetime | None = None,
) -> Iterator[dict[str, Any]]:
    """Runs in registration order, streamed; each filter is an exact match (`since`: registered at or after
    it)."""
    return db.stream(
        """SELECT r.run, r.task, r.agent, r.model, coalesce(r.outcome, 'pending') AS outcome, r.reward,
                  coalesce(f.forks, 0) AS forks, r.registered_at
           FROM runs r LEFT JOIN (SELECT run, count(*) AS forks FROM fork_openings GROUP BY run) f USING (run)
           WHERE ($task IS NULL OR r.task = $task) AND ($agent IS NULL OR r.agent = $agent)
             AND ($outcome IS NULL OR coalesce(r.outcome, 'pending') = $outcome)
             AND ($since IS NULL OR r.registered_at >= $since)
           ORDER BY r.position""",
        {"task": task, "agent": agent, "outcome": outcome, "since": since},
    )


#: How many candidates an ambiguous prefix lists before saying how many more there are.
SHOWN_CANDIDATES = 10


def resolve_run(db: ReadModelDB, given: str) -> str:
    """The run `given` names: its id, or a prefix that only one run's id, trial or last path part starts with
    (`lineage tree csv-dedupe__7c` for `nightly/csv-dedupe__7c1f2a90`). An exact id always wins; an ambiguous
    prefix is refused with the runs it could mean, and an unknown one left for the caller's own error."""
    if not given or db.scalar("SELECT count(*) FROM runs WHERE run = ?", [given]):
        return given
    matches = [
        r["run"]
        for r in db.rows(
            """SELECT run FROM runs
               WHERE starts_with(run, $p) OR starts_with(coalesce(trial, ''), $p)
                  OR starts_with(regexp_extract(run, '[^/]*$'), $p)
               ORDER BY run""",
            {"p": given},
        )
    ]
    if len(matches) > 1:
        shown = ", ".join(matches[:SHOWN_CANDIDATES])
        more = len(matches) - SHOWN_CANDIDATES
        raise InvalidInput(
            f"expected a run id or a prefix of exactly one, found {given!r} matching {len(matches)} runs: "
            + shown
            + (f" and {more} more" if more > 0 else ""),
            hint="type more of the id (`lineage runs` lists them)",
        )
    return matches[0] if matches else given


def resolve_address(db: ReadModelDB, address: str) -> str:
    """RUN, RUN:NODE or RUN:FORK/ARM with RUN given as an id or a unique prefix (see `resolve_run`)."""
    run, sep, rest = address.rpartition(":")
    if not sep:
        return resolve_run(db, address)
    if db.scalar("SELECT count(*) FROM runs WHERE run = ?", [address]):
        return address  # a run id with a colon in it
    return f"{resolve_run(db, run)}:{rest}"

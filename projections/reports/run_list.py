"""`lineage runs`: one row per run with what people filter on (task, agent, model, status,
outcome, when); and `resolve_run`, the one way every command and `lineage serve` name a run."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...adapters.duckdb_store import ReadModelDB
from ...domain.errors import InvalidInput
from ..read_models.outcome_words import OUTCOME_KINDS, STATUS_WORDS

COLUMNS = (
    "run",
    "task",
    "agent",
    "model",
    "status",
    "outcome",
    "reward",
    "forks",
    "registered_at",
)
#: What every "no such run" error suggests: the command that lists them, not an SQL query to type.
LIST_RUNS_HINT = "`lineage runs` lists the recorded runs; any unique prefix of an id names one"


_ROW = """r.run, r.task, r.agent, r.model, r.status, coalesce(r.outcome, 'pending') AS outcome,
                  r.reward, coalesce(f.forks, 0) AS forks, r.registered_at"""
_FILTERED = """FROM runs r LEFT JOIN (SELECT run, count(*) AS forks FROM fork_openings GROUP BY run) f USING (run)
           WHERE ($task IS NULL OR r.task = $task) AND ($agent IS NULL OR r.agent = $agent)
             AND ($status IS NULL OR r.status = $status)
             AND ($outcome IS NULL OR coalesce(r.outcome, 'pending') = $outcome)
             AND ($since IS NULL OR r.registered_at >= $since)"""  # noqa: E501


#: The filters whose values come from a closed vocabulary, each with it: `status` takes the
#: glossary's words, `outcome` how the outcome was recorded (`outcome_words`).
VOCABULARIES: dict[str, tuple[str, ...]] = {
    "status": tuple(STATUS_WORDS),
    "outcome": tuple(OUTCOME_KINDS),
}


def refuse_unknown_words(filters: Mapping[str, str | None]) -> None:
    """A `status` or `outcome` filter outside its vocabulary is refused with the words it takes (a
    typo such as `scord` would otherwise match nothing and read as "no such runs")."""
    for name, words in VOCABULARIES.items():
        value = filters.get(name)
        if not value or value in words:
            continue
        other = next((o for o, w in VOCABULARIES.items() if o != name and value in w), None)
        close = difflib.get_close_matches(value, words, n=1)
        raise InvalidInput(
            f"expected {name} to be one of {', '.join(words)}; found {value!r}",
            hint=f"{value!r} is a {other} word: filter on {other} (`--{other}`)"
            if other
            else (f"did you mean {close[0]!r}?" if close else "the glossary says what each means"),
        )


def list_runs(
    db: ReadModelDB,
    *,
    task: str | None = None,
    agent: str | None = None,
    status: str | None = None,
    outcome: str | None = None,
    since: datetime | None = None,
) -> Iterator[dict[str, Any]]:
    """Runs in registration order, streamed; each filter is an exact match (`since`: registered at
    or after it), `status` and `outcome` one of their words."""
    refuse_unknown_words({"status": status, "outcome": outcome})
    return db.stream(
        f"SELECT {_ROW} {_FILTERED} ORDER BY r.position",
        {"task": task, "agent": agent, "status": status, "outcome": outcome, "since": since},
    )


#: What a page of runs may be sorted by (`-` in front: descending), each an expression of the query
#: below.
SORTS = {
    "registered": "r.position",
    "run": "r.run",
    "task": "r.task",
    "agent": "r.agent",
    "model": "r.model",
    "status": "r.status",
    "outcome": "coalesce(r.outcome, 'pending')",
    "reward": "r.reward",
}
PAGE_COLUMNS = (*COLUMNS[:4], "skill_mode", *COLUMNS[4:])
#: What a page of runs may be filtered on, each an exact match, and `search` (a part of the run,
#: task, agent or model, any case).
PAGE_FILTERS = ("task", "agent", "model", "status", "outcome", "skill_mode", "search")


@dataclass
class RunPage:
    rows: list[dict[str, Any]]
    total: int
    page: int
    size: int
    sort: str

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))


def page_runs(
    db: ReadModelDB,
    filters: dict[str, str | None],
    *,
    since: datetime | None = None,
    sort: str = "-registered",
    page: int = 1,
    size: int = 50,
) -> RunPage:
    """One page of runs, filtered, sorted and cut in SQL (LIMIT/OFFSET), with how many runs match in
    all."""
    unknown = sorted(set(filters) - set(PAGE_FILTERS))
    key = sort.removeprefix("-")
    if unknown or key not in SORTS or page < 1 or not 1 <= size <= 1000:
        raise InvalidInput(
            f"expected filters among {', '.join(PAGE_FILTERS)}, a sort among "
            f"{', '.join(SORTS)} (`-` first for descending), page >= 1 and 1..1000 per "
            f"page; found filters {unknown or 'ok'}, sort {sort!r}, page {page}, size {size}"
        )
    refuse_unknown_words(filters)
    params: dict[str, Any] = {name: filters.get(name) or None for name in PAGE_FILTERS}
    params.update(since=since)
    where = f"""{_FILTERED}
             AND ($model IS NULL OR r.model = $model) AND ($skill_mode IS NULL OR r.skill_mode = $skill_mode)
             AND ($search IS NULL OR contains(lower(concat_ws(' ', r.run, r.task, r.agent, r.model)),
                                              lower($search)))"""  # noqa: E501
    order = f"{SORTS[key]} {'DESC' if sort.startswith('-') else 'ASC'} NULLS LAST, r.position"
    # One statement for the page and the count (the window counts before LIMIT): the view is planned
    # once.
    rows = db.rows(
        f"SELECT {_ROW}, r.skill_mode, count(*) OVER () AS matching {where} ORDER BY {order} "
        f"LIMIT {size} OFFSET {(page - 1) * size}",
        params,
    )
    if rows:
        total = rows[0]["matching"]
        for row in rows:
            del row["matching"]
    else:  # past the last page (or nothing matches): the count alone
        total = db.rows(f"SELECT count(*) AS n {where}", params)[0]["n"]
    return RunPage(rows, int(total), page, size, sort)


#: How many candidates an ambiguous prefix lists before saying how many more there are.
SHOWN_CANDIDATES = 10


def resolve_run(db: ReadModelDB, given: str) -> str:
    """The run `given` names, the one resolver of every command and of `lineage serve`: its id;
    else the one run whose trial or last path part is exactly `given`; else a prefix that only one
    run's id, trial or last path part starts with (`lineage tree csv-dedupe__7c` for
    `nightly/csv-dedupe__7c1f2a90`). An exact name wins over a prefix, so
    `csv-dedupe__7c1f2a90` names that run even though `csv-dedupe__7c1f2a90__continued` starts
    with it. Two runs answering at the same step are refused with the runs it could mean, and an
    unknown name is left for the caller's own error."""
    if not given or db.scalar("SELECT count(*) FROM runs WHERE run = ?", [given]):
        return given
    for test in (_NAMED_EXACTLY, _NAMED_BY_PREFIX):
        matches = [
            r["run"]
            for r in db.rows(f"SELECT run FROM runs WHERE {test} ORDER BY run", {"p": given})
        ]
        if len(matches) > 1:
            raise _ambiguous(given, matches)
        if matches:
            return matches[0]
    return given


#: What a name is matched on after the whole id: the trial or the last path part, exactly, then
#: as a prefix of any of the three.
_NAMED_EXACTLY = "coalesce(trial, '') = $p OR regexp_extract(run, '[^/]*$') = $p"
_NAMED_BY_PREFIX = """starts_with(run, $p) OR starts_with(coalesce(trial, ''), $p)
                      OR starts_with(regexp_extract(run, '[^/]*$'), $p)"""


def _ambiguous(given: str, matches: list[str]) -> InvalidInput:
    shown = ", ".join(matches[:SHOWN_CANDIDATES])
    more = len(matches) - SHOWN_CANDIDATES
    return InvalidInput(
        f"expected a run id or a prefix of exactly one, "
        f"found {given!r} matching {len(matches)} runs: "
        + shown
        + (f" and {more} more" if more > 0 else ""),
        hint="type more of the id (`lineage runs` lists them)",
    )


def resolve_address(db: ReadModelDB, address: str) -> str:
    """RUN, RUN:NODE or RUN:FORK/ARM with RUN given as an id or a unique prefix (see
    `resolve_run`)."""
    run, sep, rest = address.rpartition(":")
    if not sep:
        return resolve_run(db, address)
    if db.scalar("SELECT count(*) FROM runs WHERE run = ?", [address]):
        return address  # a run id with a colon in it
    return f"{resolve_run(db, run)}:{rest}"

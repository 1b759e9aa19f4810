"""`lineage arms RUN[:FORK]`: one row per arm, one column per test, flips marked (dvc `exp show`
style).

The baseline is the run itself (its own reward and CTRF tests, row `parent`, first) unless an arm
is named: then each fork's rows start with that arm, and the parent's row, still shown, comes last,
measured against the first fork's. A cell whose outcome differs from the baseline's is a flip,
listed in the row's `flips`.
Tests whose outcome is not the same in every arm that reported tests are the fork's `differing`
tests (what `ablation.json` calls `differing_tests`). Test names are shortened per arm as benchflow
shortens them (only when that stays unambiguous within that arm's report), so the parent's and the
arms' columns line up. An arm not reporting a test has no value in that column: "not reported",
never a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ....adapters.duckdb_store import ReadModelDB
from ....domain.errors import UnknownSubject
from ...read_models.outcome_words import run_status
from ..branch_view import UNKNOWN_USD
from ..exports.exports import require_run
from .attribution import short_test_name

PARENT = "parent"
#: Beside the reward, what the arm cost (benchflow's child `cost`): tokens, USD (null, shown
#: "unknown", when the provider reported none: never 0) and the sandbox-seconds it held.
COST_COLUMNS = ("tokens", "usd", "sandbox_seconds")
FIXED_COLUMNS = ("fork", "arm", "node", "status", "reward", *COST_COLUMNS)
FLIP_MARK = "(flip)"


@dataclass
class ArmsTable:
    """The rows (baseline first), the test columns in order, and per fork the tests that differ
    between arms."""

    run: str
    baseline: str
    tests: list[str]
    rows: list[dict[str, Any]]
    differing: dict[str, list[str]] = field(default_factory=dict)
    #: the run's checkpoint retries: re-runs of the finished trial, never arms
    retries: list[str] = field(default_factory=list)

    @property
    def columns(self) -> tuple[str, ...]:
        return (*FIXED_COLUMNS, *self.tests, "flips")


def short_names(tests: dict[str, str]) -> dict[str, str]:
    """One report's tests under short names when shortening keeps them apart, else as written."""
    short = {name: short_test_name(name) for name in tests}
    if len(set(short.values())) != len(short):
        return dict(tests)
    return {short[name]: status for name, status in tests.items()}


def _tests_by_owner(
    db: ReadModelDB, run: str
) -> dict[tuple[str | None, int | None], dict[str, str]]:
    found: dict[tuple[str | None, int | None], dict[str, str]] = {}
    for row in db.rows(
        "SELECT fork, idx, test, status FROM tests WHERE run = ? ORDER BY position", [run]
    ):
        found.setdefault((row["fork"], row["idx"]), {}).setdefault(row["test"], row["status"])
    return {owner: short_names(tests) for owner, tests in found.items()}


def _forks(db: ReadModelDB, run: str, fork: str | None) -> tuple[list[str], list[str]]:
    """The forks whose children are arms (FORK's, or every one), and the run's retries."""
    rows = db.rows("SELECT fork, kind FROM forks WHERE run = ? ORDER BY position", [run])
    known = [r["fork"] for r in rows if r["kind"] != "retry"]
    retries = [r["fork"] for r in rows if r["kind"] == "retry"]
    if fork is None:
        return known, retries
    if fork in retries:
        raise UnknownSubject(
            f"expected a fork of arms, found fork {fork!r} of run {run!r} a checkpoint retry "
            "(one re-run of the finished trial, beside its own reward): it has no arms",
            hint=f"`lineage tree {run}` shows the retry; forks with arms: {known}",
        )
    if fork not in known:
        raise UnknownSubject(
            f"expected fork {fork!r} of run {run!r}, found forks {known}",
            hint=f"`lineage tree {run}` shows the run's forks",
        )
    return [fork], retries


def split_run_fork(db: ReadModelDB, address: str) -> tuple[str, str | None]:
    """RUN or RUN:FORK; a recorded run whose key itself holds a colon is taken whole."""
    run, sep, fork = address.rpartition(":")
    if not sep or db.scalar("SELECT count(*) FROM runs WHERE run = ?", [address]):
        return address, None
    return run, fork


def arms_table(
    db: ReadModelDB, run: str, fork: str | None = None, baseline: str = PARENT
) -> ArmsTable:
    """RUN's arms (every fork, or FORK's) against `baseline`: `parent` or the name of an arm in each
    fork."""
    run_row = require_run(db, run)
    tests = _tests_by_owner(db, run)
    rows: list[dict[str, Any]] = []
    parent = {
        "fork": None,
        "arm": PARENT,
        "node": "root",
        "status": run_status(run_row),
        "reward": run_row["reward"],
        **dict.fromkeys(COST_COLUMNS),
        "tests": tests.get((None, None)),
    }
    if baseline == PARENT:
        rows.append(parent)
    differing: dict[str, list[str]] = {}
    # One query for every fork's children (the view is a join; one per fork cost ~9 ms each, 45 s
    # for a 10,000-node tree), grouped here in the forks' order.
    children: dict[str, list[dict[str, Any]]] = {}
    for child in db.rows(
        "SELECT fork, arm, node, status, reward, child_index, tokens, usd, sandbox_seconds "
        "FROM children WHERE run = ? AND (? IS NULL OR fork = ?) ORDER BY child_index",
        [run, fork, fork],
    ):
        children.setdefault(child["fork"], []).append(child)
    forks, retries = _forks(db, run, fork)
    for fork_id in forks:
        arms = [
            {
                "fork": fork_id,
                "arm": child["arm"],
                "node": child["node"],
                "status": child["status"],
                "reward": child["reward"],
                **{name: child[name] for name in COST_COLUMNS},
                "tests": tests.get((fork_id, child["child_index"])),
            }
            for child in children.get(fork_id, [])
        ]
        if baseline != PARENT and baseline not in {arm["arm"] for arm in arms}:
            raise UnknownSubject(
                f"expected an arm {baseline!r} in fork {fork_id!r} to compare against, "
                f"found arms {[arm['arm'] for arm in arms]}",
                hint="name one of those arms with --baseline, or "
                "leave it out to compare with the parent run",
            )
        differing[fork_id] = _differing([arm["tests"] for arm in arms])
        rows.extend(sorted(arms, key=lambda arm: not _is_baseline(arm, baseline)))
    if baseline != PARENT:  # still shown, after the arms, measured against the first baseline
        rows.append(parent)
    table = _flatten(run, baseline, rows, differing)
    table.retries = retries
    return table


def _differing(reported: list[dict[str, str] | None]) -> list[str]:
    tested = [tests for tests in reported if tests is not None]
    if len(tested) < 2:
        return []
    names = sorted({name for tests in tested for name in tests})
    return [name for name in names if len({tests.get(name) for tests in tested}) > 1]


def _flips(own: dict[str, str], base: dict[str, str]) -> list[str]:
    """Tests both reported whose outcomes differ (a test one side did not report is no flip)."""
    return sorted(name for name in own.keys() & base.keys() if own[name] != base[name])


def _is_baseline(row: dict[str, Any], baseline: str) -> bool:
    """The parent row (no fork: an arm may be named "parent" too), or the arm of that name in its
    fork."""
    return row["arm"] == baseline and (row["fork"] is None) == (baseline == PARENT)


def _flatten(
    run: str, baseline: str, rows: list[dict[str, Any]], differing: dict[str, list[str]]
) -> ArmsTable:
    """One column per test; each row's `flips`: the tests where it differs from its baseline."""
    names = sorted({name for row in rows for name in (row["tests"] or {})})
    # the parent is one baseline for every fork; a named arm is each fork's own
    reference = {row["fork"]: row["tests"] or {} for row in rows if _is_baseline(row, baseline)}
    first = next(iter(reference), None)  # the parent's, when an arm is the baseline
    flat = []
    for row in rows:
        own = row.pop("tests") or {}
        base = reference.get(None if baseline == PARENT else row["fork"] or first, {})
        row["flips"] = [] if _is_baseline(row, baseline) else _flips(own, base)
        flat.append({**row, **{name: own.get(name) for name in names}})
    return ArmsTable(run, baseline, names, flat, differing)


def marked_rows(table: ArmsTable) -> list[dict[str, Any]]:
    """The rows for people: a flipped cell says so (machine formats keep the bare outcome and
    `flips`)."""
    return [
        {
            **row,
            **{name: f"{row[name]} {FLIP_MARK}" for name in row["flips"]},
            "flips": len(row["flips"]),
            "usd": UNKNOWN_USD if row["usd"] is None and row["tokens"] is not None else row["usd"],
        }
        for row in table.rows
    ]


def legend(table: ArmsTable) -> str:
    between = "; ".join(
        f"fork {fork}: {', '.join(names) or 'none'}" for fork, names in table.differing.items()
    )
    return (
        f"{FLIP_MARK}: differs from {table.baseline}; "
        f"tests differing between arms: {between or 'no forks'}"
        + (f"; retries (not arms): {', '.join(table.retries)}" if table.retries else "")
    )

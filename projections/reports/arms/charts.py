"""What `lineage serve`'s charts page shows: per arm, pass rate and mean reward with 95% intervals;
a task x arm grid of pass rates; runs and mean reward over time; each split by any column of the
`runs` view. The numbers are `lineage arms --stats`'s own, and bounded whatever the store holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ....adapters.duckdb_store import ReadModelDB
from ....domain.errors import InvalidInput
from .arm_stats import COLUMNS, METHOD, NAMED, arm_summary, grouped_trials

DEFAULT_GROUP = "task"
# The bounds: at most GROUP_CAP groups (the ones with the most runs; the rest are counted as
# "other"), ARM_CAP arms per group, GRID_TASKS x GRID_ARMS cells and TIME_BUCKETS points in time;
# every sum is SQL's.
GROUP_CAP = 12
ARM_CAP = 12
GRID_TASKS = 40
GRID_ARMS = 12
TIME_BUCKETS = 60
#: The most scored trials the page bootstraps for reward intervals (the Wilson intervals cost
#: nothing). A bootstrap's cost grows with the arm's trials (~0.5 s for 1,000 on one core here).
RESAMPLE_BUDGET = 4000
#: Coarser and coarser units until the runs' time span fits in TIME_BUCKETS points.
UNITS = ("hour", "day", "week", "month", "quarter", "year")
#: Columns of the view that are no group (a nested value), left out of the choices.
NOT_GROUPS = frozenset({"rewards", "timing", "position"})


@dataclass
class Charts:
    group: str
    columns: list[str]
    groups: list[Any]  # the shown values, most runs first; None: runs without a value
    group_runs: list[int]  # runs in each shown group, in the same order
    groups_total: int
    other_runs: int  # runs in groups past GROUP_CAP
    arms: list[dict[str, Any]]  # arm_summary rows, each with its `group`
    arms_left_out: int  # (group, arm) pairs past ARM_CAP
    # (group, arm, trials) the budget left without a reward interval
    no_interval: list[dict[str, Any]]
    grid: dict[str, Any]
    timeline: dict[str, Any]
    caps: dict[str, int] = field(
        default_factory=lambda: {
            "groups": GROUP_CAP,
            "arms_per_group": ARM_CAP,
            "grid_tasks": GRID_TASKS,
            "grid_arms": GRID_ARMS,
            "time_buckets": TIME_BUCKETS,
            "resampled_trials": RESAMPLE_BUDGET,
        }
    )
    method: str = METHOD


def group_columns(db: ReadModelDB) -> list[str]:
    """The columns of the `runs` view, as DuckDB describes it (the real ones, not a list kept
    here)."""
    names = [row["column_name"] for row in db.rows("DESCRIBE SELECT * FROM runs")]
    return [name for name in names if name not in NOT_GROUPS]


def checked_group(db: ReadModelDB, group: str | None) -> tuple[str, list[str]]:
    columns = group_columns(db)
    chosen = group or DEFAULT_GROUP
    if chosen not in columns:
        raise InvalidInput(
            f"expected group to be a column of the runs view, one of {', '.join(columns)}; "
            f"found {chosen!r}",
            hint="`lineage tables` lists the columns of every read model",
        )
    return chosen, columns


def charts(db: ReadModelDB, group: str | None = None) -> Charts:
    """The charts page's numbers, grouped by `group` (a column of `runs`, `task` by default).

    With `group` `task`, an arm's row is `lineage arms --stats`'s row for any run of the task.
    Only the drawing is the page's (`adapters/web/chart_svg.py`); `lineage serve` remembers each
    answer for its log position, like every served answer."""
    chosen, columns = checked_group(db, group)
    value = f'CAST(r."{chosen}" AS VARCHAR)'  # a checked name, quoted; values are never pasted
    counted = db.rows(
        f"SELECT {value} AS grp, count(*) AS n FROM runs r GROUP BY ALL "
        f"ORDER BY n DESC, grp NULLS LAST LIMIT {GROUP_CAP + 1}"
    )
    totals = db.rows(
        f"SELECT count(DISTINCT {value}) + (count(*) > count({value}))::INT AS g, count(*) AS n "
        "FROM runs r"
    )[0]
    shown = [row["grp"] for row in counted[:GROUP_CAP]]
    group_runs = [int(row["n"]) for row in counted[:GROUP_CAP]]
    groups_total = int(totals["g"] or 0)
    other = int(totals["n"] or 0) - sum(group_runs)
    arms, left_out, skipped = _arm_rows(db, chosen, shown)
    return Charts(
        group=chosen,
        columns=columns,
        groups=shown,
        group_runs=group_runs,
        groups_total=groups_total,
        other_runs=other,
        arms=arms,
        arms_left_out=left_out,
        no_interval=skipped,
        grid=_grid(db),
        timeline=_timeline(db, value, shown),
    )


def _arm_rows(
    db: ReadModelDB, column: str, shown: list[Any]
) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
    """The arms' rows, the (group, arm) pairs past ARM_CAP, and the arms left without a reward
    interval.

    `arm_stats.grouped_trials` selects the trials as `lineage arms --stats` does and
    `arm_stats.arm_summary` computes every number. Intervals are resampled in the order shown
    (groups with the most runs first, each group's arms by name) while RESAMPLE_BUDGET lasts; an
    arm past it shows its mean without an interval, and the page says which and how to get it
    (`lineage arms RUN --stats`)."""
    pooled = grouped_trials(db, column, shown)
    budget = RESAMPLE_BUDGET
    rows, left_out, skipped = [], 0, []
    for value in shown:
        scored, unscored, _runs = pooled.get(value, ({}, {}, {}))
        arms = sorted(scored, key=lambda arm: (-len(scored[arm]), arm))
        left_out += max(0, len(arms) - ARM_CAP)
        for arm in sorted(arms[:ARM_CAP]):
            trials = scored[arm]
            affordable = len(trials) <= budget
            if affordable and len(trials) >= 2:
                budget -= len(trials)
            row = arm_summary(arm, trials, unscored[arm], reward_interval=affordable)
            del row["method"]
            if not affordable:
                skipped.append({"group": value, "arm": arm, "trials": len(trials)})
            rows.append({"group": value, **{k: row[k] for k in SUMMARY}})
    return rows, left_out, skipped


#: The columns of an arm's row here: `lineage arms --stats`'s own, up to the comparison with a
#: baseline.
SUMMARY = COLUMNS[: COLUMNS.index("unscored") + 1]


def _grid(db: ReadModelDB) -> dict[str, Any]:
    """Pass rate of each (task, arm): scored children of named arms, pooled by task as `arms
    --stats` pools."""
    cells = db.rows(
        "SELECT r.task, c.arm, count(*) FILTER (WHERE c.status IN "
        "('pass', 'fail')) AS trials, count(*) FILTER (WHERE c.status "
        "= 'pass') AS passes FROM children c JOIN runs r USING (run) "
        f"JOIN forks f ON f.run = c.run AND f.fork = c.fork {NAMED} GROUP BY ALL"
    )
    by_task: dict[Any, int] = {}
    by_arm: dict[str, int] = {}
    for cell in cells:
        by_task[cell["task"]] = by_task.get(cell["task"], 0) + cell["trials"]
        by_arm[cell["arm"]] = by_arm.get(cell["arm"], 0) + cell["trials"]
    tasks = sorted(by_task, key=lambda t: (-by_task[t], t is None, t or ""))[:GRID_TASKS]
    arms = sorted(sorted(by_arm, key=lambda a: (-by_arm[a], a))[:GRID_ARMS])
    tasks.sort(key=lambda t: (t is None, t or ""))
    keep_tasks, keep_arms = set(tasks), set(arms)
    return {
        "tasks": tasks,
        "arms": arms,
        "tasks_total": len(by_task),
        "arms_total": len(by_arm),
        "cells": [
            {
                "task": c["task"],
                "arm": c["arm"],
                "trials": int(c["trials"]),
                "passes": int(c["passes"]),
                "pass_rate": c["passes"] / c["trials"] if c["trials"] else None,
            }
            for c in sorted(cells, key=lambda c: (c["task"] is None, c["task"] or "", c["arm"]))
            if c["task"] in keep_tasks and c["arm"] in keep_arms
        ],
    }


def _timeline(db: ReadModelDB, value: str, shown: list[Any]) -> dict[str, Any]:
    """Runs registered and their mean reward per unit of time, per shown group (the rest as
    `other`)."""
    span = db.rows("SELECT min(registered_at) AS first, max(registered_at) AS last FROM runs")[0]
    first, last = span["first"], span["last"]
    if first is None or last is None:
        return {"unit": None, "buckets": [], "series": []}
    unit = _unit(first, last)
    known = [v for v in shown if v is not None]
    in_shown = f"coalesce({value} IN (SELECT unnest(?::VARCHAR[]))" + (
        f" OR {value} IS NULL, false)" if None in shown else ", false)"
    )
    rows = db.rows(
        f"SELECT date_trunc('{unit}', registered_at) AS bucket, "
        f"CASE WHEN {in_shown} THEN {value} END AS grp, NOT {in_shown} AS other, "
        "count(*) AS runs, avg(reward) AS mean_reward, count(reward) AS scored "
        "FROM runs r WHERE registered_at IS NOT NULL GROUP BY ALL ORDER BY bucket",
        [known, known],
    )
    buckets = sorted({row["bucket"] for row in rows})
    place = {bucket: i for i, bucket in enumerate(buckets)}
    series: dict[tuple[Any, bool], dict[str, Any]] = {}
    for key in [(v, False) for v in shown] + [(None, True)]:
        series[key] = {
            "group": key[0],
            "other": key[1],
            "runs": [0] * len(buckets),
            "mean_reward": [None] * len(buckets),
        }
    for row in rows:
        line = series[(None, True) if row["other"] else (row["grp"], False)]
        line["runs"][place[row["bucket"]]] = int(row["runs"])
        line["mean_reward"][place[row["bucket"]]] = row["mean_reward"]
    return {
        "unit": unit,
        "buckets": buckets,
        "series": [s for s in series.values() if any(s["runs"])],
    }


def _unit(first: datetime, last: datetime) -> str:
    hours = (last - first).total_seconds() / 3600
    per_unit = {"hour": 1, "day": 24, "week": 168, "month": 744, "quarter": 2232, "year": 8784}
    for unit in UNITS:
        if hours / per_unit[unit] < TIME_BUCKETS - 1:
            return unit
    return "year"

"""`lineage arms --stats`: each arm's pass rate and mean reward with 95% intervals over repeated
trials, and each arm against a baseline arm, paired trial by trial, with a verdict that says when it
is within noise. The statistics are scipy's, never ours.
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from ....adapters.duckdb_store import ReadModelDB
from ....domain.errors import UnknownSubject
from ..branch_view import UNKNOWN_USD
from ..exports.exports import require_run

# The Wilson interval of `binomtest` for a pass rate, the exact McNemar test as `binomtest` on the
# discordant pairs (b of b + c, p = 0.5), and `bootstrap` (percentile, a fixed seed, so the same
# store prints the same intervals) for a mean reward and for the paired difference.
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
SEED = 0
RESAMPLES = 9999
#: Fewer paired trials give no verdict: exact McNemar cannot reach p < 0.05 on fewer than 6
#: discordant pairs, and a percentile bootstrap of a handful of differences is far narrower than the
#: truth.
MIN_PAIRS = 5
#: A mean reward needs two trials for a bootstrap interval (a pass rate's Wilson interval needs
#: one).
MIN_TRIALS = 2

METHOD = (
    f"95% intervals: Wilson (pass rate); percentile "
    f"bootstrap, {RESAMPLES} resamples, fixed seed {SEED} "
    "(mean reward, paired difference); p: exact McNemar on pairs (binomtest on the discordant ones)"
)
COLUMNS = (
    "arm",
    "trials",
    "passes",
    "pass_rate",
    "pass_low",
    "pass_high",
    "mean_reward",
    "reward_low",
    "reward_high",
    "unscored",
    # beside the reward, what the arm's children cost over the pooled runs: tokens, USD (null,
    # shown "unknown", unless every child's provider reported one: never 0) and sandbox-seconds
    "tokens",
    "usd",
    "sandbox_seconds",
    "pairs",
    "gains",
    "losses",
    "p_value",
    "reward_diff",
    "diff_low",
    "diff_high",
    "verdict",
)
#: Machine formats carry the method in every row (they have no title line).
MACHINE_COLUMNS = (*COLUMNS, "method")
ROUNDED = frozenset(COLUMNS[3:9]) | {"reward_diff", "diff_low", "diff_high", "sandbox_seconds"}

#: Only children recorded with an arm name: `children.arm` falls back to the node for the others (a
#: search's plain branches), and a node name is no arm to pool across runs. A checkpoint retry's
#: child is no arm either (it re-runs a finished trial, it compares nothing).
NAMED = (
    "JOIN fork_children named ON named.run = c.run AND named.fork = c.fork "
    "AND named.idx = c.child_index AND named.arm IS NOT NULL AND f.kind = 'fork'"
)


@dataclass(frozen=True)
class Trial:
    """One scored child: which fork it belongs to (the pairing key) and what it got.

    A trial of an arm is one child of one fork. Two arms are paired where they are children of the
    same fork (same task, same run, same state at the branch point): the k-th child of that name
    with the k-th."""

    # task, run, fork, occurrence of the arm's name in that fork
    key: tuple[str | None, str, str, int]
    passed: bool
    reward: float


@dataclass
class ArmStats:
    """The rows (baseline first) and what they were pooled from."""

    run: str  # whose arms these are
    task: str | None  # the task they are pooled over; None: every task
    runs: int
    baseline: str
    rows: list[dict[str, Any]]

    @property
    def title(self) -> str:
        scope = "every task" if self.task is None else f"task {self.task}"
        return (
            f"the arms of {self.run} over {self.runs} run(s) of {scope}, against {self.baseline}; "
            f"{METHOD}"
        )


def _trials(
    db: ReadModelDB, task: str | None, every_task: bool
) -> tuple[dict[str, list[Trial]], dict[str, int], dict[str, set[str]]]:
    """Each arm's scored trials, its unscored count and the runs it was in, in order of first
    appearance."""
    where = "" if every_task else "AND r.task IS NOT DISTINCT FROM ?"
    found = _pooled(db, "NULL", where, [] if every_task else [task])
    return found.get(None, ({}, {}, {}))


def grouped_trials(
    db: ReadModelDB, column: str, values: list[Any] | None = None
) -> dict[Any, tuple[dict[str, list[Trial]], dict[str, int], dict[str, set[str]]]]:
    """`_trials` pooled by a column of the `runs` view instead of the task (the charts' grouping):
    per value of `column` (text; None for a run without one), each arm's trials, selected, ordered
    and counted as `lineage arms --stats` selects them, so `column="task"` gives that command's
    numbers. `column` must be a name the caller checked against the view's columns (it is quoted,
    never a value); `values`: only those."""
    group = f'CAST(r."{column}" AS VARCHAR)'
    where, params = "", []
    if values is not None:
        known = [v for v in values if v is not None]
        where = f"AND ({group} IN (SELECT unnest(?::VARCHAR[]))"
        where += f" OR {group} IS NULL)" if None in values else ")"
        params = [known]
    return _pooled(db, group, where, params)


def _pooled(
    db: ReadModelDB, group: str, where: str, params: list[Any]
) -> dict[Any, tuple[dict[str, list[Trial]], dict[str, int], dict[str, set[str]]]]:
    """Arms pooled by name over every fork of the selected runs. Only scored children (`pass`,
    `fail`) are trials; the others (`error`, `skipped`, `pending`) have no reward and are counted
    apart, though they still take their place in the k-th-child pairing."""
    rows = db.rows(
        f"SELECT {group} AS grp, r.task, c.run, c.fork, c.arm, c.status, c.reward FROM children c "
        f"JOIN runs r USING (run) JOIN forks f ON f.run = c.run AND f.fork = c.fork {NAMED} "
        f"WHERE TRUE {where} ORDER BY r.position, f.position, c.child_index",
        params,
    )
    found: dict[Any, tuple[dict[str, list[Trial]], dict[str, int], dict[str, set[str]]]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    for row in rows:
        scored, unscored, runs = found.setdefault(row["grp"], ({}, {}, {}))
        arm = row["arm"]
        scored.setdefault(arm, [])
        unscored.setdefault(arm, 0)
        runs.setdefault(arm, set()).add(row["run"])
        place = (row["run"], row["fork"], arm)
        occurrence = seen[place] = seen.get(place, -1) + 1
        if row["status"] not in ("pass", "fail"):
            unscored[arm] += 1
            continue
        key = (row["task"], row["run"], row["fork"], occurrence)
        scored[arm].append(Trial(key, row["status"] == "pass", float(row["reward"])))
    return found


def _interval(
    samples: Sequence[np.ndarray], statistic: Callable[..., Any], paired: bool
) -> tuple[float, float]:
    """The percentile bootstrap interval; remembered by the samples' bytes, as the seed is fixed and
    the same samples give the same interval: a long-lived reader (`lineage serve`) pays ~0.5 s per
    1,000 trials once, not after every write that left an arm's trials as they were."""
    key = hashlib.blake2b(
        b"|".join(
            [statistic.__name__.encode(), b"paired" if paired else b"apart"]
            + [str(a.shape).encode() + a.tobytes() for a in samples]
        ),
        digest_size=16,
    ).digest()
    found = _INTERVALS.get(key)
    if found is not None:
        _INTERVALS.move_to_end(key)
        return found
    result = stats.bootstrap(
        tuple(samples),
        statistic,
        n_resamples=RESAMPLES,
        paired=paired,
        confidence_level=CONFIDENCE,
        method="percentile",
        rng=np.random.default_rng(SEED),
    )
    found = float(result.confidence_interval.low), float(result.confidence_interval.high)
    _INTERVALS[key] = found
    if len(_INTERVALS) > REMEMBERED_INTERVALS:
        _INTERVALS.popitem(last=False)
    return found


#: Bootstrap intervals remembered (a key and two floats each).
REMEMBERED_INTERVALS = 4096
_INTERVALS: OrderedDict[bytes, tuple[float, float]] = OrderedDict()


def _mean(x: np.ndarray, axis: int = -1) -> Any:
    return np.mean(x, axis=axis)


def _mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> Any:
    return np.mean(x - y, axis=axis)


@functools.lru_cache(maxsize=4096)
def _wilson(passes: int, trials: int) -> tuple[float, float]:
    """The Wilson interval of passes/trials; cached, as a search tree's thousand one-trial arms
    repeat it."""
    rate = stats.binomtest(passes, trials).proportion_ci(CONFIDENCE, method="wilson")
    return float(rate.low), float(rate.high)


def arm_summary(
    arm: str, trials: list[Trial], unscored: int, reward_interval: bool = True
) -> dict[str, Any]:
    """n, passes, pass rate (Wilson interval) and mean reward (bootstrap interval) of one arm;
    without `reward_interval` the bootstrap is left out (its bounds None), the one part whose cost
    grows with n."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(arm=arm, trials=len(trials), unscored=unscored, method=METHOD)
    if not trials:
        return row
    passes = sum(t.passed for t in trials)
    rewards = np.array([t.reward for t in trials])
    low, high = _wilson(passes, len(trials))
    row.update(
        passes=passes,
        pass_rate=passes / len(trials),
        pass_low=low,
        pass_high=high,
        mean_reward=float(np.mean(rewards)),
    )
    if reward_interval and len(trials) >= MIN_TRIALS:
        row["reward_low"], row["reward_high"] = _interval([rewards], _mean, paired=False)
    return row


def compare(arm: str, trials: list[Trial], base: str, base_trials: list[Trial]) -> dict[str, Any]:
    """`arm` against `base` on the trials both have: exact McNemar on pass/fail, paired bootstrap on
    reward."""
    theirs = {t.key: t for t in base_trials}
    pairs = [(t, theirs[t.key]) for t in trials if t.key in theirs]
    gains = sum(own.passed and not other.passed for own, other in pairs)
    losses = sum(other.passed and not own.passed for own, other in pairs)
    found: dict[str, Any] = {"pairs": len(pairs), "gains": gains, "losses": losses}
    if len(pairs) < MIN_PAIRS:
        found["verdict"] = f"not enough paired trials (n={len(pairs)}; a verdict needs {MIN_PAIRS})"
        return found
    discordant = gains + losses
    # no discordant pair: nothing on pass/fail tells the arms apart (binomtest needs n >= 1)
    p = float(stats.binomtest(gains, discordant, 0.5).pvalue) if discordant else 1.0
    own = np.array([o.reward for o, _ in pairs])
    other = np.array([b.reward for _, b in pairs])
    low, high = _interval([own, other], _mean_difference, paired=True)
    diff = float(np.mean(own - other))
    found.update(p_value=p, reward_diff=diff, diff_low=low, diff_high=high)
    found["verdict"] = _verdict(arm, base, p, gains > losses, diff, low, high)
    return found


def _verdict(
    arm: str, base: str, p: float, gains_more: bool, diff: float, low: float, high: float
) -> str:
    interval = f"95% CI [{low:.3f}, {high:.3f}]"
    if p < ALPHA:
        return f"{arm} {'beats' if gains_more else 'trails'} {base} on pass rate (p={p:.3g})"
    if low > 0 or high < 0:
        way = "beats" if diff > 0 else "trails"
        return f"{arm} {way} {base} on mean reward ({diff:+.3f}, {interval}; pass rate p={p:.3g})"
    return f"difference within noise (p={p:.3g}, {interval} includes 0)"


def _arm_costs(db: ReadModelDB, task: str | None, every_task: bool) -> dict[str, dict[str, Any]]:
    """Each arm's cost summed over the children `_trials` pools (scored or not: a failed child
    cost too); USD only when every one of them reported it."""
    where = "" if every_task else "AND r.task IS NOT DISTINCT FROM ?"
    rows = db.rows(
        "SELECT c.arm, sum(c.tokens) AS tokens, CASE WHEN count(c.usd) = count(*) THEN "
        "sum(c.usd) END AS usd, sum(c.sandbox_seconds) AS sandbox_seconds FROM children c "
        f"JOIN runs r USING (run) JOIN forks f ON f.run = c.run AND f.fork = c.fork {NAMED} "
        f"WHERE TRUE {where} GROUP BY c.arm",
        [] if every_task else [task],
    )
    return {
        row["arm"]: {
            "tokens": None if row["tokens"] is None else int(row["tokens"]),
            "usd": row["usd"],
            "sandbox_seconds": row["sandbox_seconds"],
        }
        for row in rows
    }


def _own_arms(db: ReadModelDB, run: str) -> list[str]:
    """RUN's arm names in the order its forks list them: the arms its statistics are about."""
    rows = db.rows(
        f"SELECT c.arm FROM children c JOIN forks f ON f.run = c.run AND f.fork = c.fork {NAMED} "
        "WHERE c.run = ? ORDER BY f.position, c.child_index",
        [run],
    )
    return list(dict.fromkeys(row["arm"] for row in rows))


def has_named_arms(db: ReadModelDB, run: str) -> bool:
    return bool(_own_arms(db, run))


def arm_stats(
    db: ReadModelDB, run: str, baseline: str | None = None, every_task: bool = False
) -> ArmStats:
    """RUN's arms, each pooled over every run of RUN's task (or of every task), against `baseline`
    (default: RUN's first arm). Arms only other runs have are left out: RUN names the experiment."""
    task = require_run(db, run)["task"]
    own = _own_arms(db, run)
    if not own:
        raise UnknownSubject(
            f"expected run {run!r} to have fork children recorded with arm names, found none",
            hint="`lineage arms RUN` lists its children; one without an arm name "
            "(a search's branch) goes by its node and is no arm to pool across runs",
        )
    base = own[0] if baseline is None else baseline
    if base not in own:
        raise UnknownSubject(
            f"expected an arm {base!r} of run {run!r} to compare against, found arms {own}",
            hint="name one of those arms with --baseline, or leave it out to use the first",
        )
    scored, unscored, runs_of = _trials(db, task, every_task)
    costs = _arm_costs(db, task, every_task)
    runs = len(set().union(*(runs_of[arm] for arm in own)))
    rows = []
    for arm in [base, *(arm for arm in own if arm != base)]:
        row = arm_summary(arm, scored[arm], unscored[arm])
        row.update(costs.get(arm, {}))
        if arm == base:
            row["verdict"] = "baseline"
        else:
            row.update(compare(arm, scored[arm], base, scored[base]))
        rows.append(row)
    return ArmStats(run, None if every_task else task, runs, base, rows)


def rounded_rows(table: ArmStats) -> list[dict[str, Any]]:
    """The rows for people: rates, rewards and intervals to 3 decimals, p to 3 significant digits (a
    tiny p stays readable); machine formats keep every number whole."""
    return [rounded_row(row) for row in table.rows]


def rounded_row(row: dict[str, Any]) -> dict[str, Any]:
    """One row as `rounded_rows` gives it (the charts' rows too): USD not known reads "unknown"
    where tokens were counted."""
    out = {key: value if value is None else _rounded(key, value) for key, value in row.items()}
    if "usd" in out and out["usd"] is None and out.get("tokens") is not None:
        out["usd"] = UNKNOWN_USD
    return out


def _rounded(key: str, value: Any) -> Any:
    if key == "p_value":
        return float(f"{value:.3g}")
    return round(value, 3) if key in ROUNDED else value

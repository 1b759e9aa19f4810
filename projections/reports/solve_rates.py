"""`lineage rates`: pass@k, pass^k and the solve rate over repeated trials, counted as benchflow
counts them, and printed as benchflow's `solve_rates` block.

The numbers follow `pass_at_k.py` @ 8915455a (docs/reference/pass-at-k.md): a task's samples are
its scored trials, n of them with c successes; pass@k = 1 - C(n-c, k) / C(n, k) and pass^k =
C(c, k) / C(n, k) per task with n >= k, averaged over those tasks (null, never 0, when there is
none); a task with n < k is left out of that k and counted in `tasks_short_at_k`. The solve rate is
successes over scored trials, with a 95% Wilson interval, on the effective sample size when tasks
have repeated trials. Unscored trials are counted apart, never as failures.

Which trials are samples follows `Job.solve_rates` (jobs.py @ a4e694bd), what `bench eval metrics
<dir>` prints: every trial folder under the folder chosen (`--job NAME`: every folder of that name;
an alias of `--matrix --trials` pools its `trial-NN/<job>/` folders); in an Evaluation job folder a
task's trials with one agent and model are attempts of one trial and only the best counts (scored
first, then the newest result.json), elsewhere every trial is a sample; reviewer runs are no
trials; control runs (oracle, empty/nop) are left out and counted unless included. A group
(`--by`) is benchflow's rule applied to the group's trials.

The rows are `run.sample_observed` facts (`solve_samples`), what the importer read of each trial
folder; everything here but `trials` is pure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from ...adapters.duckdb_store import ReadModelDB
from ...domain.errors import InvalidInput

#: What `--by` may group on: the run's agent and model as result.json names them, and its skill
#: mode as registered.
GROUP_KEYS = ("agent", "model", "skill_mode")
#: An assessment status that lets a reward count (any other declared one withholds it).
ASSESSED = frozenset({"verified", "failed"})
#: One row per k of each block, for the row formats.
COLUMNS = (
    "k",
    "pass_at_k",
    "pass_hat_k",
    "tasks_at_k",
    "tasks_short_at_k",
    "solve_rate",
    "solve_rate_low",
    "solve_rate_high",
    "tasks",
    "trials",
    "unscored",
    "controls_excluded",
)

# --- the estimators (pass_at_k.py) ---------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One trial of a task: its reward when scored (None: unscored) and the review gate's verdict
    when it has one, which wins over the reward under the default rule."""

    task: str
    reward: float | None
    passed: bool | None = None


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """The chance that at least one of k of the task's n trials succeeds; None when n < k."""
    return None if n < k else 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """The chance that all k of the task's n trials succeed; None when n < k."""
    return None if n < k else math.comb(c, k) / math.comb(n, k)


def default_ks(min_trials: int) -> list[int]:
    """1, the powers of two and the multiples of five up to `min_trials`."""
    ks = {1}
    k = 2
    while k <= min_trials:
        ks.add(k)
        k *= 2
    ks.update(range(5, min_trials + 1, 5))
    return sorted(ks)


def wilson_interval(successes: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of `successes` out of `n` (which may be an effective size)."""
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def solve_rate_interval(counts: list[tuple[int, int]]) -> tuple[tuple[float, float], str] | None:
    """The pooled solve rate's 95% interval over (n, c) per task, and its method: Wilson's over the
    trials when no task has more than one (or there is one task), else Wilson's on the scored
    trials divided by the design effect (`wilson-clustered`); None without a scored trial."""
    counts = [(n, c) for n, c in counts if n > 0]
    total = sum(n for n, _ in counts)
    if not total:
        return None
    solved = sum(c for _, c in counts)
    if max(n for n, _ in counts) <= 1 or len(counts) < 2:
        return wilson_interval(solved, total), "wilson"
    p = solved / total
    tasks = len(counts)
    independent = p * (1 - p) / total
    if independent == 0:
        effective = float(tasks)  # every trial solved, or none
    else:
        clustered = (tasks / (tasks - 1) * math.fsum((c - p * n) ** 2 for n, c in counts)) / (
            total * total
        )
        effective = total / max(1.0, clustered / independent)
    return wilson_interval(p * effective, effective), "wilson-clustered"


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _caveats(
    at_k: list[tuple[int, int, int]], tasks: int, unscored: int, controls: int, nonbinary: int
) -> list[str]:
    """The block's caveats, in benchflow's order and words (`at_k`: k, tasks in, tasks short)."""
    caveats = [
        f"pass@{k}/pass^{k} cover {eligible} of {tasks} tasks: {short} task(s) have fewer than "
        f"{k} scored trials (n < k) and are left out; the unbiased estimator needs n >= k."
        for k, eligible, short in at_k
        if short
    ]
    if unscored:
        caveats.append(f"{unscored} unscored trial(s) are left out of n, not counted as failures.")
    if controls:
        caveats.append(
            f"{controls} control run(s) (oracle, empty/nop) are left out: they check the task, "
            "not an agent (include_controls=True counts them)."
        )
    if nonbinary:
        caveats.append(
            f"{nonbinary} scored trial(s) have a reward other than 0 or 1 and count as not "
            "passed; pass --solve-threshold (solve_threshold=) to count partial credit."
        )
    return caveats


def _mean(values: list[float | None], tasks: int) -> float | None:
    return math.fsum(v or 0.0 for v in values) / tasks if tasks else None


@dataclass(frozen=True)
class Counted:
    """Samples counted per task: (n scored, c successes) in the order tasks first appear, the
    unscored trials, and the scored ones whose reward is neither 0 nor 1."""

    counts: list[tuple[int, int]]
    unscored: int
    nonbinary: int


def _success(reward: float, passed: bool | None, solve_threshold: float | None) -> bool:
    if solve_threshold is not None:
        return reward >= solve_threshold
    return bool(passed) if passed is not None else reward == 1.0


def count(samples: Iterable[Sample], solve_threshold: float | None) -> Counted:
    per_task: dict[str, list[bool]] = {}
    unscored = nonbinary = 0
    for sample in samples:
        reward = _finite(sample.reward)
        if reward is None:
            unscored += 1
            continue
        nonbinary += reward not in (0.0, 1.0)
        per_task.setdefault(sample.task, []).append(
            _success(reward, sample.passed, solve_threshold)
        )
    return Counted([(len(v), sum(v)) for v in per_task.values()], unscored, nonbinary)


@dataclass(frozen=True)
class AtK:
    """pass@k and pass^k at one k, over the `tasks` with n >= k; `short` tasks had fewer."""

    k: int
    pass_at_k: float | None
    pass_hat_k: float | None
    tasks: int
    short: int


def at_k(counts: list[tuple[int, int]], k: int) -> AtK:
    eligible = [(n, c) for n, c in counts if n >= k]
    return AtK(
        k,
        _mean([pass_at_k(n, c, k) for n, c in eligible], len(eligible)),
        _mean([pass_hat_k(n, c, k) for n, c in eligible], len(eligible)),
        len(eligible),
        len(counts) - len(eligible),
    )


def solve_rates(
    samples: Iterable[Sample],
    *,
    ks: Iterable[int] | None = None,
    solve_threshold: float | None = None,
    controls_excluded: int = 0,
) -> dict[str, Any]:
    """benchflow's `solve_rates` block over `samples`, its keys in benchflow's order. `ks` defaults
    to `default_ks` of the smallest per-task n; `solve_threshold` makes a scored trial a success
    when its reward is at least that (else it succeeds when it passed)."""
    if solve_threshold is not None:
        solve_threshold = float(solve_threshold)
        if not math.isfinite(solve_threshold):
            raise InvalidInput(f"expected a finite solve threshold, found {solve_threshold}")
    counted = count(samples, solve_threshold)
    counts = counted.counts
    min_n = min((n for n, _ in counts), default=0)
    wanted = sorted(set(ks)) if ks is not None else default_ks(min_n)
    if any(k < 1 for k in wanted):
        raise InvalidInput(f"expected every k to be at least 1, found {wanted}")
    found = [at_k(counts, k) for k in wanted]
    total = sum(n for n, _ in counts)
    return {
        "success_rule": success_rule(solve_threshold),
        "solve_threshold": solve_threshold,
        "tasks": len(counts),
        "trials": total,
        "unscored": counted.unscored,
        "controls_excluded": controls_excluded,
        "min_trials_per_task": min_n,
        "max_trials_per_task": max((n for n, _ in counts), default=0),
        "solve_rate": sum(c for _, c in counts) / total if total else None,
        **_interval(counts),
        "nonbinary_rewards": counted.nonbinary,
        **_per_k(found),
        "caveats": _caveats(
            [(a.k, a.tasks, a.short) for a in found],
            len(counts),
            counted.unscored,
            controls_excluded,
            counted.nonbinary if solve_threshold is None else 0,
        ),
    }


def success_rule(solve_threshold: float | None) -> str:
    return "passed (reward = 1)" if solve_threshold is None else f"reward >= {solve_threshold:g}"


def _interval(counts: list[tuple[int, int]]) -> dict[str, Any]:
    interval = solve_rate_interval(counts)
    return {
        "solve_rate_interval": list(interval[0]) if interval else None,
        "solve_rate_interval_method": interval[1] if interval else None,
    }


def _per_k(found: list[AtK]) -> dict[str, Any]:
    return {
        "ks": [a.k for a in found],
        "pass_at_k": {str(a.k): a.pass_at_k for a in found},
        "pass_hat_k": {str(a.k): a.pass_hat_k for a in found},
        "tasks_at_k": {str(a.k): a.tasks for a in found},
        "tasks_short_at_k": {str(a.k): a.short for a in found},
    }


# --- which trials are samples (jobs.py) -----------------------------------------------------------


@dataclass(frozen=True)
class Trial:
    """A trial folder as `solve_samples` holds it, with where its files were read and its skill
    mode."""

    run: str
    job_dir: str
    evaluation_job: bool
    result_mtime: float
    task: str
    agent: str
    model: str | None
    control: str | None
    purpose: str | None
    reward: float | None
    passed: bool | None
    assessment: str | None
    integration_failure: str | None
    skill_mode: str | None = None
    location: str | None = None

    @property
    def scored(self) -> bool:
        """`Trial.assessment == "scored"`: a finite reward not withheld (no broken integration, no
        declared assessment still open)."""
        return (
            _finite(self.reward) is not None
            and self.integration_failure is None
            and (self.assessment is None or self.assessment in ASSESSED)
        )

    def sample(self) -> Sample:
        return Sample(self.task, self.reward if self.scored else None, self.passed)

    def rank(self) -> tuple[bool, float, str]:
        """`attempt_rank`: scored first, then the newest result.json, then the path."""
        folder = self.location or str(PurePath(self.job_dir) / PurePath(self.run).name)
        return (self.scored, self.result_mtime, str(PurePath(folder) / "result.json"))

    def value(self, key: str) -> Any:
        return getattr(self, key)

    def path_parts(self) -> tuple[str, ...]:
        """The folders from the root down to the trial folder, as it was read."""
        return (*PurePath(self.job_dir).parts, PurePath(self.location or self.run).name)


def under(trials: Iterable[Trial], folder: str) -> list[Trial]:
    """The trials under a folder named `folder`: their job folder, any folder above it (an alias
    pools its `trial-NN/<job>/` folders) or the trial folder itself. A name with slashes
    (`opus/trial-02`) names consecutive folders."""
    wanted = PurePath(folder).parts
    return [t for t in trials if _within(t.path_parts(), wanted)]


def _within(parts: tuple[str, ...], wanted: tuple[str, ...]) -> bool:
    return bool(wanted) and any(
        parts[i : i + len(wanted)] == wanted for i in range(len(parts) - len(wanted) + 1)
    )


def final_attempts(trials: Iterable[Trial]) -> list[Trial]:
    """One trial per task, agent and model in each Evaluation job folder (its best attempt); every
    trial elsewhere (`_final_attempts`)."""
    kept: list[Trial] = []
    chains: dict[tuple[str, str, str, str | None], list[Trial]] = {}
    for trial in trials:
        if trial.evaluation_job:
            chains.setdefault((trial.task, trial.job_dir, trial.agent, trial.model), []).append(
                trial
            )
        else:
            kept.append(trial)
    kept.extend(max(chain, key=Trial.rank) for chain in chains.values())
    return sorted(kept, key=lambda t: (t.task, t.rank()[2]))


def block(
    trials: Sequence[Trial],
    *,
    ks: Sequence[int] | None = None,
    solve_threshold: float | None = None,
    include_controls: bool = False,
) -> dict[str, Any]:
    """The `solve_rates` block of these (final) trials: controls left out and counted unless
    included."""
    agents = [t for t in trials if include_controls or t.control is None]
    return solve_rates(
        (t.sample() for t in agents),
        ks=ks or None,
        solve_threshold=solve_threshold,
        controls_excluded=len(trials) - len(agents),
    )


def groups(trials: Sequence[Trial], by: Sequence[str]) -> list[tuple[dict[str, Any], list[Trial]]]:
    """The trials by the values of `by`, in the order of those values."""
    found: dict[str, list[Trial]] = {}
    for trial in trials:
        found.setdefault(json.dumps([trial.value(k) for k in by]), []).append(trial)
    return [
        (dict(zip(by, json.loads(key), strict=True)), members)
        for key, members in sorted(found.items())
    ]


@dataclass(frozen=True)
class Selection:
    """What `lineage rates` counts: a jobs-tree folder and exact values of the run's fields."""

    job: str | None = None
    task: str | None = None
    agent: str | None = None
    model: str | None = None
    skill_mode: str | None = None

    def keeps(self, trial: Trial) -> bool:
        return all(
            wanted is None or trial.value(name) == wanted
            for name, wanted in (
                ("task", self.task),
                ("agent", self.agent),
                ("model", self.model),
                ("skill_mode", self.skill_mode),
            )
        )


def selected(every: Sequence[Trial], selection: Selection) -> list[Trial]:
    """The final trials `selection` picks: reviewer runs left out, the job folder's trials (all
    when none is named), their best attempts, then the field filters."""
    trials = [t for t in every if t.purpose != "reviewer"]
    if selection.job is not None:
        trials = under(trials, selection.job)
        if not trials:
            names = sorted({part for t in every for part in PurePath(t.job_dir).parts[-3:]})
            raise InvalidInput(
                f"expected trials under a folder named {selection.job!r}, found none",
                hint="name a job folder, a trial-NN folder or a matrix alias of the imported "
                f"jobs tree, such as {', '.join(names[:8]) or '(no benchflow trial imported)'}",
            )
    return [t for t in final_attempts(trials) if selection.keeps(t)]


_TRIALS = """SELECT s.run, s.job_dir, s.evaluation_job, s.result_mtime, s.task, s.agent, s.model,
                    s.control, s.purpose, s.reward, s.passed, s.assessment, s.integration_failure,
                    r.skill_mode, r.location
             FROM solve_samples s LEFT JOIN runs r USING (run)
             ORDER BY s.position"""


def trials(db: ReadModelDB) -> list[Trial]:
    """Every benchflow trial folder imported, as last read."""
    return [Trial(**row) for row in db.rows(_TRIALS)]


def rows(found: dict[str, Any], key: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A block as rows, one per k (what the table, TSV, CSV and markdown show)."""
    interval = found["solve_rate_interval"] or [None, None]
    return [
        {
            **(key or {}),
            "k": k,
            "pass_at_k": found["pass_at_k"][str(k)],
            "pass_hat_k": found["pass_hat_k"][str(k)],
            "tasks_at_k": found["tasks_at_k"][str(k)],
            "tasks_short_at_k": found["tasks_short_at_k"][str(k)],
            "solve_rate": found["solve_rate"],
            "solve_rate_low": interval[0],
            "solve_rate_high": interval[1],
            "tasks": found["tasks"],
            "trials": found["trials"],
            "unscored": found["unscored"],
            "controls_excluded": found["controls_excluded"],
        }
        for k in found["ks"]
    ]

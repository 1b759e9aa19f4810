"""`lineage arms RUN --stats` and the report's arm statistics: repeated trials of a task, arm by
arm.

Stores are built from recorded facts: one run per trial, each forking into named arms. Every number
is checked against scipy called here on the same rewards (never a number written into the test), and
the verdicts on the three kinds of sample: too few pairs, within noise, a clear winner.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from tests.conftest import Cli
from tests.html_page import Page, external_references

SEED, RESAMPLES = 0, 9999


def trial(
    run: str, task: str, rewards: dict[str, float | None], fork: str = "root"
) -> list[f.Fact]:
    """One run of `task` that forks into one child per arm; None: the child was not scored."""
    children = tuple(
        f.ForkChild(index=i, node=f"n{i + 1}", arm=arm) for i, arm in enumerate(rewards)
    )
    facts: list[f.Fact] = [
        f.RunRegistered(run=run, task=task, agent="agent", model="model", trial=run),
        f.ForkOpened(run=run, fork=fork, node="root", children=children),
    ]
    for i, reward in enumerate(rewards.values()):
        if reward is None:
            facts.append(f.ChildUnscored(run=run, fork=fork, index=i, reason="verifier-timeout"))
        else:
            facts.append(f.ChildScored(run=run, fork=fork, index=i, reward=reward))
    return facts


def record_trials(
    lineage: Lineage, task: str, arms: dict[str, Sequence[float | None]], prefix: str = "t"
) -> list[str]:
    """len(rewards) runs of `task`; run k's arm A got arms[A][k]. Returns the run ids."""
    n = len(next(iter(arms.values())))
    runs = [f"{prefix}/{task}__{k}" for k in range(n)]
    for k, run in enumerate(runs):
        lineage.record(trial(run, task, {arm: rewards[k] for arm, rewards in arms.items()}))
    return runs


def arm_stats(run_cli: Cli, *args: str) -> dict[str, dict]:
    rows = json.loads(run_cli("arms", *args, "--stats", "--format", "json").stdout)
    return {row["arm"]: row for row in rows}


def bootstrap(data: tuple[np.ndarray, ...], statistic, paired: bool) -> tuple[float, float]:
    ci = stats.bootstrap(
        data,
        statistic,
        n_resamples=RESAMPLES,
        paired=paired,
        method="percentile",
        rng=np.random.default_rng(SEED),
    ).confidence_interval
    return float(ci.low), float(ci.high)


WITH = [1.0, 0.5, 1.0, 0.0, 1.0, 0.25, 1.0, 1.0]
WITHOUT = [0.0, 0.5, 1.0, 0.0, 0.0, 0.75, 1.0, 0.0]


def test_each_number_is_scipys_on_the_same_trials(lineage: Lineage, run_cli: Cli) -> None:
    runs = record_trials(lineage, "csv-dedupe", {"no-skill": WITHOUT, "with-skill": WITH})
    rows = arm_stats(run_cli, runs[0])
    assert list(rows) == ["no-skill", "with-skill"]  # the first arm is the baseline
    for arm, rewards in (("no-skill", WITHOUT), ("with-skill", WITH)):
        row = rows[arm]
        passes = sum(r >= 1.0 for r in rewards)
        wilson = stats.binomtest(passes, len(rewards)).proportion_ci(0.95, method="wilson")
        mean_ci = bootstrap((np.array(rewards),), np.mean, paired=False)
        assert (row["trials"], row["passes"], row["unscored"]) == (len(rewards), passes, 0)
        assert row["pass_rate"] == pytest.approx(passes / len(rewards))
        assert (row["pass_low"], row["pass_high"]) == pytest.approx((wilson.low, wilson.high))
        assert row["mean_reward"] == pytest.approx(np.mean(rewards))
        assert (row["reward_low"], row["reward_high"]) == pytest.approx(mean_ci)
        assert "fixed seed 0" in row["method"]
    compared = rows["with-skill"]
    gains = sum(a >= 1 > b for a, b in zip(WITH, WITHOUT, strict=True))
    losses = sum(b >= 1 > a for a, b in zip(WITH, WITHOUT, strict=True))
    p = stats.binomtest(gains, gains + losses, 0.5).pvalue
    diff_ci = bootstrap(
        (np.array(WITH), np.array(WITHOUT)), lambda x, y, axis: np.mean(x - y, axis), paired=True
    )
    assert (compared["pairs"], compared["gains"], compared["losses"]) == (8, gains, losses)
    assert compared["p_value"] == pytest.approx(p)
    assert compared["reward_diff"] == pytest.approx(np.mean(np.subtract(WITH, WITHOUT)))
    assert (compared["diff_low"], compared["diff_high"]) == pytest.approx(diff_ci)
    assert rows["no-skill"]["verdict"] == "baseline"
    # the same store prints the same intervals: the bootstrap's seed is fixed
    assert arm_stats(run_cli, runs[0]) == rows


def test_a_tiny_sample_is_within_noise(lineage: Lineage, run_cli: Cli) -> None:
    with_skill, no_skill = [1.0, 1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 1.0, 0.0]
    runs = record_trials(lineage, "tiny", {"no-skill": no_skill, "with-skill": with_skill})
    row = arm_stats(run_cli, runs[0])["with-skill"]
    p = stats.binomtest(1, 2, 0.5).pvalue  # one gain, one loss
    low, high = row["diff_low"], row["diff_high"]
    assert low <= 0 <= high
    assert (
        row["verdict"]
        == f"difference within noise (p={p:.3g}, 95% CI [{low:.3f}, {high:.3f}] includes 0)"
    )


def test_a_large_sample_names_the_winner(lineage: Lineage, run_cli: Cli) -> None:
    # 40 trials: with-skill passes 34, no-skill 10; they are discordant on 26 (25 gains, 1 loss)
    with_skill = [1.0] * 34 + [0.0] * 6
    no_skill = [0.0] * 25 + [1.0] * 9 + [1.0] + [0.0] * 5
    runs = record_trials(lineage, "big", {"with-skill": with_skill, "no-skill": no_skill})
    rows = arm_stats(run_cli, runs[0], "--baseline", "no-skill")
    assert list(rows) == ["no-skill", "with-skill"]
    p = stats.binomtest(25, 26, 0.5).pvalue
    assert rows["with-skill"]["verdict"] == f"with-skill beats no-skill on pass rate (p={p:.3g})"
    assert p < 0.05
    # and the other way round, the loser is named as such
    assert arm_stats(run_cli, runs[0])["no-skill"]["verdict"] == (
        f"no-skill trails with-skill on pass rate (p={stats.binomtest(1, 26, 0.5).pvalue:.3g})"
    )


def test_a_steady_reward_gain_without_a_pass_is_named(lineage: Lineage, run_cli: Cli) -> None:
    # no trial passes in either arm (McNemar has nothing to count), but with-skill scores higher
    # every time
    no_skill = [0.1, 0.2, 0.3, 0.4, 0.1, 0.2, 0.3, 0.4]
    with_skill = [0.7, 0.6, 0.9, 0.8, 0.6, 0.9, 0.7, 0.8]
    runs = record_trials(lineage, "partial", {"no-skill": no_skill, "with-skill": with_skill})
    row = arm_stats(run_cli, runs[0])["with-skill"]
    low, high = bootstrap(
        (np.array(with_skill), np.array(no_skill)),
        lambda x, y, axis: np.mean(x - y, axis),
        paired=True,
    )
    diff = float(np.mean(np.subtract(with_skill, no_skill)))
    assert (row["gains"], row["losses"], row["p_value"]) == (0, 0, 1.0) and low > 0
    assert row["verdict"] == (
        f"with-skill beats no-skill on mean reward ({diff:+.3f}, 95% CI [{low:.3f}, {high:.3f}]; "
        "pass rate p=1)"
    )


def test_repeated_arms_in_one_fork_pair_in_order(lineage: Lineage, run_cli: Cli) -> None:
    # one fork, each arm five times: the k-th with-skill child is paired with the k-th no-skill
    # child
    arms = [("no-skill", 0.0), ("with-skill", 1.0)] * 3 + [
        ("no-skill", 1.0),
        ("with-skill", 0.0),
    ] * 2
    children = tuple(
        f.ForkChild(index=i, node=f"n{i + 1}", arm=arm) for i, (arm, _) in enumerate(arms)
    )
    lineage.record(
        [
            f.RunRegistered(run="many", task="many"),
            f.ForkOpened(run="many", fork="root", node="root", children=children),
            *(
                f.ChildScored(run="many", fork="root", index=i, reward=reward)
                for i, (_, reward) in enumerate(arms)
            ),
        ]
    )
    row = arm_stats(run_cli, "many")["with-skill"]
    assert (row["trials"], row["pairs"], row["gains"], row["losses"]) == (5, 5, 3, 2)
    assert row["p_value"] == pytest.approx(stats.binomtest(3, 5, 0.5).pvalue)


def test_a_single_trial_is_not_enough(lineage: Lineage, run_cli: Cli) -> None:
    runs = record_trials(lineage, "once", {"with-skill": [1.0], "no-skill": [0.0]})
    rows = arm_stats(run_cli, runs[0])
    assert rows["no-skill"]["verdict"].startswith("not enough paired trials (n=1")
    assert rows["no-skill"]["p_value"] is None and rows["no-skill"]["diff_low"] is None
    # one trial has a Wilson interval for its pass rate, but no bootstrap interval for its mean
    assert rows["with-skill"]["pass_low"] is not None and rows["with-skill"]["reward_low"] is None


def test_pairs_are_children_of_one_fork_and_unscored_arms_are_apart(
    lineage: Lineage, run_cli: Cli
) -> None:
    # with-skill ran in runs a*, no-skill in run b0: no fork holds both scored, so nothing is paired
    lineage.record(trial("a0", "split", {"with-skill": 1.0}))
    lineage.record(trial("a1", "split", {"with-skill": 1.0}))
    lineage.record(trial("b0", "split", {"no-skill": 0.0}))
    lineage.record(trial("c0", "split", {"no-skill": None, "with-skill": None, "hint": None}))
    lineage.record(trial("d0", "split", {"other-arm": 1.0}))
    rows = arm_stats(run_cli, "c0")
    # c0's arms only, its first the baseline
    assert list(rows) == [
        "no-skill",
        "with-skill",
        "hint",
    ]
    assert (rows["with-skill"]["trials"], rows["no-skill"]["trials"]) == (2, 1)
    assert rows["with-skill"]["pairs"] == 0
    assert rows["with-skill"]["verdict"].startswith("not enough paired trials (n=0")
    # an unscored child is no failure: it is counted apart, not as a trial
    assert (rows["hint"]["trials"], rows["hint"]["unscored"], rows["hint"]["passes"]) == (
        0,
        1,
        None,
    )
    assert rows["with-skill"]["unscored"] == 1


def test_tasks_are_apart_unless_all_tasks_is_asked(lineage: Lineage, run_cli: Cli) -> None:
    first = record_trials(lineage, "one", {"base": [0.0] * 3, "arm": [1.0] * 3})
    record_trials(lineage, "two", {"base": [0.0] * 3, "arm": [1.0] * 3})
    assert arm_stats(run_cli, first[0])["arm"]["pairs"] == 3
    pooled = arm_stats(run_cli, first[0], "--all-tasks")["arm"]
    assert (pooled["pairs"], pooled["gains"]) == (6, 6)
    p = stats.binomtest(6, 6, 0.5).pvalue
    assert pooled["verdict"] == f"arm beats base on pass rate (p={p:.3g})"


def test_bad_requests_are_refused_and_say_why(lineage: Lineage, run_cli: Cli) -> None:
    runs = record_trials(lineage, "t", {"with-skill": [1.0, 0.0], "no-skill": [0.0, 0.0]})
    lineage.record([f.RunRegistered(run="lonely", task="t")])
    wrong = run_cli("arms", runs[0], "--stats", "--baseline", "nope", ok=False)
    assert wrong.exit_code != 0 and "expected an arm 'nope'" in wrong.output + wrong.stderr
    assert "with-skill" in wrong.output + wrong.stderr
    fork = run_cli("arms", f"{runs[0]}:root", "--stats", ok=False)
    assert fork.exit_code != 0 and "name the run alone" in fork.output + fork.stderr
    alone = run_cli("arms", runs[0], "--all-tasks", ok=False)
    assert alone.exit_code != 0 and "add --stats" in alone.output + alone.stderr
    none = run_cli("arms", "lonely", "--stats", ok=False)
    # a run of the task that never forked has no arms of its own, though its task's other runs do
    assert (
        none.exit_code != 0 and "recorded with arm names, found none" in none.output + none.stderr
    )


def test_every_format_and_the_table_says_its_method(lineage: Lineage, run_cli: Cli) -> None:
    runs = record_trials(lineage, "fmt", {"with-skill": WITH, "no-skill": WITHOUT})
    table = run_cli("arms", runs[0], "--stats", "--format", "table").stdout
    assert "fixed seed 0" in table and "Wilson" in table and "McNemar" in table
    markdown = run_cli("arms", runs[0], "--stats", "--format", "markdown").stdout
    assert "fixed seed 0" in markdown and "| with-skill |" in markdown
    csv = run_cli("arms", runs[0], "--stats", "--format", "csv").stdout.splitlines()
    assert csv[0].startswith("arm,trials,passes,pass_rate") and len(csv) == 3


HOSTILE = "</td></tr></table><script>alert(1)</script><img src=x onerror=alert(2)>"


def test_the_report_shows_the_stats_and_hostile_arms_stay_text(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    runs = record_trials(lineage, "<b>task</b>", {HOSTILE: WITHOUT, "with-skill": WITH})
    target = tmp_path / "report.html"
    run_cli("report", runs[0], "--to", str(target))
    page = Page(target.read_text(encoding="utf-8"))
    assert external_references(page) == []
    assert not page.find("script") and not page.find("img")
    (table,) = page.find("table", "arm-stats")
    assert page.text_of(table).startswith("armtrials") and HOSTILE in page.text_of(table)
    cells = [page.text_of(td) for td in page.find("td")]
    expected = json.loads(run_cli("arms", runs[0], "--stats", "--format", "json").stdout)
    verdicts = [row["verdict"] for row in expected]
    assert verdicts[0] == "baseline" and all(v in cells for v in verdicts)
    rate = expected[1]
    assert f"{rate['pass_rate']:.3f} [{rate['pass_low']:.3f}, {rate['pass_high']:.3f}]" in cells
    (scope,) = page.find("p", "arm-stats-scope")
    assert "fixed seed 0" in page.text_of(scope) and "<b>task</b>" in page.text_of(scope)


def test_children_without_an_arm_name_are_no_arms(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    # a search's plain branches carry no arm name: nothing to pool, in the command or the report
    children = (f.ForkChild(index=0, node="n1"), f.ForkChild(index=1, node="n2"))
    lineage.record(
        [
            f.RunRegistered(run="search", task="s"),
            f.ForkOpened(run="search", fork="root", node="root", children=children),
            f.ChildScored(run="search", fork="root", index=0, reward=1.0),
        ]
    )
    refused = run_cli("arms", "search", "--stats", ok=False)
    assert (
        refused.exit_code != 0
        and "recorded with arm names, found none" in refused.output + refused.stderr
    )
    target = tmp_path / "report.html"
    run_cli("report", "search", "--to", str(target))
    page = Page(target.read_text(encoding="utf-8"))
    assert not page.find("table", "arm-stats") and "No named arms." in target.read_text()


def test_a_remembered_interval_is_the_one_scipy_gives_for_those_very_samples() -> None:
    """The bootstrap is remembered by the samples' bytes: the same samples in another order, or
    paired differently, are other samples (the resamples pick by position), never an earlier
    answer."""
    from rollout_lineage.projections.reports.arms import arm_stats as module

    module._INTERVALS.clear()
    x = np.array(WITH)
    y = np.array(WITHOUT)
    for data, paired in (((x,), False), ((x[::-1],), False), ((x, y), True), ((y, x), True)):
        statistic = module._mean if len(data) == 1 else module._mean_difference
        for _ in range(2):  # computed, then remembered
            assert module._interval(list(data), statistic, paired) == bootstrap(
                data, statistic, paired=paired
            )
    assert len(module._INTERVALS) == 4

"""The estimators and the selection of `lineage rates`, against the examples of benchflow's contract
(docs/reference/pass-at-k.md and pass_at_k.py's own examples @ 8915455a, jobs.py @ a4e694bd)."""

from __future__ import annotations

import pytest

from rollout_lineage.domain.errors import InvalidInput
from rollout_lineage.projections.reports import solve_rates as sr


def trial(run: str, task: str = "t", **fields: object) -> sr.Trial:
    given: dict = {
        "run": run,
        "job_dir": "/jobs/opus/trial-01/2026-11-03__09-00-00",
        "evaluation_job": True,
        "result_mtime": 1.0,
        "task": task,
        "agent": "claude",
        "model": "opus",
        "control": None,
        "purpose": None,
        "reward": 1.0,
        "passed": None,
        "assessment": None,
        "integration_failure": None,
        **fields,
    }
    return sr.Trial(**given)


def test_the_estimators_give_the_contracts_examples() -> None:
    assert round(sr.pass_at_k(5, 2, 2) or 0, 3) == 0.7
    assert round(sr.pass_hat_k(5, 3, 2) or 0, 3) == 0.3
    assert sr.pass_at_k(2, 1, 3) is None and sr.pass_hat_k(2, 1, 3) is None
    assert sr.default_ks(0) == [1]
    assert sr.default_ks(5) == [1, 2, 4, 5]
    assert sr.default_ks(10) == [1, 2, 4, 5, 8, 10]
    low, high = sr.wilson_interval(9, 20)
    assert (round(low, 4), round(high, 4)) == (0.2582, 0.6579)


def test_the_interval_is_wilsons_with_one_trial_per_task_and_clustered_with_more() -> None:
    assert sr.solve_rate_interval([]) is None
    assert sr.solve_rate_interval([(1, 1), (1, 0)]) == (sr.wilson_interval(1, 2), "wilson")
    assert sr.solve_rate_interval([(3, 2)]) == (sr.wilson_interval(2, 3), "wilson")
    # every trial solved: the effective size is the number of tasks
    assert sr.solve_rate_interval([(2, 2), (3, 3)]) == (
        sr.wilson_interval(2.0, 2.0),
        "wilson-clustered",
    )


def test_no_samples_give_nulls_and_one_k() -> None:
    block = sr.solve_rates([])
    assert block["ks"] == [1] and block["pass_at_k"] == {"1": None}
    assert (block["solve_rate"], block["solve_rate_interval"]) == (None, None)
    assert block["caveats"] == []
    with pytest.raises(InvalidInput):
        sr.solve_rates([], ks=[0])
    with pytest.raises(InvalidInput):
        sr.solve_rates([], solve_threshold=float("inf"))


def test_a_non_finite_or_boolean_reward_is_unscored() -> None:
    samples = [sr.Sample("t", float("nan")), sr.Sample("t", True), sr.Sample("t", 1.0)]  # type: ignore[arg-type]
    block = sr.solve_rates(samples)
    assert (block["trials"], block["unscored"], block["solve_rate"]) == (1, 2, 1.0)


def test_the_best_attempt_is_scored_then_newest_then_last_by_path() -> None:
    attempts = [
        trial("j/t__1", reward=1.0, result_mtime=5.0),
        trial("j/t__2", reward=None, result_mtime=9.0),  # newer, but unscored
        trial("j/t__3", reward=0.0, result_mtime=7.0),  # the newest scored
    ]
    [best] = sr.final_attempts(attempts)
    assert best.run == "j/t__3"
    tied = [trial("j/t__b", result_mtime=1.0), trial("j/t__a", result_mtime=1.0)]
    assert sr.final_attempts(tied)[0].run == "j/t__b"  # the later path wins a tie
    withheld = trial("j/t__4", reward=1.0, integration_failure="detected", result_mtime=9.0)
    assert sr.final_attempts([withheld, attempts[0]])[0].run == "j/t__1"


def test_attempts_are_per_task_agent_model_and_folder() -> None:
    other_folder = "/jobs/opus/trial-02/2026-11-03__09-10-00"
    trials = [
        trial("a/t__1"),
        trial("a/t__2", model="haiku"),
        trial("a/t__3", agent="codex"),
        trial("a/u__1", task="u"),
        trial("b/t__1", job_dir=other_folder),
        trial("c/t__1", evaluation_job=False),
        trial("c/t__2", evaluation_job=False),
    ]
    assert len(sr.final_attempts(trials)) == 7
    assert len(sr.final_attempts([*trials, trial("a/t__9")])) == 7


def test_a_job_names_any_folder_above_the_trial() -> None:
    trials = [trial("a/t__1"), trial("b/t__1", job_dir="/jobs/haiku/trial-01/job")]
    chosen = sr.selected(trials, sr.Selection(job="opus"))
    assert [t.run for t in chosen] == ["a/t__1"]
    assert len(sr.selected(trials, sr.Selection(job="trial-01"))) == 2
    assert [t.run for t in sr.selected(trials, sr.Selection(job="haiku/trial-01"))] == ["b/t__1"]
    assert {t.run for t in sr.selected(trials, sr.Selection(job="t__1"))} == {"a/t__1", "b/t__1"}
    with pytest.raises(InvalidInput):
        sr.selected(trials, sr.Selection(job="opus/trial-02"))
    with pytest.raises(InvalidInput, match="opux"):
        sr.selected(trials, sr.Selection(job="opux"))
    reviewer = trial("a/t__2", purpose="reviewer", result_mtime=99.0)
    assert {t.run for t in sr.selected([*trials, reviewer], sr.Selection())} == {
        "a/t__1",
        "b/t__1",
    }

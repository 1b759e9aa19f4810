"""What benchflow's solve rates read of a trial: where the trial folder sits in the jobs tree, and
its result as `Job.solve_rates` counts it. Part of the vocabulary in `facts.py`, which re-exports
it.

benchflow (`jobs.py` @ a4e694bd, `pass_at_k.py` @ 8915455a) counts a trial folder as one sample of
its task unless it is one of several attempts in one Evaluation job folder (then only the best
attempt counts), a control run, or unscored. Which attempt is best depends on each result.json's
modification time, and whether a reward counts depends on files beside it (the trajectory of an
agent that did nothing), so the importer records what those rules read, as the files were when it
read them. The rules themselves (`projections/reports/solve_rates.py`) run on these rows.
"""

from __future__ import annotations

from typing import Literal

from .fact_base import Count, Fact, Key, Number, Text


class SampleObserved(Fact):
    """One trial folder as benchflow's solve rates read it, observed at import.

    Placement: `job_dir` is the folder holding the trial folder (benchflow's job folder, whose
    trials of one task, agent and model are attempts of one trial when it is an Evaluation's:
    `evaluation_job`, it holds evaluation.json or summary.json); `trial_number` is N of the
    `trial-NN` folder above it that `bench eval run --matrix --trials` writes, and `alias` the
    matrix entry's folder above that. `result_mtime` is result.json's modification time (seconds
    since the epoch), by which benchflow picks the newest attempt.

    The result as benchflow reads it: `task` (result.json `task_name`, legacy `task_id`, else
    empty), `agent` and `model` (result.json's, `agent_result` filling in), `control` (`oracle` or
    `empty`: a run that checks the task, not an agent), `purpose` (a `reviewer` run is no trial),
    `reward` (`rewards.reward`, or a legacy top-level `reward`, as a number), `passed` (a complete
    integrated-review verdict), `assessment` (a declared outcome assessment's status: only
    `verified` and `failed` let a reward count) and `integration_failure` (`recorded`: benchflow
    stored that the agent's integration broke; `detected`: the trajectory shows the agent did
    nothing after the prompt, which benchflow finds the same way on read): either withholds the
    reward.

    An observation, not a claim about the trial's life: reading the folder again after it changed
    (moved, a result.json rewritten) records another, and the latest one counts."""

    type: Literal["run.sample_observed"] = "run.sample_observed"
    run: Key
    job_dir: Text
    evaluation_job: bool = False
    trial_number: Count | None = None
    alias: Text | None = None
    result_mtime: Number
    task: Text = ""
    agent: Text = ""
    model: Text | None = None
    control: Literal["oracle", "empty"] | None = None
    purpose: Text | None = None
    reward: Number | None = None
    passed: bool | None = None
    assessment: Text | None = None
    integration_failure: Literal["recorded", "detected"] | None = None

"""Solve-rate samples: each trial folder as benchflow's solve rates read it when it was imported,
one row per observation, the latest per run in `solve_samples`.

`lineage rates` selects and counts these rows the way `bench eval metrics` does
(`projections/reports/solve_rates.py`); `job` is the job folder's name, the last part of `job_dir`.
"""

from __future__ import annotations

from .base import OCCURRED_AT, POSITION, Columns, Projection, derived, fact, facts

SAMPLES = Columns.of(
    "run_samples",
    ["run.sample_observed"],
    POSITION,
    fact("run"),
    fact("job_dir"),
    derived("job", "VARCHAR", "regexp_extract(j.job_dir, '([^/]*)/*$', 1)", job_dir="VARCHAR"),
    fact("evaluation_job", "BOOLEAN"),
    fact("trial_number", "INTEGER"),
    fact("alias"),
    fact("result_mtime", "DOUBLE"),
    facts("task", "agent", "model", "control", "purpose"),
    fact("reward", "DOUBLE"),
    fact("passed", "BOOLEAN"),
    facts("assessment", "integration_failure"),
    OCCURRED_AT,
)

PROJECTION = Projection.of(
    name="samples",
    version=1,
    columns=(SAMPLES,),
    views={
        "solve_samples": """SELECT * EXCLUDE (occurred_at), occurred_at AS observed_at,
                                   count(*) OVER (PARTITION BY run) AS observations
                            FROM run_samples
                            QUALIFY row_number() OVER (PARTITION BY run ORDER BY position DESC) = 1"""  # noqa: E501
    },
    docs={
        "solve_samples": "one row per benchflow trial folder, as benchflow's solve rates read it "
        "when it was last imported (observations: how many different readings were recorded): "
        "job_dir (the folder holding the trial folder) and job (its name), evaluation_job "
        "(it holds evaluation.json or summary.json, so a task's retries there are one trial), "
        "trial_number and alias (bench eval run --matrix --trials: <alias>/trial-NN/<job>/), "
        "result_mtime (result.json's modification time, which picks the newest attempt), task, "
        "agent and model as result.json names them, control (oracle / empty, or NULL), purpose, "
        "reward, passed (a complete review verdict), assessment and integration_failure "
        "(recorded / detected: the agent did nothing, so the reward is withheld)",
        "run_samples": "run.sample_observed facts, one row per observation of a trial folder",
    },
)

"""Runs: registration, where the run's files are now, outcome (scored, unscored, failed) and finish, one row per run."""

from __future__ import annotations

from .base import Projection, facts_of

REGISTRATION = {key: "VARCHAR" for key in ("run", "task", "task_path", "agent", "model", "skill_mode", "sandbox", "trial",
                                           "role", "parent_run", "parent_node", "run_dir", "config_sha256")} | {"source": "JSON"}
OUTCOME = {"run": "VARCHAR", "reward": "DOUBLE", "rewards": "JSON", "tests": "JSON", "verifier_error": "VARCHAR",
           "reason": "VARCHAR", "error": "VARCHAR", "category": "VARCHAR", "request_global": "BOOLEAN", "status": "VARCHAR",
           "started_at": "VARCHAR", "finished_at": "VARCHAR", "timing": "JSON", "trajectory": "VARCHAR"}

PROJECTION = Projection(
    name="runs",
    version=3,
    tables={
        "run_registrations": "position BIGINT, run VARCHAR, task VARCHAR, task_path VARCHAR, agent VARCHAR, model VARCHAR, "
                             "skill_mode VARCHAR, sandbox VARCHAR, trial VARCHAR, role VARCHAR, parent_run VARCHAR, "
                             "parent_node VARCHAR, run_dir VARCHAR, source JSON, config_sha256 VARCHAR, "
                             "occurred_at TIMESTAMPTZ, recorded_at TIMESTAMPTZ",
        "run_outcomes": "position BIGINT, run VARCHAR, kind VARCHAR, reward DOUBLE, rewards JSON, tests JSON, "
                        "verifier_error VARCHAR, reason VARCHAR, error VARCHAR, category VARCHAR, request_global BOOLEAN, "
                        "status VARCHAR, started_at VARCHAR, finished_at VARCHAR, timing JSON, trajectory VARCHAR, "
                        "occurred_at TIMESTAMPTZ",
        "run_locations": "position BIGINT, run VARCHAR, kind VARCHAR, path VARCHAR, recorded_at TIMESTAMPTZ",
    },
    apply=(
        f"""INSERT INTO run_registrations SELECT position, j.run, j.task, j.task_path, j.agent, j.model, j.skill_mode,
            j.sandbox, j.trial, j.role, j.parent_run, j.parent_node, j.run_dir, j.source, j.config_sha256, occurred_at,
            recorded_at FROM {facts_of("'run.registered'", REGISTRATION)}""",
        f"""INSERT INTO run_outcomes SELECT position, j.run, replace(type, 'run.', ''), j.reward, j.rewards, j.tests,
            j.verifier_error, j.reason, j.error, j.category, j.request_global, j.status, j.started_at, j.finished_at,
            j.timing, j.trajectory, occurred_at
            FROM {facts_of("'run.scored', 'run.unscored', 'run.failed', 'run.finished'", OUTCOME)}""",
        f"""INSERT INTO run_locations SELECT position, j.run, coalesce(j.kind, 'read'), j.path, recorded_at
            FROM {facts_of("'run.located'", {"run": "VARCHAR", "kind": "VARCHAR", "path": "VARCHAR"})}""",
    ),
    views={
        "runs": """
            SELECT r.run, r.task, r.task_path, r.agent, r.model, r.skill_mode, r.sandbox, r.trial, r.role, r.parent_run,
                   r.parent_node, coalesce(loc.recorded, r.run_dir) AS run_dir,
                   coalesce(loc.read, loc.recorded, r.run_dir) AS location, r.config_sha256, r.source,
                   CASE WHEN s.run IS NOT NULL THEN 'scored' WHEN u.run IS NOT NULL THEN 'unscored'
                        WHEN f.run IS NOT NULL THEN 'failed' ELSE 'pending' END AS outcome,
                   s.reward, s.rewards, s.verifier_error, u.reason AS unscored_reason, f.error, f.category AS error_category,
                   coalesce(f.request_global, false) AS request_global, fin.status, fin.started_at, fin.finished_at,
                   fin.timing, fin.trajectory, r.occurred_at AS registered_at, r.position
            FROM run_registrations r
            LEFT JOIN run_outcomes s ON s.run = r.run AND s.kind = 'scored'
            LEFT JOIN run_outcomes u ON u.run = r.run AND u.kind = 'unscored'
            LEFT JOIN run_outcomes f ON f.run = r.run AND f.kind = 'failed'
            LEFT JOIN run_outcomes fin ON fin.run = r.run AND fin.kind = 'finished'
            LEFT JOIN (SELECT run, arg_max(path, position) FILTER (WHERE kind = 'recorded') AS recorded,
                              arg_max(path, position) FILTER (WHERE kind = 'read') AS read
                       FROM run_locations GROUP BY run) loc ON loc.run = r.run""",
    },
    docs={
        "runs": "one row per run: registration (task, agent, model, skill mode, trial, role, parent; run_dir as the "
                "harness recorded it, location where its files were last newly read), outcome "
                "(scored / unscored / failed / pending) with reward or reason, finish status and timing",
        "run_registrations": "run.registered facts, one row per run",
        "run_outcomes": "run.scored / unscored / failed / finished facts (kind column)",
        "run_locations": "run.located facts: every place a run's directory was read at (kind read) or that the "
                         "harness recorded for it (kind recorded), each once, in log order",
    },
)

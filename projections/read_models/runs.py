"""Runs: registration, where the run's files are now, status (the glossary's word: pass, fail,
error, skipped, pending), outcome (scored, unscored, failed) and finish, one row per run."""

from __future__ import annotations

from .base import OCCURRED_AT, POSITION, RECORDED_AT, Columns, Projection, derived, fact, facts
from .outcome_words import RUN_STATUS

REGISTRATIONS = Columns.of(
    "run_registrations",
    ["run.registered"],
    POSITION,
    facts(
        *("run", "task", "task_path", "agent", "model", "skill_mode", "sandbox", "trial", "role"),
        *("parent_run", "parent_node", "run_dir"),
    ),
    fact("source", "JSON"),
    fact("config_sha256"),
    OCCURRED_AT,
    RECORDED_AT,
)
# Facts stored by version 1 are read with today's meaning, as the domain's upcasters read them: a
# `request_global` category is request-global, `rewards.source = branch_aggregate` is the branch's
# V, and times rewritten as UTC say so.
OUTCOMES = Columns.of(
    "run_outcomes",
    ["run.scored", "run.unscored", "run.failed", "run.finished"],
    POSITION,
    fact("run"),
    derived("kind", "VARCHAR", "replace(type, 'run.', '')"),
    fact("reward", "DOUBLE"),
    fact("rewards", "JSON"),
    fact("tests", "JSON"),
    facts("verifier_error", "reason", "error", "category"),
    derived(
        "request_global",
        "BOOLEAN",
        "coalesce(j.request_global, false) OR coalesce(j.category = 'request_global', false)",
        request_global="BOOLEAN",
        category="VARCHAR",
    ),
    facts("status", "started_at", "finished_at"),
    fact("timing", "JSON"),
    fact("trajectory"),
    OCCURRED_AT,
    derived(
        "basis",
        "VARCHAR",
        "CASE WHEN type <> 'run.scored' THEN NULL WHEN j.basis IS NOT NULL THEN j.basis WHEN "
        "j.rewards->>'source' = 'branch_aggregate' THEN 'branch_aggregate' ELSE 'verified' END",
        basis="VARCHAR",
        rewards="JSON",
    ),
    derived(
        "time_zone",
        "VARCHAR",
        "CASE WHEN type <> 'run.finished' THEN NULL WHEN j.time_zone IS NOT NULL THEN j.time_zone "
        "WHEN j.started_at IS NOT NULL OR j.finished_at IS NOT NULL THEN 'utc-assumed' END",
        time_zone="VARCHAR",
        started_at="VARCHAR",
        finished_at="VARCHAR",
    ),
    fact("exchanges_recorded", "INTEGER"),
)
LOCATIONS = Columns.of(
    "run_locations",
    ["run.located"],
    POSITION,
    fact("run"),
    derived("kind", "VARCHAR", "coalesce(j.kind, 'read')", kind="VARCHAR"),
    fact("path"),
    RECORDED_AT,
)

PROJECTION = Projection.of(
    name="runs",
    version=4,
    columns=(REGISTRATIONS, OUTCOMES, LOCATIONS),
    views={
        "runs": f"""
            SELECT r.run, r.task, r.task_path, r.agent, r.model, r.skill_mode, r.sandbox, r.trial, r.role, r.parent_run,
                   r.parent_node, coalesce(loc.recorded, r.run_dir) AS run_dir,
                   coalesce(loc.read, loc.recorded, r.run_dir) AS location, r.config_sha256, r.source,
                   CASE WHEN s.basis = 'branch_aggregate' THEN 'branch_aggregate' WHEN s.run IS NOT NULL THEN 'scored'
                        WHEN u.run IS NOT NULL THEN 'unscored' WHEN f.run IS NOT NULL THEN 'failed'
                        WHEN t.parent = 'discarded' THEN 'discarded' ELSE 'pending' END AS outcome, {RUN_STATUS} AS status,
                   CASE WHEN s.basis = 'branch_aggregate' THEN NULL ELSE s.reward END AS reward,
                   CASE WHEN s.basis = 'branch_aggregate' THEN s.reward END AS branch_value,
                   coalesce(s.rewards, u.rewards) AS rewards, coalesce(s.verifier_error, u.verifier_error) AS verifier_error,
                   u.reason AS unscored_reason, f.error, f.category AS error_category,
                   coalesce(f.request_global, false) AS request_global, fin.status AS finish_status, fin.started_at, fin.finished_at,
                   fin.time_zone, fin.timing, fin.trajectory, fin.exchanges_recorded, r.occurred_at AS registered_at, r.position,
                   t.retry_status, TRY_CAST(t.retry->>'reward' AS DOUBLE) AS retry_reward
            FROM run_registrations r
            LEFT JOIN run_outcomes s ON s.run = r.run AND s.kind = 'scored'
            LEFT JOIN run_outcomes u ON u.run = r.run AND u.kind = 'unscored'
            LEFT JOIN run_outcomes f ON f.run = r.run AND f.kind = 'failed'
            LEFT JOIN run_outcomes fin ON fin.run = r.run AND fin.kind = 'finished'
            LEFT JOIN (SELECT run, arg_max(path, position) FILTER (WHERE kind = 'recorded') AS recorded,
                              arg_max(path, position) FILTER (WHERE kind = 'read') AS read
                       FROM run_locations GROUP BY run) loc ON loc.run = r.run
            LEFT JOIN trials t ON t.run = r.run""",  # noqa: E501
    },
    docs={
        "runs": "one row per run: registration (task, agent, model, skill mode, trial, "
        "role, parent; run_dir as the harness recorded it, location where its files were "
        "last newly read), status (pass / fail / error / skipped / pending, as the "
        "glossary and children.status say), outcome (how it was recorded: scored / "
        "branch_aggregate / unscored / failed / discarded / pending) with reward or reason, "
        "finish_status (the harness's: completed, timeout, ...) and timing; a branch_aggregate run "
        "never verified itself: its result's reward is its fork's V (branch_value), not its "
        "own; a discarded run is a benchflow trial whose parent its fork discarded (--parent "
        "discard): unscored by design, status skipped; retry_status and retry_reward: its "
        "checkpoint retry, beside its own reward, never replacing it; "
        "started_at / finished_at as the harness wrote them, time_zone unknown for "
        "naive local times (utc-assumed where an earlier version read them as UTC); "
        "exchanges_recorded, the LLM exchanges its recording holds (what a replay can serve)",
        "run_registrations": "run.registered facts, one row per run",
        "run_outcomes": "run.scored / unscored / failed / finished facts (kind column)",
        "run_locations": "run.located facts: every place a run's directory was read at (kind "
        "read) or that the harness recorded for it (kind recorded), each once, in log order",
    },
)

"""Release-gate evidence: what each run's (and fresh-rollout arm's) files held when imported, one row per node.

Flattened so `lineage sql` and `lineage audit` read plain columns: trajectory files (present, size, lines,
what their lines held), the trainer-facing `results.jsonl` row, token usage, timing, tool calls and skill
loading. A node read again with different contents (benchflow writes results.jsonl after result.json, so an
import can land between them) has one row per observation in `run_evidence`; `evidence` shows the latest. The
trial a run fills (benchflow's rollout name) is here too: run registrations from earlier
versions did not carry it, and evidence is additive.
"""

from __future__ import annotations

from .base import Projection, facts_of

TRAJECTORY = {
    "present": "BOOLEAN",
    "size": "BIGINT",
    "records": "INTEGER",
    "malformed": "INTEGER",
    "agent_events": "INTEGER",
    "requests": "INTEGER",
    "responses": "INTEGER",
    "responses_with_usage": "INTEGER",
}
SPEC = {
    "run": "VARCHAR",
    "node": "VARCHAR",
    "trial": "VARCHAR",
    "acp_trajectory": TRAJECTORY,
    "llm_trajectory": TRAJECTORY,
    "results": {
        "present": "BOOLEAN",
        "rows": "INTEGER",
        "malformed": "INTEGER",
        "training_ready": "BOOLEAN",
        "training_ready_reason": "VARCHAR",
        "rows_without_usage": "INTEGER",
        "unlisted_tool_calls": "INTEGER",
    },
    "token_usage": {
        "input_tokens": "BIGINT",
        "output_tokens": "BIGINT",
        "total_tokens": "BIGINT",
        "source": "VARCHAR",
    },
    "started_at": "VARCHAR",
    "finished_at": "VARCHAR",
    "duration_sec": "DOUBLE",
    "tool_calls": "INTEGER",
    "partial_trajectory": "BOOLEAN",
    "skills": {
        "skill_mode": "VARCHAR",
        "skills_dir": "VARCHAR",
        "invocations": "INTEGER",
        "marker_lines": "INTEGER",
    },
    "review": "JSON",
}


def _file(name: str, prefix: str) -> str:
    columns = (
        "present",
        "size",
        "records",
        "malformed",
        "agent_events",
        "requests",
        "responses",
        "responses_with_usage",
    )
    return ", ".join(f"j.{name}.{c} AS {prefix}_{c}" for c in columns)


PROJECTION = Projection(
    name="evidence",
    version=2,
    tables={
        "run_evidence": "position BIGINT, run VARCHAR, node VARCHAR, trial VARCHAR, "
        + ", ".join(f"{p}_{c} {t}" for p in ("acp", "llm") for c, t in TRAJECTORY.items())
        + ", results_present BOOLEAN, results_rows INTEGER, results_malformed INTEGER, training_ready BOOLEAN, "
        "training_ready_reason VARCHAR, results_rows_without_usage INTEGER, results_unlisted_tool_calls INTEGER, "
        "input_tokens BIGINT, output_tokens BIGINT, total_tokens BIGINT, "
        "usage_source VARCHAR, started_at VARCHAR, finished_at VARCHAR, duration_sec DOUBLE, tool_calls INTEGER, "
        "partial_trajectory BOOLEAN, skill_mode VARCHAR, skills_dir VARCHAR, skill_invocations INTEGER, "
        "skill_marker_lines INTEGER, review JSON, occurred_at TIMESTAMPTZ",
    },
    apply=(
        f"""INSERT INTO run_evidence SELECT position, j.run, j.node, j.trial, {_file("acp_trajectory", "acp")},
            {_file("llm_trajectory", "llm")}, j.results.present, j.results.rows, j.results.malformed, j.results.training_ready,
            j.results.training_ready_reason, j.results.rows_without_usage, j.results.unlisted_tool_calls,
            j.token_usage.input_tokens, j.token_usage.output_tokens,
            j.token_usage.total_tokens, j.token_usage.source, j.started_at, j.finished_at, j.duration_sec, j.tool_calls,
            j.partial_trajectory, j.skills.skill_mode, j.skills.skills_dir, j.skills.invocations, j.skills.marker_lines,
            j.review, occurred_at
            FROM {facts_of("'run.evidence_observed'", SPEC)}""",
    ),
    views={
        "evidence": """SELECT * EXCLUDE (occurred_at), occurred_at AS observed_at,
                                 count(*) OVER (PARTITION BY run, node) AS observations
                          FROM run_evidence
                          QUALIFY row_number() OVER (PARTITION BY run, node ORDER BY position DESC) = 1"""
    },
    docs={
        "evidence": "one row per run node (root, or a fresh-rollout arm's node) whose directory was read for the release "
        "gate, its latest observation (observations: how many different ones were recorded): trial, "
        "ACP and LLM trajectory files (acp_* / llm_*: present, size, records, malformed lines, "
        "agent events, requests, responses, responses with usage; NULL when the layout writes none), "
        "results.jsonl (rows, training_ready and its reason, training-ready rows without token usage, rows "
        "calling tools they do not list), token usage, timing, tool calls, skill loading, and review: what the "
        "experiment-review skill's judges found (validator issues, reward-hacking signals, the startup skill "
        "catalog, capability-attribution traces; JSON, NULL when read by an earlier version)",
        "run_evidence": "run.evidence_observed facts, flattened: every different observation of a node",
    },
)

"""Release-gate evidence: what each run's (and fresh-rollout arm's) files held when imported, one
row per node.

Flattened so `lineage sql` and `lineage audit` read plain columns: trajectory files (present, size,
lines, what their lines held), the trainer-facing `results.jsonl` row, token usage, timing, tool
calls and skill loading. A node read again with different contents (benchflow writes results.jsonl
after result.json, so an import can land between them) has one row per observation in
`run_evidence`; `evidence` shows the latest. The trial a run fills (benchflow's rollout name) is
here too: run registrations from earlier versions did not carry it, and evidence is additive.
"""

from __future__ import annotations

from .base import OCCURRED_AT, POSITION, Column, Columns, Projection, fact, facts

TRAJECTORY = {
    "present": "BOOLEAN",
    "size": "BIGINT",
    "records": "INTEGER",
    "malformed": "INTEGER",
    "agent_events": "INTEGER",
    "requests": "INTEGER",
    "responses": "INTEGER",
    "responses_with_usage": "INTEGER",
    "sha256": "VARCHAR",
}


def _file(name: str, prefix: str) -> list[Column]:
    """A trajectory file's summary, one `<prefix>_<field>` column per field."""
    return [fact(f"{name}.{c}", t, name=f"{prefix}_{c}") for c, t in TRAJECTORY.items()]


EVIDENCE = Columns.of(
    "run_evidence",
    ["run.evidence_observed"],
    POSITION,
    facts("run", "node", "trial"),
    _file("acp_trajectory", "acp"),
    _file("llm_trajectory", "llm"),
    fact("results.present", "BOOLEAN", name="results_present"),
    fact("results.rows", "INTEGER", name="results_rows"),
    fact("results.malformed", "INTEGER", name="results_malformed"),
    fact("results.training_ready", "BOOLEAN"),
    fact("results.training_ready_reason"),
    fact("results.rows_without_usage", "INTEGER", name="results_rows_without_usage"),
    fact("results.unlisted_tool_calls", "INTEGER", name="results_unlisted_tool_calls"),
    fact("token_usage.input_tokens", "BIGINT"),
    fact("token_usage.output_tokens", "BIGINT"),
    fact("token_usage.total_tokens", "BIGINT"),
    fact("token_usage.source", name="usage_source"),
    facts("started_at", "finished_at"),
    fact("duration_sec", "DOUBLE"),
    fact("tool_calls", "INTEGER"),
    fact("partial_trajectory", "BOOLEAN"),
    fact("skills.skill_mode"),
    fact("skills.skills_dir"),
    fact("skills.invocations", "INTEGER", name="skill_invocations"),
    fact("skills.marker_lines", "INTEGER", name="skill_marker_lines"),
    fact("review", "JSON"),
    _file("atif_trajectory", "atif"),
    fact("folder"),
    OCCURRED_AT,
)

PROJECTION = Projection.of(
    name="evidence",
    version=3,
    columns=(EVIDENCE,),
    views={
        "evidence": """SELECT * EXCLUDE (occurred_at), occurred_at AS observed_at,
                                 count(*) OVER (PARTITION BY run, node) AS observations
                          FROM run_evidence
                          QUALIFY row_number() OVER (PARTITION BY run, node ORDER BY position DESC) = 1"""  # noqa: E501
    },
    docs={
        "evidence": "one row per run node (root, or a fresh-rollout arm's node) whose directory "
        "was read for the release gate, its latest observation (observations: how many different "
        "ones were recorded): trial, ACP and LLM trajectory files (acp_* / llm_*: present, size, "
        "records, malformed lines, agent events, requests, responses, responses with usage, "
        "sha256 as read; NULL when the layout writes none), Harbor's ATIF agent/trajectory.json "
        "(atif_*: records are its steps), the folder the node's files were read from (relative "
        "to the run's directory), results.jsonl (rows, training_ready and its reason, "
        "training-ready rows without token usage, rows calling tools they do not list), token "
        "usage, timing, tool calls, skill loading, and review: what the experiment-review "
        "skill's judges found (validator issues, reward-hacking signals, the startup skill "
        "catalog, capability-attribution traces; JSON, NULL when read by an earlier version)",
        "run_evidence": "run.evidence_observed facts, "
        "flattened: every different observation of a node",
    },
)

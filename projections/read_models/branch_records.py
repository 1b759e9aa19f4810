"""Branch records: how benchflow's main-line writers recorded each fork, each child and the trial
(`fork.described`, `fork.child_described`, `run.trial_described`), with the cost figures readers
put beside rewards."""

from __future__ import annotations

from .base import OCCURRED_AT, POSITION, Column, Columns, Projection, derived, fact, facts


def _cost(name: str, key: str, type: str) -> Column:
    """A figure of the `cost` block, null where the block or the figure is absent (USD unknown
    stays null, never 0)."""
    return derived(name, type, f"TRY_CAST(j.cost->>'{key}' AS {type})", cost="JSON")


FORK_RECORDS = Columns.of(
    "fork_descriptions",
    ["fork.described"],
    POSITION,
    facts("run", "fork"),
    derived("fork_order", "INTEGER", 'j."order"', order="INTEGER"),
    fact("status"),
    fact("requested_children", "INTEGER"),
    fact("value", "DOUBLE"),
    fact("value_stderr", "DOUBLE"),
    fact("parent_restore"),
    fact("error", "JSON"),
    fact("parent_restore_error", "JSON"),
    fact("artifact_error", "JSON"),
    fact("children_mode", "JSON"),
    fact("timing_sec", "JSON"),
    fact("cost", "JSON"),
    _cost("tokens", "tokens", "BIGINT"),
    _cost("usd", "usd", "DOUBLE"),
    derived("usd_known", "BOOLEAN", "TRY_CAST(j.cost->>'usd_known' AS BOOLEAN)", cost="JSON"),
    _cost("sandbox_seconds", "sandbox_seconds", "DOUBLE"),
    fact("snapshot", "JSON"),
    OCCURRED_AT,
)
CHILD_RECORDS = Columns.of(
    "child_descriptions",
    ["fork.child_described"],
    POSITION,
    facts("run", "fork"),
    fact("index", "INTEGER", name="idx"),
    fact("node"),
    fact("status"),
    fact("reward", "DOUBLE"),
    facts("reward_source", "label", "requested", "execution"),
    fact("error", "JSON"),
    fact("cleanup_error", "JSON"),
    fact("attempts", "INTEGER"),
    fact("retried_after", "JSON"),
    fact("cost", "JSON"),
    _cost("tokens", "tokens", "BIGINT"),
    _cost("usd", "usd", "DOUBLE"),
    _cost("sandbox_seconds", "sandbox_seconds", "DOUBLE"),
    fact("usage", "JSON"),
    fact("timing_sec", "JSON"),
    fact("snapshot_start", "JSON"),
    derived(
        "verifier_baseline",
        "VARCHAR",
        "j.snapshot_start->>'verifier_baseline'",
        snapshot_start="JSON",
    ),
    facts("archive", "archive_status"),
    fact("observation", "BOOLEAN"),
    fact("result", "BOOLEAN"),
    OCCURRED_AT,
)
TRIAL_RECORDS = Columns.of(
    "trial_descriptions",
    ["run.trial_described"],
    POSITION,
    facts("run", "folder", "rollout_name", "task_name", "parent"),
    fact("cost", "JSON"),
    fact("retry", "JSON"),
    derived("retry_status", "VARCHAR", "j.retry->>'status'", retry="JSON"),
    fact("checkpoint_source", "JSON"),
    fact("checkpoints", "JSON"),
    OCCURRED_AT,
)

PROJECTION = Projection.of(
    name="branch_records",
    version=1,
    columns=(FORK_RECORDS, CHILD_RECORDS, TRIAL_RECORDS),
    views={
        "trials": """
            SELECT run, arg_max(folder, position) AS folder, arg_max(rollout_name, position) AS rollout_name,
                   arg_max(task_name, position) AS task_name, arg_max(parent, position) AS parent,
                   arg_max(cost, position) AS cost, arg_max(retry, position) AS retry,
                   arg_max(retry_status, position) AS retry_status,
                   arg_max(checkpoint_source, position) AS checkpoint_source,
                   arg_max(checkpoints, position) AS checkpoints, max(position) AS position
            FROM trial_descriptions GROUP BY run""",  # noqa: E501
    },
    docs={
        "trials": "one row per benchflow trial whose branch files were read, the latest reading: "
        "result.json's branches.parent (discarded: unscored by design) and branches.cost, its "
        "checkpoint-retry block (retry, beside the trial's own reward), checkpoint_source.json "
        "and checkpoints.json",
        "fork_descriptions": "fork.described facts: each fork as tree.json records it (status, "
        "parent restore, value_stderr, errors as {type, code}, children_mode, timing_sec, cost "
        "with tokens / usd (null when unknown) / sandbox_seconds, snapshot)",
        "child_descriptions": "fork.child_described facts: each child as tree.json records it "
        "(status, intervention, errors, attempts, cost, usage, timing_sec, snapshot_start and its "
        "verifier_baseline, archive and which of its files were there)",
        "trial_descriptions": "run.trial_described facts, every reading of a trial's files",
    },
)

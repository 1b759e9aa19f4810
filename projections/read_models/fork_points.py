"""Forks, their children (delta, arm, outcome, status) and per-test outcomes (child x test ->
status)."""

from __future__ import annotations

from .base import OCCURRED_AT, POSITION, Column, Columns, Projection, derived, fact, facts, through
from .outcome_words import CHILD_STATUS


def _child(field: str, type: str = "VARCHAR", *, name: str | None = None) -> Column:
    """A field of one child of `fork.opened`, unnested as `c`."""
    sql = 'c."index"' if field == "index" else f"c.{field}"
    return Column(name or field, type, sql, {"children": [{field: type}]})


def _delta(key: str, type: str = "VARCHAR") -> Column:
    return derived(key, type, f"c.delta->>'{key}'")


OPENINGS = Columns.of(
    "fork_openings",
    ["fork.opened"],
    POSITION,
    facts("run", "fork", "node", "stage"),
    fact("layers", "VARCHAR[]", spec=["VARCHAR"]),
    fact("snapshot.sandbox", name="sandbox_ref"),
    fact("snapshot.environment", name="environment_ref"),
    derived("n_children", "INTEGER", "len(j.children)", children=["JSON"]),
    fact("ablation", "JSON"),
    OCCURRED_AT,
    # forks recorded before retries were told apart are forks
    derived("kind", "VARCHAR", "coalesce(j.kind, 'fork')", kind="VARCHAR"),
    facts("reason", "checkpoint", "rollout"),
)
CHILDREN = Columns.of(
    "fork_children",
    ["fork.opened"],
    POSITION,
    through("run"),
    through("fork"),
    _child("index", "INTEGER", name="idx"),
    _child("node"),
    _child("arm"),
    _child("kind"),
    _child("source"),
    _child("delta", "JSON"),
    _delta("skill_mode"),
    _delta("environment_ref"),
    _delta("config_override_sha256"),
    _delta("injected_prompt_sha256"),
    derived(
        "config_override_keys",
        "VARCHAR[]",
        "CAST(json_or_null(c.delta->'config_override_keys') AS VARCHAR[])",
    ),
    _child("delta_execution"),
    _child("environment", "JSON"),
    source="(SELECT position, j.run AS run, j.fork AS fork, unnest(j.children) AS c FROM {facts})",
)
OUTCOME_TYPES = ("fork.child_scored", "fork.child_unscored", "fork.child_failed")
OUTCOMES = Columns.of(
    "child_outcomes",
    OUTCOME_TYPES,
    POSITION,
    facts("run", "fork"),
    fact("index", "INTEGER", name="idx"),
    derived("kind", "VARCHAR", "replace(type, 'fork.child_', '')"),
    fact("reward", "DOUBLE"),
    derived("reason", "VARCHAR", "coalesce(j.reason, j.error)", reason="VARCHAR", error="VARCHAR"),
    fact("tests", "JSON"),
    fact("wall_clock_sec", "DOUBLE"),
    OCCURRED_AT,
)
RESTORES = Columns.of(
    "child_restores",
    ["fork.child_restored"],
    POSITION,
    facts("run", "fork"),
    fact("index", "INTEGER", name="idx"),
    fact("layers", "VARCHAR[]", spec=["VARCHAR"]),
    fact("snapshot.sandbox", name="sandbox_ref"),
    fact("snapshot.environment", name="environment_ref"),
    OCCURRED_AT,
)
CLOSURES = Columns.of(
    "fork_closures",
    ["fork.closed"],
    POSITION,
    facts("run", "fork", "outcome"),
    fact("value", "DOUBLE"),
    fact("error"),
    OCCURRED_AT,
)
REPORTS = Columns.of(
    "ablation_reports",
    ["ablation.reported"],
    POSITION,
    facts("run", "stage", "fork"),
    fact("parent_reward", "DOUBLE"),
    facts("parent_error", "error"),
    fact("report", "JSON"),
    OCCURRED_AT,
)
# No join here: a page's cost must not grow with the tables (the node comes from the `tests` view).
# The test map is parsed straight into a MAP and unnested: extracting each key from the JSON again
# (`tests->>key`) costs O(tests) per key, and parsing to JSON then casting holds two copies (200,000
# tests with long names exhausted the memory cap either way).
TESTS = Columns.of(
    "test_outcomes",
    (*OUTCOME_TYPES, "run.scored"),
    POSITION,
    through("run"),
    through("fork"),
    through("idx", "INTEGER", field="index"),
    derived("test", "VARCHAR", "test.key"),
    derived("status", "VARCHAR", "test.value", tests="MAP(VARCHAR, VARCHAR)"),
    source="""(SELECT position, j.run AS run, j.fork AS fork, j."index" AS idx,
                      unnest(map_entries(j.tests)) AS test FROM {facts})""",
    tail="ORDER BY position",
)

PROJECTION = Projection.of(
    name="forks",
    version=6,
    columns=(OPENINGS, CHILDREN, OUTCOMES, RESTORES, CLOSURES, TESTS, REPORTS),
    views={
        "tests": """SELECT t.position, t.run, t.fork, t.idx, coalesce(c.node, 'root') AS node, t.test, t.status
                    FROM test_outcomes t LEFT JOIN fork_children c USING (run, fork, idx)""",  # noqa: E501
        "children": f"""
            SELECT c.run, c.fork, c.idx AS child_index, c.node, coalesce(c.arm, c.node) AS arm, c.kind AS arm_kind, c.source,
                   c.delta, c.skill_mode, c.environment_ref, c.config_override_sha256, c.injected_prompt_sha256,
                   c.config_override_keys, c.delta_execution, {CHILD_STATUS} AS status, o.kind AS outcome, o.reward,
                   o.reason, o.tests, o.wall_clock_sec, r.sandbox_ref AS restored_sandbox_ref,
                   r.environment_ref AS restored_environment_ref, o.occurred_at AS outcome_at,
                   coalesce(op.kind, 'fork') AS fork_kind, d.tokens, d.usd, d.sandbox_seconds
            FROM fork_children c
            LEFT JOIN child_outcomes o USING (run, fork, idx)
            LEFT JOIN child_restores r USING (run, fork, idx)
            LEFT JOIN fork_closures cl USING (run, fork)
            LEFT JOIN fork_openings op USING (run, fork)
            LEFT JOIN child_descriptions d USING (run, fork, idx)""",  # noqa: E501
        "forks": """
            SELECT f.run, f.fork, f.node, coalesce(f.stage, 'cursor:' || f.node) AS branch_point, f.stage, f.layers,
                   f.sandbox_ref, f.environment_ref, f.n_children,
                   count(o.idx) FILTER (WHERE o.kind = 'scored') AS n_scored,
                   count(o.idx) FILTER (WHERE o.kind = 'unscored') AS n_unscored,
                   count(o.idx) FILTER (WHERE o.kind = 'failed') AS n_failed,
                   coalesce(any_value(cl.outcome), 'open') AS outcome, any_value(cl.value) AS value,
                   CASE WHEN count(o.idx) FILTER (WHERE o.kind = 'scored') = f.n_children THEN avg(o.reward) END AS mean_reward,
                   any_value(cl.error) AS error, f.ablation IS NOT NULL AS is_ablation, f.occurred_at AS opened_at, f.position,
                   f.kind, f.reason, f.checkpoint, f.rollout, any_value(d.parent_restore) AS parent_restore,
                   any_value(d.tokens) AS tokens, any_value(d.usd) AS usd, any_value(d.usd_known) AS usd_known,
                   any_value(d.sandbox_seconds) AS sandbox_seconds
            FROM fork_openings f
            LEFT JOIN child_outcomes o USING (run, fork)
            LEFT JOIN fork_closures cl USING (run, fork)
            LEFT JOIN fork_descriptions d USING (run, fork)
            GROUP BY f.run, f.fork, f.node, f.stage, f.layers, f.sandbox_ref, f.environment_ref, f.n_children, f.ablation,
                     f.occurred_at, f.position, f.kind, f.reason, f.checkpoint, f.rollout""",  # noqa: E501
    },
    docs={
        "forks": "one row per fork: run, fork id, node, stage (or cursor), "
        "layers, snapshot refs, children counts by outcome, closing outcome, "
        "V (value) and the mean of rewards when every child was scored; kind fork or retry "
        "(a checkpoint retry, with its reason and checkpoint: never an arm), the rollout "
        "that forked (a child's node for a nested fork), its parent restore and cost (tokens, "
        "usd null when unknown, usd_known, sandbox_seconds)",
        "children": "one row per fork child: arm label and kind, "
        "delta and its hashes, delta execution, status (pass / fail "
        "/ error / skipped / pending), reward or reason, restore refs; fork_kind (a retry's "
        "child is no arm) and its cost: tokens, usd (null when unknown), sandbox_seconds",
        "tests": "one row per (run or fork child) x test: "
        "the CTRF status as reported (raw test names)",
        "test_outcomes": "the per-test rows of scored and "
        "unscored facts, before the child's node is joined in",
        "fork_openings": "fork.opened facts",
        "fork_children": "one row per child of fork.opened",
        "child_outcomes": "fork.child_scored / unscored / failed facts",
        "child_restores": "fork.child_restored facts",
        "fork_closures": "fork.closed facts",
        "ablation_reports": "ablation.reported facts: a report's parent block where "
        "result.json differs, its own error, and whole reports whose arms never ran (fork null)",
    },
)

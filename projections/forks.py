"""Forks, their children (delta, arm, outcome, status) and per-test outcomes (child x test -> status)."""

from __future__ import annotations

from .base import Projection, facts_of
from .outcome_words import CHILD_STATUS

REFS = {"sandbox": "VARCHAR", "environment": "VARCHAR"}
OPENED = {
    "run": "VARCHAR",
    "fork": "VARCHAR",
    "node": "VARCHAR",
    "stage": "VARCHAR",
    "layers": ["VARCHAR"],
    "snapshot": REFS,
    "ablation": "JSON",
    "children": [
        {
            "index": "INTEGER",
            "node": "VARCHAR",
            "arm": "VARCHAR",
            "kind": "VARCHAR",
            "source": "VARCHAR",
            "delta": "JSON",
            "delta_execution": "VARCHAR",
            "environment": "JSON",
        }
    ],
}
OUTCOME = {
    "run": "VARCHAR",
    "fork": "VARCHAR",
    "index": "INTEGER",
    "reward": "DOUBLE",
    "reason": "VARCHAR",
    "error": "VARCHAR",
    "tests": "JSON",
    "wall_clock_sec": "DOUBLE",
}
TEST_MAP = {
    "run": "VARCHAR",
    "fork": "VARCHAR",
    "index": "INTEGER",
    "tests": "MAP(VARCHAR, VARCHAR)",
}
OUTCOME_TYPES = "'fork.child_scored', 'fork.child_unscored', 'fork.child_failed'"
REPORTED = {
    "run": "VARCHAR",
    "stage": "VARCHAR",
    "fork": "VARCHAR",
    "parent_reward": "DOUBLE",
    "parent_error": "VARCHAR",
    "error": "VARCHAR",
    "report": "JSON",
}
CLOSED = {
    "run": "VARCHAR",
    "fork": "VARCHAR",
    "outcome": "VARCHAR",
    "value": "DOUBLE",
    "error": "VARCHAR",
}
RESTORED = {
    "run": "VARCHAR",
    "fork": "VARCHAR",
    "index": "INTEGER",
    "layers": ["VARCHAR"],
    "snapshot": REFS,
}


PROJECTION = Projection(
    name="forks",
    version=5,
    tables={
        "fork_openings": "position BIGINT, run VARCHAR, fork VARCHAR, node VARCHAR, stage VARCHAR, layers VARCHAR[], "
        "sandbox_ref VARCHAR, environment_ref VARCHAR, n_children INTEGER, ablation JSON, occurred_at TIMESTAMPTZ",
        "fork_children": "position BIGINT, run VARCHAR, fork VARCHAR, idx INTEGER, node VARCHAR, arm VARCHAR, kind VARCHAR, "
        "source VARCHAR, delta JSON, skill_mode VARCHAR, environment_ref VARCHAR, config_override_sha256 VARCHAR, "
        "injected_prompt_sha256 VARCHAR, config_override_keys VARCHAR[], delta_execution VARCHAR, environment JSON",
        "child_outcomes": "position BIGINT, run VARCHAR, fork VARCHAR, idx INTEGER, kind VARCHAR, reward DOUBLE, reason VARCHAR, "
        "tests JSON, wall_clock_sec DOUBLE, occurred_at TIMESTAMPTZ",
        "child_restores": "position BIGINT, run VARCHAR, fork VARCHAR, idx INTEGER, layers VARCHAR[], sandbox_ref VARCHAR, "
        "environment_ref VARCHAR, occurred_at TIMESTAMPTZ",
        "fork_closures": "position BIGINT, run VARCHAR, fork VARCHAR, outcome VARCHAR, value DOUBLE, "
        "error VARCHAR, occurred_at TIMESTAMPTZ",
        "test_outcomes": "position BIGINT, run VARCHAR, fork VARCHAR, idx INTEGER, test VARCHAR, status VARCHAR",
        "ablation_reports": "position BIGINT, run VARCHAR, stage VARCHAR, fork VARCHAR, parent_reward DOUBLE, "
        "parent_error VARCHAR, error VARCHAR, report JSON, occurred_at TIMESTAMPTZ",
    },
    apply=(
        f"""INSERT INTO fork_openings SELECT position, j.run, j.fork, j.node, j.stage, j.layers, j.snapshot.sandbox,
            j.snapshot.environment, len(j.children), j.ablation, occurred_at
            FROM {facts_of("'fork.opened'", OPENED)}""",
        f"""INSERT INTO fork_children SELECT position, run, fork, c."index", c.node, c.arm, c.kind, c.source, c.delta,
            c.delta->>'skill_mode', c.delta->>'environment_ref', c.delta->>'config_override_sha256',
            c.delta->>'injected_prompt_sha256', CAST(json_or_null(c.delta->'config_override_keys') AS VARCHAR[]),
            c.delta_execution, c.environment
            FROM (SELECT position, j.run AS run, j.fork AS fork, unnest(j.children) AS c FROM {facts_of("'fork.opened'", OPENED)})""",
        f"""INSERT INTO child_outcomes SELECT position, j.run, j.fork, j."index", replace(type, 'fork.child_', ''), j.reward,
            coalesce(j.reason, j.error), j.tests, j.wall_clock_sec, occurred_at
            FROM {facts_of(OUTCOME_TYPES, OUTCOME)}""",
        f"""INSERT INTO child_restores SELECT position, j.run, j.fork, j."index", j.layers, j.snapshot.sandbox,
            j.snapshot.environment, occurred_at
            FROM {facts_of("'fork.child_restored'", RESTORED)}""",
        f"""INSERT INTO fork_closures SELECT position, j.run, j.fork, j.outcome, j.value, j.error, occurred_at
            FROM {facts_of("'fork.closed'", CLOSED)}""",
        f"""INSERT INTO ablation_reports SELECT position, j.run, j.stage, j.fork, j.parent_reward, j.parent_error, j.error,
            j.report, occurred_at
            FROM {facts_of("'ablation.reported'", REPORTED)}""",
        # No join here: a page's cost must not grow with the tables (the node comes from the `tests` view). The test
        # map is parsed straight into a MAP and unnested: extracting each key from the JSON again (`tests->>key`)
        # costs O(tests) per key, and parsing to JSON then casting holds two copies (200,000 tests with long names
        # exhausted the memory cap either way).
        f"""INSERT INTO test_outcomes
            SELECT position, run, fork, idx, test.key, test.value FROM (
                SELECT position, j.run AS run, j.fork AS fork, j."index" AS idx, unnest(map_entries(j.tests)) AS test
                FROM {facts_of(OUTCOME_TYPES + ", 'run.scored'", TEST_MAP)})
            ORDER BY position""",
    ),
    views={
        "tests": """SELECT t.position, t.run, t.fork, t.idx, coalesce(c.node, 'root') AS node, t.test, t.status
                    FROM test_outcomes t LEFT JOIN fork_children c USING (run, fork, idx)""",
        "children": f"""
            SELECT c.run, c.fork, c.idx AS child_index, c.node, coalesce(c.arm, c.node) AS arm, c.kind AS arm_kind, c.source,
                   c.delta, c.skill_mode, c.environment_ref, c.config_override_sha256, c.injected_prompt_sha256,
                   c.config_override_keys, c.delta_execution, {CHILD_STATUS} AS status, o.kind AS outcome, o.reward,
                   o.reason, o.tests, o.wall_clock_sec, r.sandbox_ref AS restored_sandbox_ref,
                   r.environment_ref AS restored_environment_ref, o.occurred_at AS outcome_at
            FROM fork_children c
            LEFT JOIN child_outcomes o USING (run, fork, idx)
            LEFT JOIN child_restores r USING (run, fork, idx)
            LEFT JOIN fork_closures cl USING (run, fork)""",
        "forks": """
            SELECT f.run, f.fork, f.node, coalesce(f.stage, 'cursor:' || f.node) AS branch_point, f.stage, f.layers,
                   f.sandbox_ref, f.environment_ref, f.n_children,
                   count(o.idx) FILTER (WHERE o.kind = 'scored') AS n_scored,
                   count(o.idx) FILTER (WHERE o.kind = 'unscored') AS n_unscored,
                   count(o.idx) FILTER (WHERE o.kind = 'failed') AS n_failed,
                   coalesce(any_value(cl.outcome), 'open') AS outcome, any_value(cl.value) AS value,
                   CASE WHEN count(o.idx) FILTER (WHERE o.kind = 'scored') = f.n_children THEN avg(o.reward) END AS mean_reward,
                   any_value(cl.error) AS error, f.ablation IS NOT NULL AS is_ablation, f.occurred_at AS opened_at, f.position
            FROM fork_openings f
            LEFT JOIN child_outcomes o USING (run, fork)
            LEFT JOIN fork_closures cl USING (run, fork)
            GROUP BY f.run, f.fork, f.node, f.stage, f.layers, f.sandbox_ref, f.environment_ref, f.n_children, f.ablation,
                     f.occurred_at, f.position""",
    },
    docs={
        "forks": "one row per fork: run, fork id, node, stage (or cursor), layers, snapshot refs, children counts by outcome, "
        "closing outcome, V (value) and the mean of rewards when every child was scored",
        "children": "one row per fork child: arm label and kind, delta and its hashes, delta execution, status "
        "(pass / fail / error / skipped / pending), reward or reason, restore refs",
        "tests": "one row per (run or fork child) x test: the CTRF status as reported (raw test names)",
        "test_outcomes": "the per-test rows of scored and unscored facts, before the child's node is joined in",
        "fork_openings": "fork.opened facts",
        "fork_children": "one row per child of fork.opened",
        "child_outcomes": "fork.child_scored / unscored / failed facts",
        "child_restores": "fork.child_restored facts",
        "fork_closures": "fork.closed facts",
        "ablation_reports": "ablation.reported facts: a report's parent block where result.json differs, its own error, "
        "and whole reports whose arms never ran (fork null)",
    },
)

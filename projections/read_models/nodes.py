"""The rollout tree: every node of every run, and SQL helpers to walk it.

`ancestors(run, node)`, `descendants(run, node)` and `lineage_path(run, a, b)` are DuckDB table
macros, so they work from `lineage sql` as well as from our own queries.
"""

from __future__ import annotations

from .base import Projection, facts_of

PROJECTION = Projection(
    name="nodes",
    version=1,
    tables={
        "nodes": "position BIGINT, run VARCHAR, node VARCHAR, parent "
        "VARCHAR, fork VARCHAR, child_index INTEGER, kind VARCHAR"
    },
    apply=(
        f"""INSERT INTO nodes
            SELECT position, j.run, coalesce(j.node, 'root'), j.parent, NULL, NULL, CASE WHEN j.node IS NULL THEN 'root' ELSE 'linear' END
            FROM {
            facts_of(
                "'run.registered', 'run.node_opened'",
                {"run": "VARCHAR", "node": "VARCHAR", "parent": "VARCHAR"},
            )
        }
            UNION ALL
            SELECT position, run, child.node, fork_node, fork, child."index", 'child' FROM (
                SELECT position, j.run AS run, j.node AS fork_node, j.fork AS fork, unnest(j.children) AS child
                FROM {
            facts_of(
                "'fork.opened'",
                {
                    "run": "VARCHAR",
                    "node": "VARCHAR",
                    "fork": "VARCHAR",
                    "children": [{"index": "INTEGER", "node": "VARCHAR"}],
                },
            )
        })
            ORDER BY position""",  # noqa: E501
    ),
    macros=(
        """CREATE OR REPLACE MACRO ancestors(run_key, node_id) AS TABLE
           WITH RECURSIVE up(node, parent, depth) AS (
               SELECT node, parent, 0 FROM nodes WHERE run = run_key AND node = node_id
               UNION ALL
               SELECT n.node, n.parent, up.depth + 1 FROM nodes n JOIN up ON n.run = run_key AND n.node = up.parent)
           SELECT node, parent, depth FROM up""",  # noqa: E501
        """CREATE OR REPLACE MACRO descendants(run_key, node_id) AS TABLE
           WITH RECURSIVE down(node, parent, depth) AS (
               SELECT node, parent, 0 FROM nodes WHERE run = run_key AND node = node_id
               UNION ALL
               SELECT n.node, n.parent, down.depth + 1 FROM nodes n JOIN down ON n.run = run_key AND n.parent = down.node)
           SELECT node, parent, depth FROM down""",  # noqa: E501
        """CREATE OR REPLACE MACRO lineage_path(run_key, from_node, to_node) AS TABLE
           WITH a AS (SELECT * FROM ancestors(run_key, from_node)), b AS (SELECT * FROM ancestors(run_key, to_node)),
                meet AS (SELECT a.node, a.depth AS da, b.depth AS db FROM a JOIN b USING (node) ORDER BY a.depth LIMIT 1)
           SELECT node, step FROM (
               SELECT a.node, a.depth AS step FROM a, meet WHERE a.depth <= meet.da
               UNION ALL
               SELECT b.node, meet.da + meet.db - b.depth AS step FROM b, meet WHERE b.depth < meet.db)
           ORDER BY step""",  # noqa: E501
    ),
    docs={
        "nodes": "every node of every run's rollout tree: root, "
        "linear cursor nodes and fork children (fork, child_index)",
        "ancestors(run, node)": "table macro: the node and its ancestors up to root, with depth",
        "descendants(run, node)": "table macro: the node and everything below it, with depth",
        "lineage_path(run, a, b)": "table macro: the nodes on the "
        "path from a up to the common ancestor and down to b",
    },
)

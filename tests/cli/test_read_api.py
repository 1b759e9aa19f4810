"""The Python read API beside the write API: `Lineage.sql`, `.arrow()`, `.df()`, with `lineage
sql`'s rules."""

from __future__ import annotations

import pytest

from rollout_lineage import Lineage
from rollout_lineage.domain.errors import InvalidInput
from tests.scenarios import ablate_run_facts


def test_sql_returns_one_dict_per_row_and_binds_parameters(lineage: Lineage) -> None:
    lineage.record(ablate_run_facts())
    rows = lineage.sql(
        "SELECT arm, status, reward FROM children WHERE status = $status ORDER BY child_index",
        {"status": "pass"},
    )
    assert rows and all(set(row) == {"arm", "status", "reward"} for row in rows)
    assert {row["status"] for row in rows} == {"pass"}
    assert lineage.sql("SELECT count(*) AS n FROM runs WHERE run = $r", {"r": "' OR 1=1 --"}) == [
        {"n": 0}
    ]


def test_as_of_answers_from_a_prefix_of_the_log(lineage: Lineage) -> None:
    first = lineage.record(ablate_run_facts()).position
    assert lineage.sql("SELECT count(*) AS n FROM events", as_of=1) == [{"n": 1}]
    assert lineage.sql("SELECT count(*) AS n FROM events") == [{"n": first}]


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM events_table_does_not_matter",
        "CREATE TABLE x AS SELECT 1",
        "EXPLAIN ANALYZE DELETE FROM runs",
        "WITH d AS (DELETE FROM runs RETURNING *) SELECT * FROM d",
    ],
)
def test_the_read_api_refuses_writes_like_the_cli(lineage: Lineage, query: str) -> None:
    lineage.record(ablate_run_facts())
    before = lineage.sql("SELECT count(*) AS n FROM runs")
    with pytest.raises(InvalidInput):
        lineage.sql(query)
    with pytest.raises(InvalidInput):
        lineage.arrow(query)
    assert lineage.sql("SELECT count(*) AS n FROM runs") == before


def test_arrow_and_df_give_the_same_answer_as_sql(lineage: Lineage) -> None:
    lineage.record(ablate_run_facts())
    query = "SELECT arm, reward FROM children WHERE run = $run ORDER BY child_index"
    run = lineage.sql("SELECT run FROM runs LIMIT 1")[0]["run"]
    rows = lineage.sql(query, {"run": run})
    table = lineage.arrow(query, {"run": run})
    assert table.column_names == ["arm", "reward"] and table.to_pylist() == rows
    frame = lineage.df(query, {"run": run})
    assert list(frame.columns) == ["arm", "reward"] and frame["arm"].tolist() == [
        r["arm"] for r in rows
    ]

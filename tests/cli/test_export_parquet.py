"""`lineage export parquet DIR`: every read model as a Parquet file DuckDB wrote, with users' SQL
still sealed."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from rollout_lineage.bootstrap import Lineage
from tests.conftest import EXAMPLES, Cli
from tests.scenarios import ablate_run_facts


def parquet_rows(path: Path, query: str = "SELECT * FROM t ORDER BY ALL") -> list[tuple]:
    with duckdb.connect() as connection:
        connection.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{path}')")
        return connection.execute(query).fetchall()


def test_every_read_model_is_written_and_reads_back_equal(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    out = tmp_path / "parquet"
    listed = json.loads(run_cli("export", "parquet", str(out), "--format", "json").stdout)
    tables = json.loads(run_cli("tables", "--format", "json").stdout)
    expected = {t["name"] for t in tables if t["kind"] in ("view", "table")}
    assert {row["relation"] for row in listed} == expected
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{name}.parquet" for name in expected)
    children = json.loads(
        run_cli(
            "sql",
            "SELECT run, fork, child_index, arm, status, reward FROM children ORDER BY ALL",
            "--format",
            "json",
        ).stdout
    )
    assert parquet_rows(
        out / "children.parquet",
        "SELECT run, fork, child_index, arm, status, reward FROM t ORDER BY ALL",
    ) == [tuple(row.values()) for row in children]
    counts = {row["relation"]: row["rows"] for row in listed}
    assert counts["events"] == int(run_cli("head").stdout.split(":")[0])
    assert parquet_rows(out / "runs.parquet", "SELECT count(*) FROM t") == [(counts["runs"],)]


def test_as_of_writes_the_log_as_it_stood(lineage: Lineage, run_cli: Cli, tmp_path: Path) -> None:
    before = lineage.record(ablate_run_facts(with_late_reward=False)).position
    lineage.record(ablate_run_facts())
    run_cli("export", "parquet", str(tmp_path / "then"), "--as-of", str(before))
    run_cli("export", "parquet", str(tmp_path / "now"))
    status = "SELECT status FROM t ORDER BY child_index"
    assert parquet_rows(tmp_path / "then" / "children.parquet", status)[-1] == ("pending",)
    assert parquet_rows(tmp_path / "now" / "children.parquet", status)[-1] == ("pass",)


def test_users_sql_still_cannot_touch_files(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    out = tmp_path / "parquet"
    run_cli("export", "parquet", str(out))
    for query in (
        f"SELECT count(*) FROM read_parquet('{out / 'runs.parquet'}')",
        f"COPY (SELECT 1) TO '{out / 'x.parquet'}' (FORMAT parquet)",
    ):
        result = run_cli("sql", query, ok=False)
        assert result.exit_code == 1, query
    assert not (out / "x.parquet").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_a_file_where_the_directory_should_be_is_refused(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    target = tmp_path / "taken"
    target.write_text("keep me")
    result = run_cli("export", "parquet", str(target), ok=False)
    assert result.exit_code == 2 and "is a file" in result.stderr  # a usage error
    assert target.read_text() == "keep me"


def test_a_directory_that_cannot_be_made_is_refused_plainly(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    (tmp_path / "a-file").write_text("keep me")
    result = run_cli("export", "parquet", str(tmp_path / "a-file" / "sub"), ok=False)
    assert result.exit_code == 1 and "expected to create the directory" in result.stderr
    assert (tmp_path / "a-file").read_text() == "keep me"


def test_a_folder_named_like_an_export_file_is_refused_before_anything_is_replaced(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Found only while moving the files in, it would leave DIR half replaced (an attack review's
    find)."""
    run_cli("import", str(EXAMPLES / "pr-layout"))
    target = tmp_path / "out"
    target.mkdir()
    (target / "stages.parquet").mkdir()
    (target / "runs.parquet").write_text("an older export")
    result = run_cli("export", "parquet", str(target), ok=False)
    assert result.exit_code == 1 and "found a directory of that name" in result.stderr
    assert sorted(p.name for p in target.iterdir()) == ["runs.parquet", "stages.parquet"]
    assert (target / "runs.parquet").read_text() == "an older export"

"""Find the store, never invent one (issue #15): like git and dvc, the nearest `.lineage/` in this folder or a parent;
read commands with no store say where they looked; `init`, `import` and `ingest` create one and say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rollout_lineage.cli.main import cli

LINE = json.dumps({"type": "run.registered", "run": "jobs/t__1", "task": "t"}) + "\n"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("LINEAGE_HOME", "LINEAGE_STORE"):
        monkeypatch.delenv(name, raising=False)
    project = tmp_path / "project"
    (project / "runs" / "deep").mkdir(parents=True)
    monkeypatch.chdir(project)
    return project


def lineage(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_a_read_command_with_no_store_says_where_it_looked_and_creates_nothing(here: Path) -> None:
    result = lineage("sql", "SELECT 1")
    assert result.exit_code == 1
    assert (
        "no lineage store here" in result.stderr
        and str(here) in result.stderr
        and "lineage init" in result.stderr
    )
    assert not (here / ".lineage").exists()
    assert lineage("sql", "--help").exit_code == 0  # help needs no store


def test_init_creates_once_and_commands_find_it_from_a_sub_folder(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "created an empty lineage store at" in lineage("init").stderr
    assert "already at" in lineage("init").stderr
    monkeypatch.chdir(here / "runs" / "deep")
    assert lineage("ingest", "-", input=LINE).exit_code == 0
    assert not (here / "runs" / "deep" / ".lineage").exists()
    out = lineage("sql", "SELECT run FROM runs", "--format", "csv").stdout
    assert out == "run\njobs/t__1\n"


def test_ingest_creates_a_store_where_none_is_and_says_so(here: Path) -> None:
    result = lineage("ingest", "-", input=LINE)
    assert result.exit_code == 0 and "created a new lineage store at" in result.stderr
    assert (here / ".lineage" / "events.sqlite").exists()
    assert "created" not in lineage("ingest", "-", input=LINE).stderr


def test_a_refused_first_ingest_leaves_no_store_behind(here: Path) -> None:
    assert lineage("ingest", "-", input="{not json\n").exit_code == 1
    assert not (here / ".lineage").exists()


def test_reading_a_file_that_is_not_a_lineage_store_says_so(tmp_path: Path) -> None:
    """Read commands open the SQLite file read-only by themselves (no write side): a file that is not a lineage
    store is reported as such (exit 4), and nothing is written to it."""
    from tests.conftest import Cli

    home = tmp_path / ".lineage"
    home.mkdir()
    (home / "events.sqlite").write_bytes(b"not a database, just bytes" * 100)
    before = (home / "events.sqlite").read_bytes()
    for command in (["sql", "SELECT 1"], ["verify"], ["tables"]):
        result = Cli(home)(*command, ok=False)
        assert result.exit_code == 4, (command, result.output)
        assert "expected a lineage SQLite store" in result.stderr, result.stderr
    assert (home / "events.sqlite").read_bytes() == before

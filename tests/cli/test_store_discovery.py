"""Find the store, never invent one (issue #15): like git and dvc, the nearest `.lineage/` in this
folder or a parent; read commands with no store say where they looked; `init`, `import` and `ingest`
create one and say so."""

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
    """Read commands open the SQLite file read-only by themselves (no write side): a file that is
    not a lineage store is reported as such (exit 4), and nothing is written to it."""
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


def test_init_below_a_folder_with_a_store_creates_one_here(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `git init`: it said "created an empty lineage store at PARENT/.lineage" and made nothing
    here."""
    assert lineage("init").exit_code == 0
    sub = here / "runs"
    monkeypatch.chdir(sub)
    result = lineage("init")
    assert result.exit_code == 0
    assert (
        f"created an empty lineage store at {sub / '.lineage' / 'events.sqlite'}" in result.stderr
    )
    assert (sub / ".lineage" / "events.sqlite").is_file()
    assert "already at" in lineage("init").stderr


def test_import_and_ingest_below_a_store_use_it_and_say_which(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import EXAMPLES

    assert lineage("init").exit_code == 0
    monkeypatch.chdir(here / "runs" / "deep")
    said = f"using the lineage store at {here / '.lineage'} (found in a parent folder"
    ingested = lineage("ingest", "-", input=LINE)
    assert ingested.exit_code == 0 and said in ingested.stderr
    imported = lineage("import", str(EXAMPLES / "pr-layout" / "jobs"))
    assert imported.exit_code == 0 and said in imported.stderr
    assert not (here / "runs" / "deep" / ".lineage").exists()
    # Readers find it too, without a word; in the store's own folder writers say nothing either.
    read = lineage("sql", "SELECT count(*) AS n FROM runs", "--format", "csv")
    assert read.stdout != "n\n0\n" and "using" not in read.stderr
    monkeypatch.chdir(here)
    assert "using" not in lineage("ingest", "-", input=LINE).stderr


def test_ceiling_directories_stop_the_search_as_git_does(
    here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert lineage("init").exit_code == 0
    deep = here / "runs" / "deep"
    monkeypatch.chdir(deep)
    monkeypatch.setenv("LINEAGE_CEILING_DIRECTORIES", f"/nonexistent:{here}")
    refused = lineage("sql", "SELECT 1")
    assert refused.exit_code == 1 and "no lineage store here" in refused.stderr
    assert str(here) + "," not in refused.stderr and str(here / "runs") in refused.stderr
    created = lineage("ingest", "-", input=LINE)
    assert created.exit_code == 0
    assert f"created a new lineage store at {deep / '.lineage'}" in created.stderr
    # The folder one stands in is always looked at, even when it is a ceiling itself.
    monkeypatch.setenv("LINEAGE_CEILING_DIRECTORIES", str(here))
    monkeypatch.chdir(here)
    assert lineage("sql", "SELECT 1").exit_code == 0
    # A relative entry is refused, not skipped: a search that crossed it could open another's store.
    monkeypatch.setenv("LINEAGE_CEILING_DIRECTORIES", "runs")
    bad = lineage("sql", "SELECT 1")
    assert bad.exit_code == 1 and "LINEAGE_CEILING_DIRECTORIES" in bad.stderr
    assert "'runs'" in bad.stderr


def test_the_suite_searches_no_folder_above_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/conftest.py sets the ceiling: two tests here failed, and the suite wrote an
    events.sqlite, when a parent folder such as /tmp held a `.lineage/`."""
    from rollout_lineage.settings import Settings
    from tests.conftest import REPO

    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    searched = Settings.from_env().searched
    assert searched == (str(tmp_path / "a" / "b"), str(tmp_path / "a"), str(tmp_path))
    monkeypatch.chdir(REPO)
    assert set(Settings.from_env().searched) <= {str(REPO)}


def test_a_store_named_by_url_keeps_its_read_models_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`open_store("sqlite:///data/events.sqlite")` wrote ./.lineage/projections-<hash>.duckdb
    wherever the harness stood; `--store` did the same for the CLI."""
    from rollout_lineage import facts, open_store

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    data = tmp_path / "data"
    url = f"sqlite:///{data / 'events.sqlite'}"
    with open_store(url) as store:
        store.record([facts.RunRegistered(run="jobs/t__1", task="t")])
        assert store.sql("SELECT count(*) AS n FROM runs") == [{"n": 1}]
    other = f"sqlite:///{data / 'other.sqlite'}"
    result = lineage("--store", other, "ingest", "-", input=LINE)
    assert result.exit_code == 0, result.output
    read = lineage("--store", other, "sql", "SELECT run FROM runs", "--format", "csv")
    assert read.stdout == "run\njobs/t__1\n"
    assert not (work / ".lineage").exists(), sorted(work.rglob("*"))
    assert (data / "projections.duckdb").is_file()
    assert len(list(data.glob("projections-*.duckdb"))) == 1  # other.sqlite's, beside it
    # The CLI given the folder as home reads the same file the API made.
    shared = lineage(
        "--home", str(data), "sql", "SELECT count(*) AS n FROM runs", "--format", "csv"
    )
    assert shared.stdout == "n\n1\n"

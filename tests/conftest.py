"""Shared fixtures: a fresh store per test, the CLI runner, and the real services of the integration
layer.

Integration tests skip when PostgreSQL or a Docker engine is absent on a developer's machine, but CI
sets LINEAGE_REQUIRE_INTEGRATION=1 (see .ci/run), where a missing service is a failure, never a
silent skip.
"""

from __future__ import annotations

import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import settings

from rollout_lineage.adapters.duckdb_store import ReadModelDB
from rollout_lineage.bootstrap import Lineage, in_memory
from rollout_lineage.cli.main import cli
from rollout_lineage.projections.read_models.registry import PROJECTIONS
from rollout_lineage.settings import CEILING_ENV, Settings

# CI replays the same fuzz examples every run (a failure there is reproducible, never a coin toss);
# a developer's run explores new ones. LINEAGE_FUZZ_SCALE (see tests/fuzz_strategies.py) widens
# either.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture(autouse=True)
def store_search_stays_in_the_test(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test finds, reads or writes a store outside its own folders: the search for a `.lineage/`
    never goes up past the test's temporary folder (or the checkout it runs from), and no store,
    home or cache named in the developer's environment is used. Scratch files (a served copy, an
    `--as-of` rebuild) go to a temporary directory of the test's own, in this process and in the
    commands it starts, so `lineage serve`'s sweep of abandoned copies sees only the test's."""
    monkeypatch.setenv(CEILING_ENV, os.pathsep.join([str(tmp_path.parent), str(REPO.parent)]))
    for name in ("LINEAGE_HOME", "LINEAGE_STORE", "LINEAGE_SIGNING_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LINEAGE_CACHE", str(tmp_path / "lineage-cache"))
    scratch = tmp_path_factory.mktemp("tempdir")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setenv("TMPDIR", str(scratch))


@pytest.fixture
def ctrl_c_delivered() -> Iterator[None]:
    """SIGINT handled as Python handles it by default, in the test and in the processes it starts. A
    script that runs pytest in the background (`pytest &`, no job control) starts it with SIGINT
    ignored, and an ignored signal stays ignored in every child: each Ctrl-C test then interrupted
    nothing."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if before is None else before)


def integration_unavailable(reason: str) -> None:
    if os.environ.get("LINEAGE_REQUIRE_INTEGRATION") == "1":
        pytest.fail(f"{reason}, but LINEAGE_REQUIRE_INTEGRATION=1 says it must be available here")
    pytest.skip(reason)


class Cli:
    """`lineage ...` against one store, through click's CliRunner."""

    def __init__(self, home: Path, store: str | None = None) -> None:
        self.home = home
        self.store = store
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | bytes | None = None, ok: bool = True) -> Result:
        base = ["--home", str(self.home), "--actor", "tester@lab"]
        if self.store:
            base += ["--store", self.store]
        result = self.runner.invoke(cli, [*base, *args], input=input, catch_exceptions=False)
        if ok and result.exit_code != 0:
            raise AssertionError(
                f"lineage {' '.join(args)} exited {result.exit_code}:\n"
                f"{result.output}\n{result.stderr}"
            )
        return result


def open_lineage(store_url: str, home: Path | str) -> Lineage:
    """A store at any URL, opened as a test's writer would."""
    return Lineage(Settings.from_env({}, store=store_url, home=home, actor="tester@lab"))


def table_contents(db: ReadModelDB) -> dict[str, list[tuple]]:
    """Every projection table's rows (positions aside), to compare a caught-up database with a fresh
    rebuild."""
    names = sorted(name for p in PROJECTIONS for name in p.tables)
    return {
        name: db.connection.execute(
            f"SELECT * EXCLUDE (position) FROM {name} ORDER BY ALL"
        ).fetchall()
        for name in names
    }


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same scenario on the embedded SQLite file and on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'events.sqlite'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def store_env(store_url: str) -> dict[str, str]:
    """`store_url` as the application's settings (its SQLite file's folder made)."""
    from rollout_lineage.adapters.store.store_url import StoreURL

    if store_url.startswith("sqlite:///"):
        Path(store_url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return StoreURL.parse(store_url).application_env()


@pytest.fixture
def two_apps(store_env: dict[str, str]) -> Iterator[tuple[Any, Any]]:
    """Two writers on one store, each with its own application (and cache), as two processes."""
    from rollout_lineage.domain.application import LineageApp

    first = LineageApp(env=store_env, actor="first@lab", tool_version="tests")
    second = LineageApp(env=store_env, actor="second@lab", tool_version="tests")
    yield first, second
    first.close()
    second.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def run_cli(home: Path) -> Cli:
    """The CLI on an empty store made with `lineage init` (read commands never create one)."""
    cli = Cli(home)
    cli("init")
    return cli


@pytest.fixture
def lineage(home: Path) -> Iterator[Lineage]:
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as store:
        yield store


@pytest.fixture
def memory_lineage(tmp_path: Path) -> Iterator[Lineage]:
    """A store whose log lives in memory (hash chain included), for tests that need no SQLite
    file."""
    with in_memory(tmp_path / "memory-home", actor="tester@lab") as store:
        yield store


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh schema in the CI database per test, so tests never see each other's events."""
    base = os.environ.get("LINEAGE_TEST_POSTGRES_URL")
    if not base:
        integration_unavailable("LINEAGE_TEST_POSTGRES_URL is not set (no PostgreSQL server)")
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {schema}")
    except psycopg.OperationalError as exc:
        integration_unavailable(f"PostgreSQL at {base} is unreachable: {exc}")
    yield f"{base}?schema={schema}"
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA {schema} CASCADE")

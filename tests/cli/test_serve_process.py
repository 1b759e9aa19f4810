"""`lineage serve` as a process beside the other commands: they read and catch up while it runs, and
a signal stops it with the shell's code (Ctrl-C 130, SIGTERM 143), one line on stderr, its scratch
copy removed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rollout_lineage.domain import facts as f
from tests.conftest import EXAMPLES, REPO, Cli, open_lineage
from tests.serve_process import get, serving

pytestmark = pytest.mark.slow


def lineage_command(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A read command in its own process, with a short lock timeout: waiting on the server would
    fail it."""
    return subprocess.run(
        [sys.executable, "-m", "rollout_lineage.cli", "--home", str(home), *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "LINEAGE_LOCK_TIMEOUT": "3"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    return home


def test_runs_and_sql_catch_up_beside_a_running_server(home: Path, tmp_path: Path) -> None:
    scratch = {p.name for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("lineage-serve-*")}
    with serving(home, env={"TMPDIR": str(tmp_path)}) as (_process, base):
        (copy,) = list(tmp_path.glob("lineage-serve-*"))  # the server's own read models
        with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as writer:
            writer.record([f.RunRegistered(run="beside/serve", task="beside")])
        # both must catch the store's read models up past the new event, with the server running
        runs = lineage_command(home, "runs", "--task", "beside", "--format", "json")
        assert runs.returncode == 0, runs.stderr
        assert [row["run"] for row in json.loads(runs.stdout)] == ["beside/serve"]
        with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as writer:
            writer.record([f.RunRegistered(run="beside/sql", task="beside")])
        sql = lineage_command(
            home, "sql", "SELECT count(*) AS n FROM runs WHERE task = 'beside'", "--format", "json"
        )
        assert sql.returncode == 0, sql.stderr
        assert json.loads(sql.stdout) == [{"n": 2}]
        status, body = get(f"{base}/api/runs?task=beside&sort=run")
        assert status == 200
        assert [r["run"] for r in json.loads(body)["runs"]] == ["beside/serve", "beside/sql"]
        assert copy.exists()
    assert not copy.exists()  # removed when the server stopped
    assert {
        p.name for p in Path(os.environ.get("TMPDIR", "/tmp")).glob("lineage-serve-*")
    } <= scratch


@pytest.mark.parametrize(
    ("number", "code", "line"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_signal_stops_the_server_with_the_shells_code(
    home: Path, tmp_path: Path, number: int, code: int, line: str
) -> None:
    with serving(home, env={"TMPDIR": str(tmp_path)}) as (process, base):
        assert get(f"{base}/charts")[0] == 200
        process.send_signal(number)
        assert process.wait(timeout=60) == code
        assert process.stderr is not None
        assert process.stderr.read().decode().splitlines()[-1] == line
    assert not list(tmp_path.glob("lineage-serve-*"))


def test_ctrl_c_stops_a_server_that_inherited_sigint_ignored(home: Path, tmp_path: Path) -> None:
    """A shell starts a background job with SIGINT ignored; uvicorn's re-raise then ended it with
    exit 0."""
    # inherited by the child, as from `cmd &`
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        context = serving(home, env={"TMPDIR": str(tmp_path)})
        process, _base = context.__enter__()
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
    finally:
        context.__exit__(None, None, None)


def test_a_killed_servers_copy_is_removed_by_the_next_and_a_live_ones_is_not(
    home: Path, tmp_path: Path
) -> None:
    """kill -9 skips the server's own cleanup, and its copy of the read models (gigabytes on a big
    store) stayed in the temporary directory for good. The next server to start removes it, never a
    copy whose server still runs, nor a folder it cannot tell is a server's (no lock file)."""
    env = {"TMPDIR": str(tmp_path)}
    unknown = tmp_path / "lineage-serve-unknown"
    unknown.mkdir()
    with serving(home, env=env) as (killed, _base):
        (abandoned,) = set(tmp_path.glob("lineage-serve-*")) - {unknown}
        killed.kill()
        killed.wait(timeout=60)
    assert abandoned.exists(), "kill -9 ran the server's cleanup: nothing to test"
    with serving(home, env=env) as (_first, _base):
        (live,) = set(tmp_path.glob("lineage-serve-*")) - {unknown}
        assert live != abandoned and not abandoned.exists()
        with serving(home, env=env) as (_second, _base):
            copies = set(tmp_path.glob("lineage-serve-*")) - {unknown}
            assert live in copies and len(copies) == 2, "a running server's copy was removed"
    assert unknown.exists()
    assert set(tmp_path.glob("lineage-serve-*")) == {unknown}


#: Loaded by the server's interpreter (`sitecustomize`): the first chain walk runs a query that
#: never ends, in and out of DuckDB's engine, as a long walk of a large log is when a signal comes.
ENDLESS_WALK = """
import duckdb
from rollout_lineage.cli import serve_cmds

def endless(self):
    connection = duckdb.connect()
    while True:
        connection.execute("SELECT sum(range) FROM range(3000000)").fetchall()

serve_cmds.ChainChecks._check = endless
"""


@pytest.mark.parametrize(
    ("number", "code", "line"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_signal_during_the_first_chain_walk_ends_with_one_line(
    home: Path, tmp_path: Path, number: int, code: int, line: str
) -> None:
    """CI saw exit -6 (DuckDB's bindings aborting) and a traceback from the Merkle store when the
    signal came while the background walk was still inside the store: the interpreter was finalised
    under it. The walk here never ends, so the moment does not depend on timing."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(ENDLESS_WALK, encoding="utf-8")
    env = {"TMPDIR": str(tmp_path), "PYTHONPATH": f"{hook}{os.pathsep}{REPO}"}
    with serving(home, env=env) as (process, base):
        assert get(f"{base}/api/runs")[0] == 200
        process.send_signal(number)
        assert process.wait(timeout=60) == code
        assert process.stderr is not None
        assert process.stderr.read().decode().splitlines()[-1] == line
    assert not list(tmp_path.glob("lineage-serve-*"))

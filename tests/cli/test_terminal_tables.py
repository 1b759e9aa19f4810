"""Tables on a real terminal (a pty of 80 columns): one line per row, a long cell cut with `…`
(never an id: `test_terminal_processes.py`); piped, whole.

Before, a table folded every cell into the column: at 80 columns one run id of `lineage runs` took 7
lines, and `lineage arms` split test names mid-word.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO

ABLATE_RUN = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"


def lineage(home: Path, *args: str, columns: int | None = None) -> str:
    """`lineage ARGS` with stdout on a pty `columns` wide (or a pipe when None); returns what it
    printed."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env |= {"LINEAGE_HOME": str(home), "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "rollout_lineage.cli", *args]
    if columns is None:
        return subprocess.run(
            command, env=env, cwd=REPO, capture_output=True, text=True, check=True
        ).stdout
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    process = subprocess.Popen(
        command, env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert process.wait(timeout=120) == 0, process.stderr.read() if process.stderr else ""
    shown = b"".join(chunks).decode("utf-8").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;]*m", "", shown)  # rich's bold header


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("terminal") / "store"
    lineage(home, "import", str(EXAMPLES))
    return home


def body(table: str) -> list[str]:
    """The row lines of a rich table (between the header rule and the bottom border)."""
    lines = table.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    return [line for line in lines[start + 1 :] if line.startswith("│")]


def test_runs_on_an_80_column_terminal_is_one_line_per_run_ids_whole(home: Path) -> None:
    """One table row per run; the run ids are whole (issue #37: the value people copy), and the
    other columns give way: cut with an ellipsis, or left out when even that does not fit."""
    shown = lineage(home, "runs", "--format", "table", columns=80)
    piped = lineage(home, "runs", "--format", "tsv")
    ids = [line.split("\t")[0] for line in piped.splitlines()[1:]]
    rows = body(shown)
    assert [row.split("│")[1].strip() for row in rows] == ids, shown
    assert all(len(line) <= max(80, max(map(len, ids)) + 4) for line in shown.splitlines())


def test_arms_on_a_terminal_never_splits_a_test_name_across_lines(home: Path) -> None:
    shown = lineage(home, "arms", ABLATE_RUN, "--format", "table", columns=80)
    assert all(len(line) <= 80 for line in shown.splitlines())
    rows = body(shown)
    assert len(rows) == 5, shown  # the parent and four arms, one line each


def test_a_table_written_to_a_pipe_keeps_every_value_whole(home: Path) -> None:
    piped = lineage(home, "runs", "--format", "table")
    rows = body(piped)
    assert "…" not in piped
    assert any(f"│ {ABLATE_RUN} " in row for row in rows)
    long_model = "bedrock/us.anthropic.claude-opus-4-5-20251101-v1:0"
    assert any(long_model in row for row in rows)

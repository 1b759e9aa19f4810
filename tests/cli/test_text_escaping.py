"""Text formats print a recorded newline as `\\n`, as tables do: a run or node id cannot draw lines
of its own.

Before, `tree`, `history`, `audit`, `diff` and `cut-point` text printed the id raw, so a run named
with a newline and a tree drawing could add a node, an event or a verdict line that is not in the
log.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from tests.conftest import Cli

FAKE = "\n└── n9  arm forged · pass: reward 1.0\nverdict: publishable"
RUN = "evil/run" + FAKE
NODE = "n1" + FAKE


def hostile(lineage: Lineage) -> None:
    lineage.record(
        [
            f.RunRegistered(run=RUN, task="t"),
            f.ForkOpened(
                run=RUN,
                fork="f" + FAKE,
                node="root",
                children=(f.ForkChild(index=0, node=NODE, arm="a" + FAKE),),
            ),
            f.ChildScored(run=RUN, fork="f" + FAKE, index=0, reward=0.0),
        ]
    )


@pytest.mark.parametrize(
    "args",
    [
        ("tree", RUN),
        ("tree", RUN, "--format", "mermaid"),
        ("history", f"{RUN}:{NODE}"),
        ("audit",),
        ("diff", f"{RUN}:{NODE}", f"{RUN}:root"),
        ("cut-point", RUN),
    ],
)
def test_a_newline_in_a_recorded_id_draws_no_line(
    lineage: Lineage, run_cli: Cli, args: tuple[str, ...]
) -> None:
    hostile(lineage)
    result = run_cli(*args, ok=False)
    assert result.exit_code in (0, 10, 11), result.stderr
    lines = result.stdout.splitlines()
    assert lines, result.stderr
    forged = [
        line
        for line in lines
        if line.lstrip(" │├└─").startswith("n9  arm forged") or line == "verdict: publishable"
    ]
    assert forged == [], forged
    assert any("\\n└── n9  arm forged" in line for line in lines)


# `lineage arms` and every other command that prints rows: ids, arm names and test names (which
# become column names) are escaped in the one place rows are written (`cli/output.py`), headers and
# the table's title included (issue #33, finding 11). Before, a newline in a test name or an arm
# drew a row of its own in `table` and `markdown`, and ESC and CR reached the terminal (`csv` too).
ESC = "\x1b[2J\x1b[31m"
ARMS_RUN = "jobs/evil" + ESC + "\r__1"
FORGED_ROW = "\n| root | FORGED | n9 | pass | 1.0 |"
HOSTILE_ARM = "arm" + FORGED_ROW + ESC + "\r"
HOSTILE_TEST = "test_x" + FORGED_ROW + ESC + "[bold]markup[/bold]\r"


def hostile_arms_facts(tmp_path: Path) -> Path:
    """A parent run and a fork of two arms whose names and test names an attacker chose, as `lineage
    ingest` takes them."""
    tests_parent = {"test_a": "failed", HOSTILE_TEST: "passed"}
    lines = [
        {"type": "run.registered", "run": ARMS_RUN, "task": "t" + ESC},
        {"type": "run.scored", "run": ARMS_RUN, "reward": 0.0, "tests": tests_parent},
        {
            "type": "fork.opened",
            "run": ARMS_RUN,
            "fork": "root",
            "node": "root",
            "children": [
                {"index": 0, "node": "n1" + ESC, "arm": HOSTILE_ARM},
                {"index": 1, "node": "n2", "arm": "plain"},
            ],
        },
        {
            "type": "fork.child_scored",
            "run": ARMS_RUN,
            "fork": "root",
            "index": 0,
            "reward": 1.0,
            "tests": {"test_a": "passed", HOSTILE_TEST: "failed"},
        },
        {
            "type": "fork.child_scored",
            "run": ARMS_RUN,
            "fork": "root",
            "index": 1,
            "reward": 0.0,
            "tests": {"test_a": "failed"},
        },
    ]
    path = tmp_path / "hostile-arms.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])  # tsv escaped them already
def test_arms_shows_hostile_names_escaped_in_every_text_format(
    run_cli: Cli, tmp_path: Path, fmt: str
) -> None:
    run_cli("ingest", str(hostile_arms_facts(tmp_path)))
    out = run_cli("arms", ARMS_RUN, "--format", fmt).stdout
    assert "\x1b" not in out and "\r" not in out, out
    assert "\\x1b[2J" in out
    lines = out.splitlines()
    if fmt == "csv":
        records = list(csv.reader(io.StringIO(out)))
        assert len(records) == 4 and {len(r) for r in records} == {len(records[0])}
        # a newline stays, quoted, as CSV has it; ESC and CR are shown
        hostile = [h for h in records[0] if h.startswith(HOSTILE_TEST.split(ESC)[0])]
        assert hostile and hostile[0].startswith(HOSTILE_TEST.split(ESC)[0] + "\\x1b[2J")
        return
    # every row is one line: the forged row is shown inside the arm's (and the test's) cell
    shown = "\\n\\| root \\| FORGED" if fmt == "markdown" else "\\n| root | FORGED"
    assert all(shown in line for line in lines if "FORGED" in line), out
    if fmt == "markdown":
        cells = {len(re.findall(r"(?<!\\)\|", line)) for line in lines}  # unescaped pipes
        # 11 columns (fork, arm, node, status, reward, three of cost, two tests, flips): 12 pipes
        assert len(lines) == 2 + 3 and cells == {12}, out
        assert "[bold]markup[/bold]" in lines[0]
    if fmt == "table":
        assert "[bold]markup[/bold]" in out  # a test name is data, never rich markup


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_column_names_a_query_chose_are_escaped_too(run_cli: Cli, fmt: str) -> None:
    """The header is written where the rows are, for every command: here `lineage sql`, whose
    column names are the user's."""
    query = 'SELECT 1 AS "a' + FORGED_ROW.replace('"', "") + ESC + '\r", 2 AS b'
    out = run_cli("sql", query, "--format", fmt).stdout
    assert "\x1b" not in out and "\r" not in out, out
    if fmt == "markdown":
        assert len(out.splitlines()) == 3
    if fmt == "table":
        assert all("\\n| root | FORGED" in line for line in out.splitlines() if "FORGED" in line)

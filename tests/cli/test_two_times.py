"""The two times a read is asked at: `--as-of` (what the log held) and `--occurred-before` (what had
happened).

A run imported long after it happened is the case that tells them apart: by recording time it did
not exist yet on its own dates; by occurrence time it did, as it stood then. An arm without an
outcome at either point is `pending` in every export and view, in benchflow's ablation schema (the
same fields, no error).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.main import cli
from tests.conftest import EXAMPLES, Cli, open_lineage
from tests.scenarios import ABLATE_RUN, T0, ablate_run_facts

ABLATION_FILE = EXAMPLES / "pr-layout" / "ablate-2026-11-02__10-15-00" / "ablation.json"
NIGHTLY = "nightly/csv-dedupe__7c1f2a90"


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _last_arm_scored_at() -> datetime:
    """When the ablate scenario's fourth arm was scored (its facts are ten seconds apart from
    T0)."""
    entries = ablate_run_facts()
    [at] = [e.occurred_at for e in entries if getattr(e.fact, "index", None) == 3]
    return at


def test_occurred_before_shows_an_arm_still_running_as_pending(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(ablate_run_facts())
    before = _iso(_last_arm_scored_at())
    early = json.loads(
        run_cli("export", "ablation", f"{ABLATE_RUN}:root", "--occurred-before", before).stdout
    )
    written = json.loads(ABLATION_FILE.read_text())
    # benchflow's ablation schema: the same fields at the top and on every arm
    assert early.keys() == written.keys()
    assert [arm.keys() for arm in early["arms"]] == [arm.keys() for arm in written["arms"]]
    arm = early["arms"][3]
    assert (arm["status"], arm["reward"], arm["error"], arm["tests"], arm["reference"]) == (
        "pending",
        None,
        None,
        None,
        None,
    )
    assert arm["verdict"] == "no outcome recorded yet — the arm is still running"
    assert early["value"] is None and early["error"] is None
    assert early["test_attribution"]["arms_without_tests"] == [
        "inject:prompts/hint.md",
        arm["name"],
    ]
    children = json.loads(
        run_cli(
            "sql",
            "SELECT status FROM children ORDER BY child_index",
            "--occurred-before",
            before,
            "--format",
            "json",
        ).stdout
    )
    assert [row["status"] for row in children] == ["pass", "fail", "error", "pending"]
    tree = run_cli("tree", ABLATE_RUN, "--occurred-before", before).stdout
    # the last line says what V is
    assert tree.splitlines()[-2].endswith("· pending: no outcome yet")
    last_arm = f'{ABLATE_RUN}:root/config:{{"agent": {{"max_turns": 40}}}}'
    diff = run_cli(
        "diff", f"{ABLATE_RUN}:root/with-skill", last_arm, "--occurred-before", before
    ).stdout
    assert "B: no reward (fork child pending)" in diff.splitlines()
    late = json.loads(run_cli("export", "ablation", f"{ABLATE_RUN}:root").stdout)
    assert late["arms"][3]["status"] == "pass"


def test_a_run_imported_later_exists_on_its_own_dates_only_by_occurrence(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout" / "jobs"))
    on_its_date = "2026-11-03T02:04:30Z"  # after the first child was scored, before the second
    result = run_cli("tree", NIGHTLY, "--as-of", on_its_date, ok=False)
    assert result.exit_code == 1 and "expected a recorded run" in result.stderr
    tree = run_cli("tree", NIGHTLY, "--occurred-before", on_its_date).stdout.splitlines()
    assert tree[-3].endswith("· pass: reward 1.0") and tree[-2].endswith(
        "· pending: no outcome yet"
    )
    assert "open: V undefined (fork still open)" in tree[-4]
    runs = json.loads(
        run_cli("runs", "--occurred-before", "2026-11-03T02:00:08Z", "--format", "json").stdout
    )
    assert [row["run"] for row in runs] == [NIGHTLY]
    assert runs[0]["outcome"] == "pending"  # scored at 02:02:57


def test_occurred_before_and_as_of_together_take_both(lineage: Lineage, run_cli: Cli) -> None:
    first = lineage.record(ablate_run_facts(with_late_reward=False)).position
    count = "SELECT count(*) AS n FROM events"
    everything = json.loads(run_cli("sql", count, "--format", "json").stdout)[0]["n"]
    prefix = json.loads(run_cli("sql", count, "--as-of", str(first), "--format", "json").stdout)[0][
        "n"
    ]
    both = json.loads(
        run_cli(
            "sql",
            count,
            "--as-of",
            str(first),
            "--occurred-before",
            _iso(T0 + timedelta(seconds=25)),
            "--format",
            "json",
        ).stdout
    )[0]["n"]
    assert everything == prefix and 0 < both < prefix


def test_occurred_before_on_every_backend(store_url: str, tmp_path: Path) -> None:
    """The selection is built from the log the same way on the embedded SQLite file and on
    PostgreSQL."""
    with open_lineage(store_url, tmp_path / "home") as lineage:
        lineage.record(ablate_run_facts())
    run_cli = Cli(tmp_path / "home", store=store_url)
    before = _iso(_last_arm_scored_at())
    early = json.loads(
        run_cli("export", "ablation", f"{ABLATE_RUN}:root", "--occurred-before", before).stdout
    )
    assert [arm["status"] for arm in early["arms"]] == ["pass", "fail", "error", "pending"]


@pytest.mark.parametrize("value", ["yesterday", "2026-11-03T02:00:00"])
def test_occurred_before_refuses_a_time_it_cannot_read(run_cli: Cli, value: str) -> None:
    result = run_cli("runs", "--occurred-before", value, ok=False)
    assert result.exit_code == 1 and "--occurred-before" in result.stderr


def test_every_read_command_with_as_of_names_both_times() -> None:
    """Each help text says --as-of is the log's own time and offers --occurred-before beside it."""
    from click.testing import CliRunner

    commands = [
        ["runs"],
        ["arms"],
        ["sql"],
        ["tree"],
        ["history"],
        ["diff"],
        ["cut-point"],
        ["audit"],
        ["export", "tree"],
        ["export", "stages"],
        ["export", "ablation"],
        ["snapshots", "list"],
        ["snapshots", "show"],
    ]
    for command in commands:
        text = CliRunner().invoke(cli, [*command, "--help"], terminal_width=200).output
        assert "--occurred-before" in text and "recording time" in text, command

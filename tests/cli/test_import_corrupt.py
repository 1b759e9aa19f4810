"""`lineage import`: a run whose result.json exists but cannot be read is named as corrupt, with its
file and why, and refused like any other run the import cannot read (issues #33 and #37).

Before, a truncated, BOM-prefixed or non-UTF-8 result.json was left out as "may still be running"
and one of the wrong shape (`[1, 2]`) as "not a run"; the import exited 0 (and, with nothing else
to import, created no store). benchflow writes result.json last, once the run is over, so one that
exists is never still being written. Runs are built as benchflow's writers build them
(`tests/writer_runs.py`), then one file is damaged (`tests/corrupt_results.py`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.corrupt_results import DAMAGE, REASONS, damage
from tests.writer_runs import benchflow_run

HEALTHY, BROKEN = "csv-dedupe__11111111", "csv-dedupe__99999999"  # the healthy one sorts first


@pytest.fixture
def fresh_cli(tmp_path: Path) -> Cli:
    """The CLI where no store exists yet, as a first import finds it."""
    return Cli(tmp_path / "home")


def registered(cli: Cli) -> list[str]:
    log = cli("log", "--format", "jsonl", ok=False)
    return [
        json.loads(line)["fact"]["run"]
        for line in log.stdout.splitlines()
        if json.loads(line)["type"] == "run.registered"
    ]


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_corrupt_result_json_is_named_as_corrupt_and_refused(
    how: str, fresh_cli: Cli, tmp_path: Path
) -> None:
    result_json = damage(benchflow_run(tmp_path, BROKEN), how)
    for extra in ([], ["--unfinished"]):
        refused = fresh_cli("import", *extra, str(tmp_path / "jobs"), ok=False)
        assert refused.exit_code == 1, refused.stderr
        error = refused.stderr.splitlines()[-1]
        assert error.startswith(f"Error: {result_json} is corrupt: ") and REASONS[how] in error
        assert "still" not in refused.stderr and "not a run" not in refused.stderr
        assert "1 runs rejected" in refused.stderr
        assert registered(fresh_cli) == []


def test_one_corrupt_run_stops_the_import_before_anything_is_appended(
    fresh_cli: Cli, tmp_path: Path
) -> None:
    """Fail closed: every run is read before any is recorded, so a corrupt one found while reading
    appends nothing, not even the runs that sort before it."""
    benchflow_run(tmp_path, HEALTHY)
    damage(benchflow_run(tmp_path, BROKEN), "truncated")
    refused = fresh_cli("import", str(tmp_path / "jobs"), ok=False)
    assert refused.exit_code == 1 and f"{BROKEN}/result.json is corrupt" in refused.stderr
    assert "0 runs," in refused.stderr and "1 runs rejected" in refused.stderr
    assert registered(fresh_cli) == []


def test_keep_going_imports_the_others_and_lists_the_corrupt_run(
    fresh_cli: Cli, tmp_path: Path
) -> None:
    benchflow_run(tmp_path, HEALTHY)
    result_json = damage(benchflow_run(tmp_path, BROKEN), "list")
    jobs = str(tmp_path / "jobs")
    going = fresh_cli("import", "--keep-going", "--format", "json", jobs, ok=False)
    assert going.exit_code == 1, going.stderr
    assert f"rejected: {result_json} is corrupt: expected a JSON object, found a list" in (
        going.stderr
    )
    document = json.loads(going.stdout)
    assert (document["runs"], document["runs_rejected"], document["runs_corrupt"]) == (1, 1, 1)
    assert document["corrupt"] == [
        {
            "path": str(result_json.parent),
            "file": str(result_json),
            "reason": "expected a JSON object, found a list",
        }
    ]
    assert [r["path"] for r in document["rejected"]] == [str(result_json.parent)]
    assert document["skipped"] == [] and document["runs_unfinished"] == 0
    assert registered(fresh_cli) == [f"nightly/{HEALTHY}"]

"""`lineage audit PATH`: a rollout whose result.json exists but cannot be read is an unhealthy run
of its own, never left out (issue #33, finding 1).

Before, such a rollout was left out as "may still be running" (a truncated, BOM-prefixed or
non-UTF-8 file) or with no word at all (valid JSON of the wrong shape, `[1, 2]`), and a batch of one
healthy run plus one such run exited 0, publishable, where benchflow's validator calls the rollout
unhealthy (`tests/corrupt_results.py`: its words at benchflow 17a3573b). Runs are built by
benchflow's writer functions (`tests/rollout_writer.py`), then one file is damaged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli
from tests.corrupt_results import DAMAGE, REASONS, VALIDATOR_SAYS, damage
from tests.validator_scenarios import healthy_fail, healthy_pass


@pytest.fixture
def run_cli(tmp_path: Path) -> Cli:
    """The CLI with no store at all: auditing directories needs none."""
    return Cli(tmp_path / "home")


def batch(tmp_path: Path, how: str) -> tuple[Path, Path, Path]:
    """A jobs folder of two writer-built rollouts, the second one's result.json damaged `how`."""
    jobs = tmp_path / "jobs"
    healthy = healthy_pass(jobs)
    broken = healthy_fail(jobs)
    return jobs, healthy, damage(broken, how)


@pytest.mark.parametrize("how", list(DAMAGE))
def test_a_rollout_whose_result_json_cannot_be_read_is_an_unhealthy_run_of_its_own(
    how: str, run_cli: Cli, tmp_path: Path
) -> None:
    jobs, _, result_json = batch(tmp_path, how)
    audited = run_cli("audit", str(jobs), "--format", "json", ok=False)
    assert audited.exit_code == 10, audited.stdout + audited.stderr  # withheld, never publishable
    assert "may still be running" not in audited.stderr
    report = json.loads(audited.stdout)
    [finding] = [f for f in report["findings"] if f["check"] == "corrupt-run"]
    assert finding["level"] == "quarantine" and finding["subject"] == str(result_json.parent)
    assert f"{result_json} is corrupt: " in finding["message"]
    assert REASONS[how] in finding["message"] and "[result.parse]" in finding["message"]
    assert report["quarantined"] == [str(result_json.parent)]
    assert [(r["health"], r["status"]) for r in report["runs"]] == [("healthy", "ok")]
    text = run_cli("audit", str(jobs), ok=False)
    assert text.exit_code == 10
    assert f"{result_json} is corrupt" in text.stdout
    assert text.stdout.rstrip().splitlines()[-1].startswith("verdict: publishable with quarantines")


@pytest.mark.parametrize("how", ["truncated", "list"])
def test_a_batch_of_only_corrupt_rollouts_is_not_publishable(
    how: str, run_cli: Cli, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    damage(healthy_pass(jobs), how)
    audited = run_cli("audit", str(jobs), "--format", "json", ok=False)
    assert audited.exit_code == 11, audited.stdout + audited.stderr
    report = json.loads(audited.stdout)
    assert report["verdict"] == "not publishable"
    assert any(f["check"] == "corrupt-run" for f in report["findings"])


def test_the_validator_calls_each_damaged_rollout_unhealthy_but_one_we_judge_stricter() -> None:
    """The parity this file rests on, as observed: every damage but a Latin-1 byte inside a value
    (which the validator reads as a replacement character) is unhealthy to benchflow's validator."""
    assert {how for how, (healthy, _) in VALIDATOR_SAYS.items() if healthy} == {"latin1"}
    assert set(VALIDATOR_SAYS) == set(DAMAGE) == set(REASONS)


def test_parity_of_two_batches_is_broken_by_a_corrupt_rollout(run_cli: Cli, tmp_path: Path) -> None:
    left = tmp_path / "a"
    healthy_pass(left)
    right = tmp_path / "b"
    damage(healthy_pass(right), "bom")
    compared = run_cli("audit", "--parity", str(left), str(right), "--format", "json", ok=False)
    assert compared.exit_code == 11, compared.stdout + compared.stderr
    report = json.loads(compared.stdout)
    assert report["verdict"] == "parity broken"
    assert any("result.json is corrupt" in f["message"] for f in report["findings"])


def test_a_run_the_import_would_wait_for_is_judged_not_left_out(
    run_cli: Cli, tmp_path: Path
) -> None:
    """The import's "may still be running" rule does not decide an audit: a benchflow run with its
    tree but no result.json (still running, or killed) is read as it is and withheld as unhealthy.
    Before, it was left out with a warning and the batch was publishable."""
    jobs = tmp_path / "jobs"
    healthy_pass(jobs)
    unfinished = jobs / "nightly" / "csv-dedupe__7c1f2a90"
    shutil.copytree(EXAMPLES / "pr-layout" / "jobs" / "nightly" / unfinished.name, unfinished)
    (unfinished / "result.json").unlink()
    audited = run_cli("audit", str(jobs), "--format", "json", ok=False)
    assert audited.exit_code == 10, audited.stdout + audited.stderr
    assert "still" not in audited.stderr
    report = json.loads(audited.stdout)
    assert report["quarantined"] == ["nightly/csv-dedupe__7c1f2a90"]
    assert any("missing reward" in f["message"] for f in report["findings"])


def test_a_result_json_that_is_a_folder_is_an_unhealthy_run_too(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Not JSON at all: a folder where the file should be. Before, the rollout was no run (named on
    no line) and the batch publishable; benchflow's validator finds it and calls it unhealthy."""
    jobs = tmp_path / "jobs"
    healthy_pass(jobs)
    broken = healthy_fail(jobs)
    (broken / "result.json").unlink()
    (broken / "result.json").mkdir()
    audited = run_cli("audit", str(jobs), "--format", "json", ok=False)
    assert audited.exit_code == 10, audited.stdout + audited.stderr
    report = json.loads(audited.stdout)
    assert report["quarantined"] == [str(broken)]
    [finding] = [f for f in report["findings"] if f["subject"] == str(broken)]
    assert "result.json: expected a file, found a directory" in finding["message"]

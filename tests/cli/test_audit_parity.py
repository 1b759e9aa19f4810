"""`lineage audit --parity A B`: the skill's Daytona-vs-Docker section, on writer-built batches.

Both batches are built by benchflow's writer functions (`tests/rollout_writer.py`: `write_rollout` =
`_init_rollout`, `_write_config`, the trajectory writers, `_build_rollout_result`,
`build_rollout_results_record`) with the same task, agent, model and skill mode, once per sandbox; a
damage step gives one backend what SKILL.md calls a blocker ("Missing token usage or timing in one
backend is a blocker for new production data").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.rollout_writer import damage, fixing_run, write_rollout


@pytest.fixture
def run_cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "home")


def batch(root: Path, environment: str, suffix: str) -> Path:
    for task in ("csv-dedupe", "json-merge"):
        run = fixing_run(task, environment=environment, rollout_name=f"{task}__{suffix}")
        write_rollout(root, run)
    return root


def parity(run_cli: Cli, a: Path, b: Path, code: int) -> dict:
    result = run_cli("audit", "--parity", str(a), str(b), "--format", "json", ok=False)
    assert result.exit_code == code, result.stdout + result.stderr
    assert not run_cli.home.exists(), "parity writes no store"
    return json.loads(result.stdout)


def test_the_same_canaries_on_both_backends_hold_parity(run_cli: Cli, tmp_path: Path) -> None:
    a = batch(tmp_path / "daytona", "daytona", "1a2b3c4d")
    b = batch(tmp_path / "docker", "docker", "9e8f7a6b")
    report = parity(run_cli, a, b, code=0)
    assert report["verdict"] == "parity holds" and report["findings"] == []
    assert [s["differs"] for s in report["slots"]] == [[], []]
    text = run_cli("audit", "--parity", str(a), str(b), ok=False).stdout
    assert text.splitlines()[-1] == "verdict: parity holds"


@pytest.mark.parametrize(
    ("broken", "aspect"),
    [
        (lambda d: damage.drop_timing(d), "timing"),
        (lambda d: damage.delete(d, "trajectory/llm_trajectory.jsonl"), "trajectory presence"),
        (lambda d: damage.drop_reward(d), "reward"),
    ],
)
def test_a_difference_on_one_backend_is_a_blocker_named_by_slot(
    broken, aspect: str, run_cli: Cli, tmp_path: Path
) -> None:
    a = batch(tmp_path / "daytona", "daytona", "1a2b3c4d")
    b = batch(tmp_path / "docker", "docker", "9e8f7a6b")
    broken(next((b / "2026-11-03__09-12-44").glob("json-merge__*")))
    report = parity(run_cli, a, b, code=11)
    messages = [f["message"] for f in report["findings"]]
    assert any(
        m.startswith(
            f"slot (json-merge, claude-agent-acp, "
            f"claude-sonnet-4-5, no-skill, #1): {aspect} differs"
        )
        for m in messages
    ), messages
    assert all("csv-dedupe" not in m for m in messages)
    assert report["verdict"] == "parity broken"


def test_a_slot_missing_from_one_backend_is_a_blocker(run_cli: Cli, tmp_path: Path) -> None:
    a = batch(tmp_path / "daytona", "daytona", "1a2b3c4d")
    b = tmp_path / "docker"
    write_rollout(
        b, fixing_run("csv-dedupe", environment="docker", rollout_name="csv-dedupe__9e8f")
    )
    report = parity(run_cli, a, b, code=11)
    [missing] = [f["message"] for f in report["findings"]]
    assert missing.startswith(
        "slot (json-merge, claude-agent-acp, claude-sonnet-4-5, no-skill, #1): no run in B"
    )

"""Rule 9: naive local times kept as written (zone unknown); Harbor rewards of any keys; a verifier
timeout is a verifier failure. benchflow runs are built as `_build_rollout_result` writes them
(`started_at = datetime.now()`, written with `str()`); Harbor trials as Harbor's `Trial` writes
`TrialResult` (`VerifierResult.rewards: dict[str, float | int]`, `exception_info` from the raised
exception, naive `datetime.now()` times)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, Cli
from tests.writer_runs import FINISHED, STARTED, benchflow_run

TRIAL = (
    EXAMPLES / "public/benchflow-ai/skillsbench-trajectories/claude-opus-4-5-0126-wenbo/"
    "claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920"
)


def row(run_cli: Cli, run: str, *columns: str) -> dict[str, Any]:
    [found] = json.loads(
        run_cli(
            "sql", f"SELECT {', '.join(columns)} FROM runs WHERE run = '{run}'", "--format", "json"
        ).stdout
    )
    return found


def harbor_trial(tmp_path: Path, **changes: Any) -> Path:
    trial = tmp_path / "job" / "trial__1"
    shutil.copytree(TRIAL, trial)
    result = json.loads((trial / "result.json").read_text())
    result.update(changes)
    (trial / "result.json").write_text(json.dumps(result, indent=4))
    return trial


def test_benchflow_times_are_kept_as_written_and_their_zone_is_unknown(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_cli("import", str(benchflow_run(tmp_path)))
    found = row(run_cli, "nightly/csv-dedupe__5e0d1c2b", "started_at", "finished_at", "time_zone")
    assert found == {"started_at": STARTED, "finished_at": FINISHED, "time_zone": "unknown"}


def test_a_time_written_with_an_offset_keeps_it(run_cli: Cli, tmp_path: Path) -> None:
    run_cli(
        "import",
        str(
            benchflow_run(
                tmp_path,
                started_at="2026-11-03T09:12:44+01:00",
                finished_at="2026-11-03T09:19:02+01:00",
            )
        ),
    )
    found = row(run_cli, "nightly/csv-dedupe__5e0d1c2b", "started_at", "time_zone")
    assert found == {"started_at": "2026-11-03T09:12:44+01:00", "time_zone": "recorded"}


def test_a_run_mixing_naive_and_zoned_times_is_refused(run_cli: Cli, tmp_path: Path) -> None:
    result = run_cli(
        "import", str(benchflow_run(tmp_path, finished_at="2026-11-03T09:19:02+01:00")), ok=False
    )
    assert result.exit_code == 1
    assert (
        "expected started_at and finished_at both with or both without a UTC offset"
        in result.stderr
    )


@pytest.mark.parametrize(
    "rewards, reward",
    [({"reward": 0.25}, 0.25), ({"accuracy": 0.75}, 0.75), ({"reward": 1, "f1": 0.5}, 1.0)],
)
def test_harbor_rewards_may_have_any_keys(
    run_cli: Cli, tmp_path: Path, rewards: dict[str, float], reward: float
) -> None:
    trial = harbor_trial(tmp_path, verifier_result={"rewards": rewards})
    run_cli("import", str(trial))
    found = row(run_cli, "job/trial__1", "outcome", "reward", "rewards", "time_zone")
    assert (found["outcome"], found["reward"], found["rewards"], found["time_zone"]) == (
        "scored",
        reward,
        rewards,
        "unknown",
    )


def test_harbor_rewards_with_several_keys_and_no_reward_are_kept_unscored(
    run_cli: Cli, tmp_path: Path
) -> None:
    rewards = {"accuracy": 0.75, "f1": 0.5}
    run_cli("import", str(harbor_trial(tmp_path, verifier_result={"rewards": rewards})))
    found = row(run_cli, "job/trial__1", "outcome", "rewards", "unscored_reason")
    assert (found["outcome"], found["rewards"]) == ("unscored", rewards)
    assert (
        found["unscored_reason"]
        == "the verifier result has several rewards and none named 'reward' "
        "(keys: ['accuracy', 'f1'])"
    )


def test_a_harbor_verifier_timeout_is_a_verifier_failure(run_cli: Cli, tmp_path: Path) -> None:
    # Harbor's Trial catches the verifier's asyncio timeout as VerifierTimeoutError into
    # exception_info and leaves verifier_result null.
    trial = harbor_trial(
        tmp_path,
        verifier_result=None,
        exception_info={
            "exception_type": "VerifierTimeoutError",
            "exception_message": "Verifier execution timed out after 600.0 seconds",
        },
    )
    (trial / "verifier" / "ctrf.json").unlink()
    run_cli("import", str(trial))
    found = row(
        run_cli, "job/trial__1", "outcome", "verifier_error", "unscored_reason", "error_category"
    )
    assert found == {
        "outcome": "unscored",
        "unscored_reason": "the verifier failed (VerifierTimeoutError)",
        "verifier_error": "VerifierTimeoutError: Verifier execution timed out after 600.0 seconds",
        "error_category": "VerifierTimeoutError",
    }
    report = json.loads(run_cli("audit", "--format", "json", ok=False).stdout)
    messages = [f["message"] for f in report["findings"] if f.get("run") == "job/trial__1"]
    assert not any("missing reward" in m for m in messages)
    assert any("verifier crash: VerifierTimeoutError" in m for m in messages)


def test_a_benchflow_verifier_timeout_is_a_verifier_failure(run_cli: Cli, tmp_path: Path) -> None:
    # `_verify_rollout` (benchflow rollout/_setup.py) on the verifier's timeout: rewards stay None
    # and verifier_error = "verifier timed out after {budget}s"; `_build_rollout_result` writes
    # both, with verifier_error_category from `classify_verifier_error` ("verifier_timeout").
    run_cli(
        "import",
        str(
            benchflow_run(
                tmp_path,
                rewards=None,
                verifier_error="verifier timed out after 600s",
                verifier_error_category="verifier_timeout",
            )
        ),
    )
    found = row(
        run_cli, "nightly/csv-dedupe__5e0d1c2b", "outcome", "verifier_error", "unscored_reason"
    )
    assert found == {
        "outcome": "unscored",
        "verifier_error": "verifier timed out after 600s",
        "unscored_reason": "verifier timed out after 600s",
    }
    report = json.loads(run_cli("audit", "--format", "json", ok=False).stdout)
    messages = [
        f["message"] for f in report["findings"] if f.get("run") == "nightly/csv-dedupe__5e0d1c2b"
    ]
    assert not any("missing reward" in m for m in messages)
    assert any("verifier crash: verifier timed out after 600s" in m for m in messages)

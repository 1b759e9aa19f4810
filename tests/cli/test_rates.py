"""`lineage rates` on jobs trees written the way benchflow writes them (tests/trial_writer.py:
`rollout/_results._build_rollout_result` and `cli/eval_artifacts.run_matrix_eval` @ e0b5e2f6, the
Evaluation's job folder @ 8915455a), imported for real, counted as `bench eval metrics` counts them.

Every expected value is worked out here from benchflow's contract (docs/reference/pass-at-k.md @
8915455a and jobs.py `Job.solve_rates` @ a4e694bd): per task n scored trials with c successes,
pass@k = 1 - C(n-c,k)/C(n,k) and pass^k = C(c,k)/C(n,k), averaged over the tasks with n >= k.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.trial_writer import (
    DID_NOTHING,
    Trial,
    evaluation,
    run_batch,
    run_matrix_eval,
)

BLOCK_KEYS = [
    "success_rule",
    "solve_threshold",
    "tasks",
    "trials",
    "unscored",
    "controls_excluded",
    "min_trials_per_task",
    "max_trials_per_task",
    "solve_rate",
    "solve_rate_interval",
    "solve_rate_interval_method",
    "nonbinary_rewards",
    "ks",
    "pass_at_k",
    "pass_hat_k",
    "tasks_at_k",
    "tasks_short_at_k",
    "caveats",
]
UNSCORED_CAVEAT = "{} unscored trial(s) are left out of n, not counted as failures."


def pass_at(n: int, c: int, k: int) -> float:
    return 1 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat(n: int, c: int, k: int) -> float:
    return math.comb(c, k) / math.comb(n, k)


def wilson(successes: float, n: float, z: float = 1.96) -> list[float]:
    """The Wilson score interval, as pass-at-k.md defines it."""
    p = successes / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [max(0.0, centre - half), min(1.0, centre + half)]


def rates(run_cli: Cli, *args: str) -> dict:
    """The `solve_rates` block `lineage rates --format json` prints."""
    document = json.loads(run_cli("rates", "--format", "json", *args).stdout)
    assert list(document) == ["solve_rates"]
    assert list(document["solve_rates"]) == BLOCK_KEYS  # benchflow's key order, never sorted
    return document["solve_rates"]


def tries(task: str, *rewards: float | None) -> list[Trial]:
    """One rollout of `task` per reward; None: the agent crashed, no reward (unscored)."""
    return [
        Trial(task, reward=r, error=None if r is not None else "agent crashed: exit 1")
        for r in rewards
    ]


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    """`bench eval run --matrix --trials 3` over tasks a, b, c for alias opus (c crashed once), and
    `--trials 2` for alias haiku."""
    opus = [
        [*tries("a", 1.0), *tries("b", 0.0), *tries("c", 1.0)],
        [*tries("a", 1.0), *tries("b", 0.0), *tries("c", None)],
        [*tries("a", 0.0), *tries("b", 0.0), *tries("c", 1.0)],
    ]
    haiku = [[*tries("a", 0.0), *tries("b", 1.0)], [*tries("a", 0.0), *tries("b", 1.0)]]
    return run_matrix_eval(tmp_path / "jobs", {"opus": opus, "haiku": haiku})


def test_an_alias_pools_its_trial_folders_as_separate_samples(run_cli: Cli, matrix: Path) -> None:
    run_cli("import", str(matrix))
    block = rates(run_cli, "--job", "opus")
    # a: n=3 c=2; b: n=3 c=0; c: n=2 c=2 (its crashed trial is unscored, not a failure)
    counts = {"a": (3, 2), "b": (3, 0), "c": (2, 2)}
    assert (block["tasks"], block["trials"], block["unscored"]) == (3, 8, 1)
    assert (block["min_trials_per_task"], block["max_trials_per_task"]) == (2, 3)
    assert block["ks"] == [1, 2]  # 1 and the powers of two up to the fewest (2)
    for k in (1, 2):
        assert block["pass_at_k"][str(k)] == pytest.approx(
            sum(pass_at(n, c, k) for n, c in counts.values()) / 3
        )
        assert block["pass_hat_k"][str(k)] == pytest.approx(
            sum(pass_hat(n, c, k) for n, c in counts.values()) / 3
        )
    assert block["pass_at_k"] == {"1": pytest.approx(5 / 9), "2": pytest.approx(2 / 3)}
    assert block["pass_hat_k"] == {"1": pytest.approx(5 / 9), "2": pytest.approx(4 / 9)}
    assert block["solve_rate"] == 0.5
    # repeated trials: Wilson's interval on the scored trials over the design effect
    p, total = 0.5, 8
    spread = 3 / 2 * sum((c - p * n) ** 2 for n, c in counts.values()) / total**2
    effective = total / (spread / (p * (1 - p) / total))
    assert block["solve_rate_interval_method"] == "wilson-clustered"
    assert block["solve_rate_interval"] == pytest.approx(wilson(p * effective, effective))
    assert block["caveats"] == [UNSCORED_CAVEAT.format(1)]
    assert block["controls_excluded"] == 0 and block["success_rule"] == "passed (reward = 1)"

    haiku = rates(run_cli, "--job", "haiku")  # another alias: its own trial folders only
    assert (haiku["tasks"], haiku["trials"], haiku["solve_rate"]) == (2, 4, 0.5)
    assert haiku["pass_at_k"] == {"1": 0.5, "2": 0.5}
    second = rates(run_cli, "--job", "trial-02")  # every alias's second trial
    # c's only trial there is unscored: no sample, so no task
    assert (second["tasks"], second["trials"], second["unscored"]) == (2, 4, 1)
    opus_2 = rates(run_cli, "--job", "opus/trial-02")
    assert (opus_2["tasks"], opus_2["trials"], opus_2["unscored"]) == (2, 2, 1)
    [folder] = (matrix / "opus" / "trial-03").glob("*/a__*")
    alone = rates(run_cli, "--job", folder.name)  # one trial folder, as bench eval metrics DIR
    assert (alone["tasks"], alone["trials"], alone["solve_rate"]) == (1, 1, 0.0)


def test_the_matrix_layout_is_recorded_with_trial_numbers(run_cli: Cli, matrix: Path) -> None:
    run_cli("import", str(matrix))
    rows = json.loads(
        run_cli(
            "sql",
            "SELECT alias, trial_number, job, evaluation_job, count(*) AS trials FROM "
            "solve_samples GROUP BY ALL ORDER BY alias, trial_number",
            "--format",
            "json",
        ).stdout
    )
    jobs = {(r["alias"], r["trial_number"]): r["job"] for r in rows}
    assert [(r["alias"], r["trial_number"], r["trials"]) for r in rows] == [
        ("haiku", 1, 2),
        ("haiku", 2, 2),
        ("opus", 1, 3),
        ("opus", 2, 3),
        ("opus", 3, 3),
    ]
    assert all(r["evaluation_job"] for r in rows)
    assert all(
        (matrix / alias / f"trial-{t:02d}" / job).is_dir() for (alias, t), job in jobs.items()
    )
    # importing again reads the same: nothing new
    again = run_cli("import", str(matrix)).stderr
    assert "0 events appended" in again


def test_a_k_no_task_reaches_is_null_and_short_tasks_are_counted(
    run_cli: Cli, matrix: Path
) -> None:
    run_cli("import", str(matrix))
    block = rates(run_cli, "--job", "opus", "--k", "5", "--k", "3", "--k", "3")
    assert block["ks"] == [3, 5]
    # k=3: a (n=3, c=2) and b (n=3, c=0) are in; c (n=2) is short
    assert block["pass_at_k"] == {"3": pytest.approx((1 + 0) / 2), "5": None}
    assert block["pass_hat_k"] == {"3": 0.0, "5": None}  # a real 0 at k=3, null at 5
    assert block["tasks_at_k"] == {"3": 2, "5": 0}
    assert block["tasks_short_at_k"] == {"3": 1, "5": 3}
    assert block["caveats"][:2] == [
        "pass@3/pass^3 cover 2 of 3 tasks: 1 task(s) have fewer than 3 scored trials (n < k) "
        "and are left out; the unbiased estimator needs n >= k.",
        "pass@5/pass^5 cover 0 of 3 tasks: 3 task(s) have fewer than 5 scored trials (n < k) "
        "and are left out; the unbiased estimator needs n >= k.",
    ]
    assert run_cli("rates", "--k", "0", ok=False).exit_code == 2


def test_retries_in_one_job_are_one_trial_and_job_folders_are_samples(
    run_cli: Cli, tmp_path: Path
) -> None:
    jobs = tmp_path / "jobs"
    evaluation(
        jobs,
        [
            # t: a sandbox error, then the retry scored: one trial, scored 1
            Trial("t", reward=None, error="sandbox setup failed", mtime=1_000),
            Trial("t", reward=1.0, mtime=2_000),
            # u: two scored attempts, the newest result.json wins (written first, modified last)
            Trial("u", reward=0.0, mtime=3_000),
            Trial("u", reward=1.0, mtime=2_500),
        ],
        "2026-11-03__09-00-00",
    )
    run_batch(jobs, "batch", tries("t", 1.0, 0.0))  # bf.run_batch: each rollout a sample
    run_cli("import", str(jobs))
    one = rates(run_cli, "--job", "2026-11-03__09-00-00")
    assert (one["tasks"], one["trials"], one["unscored"], one["solve_rate"]) == (2, 2, 0, 0.5)
    assert one["pass_at_k"] == {"1": 0.5}
    batch = rates(run_cli, "--job", "batch")
    assert (batch["trials"], batch["solve_rate"], batch["ks"]) == (2, 0.5, [1, 2])
    assert batch["pass_at_k"] == {"1": 0.5, "2": pass_at(2, 1, 2)}
    every = rates(run_cli)  # t: 1 + 2 samples (c=2), u: 1 (c=0)
    assert (every["tasks"], every["trials"], every["solve_rate"]) == (2, 4, 0.5)
    assert every["pass_at_k"] == {"1": pytest.approx((2 / 3 + 0) / 2)}


def test_controls_are_left_out_and_counted_unless_included(run_cli: Cli, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    evaluation(
        jobs,
        [
            *tries("a", 1.0, 0.0),
            Trial("a", agent="oracle", model=None, reward=1.0),  # the task's own solution
            Trial("a__e", reward=0.0),  # an empty-solution copy of the task
            Trial("b", reward=1.0, config={"task_variant": "oracle-solution"}),
            Trial("b", agent="nop", model=None, reward=0.0),
            Trial("b", agent="nop", model="gpt-5", reward=0.0),  # nop with a model: an agent
        ],
    )
    run_cli("import", str(jobs))
    # one Evaluation: a's two agent attempts are one trial (the later-written wins on a tie of
    # scored: both scored, so the newest result.json)
    block = rates(run_cli)
    assert block["controls_excluded"] == 4
    assert (block["tasks"], block["trials"]) == (2, 2)
    assert block["caveats"] == [
        "4 control run(s) (oracle, empty/nop) are left out: they check the task, not an agent "
        "(include_controls=True counts them)."
    ]
    included = rates(run_cli, "--include-controls")
    assert included["controls_excluded"] == 0
    # a: agent + oracle (attempts of one trial per agent and model) ; a__e; b: three agents
    assert (included["tasks"], included["trials"]) == (3, 6)


def test_unscored_and_withheld_rewards_are_not_failures(run_cli: Cli, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    broke = {"cause": "agent_install", "evidence": "Node.js v22+ is required"}
    run_batch(
        jobs,
        "batch",
        [
            Trial("t", reward=1.0),
            Trial("t", reward=0.0),
            # the agent did nothing after the prompt: reward withheld, recorded by benchflow ...
            Trial("t", reward=0.0, events=DID_NOTHING, extra={"integration_failure_info": broke}),
            # ... or found on read: no tool call, no message, only a shim's stderr, no tokens
            Trial("t", reward=0.0, events=DID_NOTHING, n_output_tokens=0),
            # the same trajectory with output tokens did something: scored
            Trial("t", reward=0.0, events=DID_NOTHING, n_output_tokens=12),
            # an assessment still pending withholds the reward; a verified one does not
            Trial("t", reward=1.0, extra={"assessment": {"status": "pending"}}),
            Trial("t", reward=1.0, extra={"assessment": {"status": "verified"}}),
            Trial("t", reward=None, verifier_error="verifier crashed: exit 2"),
            # a reviewer's run is no trial at all
            Trial("t", reward=1.0, extra={"purpose": "reviewer"}),
        ],
    )
    run_cli("import", str(jobs))
    block = rates(run_cli)
    assert (block["trials"], block["unscored"]) == (4, 4)
    assert block["solve_rate"] == 0.5
    assert block["caveats"] == [UNSCORED_CAVEAT.format(4)]
    withheld = json.loads(
        run_cli(
            "sql",
            "SELECT integration_failure, count(*) AS n FROM solve_samples "
            "WHERE integration_failure IS NOT NULL GROUP BY ALL ORDER BY 1",
            "--format",
            "json",
        ).stdout
    )
    assert withheld == [
        {"integration_failure": "detected", "n": 1},
        {"integration_failure": "recorded", "n": 1},
    ]


def test_a_solve_threshold_counts_partial_credit(run_cli: Cli, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    scoring = {
        "schema_version": 1,
        "policy": "tests-blockers-quality-v1",
        "status": "complete",
        "passed": True,
        "tests_pass": True,
        "all_blockers_pass": True,
        "failed_blockers": [],
        "verifier_reward": 1.0,
        "rubric_reward": 0.6,
        "reviewer_run": "review__1f2e3d4c",
        "revision": None,
    }
    reviewed = {"scoring": scoring}
    run_batch(
        jobs,
        "batch",
        [
            *tries("t", 0.5, 0.75, 1.0, 0.0),
            # the review gate passed it: a success under the default rule, whatever the reward
            Trial("u", reward=0.6, extra=reviewed),
        ],
    )
    for folder in (jobs / "batch").glob("u__*"):
        result = json.loads((folder / "result.json").read_text())
        result["rewards"] = {"reward": 0.6, "verifier_reward": 1.0, "rubric_reward": 0.6}
        (folder / "result.json").write_text(json.dumps(result, indent=2))
    run_cli("import", str(jobs))
    passed = rates(run_cli)
    assert passed["solve_rate"] == 2 / 5 and passed["nonbinary_rewards"] == 3
    assert passed["caveats"][-1] == (
        "3 scored trial(s) have a reward other than 0 or 1 and count as not passed; pass "
        "--solve-threshold (solve_threshold=) to count partial credit."
    )
    partial = rates(run_cli, "--solve-threshold", "0.5")
    assert (partial["success_rule"], partial["solve_threshold"]) == ("reward >= 0.5", 0.5)
    assert partial["solve_rate"] == 4 / 5 and partial["nonbinary_rewards"] == 3
    assert partial["caveats"] == []
    assert rates(run_cli, "--solve-threshold", "1")["success_rule"] == "reward >= 1"
    assert run_cli("rates", "--solve-threshold", "nan", ok=False).exit_code == 2


@pytest.fixture
def two_arms(tmp_path: Path) -> Path:
    """One jobs folder, two agents and two models, two skill modes, tasks x and y."""
    jobs = tmp_path / "jobs"
    run_batch(
        jobs,
        "batch",
        [
            Trial("x", agent="claude", model="opus", reward=1.0, skill_mode="with-skill"),
            Trial("x", agent="claude", model="opus", reward=1.0, skill_mode="with-skill"),
            Trial("y", agent="claude", model="opus", reward=0.0, skill_mode="with-skill"),
            Trial("x", agent="claude", model="haiku", reward=0.0, skill_mode="no-skill"),
            Trial("y", agent="codex", model="gpt-5", reward=1.0, skill_mode="no-skill"),
        ],
    )
    return jobs


def test_filters_pick_trials_by_task_agent_model_and_skill_mode(
    run_cli: Cli, two_arms: Path
) -> None:
    run_cli("import", str(two_arms))
    assert rates(run_cli)["trials"] == 5
    assert rates(run_cli, "--task", "x")["solve_rate"] == 2 / 3
    assert rates(run_cli, "--agent", "codex")["solve_rate"] == 1.0
    claude = rates(run_cli, "--agent", "claude", "--model", "opus")
    assert (claude["tasks"], claude["trials"], claude["pass_at_k"]) == (2, 3, {"1": 0.5})
    assert rates(run_cli, "--skill-mode", "no-skill")["trials"] == 2
    nothing = rates(run_cli, "--model", "no-such-model")
    assert (nothing["tasks"], nothing["solve_rate"], nothing["pass_at_k"]) == (0, None, {"1": None})
    missing = run_cli("rates", "--job", "no-such-job", ok=False)
    assert missing.exit_code == 1 and "no-such-job" in missing.stderr


def test_by_prints_one_block_per_group(run_cli: Cli, two_arms: Path) -> None:
    run_cli("import", str(two_arms))
    document = json.loads(run_cli("rates", "--by", "agent,model", "--format", "json").stdout)
    assert document["by"] == ["agent", "model"]
    groups = {(g["agent"], g["model"]): g["solve_rates"] for g in document["groups"]}
    assert list(groups) == [("claude", "haiku"), ("claude", "opus"), ("codex", "gpt-5")]
    assert all(list(block) == BLOCK_KEYS for block in groups.values())
    opus = groups[("claude", "opus")]  # x: n=2 c=2, y: n=1 c=0
    assert (opus["tasks"], opus["trials"], opus["ks"]) == (2, 3, [1])
    assert opus["pass_at_k"] == {"1": 0.5} and opus["solve_rate"] == 2 / 3
    assert groups[("codex", "gpt-5")]["solve_rate"] == 1.0
    modes = run_cli("rates", "--by", "skill_mode", "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line)["skill_mode"] for line in modes] == ["no-skill", "with-skill"]
    assert run_cli("rates", "--by", "dataset", ok=False).exit_code == 2


def test_the_row_formats_print_a_row_per_k(run_cli: Cli, matrix: Path) -> None:
    run_cli("import", str(matrix))
    result = run_cli("rates", "--job", "opus", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(r["k"], r["tasks_at_k"], r["trials"], r["unscored"]) for r in rows] == [
        ("1", "3", "8", "1"),
        ("2", "3", "8", "1"),
    ]
    assert float(rows[1]["pass_hat_k"]) == pytest.approx(4 / 9)
    assert UNSCORED_CAVEAT.format(1) in result.stderr  # caveats on stderr, data on stdout
    table = run_cli("rates", "--job", "opus", "--by", "agent", "--format", "markdown").stdout
    assert table.splitlines()[0].startswith("| agent | k | pass_at_k |")
    assert "| claude-agent-acp | 2 | 0.6667 | 0.4444 |" in table


def test_with_no_trial_recorded_it_says_how_to_record_them(run_cli: Cli) -> None:
    result = run_cli("rates", "--format", "json")
    block = json.loads(result.stdout)["solve_rates"]
    assert (block["tasks"], block["trials"], block["pass_at_k"]) == (0, 0, {"1": None})
    assert "lineage import" in result.stderr

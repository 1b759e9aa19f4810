"""Today's benchflow branched trials, written the way its writers write them
(tests/branch_writer.py), imported through the CLI, and `lineage export branch-view` against
benchflow's branch-view contract (its docs/reference/branch-view.md; facts in
docs/benchflow-formats.md §16-§17).

Expected documents and values are written here from the contract, and where benchflow's own tests
assert a value for the same trial (`tests/test_branch_view.py`, `test_branch_view_1_1.py`,
`test_branch_parent_discarded.py`), that value.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.branch_writer import BranchTrial, Child, Fork, native_usage
from tests.conftest import EXAMPLES, Cli

FIXTURE = (
    EXAMPLES / "public/benchflow-ai/benchflow/tests/fixtures/"
    "branch_tree_claude/claude-continue/hello-world-task__0000abcd"
)
FIXTURE_RUN = "claude-continue/hello-world-task__0000abcd"
JOB = "2026-12-01__10-00-00"


def view(run_cli: Cli, run: str, *options: str) -> dict[str, Any]:
    return json.loads(run_cli("export", "branch-view", run, *options).stdout)


def facts(run_cli: Cli, kind: str) -> list[dict[str, Any]]:
    rows = (json.loads(line) for line in run_cli("log", "--format", "jsonl").stdout.splitlines())
    return [row["fact"] for row in rows if row["type"] == kind]


def imported(run_cli: Cli, trial: BranchTrial) -> str:
    result = run_cli("import", str(trial.dir))
    assert "0 runs rejected" in result.stderr, result.stderr
    return f"{JOB}/{trial.name}"


# --- benchflow's fixture: a tree written before cost, children_mode and rollout -------------------


def test_the_fixture_tree_reads_with_every_newer_field_null(run_cli: Cli, tmp_path: Path) -> None:
    """benchflow's `test_an_old_tree_reads_as_nulls`, and the whole document by the contract."""
    run_cli("import", str(FIXTURE))
    document = view(run_cli, FIXTURE_RUN)
    child = {
        "requested": None,
        "execution": "unspecified",
        "status": "scored",
        "reward_source": "verifier",
        "error": None,
        "attempts": None,
        "retried_after": None,
        "cost": None,
        "usd_estimate": None,
        "snapshot_start": None,
        "nested_forks": [],
    }
    fork = "00000000000000000000000000000002"

    def archive(node: str) -> dict[str, Any]:
        path = f"branches/{fork}/children/{node}"
        return {"path": path, "observation": f"{path}/observation.json", "result": None}

    usage = {"input": 8, "output": 300, "cache_read": 60000, "cache_creation": 4000, "total": 64308}
    assert document == {
        "kind": "benchflow.branch-view",
        "schema_version": "1.1",
        "schema": "benchflow.branch-view/1",
        "trial": {
            "name": "hello-world-task__0000abcd",
            "task": "hello-world-task",
            "reward": 1.0,
            "retry": None,
            "checkpoint_source": None,
            "parent": "kept",
            "unscored_by_design": False,
        },
        "totals": {
            "forks": 1,
            "children": 2,
            "cost": None,
            "usage": usage,
            "usd_estimate": None,
            "per_scored_child": {
                "scored": 2,
                "tokens": 64308 // 2,
                "usd": None,
                "usd_estimate": None,
                "sandbox_seconds": None,
            },
        },
        "pricing": None,
        "forks": [
            {
                "id": fork,
                "kind": "fork",
                "reason": None,
                "checkpoint": None,
                "parent_node": "n4",
                "depth": 1,
                "forked_by": {"rollout": None, "child_node": None, "child_label": None},
                "status": "completed",
                "value": 0.5,
                "value_stderr": None,
                "parent_restore": "restored",
                "error": None,
                "children_mode": None,
                "snapshot": {
                    "layers_requested": ["sandbox"],
                    "layers_captured": ["sandbox"],
                    "agent_session": None,
                    "retention": "deleted",
                    "provider": "daytona",
                    "reused": False,
                },
                "timing_sec": {
                    "checkpoint": 42.0,
                    "child_restore": [16.0, 2.0],
                    "parent_restore": 2.0,
                },
                "cost": None,
                "usage": usage,
                "usd_estimate": None,
                "children": [
                    {
                        **child,
                        "node_id": "n5",
                        "index": 0,
                        "label": "baseline",
                        "reward": 1.0,
                        "advantage": 0.5,
                        "usage": {
                            "n_input_tokens": 4,
                            "n_output_tokens": 100,
                            "n_cache_read_tokens": 30000,
                            "n_cache_creation_tokens": 2000,
                            "total_tokens": 32104,
                        },
                        "timing_sec": {
                            "agent_setup": 6.0,
                            "agent_execution": 4.0,
                            "verifier": 30.0,
                        },
                        "archive": archive("n5"),
                    },
                    {
                        **child,
                        "node_id": "n9",
                        "index": 1,
                        "label": "hint-reuse-draft",
                        "reward": 0.0,
                        "advantage": -0.5,
                        "usage": {
                            "n_input_tokens": 4,
                            "n_output_tokens": 200,
                            "n_cache_read_tokens": 30000,
                            "n_cache_creation_tokens": 2000,
                            "total_tokens": 32204,
                        },
                        "timing_sec": {
                            "agent_setup": 5.0,
                            "agent_execution": 7.0,
                            "verifier": 33.0,
                        },
                        "archive": archive("n9"),
                    },
                ],
            }
        ],
    }
    # importing it again says nothing new
    again = run_cli("import", str(FIXTURE))
    assert "0 events appended" in again.stderr


# --- nested forks and a retry: benchflow's `_trial` of tests/test_branch_view.py ------------------


def nested_trial(jobs: Path) -> BranchTrial:
    """A trial forked in two isolated children at n4; the `hint` child forks again from its own
    rollout (`fix` scored, `leave` unscored); then a checkpoint retry from prompt:1."""
    trial = BranchTrial(jobs, JOB, "task", "abc00000")
    trial.execute(2)
    trial.after_prompt(1)
    trial.execute(2)
    own = "own prompt (153 characters, sha256:000000000abc)"
    nested = Fork(
        [
            Child("fix", reward=1.0, usage={"total_tokens": 100}),
            Child("leave", raises="UnscoredChildError", usage={"total_tokens": 100}),
        ],
        isolated=True,
        concurrency=2,
    )
    trial.branch(
        Fork(
            [
                Child("hint", own, reward=0.0, usage={"total_tokens": 100}, forks=[nested]),
                Child("baseline", "parent's remaining prompts (1)", usage={"total_tokens": 100}),
            ],
            isolated=True,
            concurrency=2,
        )
    )
    trial.finalize(0.0)
    trial.retry(Child(reward=1.0, usage={"total_tokens": 100}))
    return trial


def test_nested_forks_and_a_retry_project_every_field(run_cli: Cli, tmp_path: Path) -> None:
    """benchflow's `test_modern_tree_projects_every_field`, on a trial its writers would write."""
    trial = nested_trial(tmp_path / "jobs")
    run = imported(run_cli, trial)
    document = view(run_cli, run)
    outer, inner, retry = document["forks"]
    assert document["trial"] == {
        "name": "task__abc00000",
        "task": "task",
        "reward": 0.0,
        "retry": json.loads((trial.dir / "result.json").read_text())["retry"],
        "checkpoint_source": None,
        "parent": "kept",
        "unscored_by_design": False,
    }
    assert document["trial"]["retry"]["reward"] == 1.0  # beside the trial's 0.0, never over it
    assert (outer["kind"], outer["depth"], outer["forked_by"]) == (
        "fork",
        1,
        {"rollout": "task__abc00000", "child_node": None, "child_label": None},
    )
    hint, baseline = outer["children"]
    assert (inner["depth"], inner["forked_by"]) == (
        2,
        {"rollout": hint["node_id"], "child_node": hint["node_id"], "child_label": "hint"},
    )
    assert (retry["kind"], retry["reason"], retry["checkpoint"], retry["depth"]) == (
        "retry",
        "failure",
        "prompt:1",
        1,
    )
    assert outer["children_mode"] == {
        "isolated": True,
        "concurrency": 2,
        "prewarm": 2,
        "child_retries": 0,
        "continue_after_child_failure": True,
    }
    assert outer["snapshot"] == {
        "layers_requested": ["sandbox"],
        "layers_captured": ["sandbox"],
        "agent_session": "fresh",
        "retention": "deleted",
        "provider": "daytona",
        "reused": False,
    }
    assert outer["cost"]["sandbox_seconds"] == 150.0 + 120.0  # the parent's wall + two children
    assert (hint["requested"], hint["execution"]) == (
        "own prompt (153 characters, sha256:000000000abc)",
        "runner",
    )
    assert (hint["advantage"], baseline["advantage"]) == (-0.5, 0.5)
    assert hint["cost"] == {"tokens": 100, "usd": None, "sandbox_seconds": 60.0}
    assert hint["timing_sec"]["sandbox_from_snapshot"] == 20.5
    assert hint["snapshot_start"]["verifier_baseline"] == "inherited"
    assert (hint["nested_forks"], baseline["nested_forks"]) == ([inner["id"]], [])
    assert (hint["attempts"], hint["retried_after"]) == (1, None)
    path = hint["archive"]["path"]
    assert hint["archive"] == {
        "path": path,
        "observation": f"{path}/observation.json",
        "result": f"{path}/result.json",
    }
    fix, leave = inner["children"]
    assert (leave["status"], leave["reward"], leave["advantage"]) == ("unscored", None, None)
    assert leave["error"] == {"type": "UnscoredChildError", "code": "missing_verifier_reward"}
    assert (inner["value"], fix["advantage"]) == (None, None)  # V needs every child scored
    assert retry["children"][0]["advantage"] == 0.0
    assert retry["parent_restore"] == "not_needed"
    assert document["totals"]["forks"] == 3 and document["totals"]["children"] == 5
    assert document["totals"]["per_scored_child"]["scored"] == 4
    assert document["totals"]["per_scored_child"]["tokens"] == 500 // 4
    # result.json's branches.cost: the nested fork's parent sandbox (an isolated child's) once
    assert (
        document["totals"]["cost"]
        == json.loads((trial.dir / "result.json").read_text())["branches"]["cost"]
    )
    assert document["totals"]["cost"]["sandbox_seconds"] == 150 + 120 + 120 + 60
    exported = run_cli("export", "branch-view", run).stdout
    assert "bf-snap" not in exported  # snapshot refs are capability handles


def test_a_retry_is_one_child_and_never_replaces_the_trial_reward(
    run_cli: Cli, tmp_path: Path
) -> None:
    """A trial that failed (reward 0.0) retried from its last kept checkpoint
    (`checkpoint_retry.run_checkpoint_retry`): the one-child fork is not refused."""
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "a1b2c3d4")
    trial.execute(4)
    trial.after_prompt(1)
    trial.execute(3)
    trial.finalize(0.0)
    retry = trial.retry(
        Child(
            reward=1.0,
            usage=native_usage(5000),
            seconds=80.0,
            snapshot_start={
                "agent": "installed",
                "verifier_baseline": "inherited",
                "setup_commands": "skipped",
            },
        )
    )
    assert retry is not None
    run = imported(run_cli, trial)
    document = view(run_cli, run)
    [fork] = document["forks"]
    [child] = fork["children"]
    assert document["trial"]["reward"] == 0.0
    assert document["trial"]["retry"] == {
        "status": "completed",
        "reason": "failure",
        "checkpoint": "prompt:1",
        "fork_id": fork["id"],
        "reward": 1.0,
        "original_reward": 0.0,
        "path": child["archive"]["path"],
        "tool_calls": 7,
        "no_work": False,
    }
    assert document["trial"]["parent"] == "kept"  # not_needed is not skipped
    assert (fork["kind"], fork["reason"], fork["checkpoint"], fork["depth"]) == (
        "retry",
        "failure",
        "prompt:1",
        1,
    )
    assert (fork["value"], fork["value_stderr"], fork["status"]) == (1.0, None, "completed")
    assert fork["children_mode"] == {"isolated": True, "concurrency": 1, "prewarm": 1}
    assert fork["snapshot"] == {
        "layers_requested": ["sandbox"],
        "layers_captured": ["sandbox"],
        "agent_session": "fresh",
        "retention": "kept",
        "provider": "daytona",
        "reused": False,
    }
    assert fork["timing_sec"] == {
        "checkpoint": None,
        "child_restore": [20.5],
        "children": None,
        "parent_restore": None,
    }
    assert fork["cost"] == {
        "tokens": 5000,
        "usd": None,
        "usd_known": False,
        "wall_seconds": 95.0,
        "parent_sandbox_seconds": 0.0,
        "children_sandbox_seconds": 80.0,
        "sandbox_seconds": 80.0,
    }
    assert (child["label"], child["requested"], child["execution"]) == (
        "retry",
        "prompts after the checkpoint (1)",
        "runner",
    )
    assert (child["advantage"], child["attempts"]) == (0.0, 1)
    assert document["totals"]["cost"] == {
        "tokens": 5000,
        "usd": None,
        "usd_known": False,
        "sandbox_seconds": 80.0,
    }
    assert document["totals"]["per_scored_child"] == {
        "scored": 1,
        "tokens": 5000,
        "usd": None,
        "usd_estimate": None,
        "sandbox_seconds": 80.0,
    }
    [opened] = facts(run_cli, "fork.opened")
    assert (opened["kind"], opened["reason"], opened["checkpoint"]) == (
        "retry",
        "failure",
        "prompt:1",
    )
    [closed] = facts(run_cli, "fork.closed")
    assert (closed["outcome"], closed["value"]) == ("completed", 1.0)
    [trial_fact] = facts(run_cli, "run.trial_described")
    assert [row["status"] for row in trial_fact["checkpoints"]["checkpoints"]] == ["kept"]


def test_a_retry_without_a_kept_checkpoint_is_recorded_on_a_trial_that_never_branched(
    run_cli: Cli, tmp_path: Path
) -> None:
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "a1b2c3d4")
    trial.execute(3)
    trial.after_prompt(1, status="failed")
    trial.finalize(0.0)
    assert trial.retry(Child()) is None
    run = imported(run_cli, trial)
    [described] = facts(run_cli, "run.trial_described")
    assert described["retry"] == {"status": "no_checkpoint", "reason": "failure"}
    assert described["checkpoints"]["checkpoints"][0]["error"] == {
        "type": "RuntimeError",
        "code": "snapshot_failed",
    }
    document = view(run_cli, run)
    assert document["forks"] == [] and document["trial"]["parent"] is None
    assert document["trial"]["retry"] == {"status": "no_checkpoint", "reason": "failure"}


# --- a discarded parent ---------------------------------------------------------------------------


def test_a_discarded_parent_is_unscored_by_design_not_pending(run_cli: Cli, tmp_path: Path) -> None:
    """benchflow's test_branch_parent_discarded: `--parent discard` finalizes the trial unverified
    (`rewards` null) and result.json says `branches.parent: "discarded"`."""
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "d15ca4d0")
    trial.execute(4)
    trial.branch(Fork([Child("a", reward=1.0), Child("b", reward=0.0)], restore_parent=False))
    trial.finalize(None)
    run = imported(run_cli, trial)
    document = view(run_cli, run)
    assert (document["trial"]["reward"], document["trial"]["parent"]) == (None, "discarded")
    assert document["trial"]["unscored_by_design"] is True
    assert document["forks"][0]["parent_restore"] == "skipped"
    assert document["forks"][0]["timing_sec"]["parent_restore"] is None
    [row] = json.loads(run_cli("runs", "--format", "json").stdout)
    assert row["outcome"] == "discarded"
    assert "skipped: unscored by design" in run_cli("tree", run).stdout
    # not attempted-and-unscored: the release gate asks no reward of it (the review skill still
    # reads its files, which this writer leaves without trajectories)
    audit = run_cli("audit", "--format", "json", ok=False)
    assert "neither run.scored nor run.unscored" not in audit.stdout
    assert "pending" not in audit.stdout


# --- children that never started, failed, cancelled, retried --------------------------------------


def test_children_that_never_started_have_no_node_and_no_reward(
    run_cli: Cli, tmp_path: Path
) -> None:
    """In place, a child that raised stops the fork: the later children stay not_started with
    `node_id: null` (the import used to refuse them)."""
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "0000beef")
    trial.execute(4)
    trial.branch(
        Fork(
            [
                Child("ok", reward=1.0),
                Child("boom", raises="RuntimeError", steps=0),
                Child("late"),
            ]
        )
    )
    trial.finalize(1.0)
    run = imported(run_cli, trial)
    [fork] = view(run_cli, run)["forks"]
    ok, boom, late = fork["children"]
    assert (fork["status"], fork["value"], fork["error"]) == (
        "partial",
        None,
        {"type": "RuntimeError", "code": "execution_failed"},
    )
    assert boom["error"] == {"type": "RuntimeError", "code": "execution_failed"}
    assert (boom["status"], boom["reward"]) == ("failed", None)
    assert late == {
        "node_id": None,
        "index": 2,
        "label": "late",
        "requested": None,
        "execution": "unspecified",
        "status": "not_started",
        "reward": None,
        "reward_source": None,
        "advantage": None,
        "error": None,
        "attempts": None,
        "retried_after": None,
        "cost": None,
        "usage": None,
        "usd_estimate": None,
        "timing_sec": None,
        "snapshot_start": None,
        "archive": {"path": None, "observation": None, "result": None},
        "nested_forks": [],
    }
    assert ok["cost"]["sandbox_seconds"] == 60.0  # the parent's sandbox, held by the child
    [closed] = facts(run_cli, "fork.closed")
    assert (closed["outcome"], closed["error"]) == ("partial", "RuntimeError: execution_failed")
    [failed] = facts(run_cli, "fork.child_failed")
    assert failed["error"] == "RuntimeError: execution_failed"


def test_a_failed_checkpoint_leaves_every_child_not_started(run_cli: Cli, tmp_path: Path) -> None:
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "0000dead")
    trial.execute(4)
    trial.branch(Fork([Child("a"), Child("b")], checkpoint_raises="SnapshotError"))
    trial.finalize(1.0)
    run = imported(run_cli, trial)
    [fork] = view(run_cli, run)["forks"]
    assert (fork["status"], fork["parent_restore"], fork["cost"]) == (
        "failed",
        "not_attempted",
        None,
    )
    assert [c["status"] for c in fork["children"]] == ["not_started", "not_started"]
    assert fork["snapshot"]["layers_captured"] == []
    [opened] = facts(run_cli, "fork.opened")
    assert opened["children"] == []


def test_child_statuses_attempts_and_cleanup_errors(run_cli: Cli, tmp_path: Path) -> None:
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "0000cafe")
    trial.execute(4)
    trial.branch(
        Fork(
            [
                Child("retried", reward=1.0, retried_after="ConnectTimeout"),
                Child("unscored", raises="UnscoredChildError"),
                Child(
                    "cleanup",
                    reward=0.0,
                    cleanup_error={"type": "TimeoutError", "code": "unresolved_cleanup"},
                ),
                Child("cancelled", raises="CancelledError"),
            ],
            child_retries=1,
            continue_after_child_failure=True,
        )
    )
    trial.finalize(1.0)
    run = imported(run_cli, trial)
    [fork] = view(run_cli, run)["forks"]
    retried, unscored, _, cancelled = fork["children"]
    assert (retried["attempts"], retried["retried_after"]) == (
        2,
        {"type": "ConnectTimeout", "code": "execution_failed"},
    )
    assert (unscored["status"], unscored["reward"]) == ("unscored", None)
    assert cancelled["status"] == "cancelled"
    assert fork["status"] == "cancelled"
    assert fork["children_mode"]["child_retries"] == 1
    [described] = [c for c in facts(run_cli, "fork.child_described") if c["index"] == 2]
    assert described["cleanup_error"] == {"type": "TimeoutError", "code": "unresolved_cleanup"}
    assert [f["index"] for f in facts(run_cli, "fork.child_unscored")] == [1]


# --- value_stderr, USD, estimates -----------------------------------------------------------------


def test_value_stderr_and_usd_known_only_when_every_child_reported_it(
    run_cli: Cli, tmp_path: Path
) -> None:
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "0000f00d")
    trial.execute(4)
    trial.branch(
        Fork(
            [
                Child("a", reward=1.0, usage=native_usage(5000, cost_usd=0.25)),
                Child("b", reward=0.0, usage=native_usage(3000, cost_usd=0.125)),
            ],
            retain=True,
        )
    )
    trial.branch(
        Fork(
            [
                Child("c", reward=1.0, usage=native_usage(1000, cost_usd=0.5)),
                Child("d", reward=1.0, usage=native_usage(1000)),
            ]
        )
    )
    trial.finalize(1.0)
    run = imported(run_cli, trial)
    document = view(run_cli, run)
    priced, unknown = document["forks"]
    # sample std of (1, 0) is sqrt(0.5); over sqrt(2): 0.5
    assert priced["value_stderr"] == 0.5
    assert unknown["value_stderr"] == 0.0
    assert (priced["cost"]["usd"], priced["cost"]["usd_known"]) == (0.375, True)
    assert (unknown["cost"]["usd"], unknown["cost"]["usd_known"]) == (None, False)
    assert priced["snapshot"]["retention"] == "kept"
    assert document["totals"]["cost"]["usd"] is None  # one fork's USD is unknown


def test_prices_give_usd_estimates_in_the_documents_own_shape(run_cli: Cli, tmp_path: Path) -> None:
    """benchflow's `test_usage_classes_and_estimate_with_given_prices`: each class at its price."""
    usage = {
        "n_input_tokens": 10,
        "n_output_tokens": 100,
        "n_cache_read_tokens": 40000,
        "n_cache_creation_tokens": 200,
        "total_tokens": 40310,
    }
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "0000abba")
    trial.execute(4)
    trial.branch(Fork([Child("a", usage=usage), Child("b", reward=0.0, usage=usage)]))
    trial.finalize(1.0)
    run = imported(run_cli, trial)
    prices = {
        "model": "m",
        "source": "test table",
        "usd_per_token": {
            "input": 3e-6,
            "output": 15e-6,
            "cache_read": 3e-7,
            "cache_creation": 3.75e-6,
        },
    }
    (tmp_path / "prices.json").write_text(json.dumps(prices))
    document = view(run_cli, run, "--prices", str(tmp_path / "prices.json"))
    one = 10 * 3e-6 + 100 * 15e-6 + 40000 * 3e-7 + 200 * 3.75e-6
    [fork] = document["forks"]
    assert document["pricing"] == prices
    assert all(math.isclose(c["usd_estimate"], one) for c in fork["children"])
    assert math.isclose(fork["usd_estimate"], 2 * one)
    assert fork["usage"] == {
        "input": 20,
        "output": 200,
        "cache_read": 80000,
        "cache_creation": 400,
        "total": 80620,
    }
    assert math.isclose(document["totals"]["per_scored_child"]["usd_estimate"], one)
    assert document["totals"]["per_scored_child"]["tokens"] == 80620 // 2
    # a child that used no tokens costs 0, priced or not
    assert view(run_cli, run)["forks"][0]["children"][0]["usd_estimate"] is None
    (tmp_path / "bad.json").write_text(json.dumps({"usd_per_token": {"input": "cheap"}}))
    refused = run_cli(
        "export", "branch-view", run, "--prices", str(tmp_path / "bad.json"), ok=False
    )
    assert refused.exit_code == 1 and "usd_per_token.input" in refused.stderr


def test_a_child_without_tokens_costs_nothing_without_prices(run_cli: Cli, tmp_path: Path) -> None:
    zero = dict.fromkeys(("n_input_tokens", "n_output_tokens", "total_tokens"), 0)
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "000000ac")
    trial.execute(4)
    trial.branch(Fork([Child("oracle", usage=zero), Child("nop", reward=0.0, usage=zero)]))
    trial.finalize(1.0)
    document = view(run_cli, imported(run_cli, trial))
    assert [c["usd_estimate"] for c in document["forks"][0]["children"]] == [0.0, 0.0]
    assert document["totals"]["usd_estimate"] == 0.0


# --- where a trial came from, what it kept --------------------------------------------------------


def test_a_trial_started_from_a_kept_checkpoint_names_it_without_its_ref(
    run_cli: Cli, tmp_path: Path
) -> None:
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "000c0de0")
    trial.started_from_checkpoint("fix-bug__old00000", "prompt:1")
    trial.execute(2)
    trial.branch(Fork([Child("a"), Child("b", reward=0.0)], reuse_ref="bf-snap-ckpt-1"))
    trial.finalize(1.0)
    run = imported(run_cli, trial)
    document = view(run_cli, run)
    assert document["trial"]["checkpoint_source"] == {
        "trial": "fix-bug__old00000",
        "checkpoint": "prompt:1",
        "provider": "daytona",
        "prefix_events": 5,
    }
    assert document["forks"][0]["snapshot"]["reused"] is True
    assert "bf-snap" not in run_cli("export", "branch-view", run).stdout
    # the reused image was captured elsewhere: this fork captured nothing
    assert facts(run_cli, "snapshot.captured") == []


def test_labels_json_must_agree_with_the_tree(run_cli: Cli, tmp_path: Path) -> None:
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "00001abe")
    trial.execute(4)
    record = trial.branch(Fork([Child("a"), Child("b", reward=0.0)]))
    trial.finalize(1.0)
    labels = trial.dir / "branches" / record["id"] / "labels.json"
    document = json.loads(labels.read_text())
    assert [c["label"] for c in document["children"]] == ["a", "b"]
    document["children"][1]["reward"] = 1.0
    labels.write_text(json.dumps(document))
    refused = run_cli("import", str(trial.dir), ok=False)
    assert refused.exit_code == 1 and "labels.json" in refused.stderr


@pytest.mark.parametrize("baseline", ["inherited", "recaptured"])
def test_a_recaptured_verifier_baseline_is_an_audit_warning(
    run_cli: Cli, tmp_path: Path, baseline: str
) -> None:
    """`recaptured`: the snapshot had no pre-agent verifier baseline, so tampering before the fork
    is not undone at verification."""
    start = {"agent": "reused", "verifier_baseline": baseline, "setup_commands": "skipped"}
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "000ba5e0")
    trial.execute(4)
    trial.branch(
        Fork(
            [Child("a", snapshot_start=start), Child("b", reward=0.0, snapshot_start=start)],
            isolated=True,
        )
    )
    trial.finalize(1.0)
    run = imported(run_cli, trial)
    audit = json.loads(run_cli("audit", "--format", "json", ok=False).stdout)
    warned = [f for f in audit["findings"] if f["check"] == "branch-snapshot" and f["run"] == run]
    assert len(warned) == (2 if baseline == "recaptured" else 0)
    assert all(f["level"] == "warning" for f in warned)


def test_a_moved_trial_reimports_as_a_new_location_only(run_cli: Cli, tmp_path: Path) -> None:
    trial = nested_trial(tmp_path / "jobs")
    run_cli("import", str(trial.dir))
    head = run_cli("head").stdout
    moved = tmp_path / "elsewhere" / JOB / trial.name
    shutil.copytree(trial.dir, moved)
    again = run_cli("import", str(moved))
    # a new location and a new reading of the trial folder (its job folder moved): no branch record
    assert "2 events appended" in again.stderr, again.stderr
    assert run_cli("head").stdout != head


@pytest.mark.parametrize("branched", [True, False])
def test_a_trial_read_before_its_retry_takes_the_retry_later(
    run_cli: Cli, tmp_path: Path, branched: bool
) -> None:
    """`checkpoint_retry` runs after the trial finished and rewrites result.json: a trial imported
    in between (with or without forks of its own) takes the retry on the next import."""
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "0000face")
    trial.execute(2)
    trial.after_prompt(1)
    trial.execute(2)
    if branched:
        trial.branch(Fork([Child("a", reward=0.0), Child("b", reward=0.0)]))
    trial.finalize(0.0)
    run = imported(run_cli, trial)
    before = view(run_cli, run) if branched else None
    trial.retry(Child(reward=1.0))
    again = run_cli("import", str(trial.dir))
    assert "0 runs rejected" in again.stderr, again.stderr
    document = view(run_cli, run)
    assert document["trial"]["retry"]["status"] == "completed"
    assert document["trial"]["reward"] == 0.0
    assert [fork["kind"] for fork in document["forks"]] == ["fork"] * branched + ["retry"]
    if before is not None:
        assert document["forks"][0] == before["forks"][0]
    assert len(facts(run_cli, "run.trial_described")) == 2


def test_a_trial_that_never_forked_has_a_view_without_forks(run_cli: Cli, tmp_path: Path) -> None:
    """benchflow's view of a trial without tree.json: no fork, no parent, its own reward."""
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "000000f0")
    trial.execute(3)
    trial.finalize(1.0)
    document = view(run_cli, imported(run_cli, trial))
    assert document["trial"] == {
        "name": trial.name,
        "task": "fix-bug",
        "reward": 1.0,
        "retry": None,
        "checkpoint_source": None,
        "parent": None,
        "unscored_by_design": False,
    }
    assert document["forks"] == [] and document["totals"]["cost"] is None
    assert document["totals"]["per_scored_child"]["scored"] == 0
    # a PR-#1046 run's forks are no main-line forks: it has no branch view
    run_cli("import", str(EXAMPLES / "pr-layout" / "ablate-2026-11-02__10-15-00"))
    refused = run_cli(
        "export", "branch-view", "ablate-2026-11-02__10-15-00/ablation/csv-dedupe", ok=False
    )
    assert refused.exit_code == 1 and "forks without them" in refused.stderr


def test_forks_nest_at_any_depth(run_cli: Cli, tmp_path: Path) -> None:
    """An isolated child forks from its own rollout, and a child of that fork again: each fork's
    `rollout` is the node id of the child that made it."""
    deepest = Fork([Child("x"), Child("y", reward=0.0)], isolated=True)
    middle = Fork([Child("deep", forks=[deepest]), Child("flat")], isolated=True)
    trial = BranchTrial(tmp_path / "jobs", JOB, "fix-bug", "000deep0")
    trial.execute(4)
    trial.branch(Fork([Child("top", forks=[middle]), Child("other")], isolated=True))
    trial.finalize(1.0)
    forks = view(run_cli, imported(run_cli, trial))["forks"]
    assert [(f["depth"], f["forked_by"]["child_label"]) for f in forks] == [
        (1, None),
        (2, "top"),
        (3, "deep"),
    ]
    top = forks[0]["children"][0]
    deep = forks[1]["children"][0]
    assert (top["nested_forks"], deep["nested_forks"]) == ([forks[1]["id"]], [forks[2]["id"]])
    assert forks[2]["forked_by"]["rollout"] == deep["node_id"]
    # the nested forks' parent sandboxes are their children's: counted once in the totals
    assert view(run_cli, f"{JOB}/{trial.name}")["totals"]["cost"]["sandbox_seconds"] == (
        150.0 + 3 * 120.0
    )

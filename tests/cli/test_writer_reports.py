"""Rule 3: ablation reports are written, not recomputed (docs/benchflow-formats.md §5, §13.3).

`ablate._branch_into_arms` sets `value` only when `branch_at_stage` returns, `_finalize_report` puts
the branch error on the report when no arm carries it, `_run_parent` takes
`parent.reward`/`parent.error` from `verify()` (before `_maybe_classify_api_error` rewrites
result.json), and a request-global parent failure skips the fork altogether. Each run below is built
in those steps; the export must equal the report benchflow wrote.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.benchflow_writer import Arm, Child, ChildRaised, WriterRun, ablation_report, dump
from tests.conftest import Cli
from tests.writer_stages import TASK, VERIFY_REFS, snap

SKILL = {"config_override_sha256": None, "environment_ref": None, "injected_prompt_sha256": None}
ARMS = [
    Arm("with-skill", "skill-mode", {**SKILL, "skill_mode": "with-skill"}, wall_clock_sec=301.5),
    Arm("no-skill", "skill-mode", {**SKILL, "skill_mode": "no-skill"}, wall_clock_sec=288.0),
]
OUT = "ablate-2026-11-02__10-15-00"
KEY = f"{OUT}/ablation/{TASK}"
RELEASE_ERROR = (
    "ArtifactCustodyError: could not move 1 of 3 held entries back into the parent's mounts; "
    "the hold is preserved at branches/root/parent"
)


def parent_run(tmp_path: Path) -> WriterRun:
    run = WriterRun(tmp_path / OUT / "ablation" / TASK, snapshot_stages={"env-ready"})
    run.start(snap("envready000"))
    return run


def branch(run: WriterRun, release_fails: str | None = None) -> tuple[float | None, str | None]:
    """ablate._branch_into_arms: the value branch_at_stage returned, or the branch error it
    raised."""
    try:
        return run.branch_at_stage(
            "env-ready",
            [
                Child(arm.delta, reward=reward)
                for arm, reward in zip(ARMS, (1.0, 0.0), strict=False)
            ],
            release_fails=release_fails,
        ), None
    except ChildRaised as exc:
        return None, f"ChildRaised: {exc}"


def export_report(run_cli: Cli, out: Path, fork: str = "root") -> tuple[dict, dict]:
    run_cli("import", str(out))
    return json.loads(run_cli("export", "ablation", f"{KEY}:{fork}").stdout), json.loads(
        (out / "ablation.json").read_text()
    )


@pytest.mark.parametrize(
    "hold_left", [True, False]
)  # False: the preserved hold was recovered by hand since
def test_a_fork_that_raised_after_every_child_scored_exports_null_value_and_the_branch_error(
    run_cli: Cli, tmp_path: Path, hold_left: bool
) -> None:
    """rollout_branch.branch: MountedArtifacts.release fails closed in the finally after both
    children scored; branch_at_stage raises, so _branch_into_arms leaves value null and
    _finalize_report sets error."""
    run = parent_run(tmp_path)
    run.execute(4)
    run.verify(VERIFY_REFS)
    value, error = branch(run, release_fails=RELEASE_ERROR)  # the writer leaves the hold behind
    if not hold_left:
        shutil.rmtree(run.run_dir / "branches" / "root" / "parent")
    run.write_run_files(TASK, rewards={"reward": 0.0})
    report = ablation_report(
        run,
        task=TASK,
        stage="env-ready",
        arms=ARMS,
        parent_reward=0.0,
        parent_error=None,
        value=value,
        branch_error=error,
    )
    assert (report["value"], report["error"], [a["status"] for a in report["arms"]]) == (
        None,
        error,
        ["pass", "fail"],
    )
    dump(run.run_dir.parent.parent / "ablation.json", report)
    exported, written = export_report(run_cli, run.run_dir.parent.parent)
    assert exported == written
    assert json.loads(run_cli("export", "tree", KEY).stdout) == json.loads(
        (run.run_dir / "tree.json").read_text()
    )


def test_the_parent_block_keeps_what_verify_returned_when_result_json_was_reclassified(
    run_cli: Cli, tmp_path: Path
) -> None:
    """ablate._run_parent records verify()'s reward; Rollout._build_result then runs
    _maybe_classify_api_error, which nulls result.json's rewards and sets its error. Both are
    kept."""
    run = parent_run(tmp_path)
    run.execute(0)  # zero tokens, zero tool calls: the suspected-API-error shape
    run.verify(VERIFY_REFS)
    value, error = branch(run)
    run.write_run_files(
        TASK,
        rewards=None,
        error="suspected provider api error: agent ended with zero tokens and zero "
        "tool calls (no scoreable model activity)",
    )
    report = ablation_report(
        run,
        task=TASK,
        stage="env-ready",
        arms=ARMS,
        parent_reward=1.0,
        parent_error=None,
        value=value,
        branch_error=error,
    )
    dump(run.run_dir.parent.parent / "ablation.json", report)
    exported, written = export_report(run_cli, run.run_dir.parent.parent)
    assert exported["parent"] == {"reward": 1.0, "error": None, "run_dir": str(run.run_dir)}
    assert exported == written
    [failed] = [
        json.loads(line)["fact"]
        for line in run_cli("log", "--format", "jsonl").stdout.splitlines()
        if json.loads(line)["type"] == "run.failed"
    ]
    assert failed["error"].startswith("suspected provider api error")


def test_a_report_whose_arms_were_all_skipped_is_recorded_and_exported(
    run_cli: Cli, tmp_path: Path
) -> None:
    """ablate._branch_into_arms: a request-global parent error skips the fork (no tree.json);
    outcomes_for_arms pairs no arm with a node, and _finalize_report puts the skip message on the
    report."""
    run = parent_run(tmp_path)
    parent_error = (
        "AgentProtocolError: model 'gemini-2.5-pro' does not support reasoning effort 'xhigh'"
    )
    error = (
        "the parent run failed with a request-global "
        "configuration error, so the arms were not attempted: "
        f"{parent_error} — every branch child would re-run "
        f"the same rejected agent/model configuration"
    )
    run.write_run_files(TASK, rewards=None, error=parent_error)
    report = ablation_report(
        run,
        task=TASK,
        stage="env-ready",
        arms=ARMS,
        parent_reward=None,
        parent_error=parent_error,
        value=None,
        branch_error=error,
        tree_written=False,
    )
    assert [a["status"] for a in report["arms"]] == ["skipped", "skipped"] and report[
        "error"
    ] == error
    dump(run.run_dir.parent.parent / "ablation.json", report)
    assert not (run.run_dir / "tree.json").exists()
    exported, written = export_report(run_cli, run.run_dir.parent.parent)
    assert exported == written


def test_a_report_whose_research_marker_never_appeared_is_recorded_and_exported(
    run_cli: Cli, tmp_path: Path
) -> None:
    """ablate._branch_into_arms: with --mark-research-end-on and no marker, post-research was never
    captured, so the fork is skipped; _retain_and_cleanup finds no registry entry (stage_snapshot
    null)."""
    run = WriterRun(tmp_path / OUT / "ablation" / TASK, snapshot_stages={"post-research"})
    run.start(snap("envready000"))
    run.execute(3)
    run.verify(VERIFY_REFS)
    error = (
        "the research-end marker 'PLAN.md' never appeared in the workspace during the "
        "parent run, so 'post-research' was never captured and there is nothing to branch"
    )
    run.write_run_files(TASK, rewards={"reward": 1.0})
    report = ablation_report(
        run,
        task=TASK,
        stage="post-research",
        arms=ARMS,
        parent_reward=1.0,
        parent_error=None,
        value=None,
        branch_error=error,
        tree_written=False,
    )
    assert report["stage_snapshot"] is None and not (run.run_dir / "stage_snapshots.json").exists()
    dump(run.run_dir.parent.parent / "ablation.json", report)
    exported, written = export_report(run_cli, run.run_dir.parent.parent)
    assert exported == written

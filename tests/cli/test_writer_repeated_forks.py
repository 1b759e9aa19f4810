"""Two forks at one recorded stage (docs/benchflow-formats.md §13.5).

`rollout_branch.branch` restores `_stage_nodes` through `_LinearState.restore_onto`, so a second
`branch_at_stage(S)` forks the node of the first; `_run_children` attaches its children after the
first fork's, and both forks write the same `provenance.json`. `tests/benchflow_writer.py`
(`WriterRun.branch_at_stage`, `_fork`, `restore`, `write_lineage`) builds the runs in those steps;
the CLI imports them into a real SQLite store and the exports must equal what was written. Where V,
the outcomes and the report cannot tell the forks apart, the children are recorded as one fork per
run of siblings (what one `branch()` leaves, the common case); the exports still equal the files.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from tests.benchflow_writer import Arm, Child, ChildRaised, WriterRun, ablation_report, dump
from tests.conftest import Cli
from tests.writer_stages import VERIFY_REFS, exports, on_disk, prompt_delta

RUN = "nightly/t__1"


def verified_run(tmp_path: Path) -> WriterRun:
    """Rollout.verify() captured pre-verify (and post-verify) on the run's last node, n3."""
    run = WriterRun(tmp_path / "jobs" / RUN, snapshot_stages={"pre-verify"})
    run.execute(3)
    run.verify(VERIFY_REFS)
    return run


def pair(first: float, second: float | None, *, raises: str | None = None) -> list[Child]:
    return [
        Child(prompt_delta("1"), reward=first),
        Child(prompt_delta("2"), reward=second, raises=raises),
    ]


def forks(run_cli: Cli) -> list[dict]:
    return json.loads(
        run_cli(
            "sql",
            "SELECT fork, node, stage, outcome, value FROM forks ORDER BY fork",
            "--format",
            "json",
        ).stdout
    )


def children_of(run_cli: Cli) -> dict[str, list[str]]:
    rows = json.loads(
        run_cli(
            "sql", "SELECT fork, node FROM children ORDER BY child_index", "--format", "json"
        ).stdout
    )
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(row["fork"], []).append(row["node"])
    return out


def assert_round_trip(run_cli: Cli, run: WriterRun) -> None:
    tree, stages = exports(run_cli, RUN)
    assert tree == on_disk(run.run_dir, "tree.json")
    assert stages == on_disk(run.run_dir, "stage_snapshots.json")


def test_two_completed_forks_at_pre_verify_are_two_forks_with_the_second_ones_v(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = verified_run(tmp_path)
    assert run.branch_at_stage("pre-verify", pair(1.0, 0.0)) == 0.5
    assert run.branch_at_stage("pre-verify", pair(1.0, 1.0)) == 1.0  # V on n3 is now 1.0, not 0.75
    run.write_run_files("t", rewards={"reward": 1.0})
    run_cli("import", str(tmp_path / "jobs"))
    assert_round_trip(run_cli, run)
    assert forks(run_cli) == [
        {"fork": "n3", "node": "n3", "stage": "pre-verify", "outcome": "completed", "value": 0.5},
        {"fork": "n3.2", "node": "n3", "stage": "pre-verify", "outcome": "completed", "value": 1.0},
    ]
    assert children_of(run_cli) == {"n3": ["n4", "n5"], "n3.2": ["n6", "n7"]}
    assert "0 events appended" in run_cli("import", str(tmp_path / "jobs")).stderr


def test_a_second_fork_whose_child_raised_keeps_the_first_forks_v(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = verified_run(tmp_path)
    run.branch_at_stage("pre-verify", pair(1.0, 0.0))
    with contextlib.suppress(ChildRaised):
        run.branch_at_stage("pre-verify", pair(1.0, None, raises="boom"))
    run.write_run_files("t", rewards={"reward": 1.0})
    run_cli("import", str(tmp_path / "jobs"))
    assert_round_trip(run_cli, run)
    assert [(r["fork"], r["outcome"], r["value"]) for r in forks(run_cli)] == [
        ("n3", "completed", 0.5),
        ("n3.2", "partial", None),
    ]
    assert children_of(run_cli) == {"n3": ["n4", "n5"], "n3.2": ["n6", "n7"]}


def test_a_second_fork_whose_release_failed_after_its_children_scored_keeps_the_first_v(
    run_cli: Cli, tmp_path: Path
) -> None:
    """`MountedArtifacts.release` fails closed in the second fork's finally: both its children
    scored, V stays the first fork's, and the hold left at the node says the fork did not
    complete."""
    run = verified_run(tmp_path)
    run.branch_at_stage("pre-verify", pair(1.0, 0.0))
    with contextlib.suppress(ChildRaised):
        run.branch_at_stage("pre-verify", pair(1.0, 1.0), release_fails="could not restore")
    run.write_run_files("t", rewards={"reward": 1.0})
    run_cli("import", str(tmp_path / "jobs"))
    assert_round_trip(run_cli, run)
    assert [(r["fork"], r["outcome"], r["value"]) for r in forks(run_cli)] == [
        ("n3", "completed", 0.5),
        ("n3.2", "partial", None),
    ]
    assert children_of(run_cli) == {"n3": ["n4", "n5"], "n3.2": ["n6", "n7"]}


def test_a_first_fork_whose_first_child_raised_is_a_fork_of_one(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = verified_run(tmp_path)
    # n=2, but the first child raised: the second never attached
    with contextlib.suppress(ChildRaised):
        run.branch_at_stage(
            "pre-verify",
            [Child(prompt_delta("1"), raises="boom"), Child(prompt_delta("2"), reward=1.0)],
        )
    run.branch_at_stage("pre-verify", pair(1.0, 0.0))
    run.write_run_files("t", rewards={"reward": 1.0})
    run_cli("import", str(tmp_path / "jobs"))
    assert_round_trip(run_cli, run)
    assert children_of(run_cli) == {"n3": ["n4"], "n3.2": ["n5", "n6"]}


def test_repeated_forks_the_files_cannot_tell_apart_import_as_one_fork_and_export_as_written(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = verified_run(tmp_path)
    run.branch_at_stage("pre-verify", pair(1.0, 0.0))
    run.branch_at_stage("pre-verify", pair(1.0, 0.0))  # V 0.5, the same as one fork of all four
    run.write_run_files("t", rewards={"reward": 1.0})
    run_cli("import", str(tmp_path / "jobs"))
    assert_round_trip(run_cli, run)


def test_one_fork_of_four_passing_children_is_one_fork(run_cli: Cli, tmp_path: Path) -> None:
    """The common case must never be refused: one branch() with four children that all pass."""
    run = verified_run(tmp_path)
    run.branch_at_stage("pre-verify", [*pair(1.0, 1.0), *pair(1.0, 1.0)])
    run.write_run_files("t", rewards={"reward": 1.0})
    run_cli("import", str(tmp_path / "jobs"))
    assert_round_trip(run_cli, run)
    assert len(children_of(run_cli)) == 1


def test_an_ablation_names_the_children_of_its_fork(run_cli: Cli, tmp_path: Path) -> None:
    """`ablate._branch_into_arms` forks once with one child per arm: ablation.json's arms say a
    four-child fork with an unscored child is one fork (without it, one of two and one of two would
    fit the same V)."""
    out = tmp_path / "ablate-2026-11-02__10-15-00"
    run = WriterRun(out / "ablation" / "t", snapshot_stages={"pre-verify"})
    run.execute(3)
    run.verify(VERIFY_REFS)
    children = [
        Child(prompt_delta("1"), reward=1.0),
        Child(prompt_delta("2"), reward=0.0),
        Child(prompt_delta("3"), unscored="verifier produced no reward"),
        Child(prompt_delta("4"), reward=1.0),
    ]
    value = run.branch_at_stage("pre-verify", children)
    run.write_run_files("t", rewards={"reward": 0.0})
    arms = [Arm(f"inject:{i}.md", "inject", prompt_delta(str(i)), f"{i}.md") for i in range(1, 5)]
    report = ablation_report(
        run,
        task="t",
        stage="pre-verify",
        arms=arms,
        parent_reward=0.0,
        parent_error=None,
        value=value,
        branch_error=None,
    )
    dump(out / "ablation.json", report)
    run_cli("import", str(tmp_path))
    key = "ablate-2026-11-02__10-15-00/ablation/t"
    tree = json.loads(run_cli("export", "tree", key).stdout)
    assert tree == on_disk(run.run_dir, "tree.json")
    assert children_of(run_cli) == {"n3": ["n4", "n5", "n6", "n7"]}
    assert json.loads(run_cli("export", "ablation", f"{key}:n3").stdout) == report

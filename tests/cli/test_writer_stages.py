"""Rule 1: stage tags move (docs/benchflow-formats.md §13.1).

`branch_policy.capture_stage` puts a stage on the cursor node, `Rollout.verify` captures pre-verify
and then post-verify on the same cursor (the node keeps the latest tag), and `branch_at_stage`
re-tags the node through `adopt_checkpoint`. The runs below are built by `tests/benchflow_writer.py`
in those steps, imported with the CLI, and exported back.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.benchflow_writer import Arm, Child, WriterRun, ablation_report, dump
from tests.conftest import Cli
from tests.writer_stages import TASK, VERIFY_REFS, exports, on_disk, prompt_delta, snap


def ablate_at(tmp_path: Path, stage: str, stages: set[str]) -> tuple[Path, WriterRun, float | None]:
    """`bench eval ablate --stage STAGE` of a parent that verified once: the writer's steps, in
    order."""
    out = tmp_path / "ablate-2026-11-02__10-15-00"
    run = WriterRun(out / "ablation" / TASK, snapshot_stages=stages)
    run.start(snap("envready000"))  # Rollout.start -> capture env-ready on root
    run.execute(3)  # three ACP events: root -> n1 -> n2 -> n3
    run.verify(VERIFY_REFS)  # pre-verify then post-verify, both on n3
    fresh = stage == "env-ready"
    value = run.branch_at_stage(
        stage,
        [
            Child(prompt_delta("1"), events=2, reward=1.0),
            Child(prompt_delta("2"), events=1, reward=0.0),
        ],
    )
    run.write_run_files(TASK, rewards={"reward": 0.0})
    arms = [
        Arm("inject:a.md", "inject", prompt_delta("1"), "a.md"),
        Arm("inject:b.md", "inject", prompt_delta("2"), "b.md"),
    ]
    report = ablation_report(
        run,
        task=TASK,
        stage=stage,
        arms=arms,
        parent_reward=0.0,
        parent_error=None,
        value=value,
        branch_error=None,
    )
    for row in report["arms"]:
        row["delta_execution"] = "fresh-rollout" if fresh else None
    dump(out / "ablation.json", report)
    return out, run, value


def test_a_run_branched_at_pre_verify_imports_with_post_verify_on_the_verify_node(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Rollout.verify + branch_at_stage('pre-verify'): the verify node is re-tagged pre-verify by
    adopt_checkpoint, so the registry's post-verify entry matches no node by tag or refs; it belongs
    on that same node."""
    out, run, value = ablate_at(tmp_path, "pre-verify", {"pre-verify", "post-verify"})
    tree = on_disk(run.run_dir, "tree.json")
    # n3 re-tagged by adopt_checkpoint; n5 and n6 are the children's own verify() (the last tag
    # wins)
    assert [(n["id"], n["stage"]) for n in tree["nodes"] if n["stage"]] == [
        ("n3", "pre-verify"),
        ("n5", "post-verify"),
        ("n6", "post-verify"),
    ]
    run_cli("import", str(out))
    key = f"{out.name}/ablation/{TASK}"
    marks = {
        row["stage"]: row["node"]
        for row in json.loads(
            run_cli(
                "sql", f"SELECT stage, node FROM stages WHERE run = '{key}'", "--format", "json"
            ).stdout
        )
    }
    assert marks == {"pre-verify": "n3", "post-verify": "n3"}
    exported_tree, exported_stages = exports(run_cli, key)
    assert exported_tree == tree
    assert exported_stages == on_disk(run.run_dir, "stage_snapshots.json")
    assert json.loads(run_cli("export", "ablation", f"{key}:n3").stdout) == on_disk(
        out, "ablation.json"
    )
    assert value == 0.5


def test_a_run_branched_at_post_verify_keeps_pre_verify_on_the_verify_node(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Rollout.verify + branch_at_stage('post-verify'): the tag stays post-verify; pre-verify was
    overwritten."""
    out, run, _ = ablate_at(tmp_path, "post-verify", {"pre-verify", "post-verify"})
    run_cli("import", str(out))
    key = f"{out.name}/ablation/{TASK}"
    exported_tree, exported_stages = exports(run_cli, key)
    assert exported_tree == on_disk(run.run_dir, "tree.json")
    assert exported_stages == on_disk(run.run_dir, "stage_snapshots.json")
    assert json.loads(run_cli("export", "ablation", f"{key}:n3").stdout) == on_disk(
        out, "ablation.json"
    )


def test_an_env_ready_ablation_with_both_verify_stages_moves_nothing_onto_root(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Rollout.start captures env-ready on root; Rollout.verify leaves only post-verify's tag on n3:
    exporting the tree must not put pre-verify (or its sandbox) on root."""
    out, run, _ = ablate_at(tmp_path, "env-ready", {"env-ready", "pre-verify", "post-verify"})
    run_cli("import", str(out))
    key = f"{out.name}/ablation/{TASK}"
    exported_tree, exported_stages = exports(run_cli, key)
    root = exported_tree["nodes"][0]
    assert (root["stage"], root["snapshot"]["sandbox"]) == (
        "env-ready",
        f"bf-snap-{TASK}-envready000",
    )
    assert exported_tree == on_disk(run.run_dir, "tree.json")
    assert exported_stages == on_disk(run.run_dir, "stage_snapshots.json")
    assert json.loads(run_cli("export", "ablation", f"{key}:root").stdout) == on_disk(
        out, "ablation.json"
    )


def test_a_research_end_marked_at_quiescence_shares_the_verify_node(
    run_cli: Cli, tmp_path: Path
) -> None:
    """ablate._execute_parent marks post-research after execute() when the marker appeared late,
    then Rollout.verify captures pre- and post-verify on the same cursor: only post-verify's tag is
    left."""
    out = tmp_path / "ablate-2026-11-02__10-15-00"
    run = WriterRun(
        out / "ablation" / TASK, snapshot_stages={"env-ready", "pre-verify", "post-verify"}
    )
    run.start(snap("envready000"))
    run.execute(3)
    run.capture_stage("post-research", snap("research000"), 3)  # Rollout.mark_stage at quiescence
    run.verify(VERIFY_REFS)
    value = run.branch_at_stage(
        "env-ready", [Child(prompt_delta("1"), reward=1.0), Child(prompt_delta("2"), reward=1.0)]
    )
    run.write_run_files(TASK, rewards={"reward": 1.0})
    arms = [
        Arm("inject:a.md", "inject", prompt_delta("1"), "a.md"),
        Arm("inject:b.md", "inject", prompt_delta("2"), "b.md"),
    ]
    report = ablation_report(
        run,
        task=TASK,
        stage="env-ready",
        arms=arms,
        parent_reward=1.0,
        parent_error=None,
        value=value,
        branch_error=None,
    )
    for row in report["arms"]:
        row["delta_execution"] = "fresh-rollout"
    dump(out / "ablation.json", report)
    run_cli("import", str(out))
    key = f"{out.name}/ablation/{TASK}"
    exported_tree, exported_stages = exports(run_cli, key)
    assert exported_tree == on_disk(run.run_dir, "tree.json")
    assert exported_stages == on_disk(run.run_dir, "stage_snapshots.json")
    assert json.loads(run_cli("export", "ablation", f"{key}:root").stdout) == on_disk(
        out, "ablation.json"
    )


def test_a_post_research_stage_no_node_explains_is_refused_with_what_to_check(
    run_cli: Cli, tmp_path: Path
) -> None:
    out, run, _ = ablate_at(tmp_path, "env-ready", {"env-ready"})
    registry = on_disk(run.run_dir, "stage_snapshots.json")
    registry["stages"]["post-research"] = {
        "environment_ref": None,
        "exchanges_completed": 2,
        "layers": ["sandbox"],
        "sandbox_ref": f"bf-snap-{TASK}-nowhere0000",
    }
    dump(run.run_dir / "stage_snapshots.json", registry)
    result = run_cli("import", str(out), ok=False)
    assert result.exit_code == 1
    assert "stages.post-research: expected a node of" in result.stderr
    assert "check that tree.json and stage_snapshots.json come from the same run" in result.stderr


def test_a_store_that_put_an_untagged_stage_on_root_takes_the_run_again(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Importers before the writer-order placement put pre-verify (whose tag Rollout.verify
    overwrote with post-verify) on root. Importing the run again records the same mark on its node
    as a correction, never a conflict, and the exports follow the latest mark."""
    out, run, _ = ablate_at(tmp_path, "env-ready", {"env-ready", "pre-verify", "post-verify"})
    lines = [
        json.loads(line) for line in run_cli("import", "--dry-run", str(out)).stdout.splitlines()
    ]
    for fact in lines:
        if (
            fact["type"] in ("stage.marked", "snapshot.captured")
            and fact.get("stage") == "pre-verify"
        ):
            assert fact["node"] == "n3"
            fact["node"] = (
                "root"  # what the earlier importers recorded (the mark and the capture it implies)
            )
    run_cli("ingest", "-", input="".join(json.dumps(fact) + "\n" for fact in lines))
    result = run_cli("import", str(out))
    assert "0 runs rejected" in result.stderr
    added = [json.loads(line) for line in run_cli("log", "--format", "jsonl").stdout.splitlines()][
        len(lines) :
    ]
    assert [(e["type"], e["fact"].get("node")) for e in added if e["type"] != "run.located"] == [
        ("stage.marked", "n3"),
        ("snapshot.captured", "n3"),
    ]
    assert "0 events appended" in run_cli("import", str(out)).stderr
    key = f"{out.name}/ablation/{TASK}"
    exported_tree, exported_stages = exports(run_cli, key)
    assert exported_tree == on_disk(run.run_dir, "tree.json")
    assert exported_stages == on_disk(run.run_dir, "stage_snapshots.json")

"""Rule 2: in-place children grow chains (docs/benchflow-formats.md §13.2).

`Rollout._commit_acp_execution` fills a pending child with its first ACP event and advances one node
per further event; the child's own `Rollout.verify` then captures its stages on its cursor (its last
node, or the child itself), and `_LinearState.restore_onto` puts the parent's registry back before
`_write_lineage` writes it. The child's tags live only in tree.json, and they must come back from an
export.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.benchflow_writer import Child, WriterRun
from tests.conftest import Cli
from tests.writer_stages import VERIFY_REFS, prompt_delta, snap


def nightly_run(tmp_path: Path, stages: set[str], children: list[Child]) -> WriterRun:
    run = WriterRun(tmp_path / "jobs" / "nightly" / "csv-dedupe__0a1b2c3d", snapshot_stages=stages)
    run.start(snap("envready000"))
    run.execute(3)
    run.verify(VERIFY_REFS)
    run.branch_at_stage("pre-verify", children)
    run.write_run_files("csv-dedupe", rewards={"reward": 1.0})
    return run


def child_verify(name: str) -> dict[str, dict[str, str | None]]:
    return {"pre-verify": snap(f"{name}pre00000"), "post-verify": snap(f"{name}post0000")}


def test_in_place_children_chains_and_their_own_stage_tags_round_trip(
    run_cli: Cli, tmp_path: Path
) -> None:
    """branch_at_stage('pre-verify') + make_default_runner: execute(node=child) then verify() per
    child."""
    # n4 -> n5 -> n6, tag on n6
    # n7 alone, tag on n7
    run = nightly_run(
        tmp_path,
        {"pre-verify"},
        [
            Child(prompt_delta("1"), events=3, reward=1.0, verify_refs=child_verify("a")),
            Child(prompt_delta("2"), events=1, reward=0.0, verify_refs=child_verify("b")),
        ],
    )
    tree = json.loads((run.run_dir / "tree.json").read_text())
    assert [(n["id"], n["parent"], n["stage"]) for n in tree["nodes"][4:]] == [
        ("n4", "n3", None),
        ("n5", "n4", None),
        ("n6", "n5", "pre-verify"),
        ("n7", "n3", "pre-verify"),
    ]
    run_cli("import", str(run.run_dir))
    key = "nightly/csv-dedupe__0a1b2c3d"
    assert json.loads(run_cli("export", "tree", key).stdout) == tree
    assert json.loads(run_cli("export", "stages", key).stdout) == json.loads(
        (run.run_dir / "stage_snapshots.json").read_text()
    )
    run_cli("import", str(run.run_dir))
    assert (
        "0 events appended"
        in run_cli("import", str(run.run_dir)).stdout + run_cli("import", str(run.run_dir)).stderr
    )


def test_a_child_verifying_both_stages_keeps_only_the_later_tag(
    run_cli: Cli, tmp_path: Path
) -> None:
    """The child's verify() captures pre-verify then post-verify on its last node; post-verify's tag
    remains."""
    run = nightly_run(
        tmp_path,
        {"pre-verify", "post-verify"},
        [
            Child(prompt_delta("1"), events=2, reward=1.0, verify_refs=child_verify("a")),
            Child(
                prompt_delta("2"),
                events=2,
                unscored="verifier produced no reward",
                verify_refs=child_verify("b"),
            ),
        ],
    )
    tree = json.loads((run.run_dir / "tree.json").read_text())
    assert [n["stage"] for n in tree["nodes"] if n["id"] in ("n5", "n7")] == [
        "post-verify",
        "post-verify",
    ]
    run_cli("import", str(run.run_dir))
    key = "nightly/csv-dedupe__0a1b2c3d"
    assert json.loads(run_cli("export", "tree", key).stdout) == tree
    assert json.loads(run_cli("export", "stages", key).stdout) == json.loads(
        (run.run_dir / "stage_snapshots.json").read_text()
    )


def test_a_cursor_branch_after_verify_keeps_the_verify_stages_off_root(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Rollout.branch() at the cursor checkpoints the verify node afresh (no stage), so neither
    verify stage matches a node by tag or refs; both stay on that node, and its tag is the cursor
    checkpoint."""
    run = WriterRun(
        tmp_path / "jobs" / "nightly" / "csv-dedupe__0a1b2c3d",
        snapshot_stages={"pre-verify", "post-verify"},
    )
    run.execute(3)
    run.verify(VERIFY_REFS)
    run.branch(
        [
            Child(prompt_delta("1"), events=2, reward=1.0),
            Child(prompt_delta("2"), events=1, reward=0.0),
        ],
        {"environment": "env-snap-cursor-1", "sandbox": None},
    )
    run.write_run_files("csv-dedupe", rewards={"reward": 1.0})
    tree = json.loads((run.run_dir / "tree.json").read_text())
    assert [(n["id"], n["stage"], n["snapshot"]) for n in tree["nodes"][:4]][-1] == (
        "n3",
        None,
        {"environment": "env-snap-cursor-1", "sandbox": None},
    )
    run_cli("import", str(run.run_dir))
    key = "nightly/csv-dedupe__0a1b2c3d"
    marks = {
        row["stage"]: row["node"]
        for row in json.loads(
            run_cli(
                "sql", f"SELECT stage, node FROM stages WHERE run = '{key}'", "--format", "json"
            ).stdout
        )
    }
    assert marks == {"pre-verify": "n3", "post-verify": "n3"}
    assert json.loads(run_cli("export", "tree", key).stdout) == tree
    assert json.loads(run_cli("export", "stages", key).stdout) == json.loads(
        (run.run_dir / "stage_snapshots.json").read_text()
    )

"""Registry stages on the node that captured them, when tags moved (docs/benchflow-formats.md
§13.1-13.2).

- A cursor `Rollout.branch()` before the parent's own `verify()`: each in-place child's `verify()`
  (`make_default_runner`) captures its stages through `capture_stage`, which rewrites
  `stage_snapshots.json` with the child's registry; `_LinearState.restore_onto` puts the parent's
  (empty) registry back and `_write_lineage` rewrites the file only `if stages:`, so the file keeps
  the last child's entries.
- `Rollout.mark_stage` twice (`capture_stage`): the registry entry is replaced and `_stage_nodes`
  moves to the later cursor; the earlier node keeps its tag with the earlier refs.
The runs are built by `tests/benchflow_writer.py` (`WriterRun.branch`, `capture_stage`, `verify`,
`branch_at_stage`), imported with the CLI into a real SQLite store and exported back.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.benchflow_writer import Child, WriterRun
from tests.conftest import Cli
from tests.writer_stages import VERIFY_REFS, exports, on_disk, prompt_delta, snap

RUN = "nightly/t__1"


def marks(run_cli: Cli) -> dict[str, str]:
    rows = json.loads(run_cli("sql", "SELECT stage, node FROM stages", "--format", "json").stdout)
    return {row["stage"]: row["node"] for row in rows}


def captured(run_cli: Cli) -> list[dict]:
    lines = run_cli("log", "--type", "snapshot.captured", "--format", "jsonl").stdout
    return [json.loads(line)["fact"] for line in lines.splitlines()]


def child_refs(name: str) -> dict[str, dict[str, str | None]]:
    return {stage: snap(f"{name}-{stage}") for stage in ("pre-verify", "post-verify")}


def test_a_cursor_branch_before_the_parents_verify_keeps_the_last_childs_stages_on_its_node(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = WriterRun(tmp_path / "jobs" / RUN, snapshot_stages={"pre-verify", "post-verify"})
    run.execute(2)
    run.branch(
        [
            Child(prompt_delta("1"), events=2, reward=1.0, verify_refs=child_refs("a")),
            Child(prompt_delta("2"), events=1, reward=0.0, verify_refs=child_refs("b")),
        ],
        {"environment": "envsnap-1", "sandbox": None},
    )
    # Rollout._build_result, phase 'branched' with no rewards of its own: the cursor's V
    run.write_run_files("t", rewards={"reward": 0.5, "source": "branch_aggregate"})
    registry = on_disk(run.run_dir, "stage_snapshots.json")
    assert registry["stages"]["post-verify"]["sandbox_ref"] == snap("b-post-verify")["sandbox"]
    run_cli("import", str(tmp_path / "jobs"))
    tree, stages = exports(run_cli, RUN)
    assert tree == on_disk(run.run_dir, "tree.json")
    assert stages == registry
    # the second child (n5) verified on itself; the first child's tag on n4 is a capture no entry
    # explains
    assert marks(run_cli) == {"pre-verify": "n5", "post-verify": "n5"}
    assert {(c["node"], c["stage"]) for c in captured(run_cli) if c["node"] == "n4"} == {
        ("n4", "post-verify")
    }


def test_a_stage_marked_twice_is_on_the_later_node_and_the_older_tag_is_a_bare_capture(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = WriterRun(tmp_path / "jobs" / RUN, snapshot_stages={"pre-verify"})
    run.execute(2)
    run.capture_stage("post-research", snap("research-1"), 2)  # Rollout.mark_stage on n2
    run.execute(2)
    run.capture_stage("post-research", snap("research-2"), 4)  # marked again on n4: entry replaced
    run.execute(1)
    run.verify(VERIFY_REFS)
    run.branch_at_stage(
        "post-research",
        [Child(prompt_delta("1"), reward=1.0), Child(prompt_delta("2"), reward=0.0)],
    )
    run.write_run_files("t", rewards={"reward": 1.0})
    run_cli("import", str(tmp_path / "jobs"))
    tree, stages = exports(run_cli, RUN)
    assert tree == on_disk(run.run_dir, "tree.json")
    assert stages == on_disk(run.run_dir, "stage_snapshots.json")
    assert marks(run_cli)["post-research"] == "n4"
    older = [c for c in captured(run_cli) if c["node"] == "n2"]
    assert [(c["ref"], c["stage"]) for c in older] == [
        (snap("research-1")["sandbox"], "post-research")
    ]
    assert "0 events appended" in run_cli("import", str(tmp_path / "jobs")).stderr

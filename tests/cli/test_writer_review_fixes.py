"""Cases a review by benchflow's side found (issue #11 follow-up), each built the way benchflow's
writer builds it.

- `rollout/_results._build_rollout_result` subtracts naive `datetime.now()` times: across a DST
  fall-back the run's `timing.total` is negative, and benchflow writes it so.
- `branch.aggregate` is `sum(returns) / len(returns)`: V keeps that float's last digit (not
  `math.fsum`'s).
- `cli/_failure_evidence._display_test_name` turns `tests/test_out.py::` into `""`, and keeps it.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from rollout_lineage.projections.reports.arms.attribution import short_test_name
from tests.benchflow_writer import Child, ChildRaised, WriterRun
from tests.conftest import Cli
from tests.writer_stages import VERIFY_REFS, prompt_delta

RUN = "nightly/t__1"


def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "jobs" / RUN


def test_a_run_across_a_dst_fall_back_imports_with_its_negative_total(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = WriterRun(run_dir(tmp_path), snapshot_stages={"pre-verify"})
    run.execute(2)
    run.verify(VERIFY_REFS)
    run.write_run_files("t", rewards={"reward": 1.0})
    result_json = run_dir(tmp_path) / "result.json"
    result = json.loads(result_json.read_text())
    # 01:40 EDT to 01:30 EST is fifty minutes; the naive subtraction says minus ten.
    result.update(started_at="2026-11-01 01:40:00.000000", finished_at="2026-11-01 01:30:00.000000")
    result["timing"] = {**result.get("timing", {}), "total": -600.0}
    result_json.write_text(json.dumps(result, indent=2))
    run_cli("import", str(tmp_path / "jobs"))
    [finished] = [
        json.loads(line)["fact"]
        for line in run_cli(
            "log", "--type", "run.finished", "--format", "jsonl"
        ).stdout.splitlines()
    ]
    assert finished["timing"]["total"] == -600.0 and finished["time_zone"] == "unknown"


def test_an_earlier_forks_v_keeps_benchflows_plain_sum(run_cli: Cli, tmp_path: Path) -> None:
    run = WriterRun(run_dir(tmp_path), snapshot_stages={"pre-verify", "post-verify"})
    run.execute(2)
    run.verify(VERIFY_REFS)
    # the last reward differs, so no later pair of children has the mean of all ten: one fork, not
    # several (repeated forks at one node are split by V, docs/benchflow-formats.md §13.5)
    rewards = [0.1] * 9 + [0.2]
    run.branch_at_stage(
        "pre-verify", [Child(prompt_delta(str(i)), reward=r) for i, r in enumerate(rewards)]
    )
    # a second fork at the same node whose second child raises: the first fork's V stays on the node
    with contextlib.suppress(ChildRaised):
        run.branch_at_stage(
            "post-verify",
            [Child(prompt_delta("a"), reward=1.0), Child(prompt_delta("b"), raises="boom")],
        )
    run.write_run_files("t", rewards={"reward": 1.0})
    run_cli("import", str(tmp_path / "jobs"))
    written = json.loads((run_dir(tmp_path) / "tree.json").read_text())
    assert json.loads(run_cli("export", "tree", RUN).stdout) == written
    # benchflow's V, not 0.11
    assert 0.10999999999999999 in [node.get("value") for node in written["nodes"]]


def test_a_test_name_that_shortens_to_nothing_stays_empty() -> None:
    assert short_test_name("tests/test_out.py::") == ""
    assert short_test_name("tests/test_out.py::TestA::test_b[1]") == "test_b[1]"


def forked_run(tmp_path: Path) -> Path:
    run = WriterRun(run_dir(tmp_path), snapshot_stages={"pre-verify"})
    run.execute(2)
    run.verify(VERIFY_REFS)
    run.branch_at_stage(
        "pre-verify", [Child(prompt_delta("1"), reward=1.0), Child(prompt_delta("2"), reward=0.0)]
    )
    run.write_run_files("t", rewards={"reward": 1.0})
    return next(run_dir(tmp_path).glob("branches/*/children/*"))


def test_links_in_a_childs_mounted_hand_off_are_named_not_followed_and_never_refuse_the_run(
    run_cli: Cli, tmp_path: Path
) -> None:
    """`MountedArtifacts.hand_off` moves entries with `shutil.move`, which keeps a link as a link
    (an agent may have left one to a path of its own machine); `artifact_test_outcomes` reads a
    dangling ctrf.json as not observed."""
    child = forked_run(tmp_path)
    (child / "mounted" / "artifacts").mkdir(parents=True)
    (child / "mounted" / "artifacts" / "result.csv").symlink_to("/app/output/result.csv")
    (child / "mounted" / "artifacts" / "kept.txt").write_text("kept")
    (child / "mounted" / "verifier").mkdir()
    # out of the run: never read
    (child / "mounted" / "verifier" / "ctrf.json").symlink_to("/etc/hostname")
    result = run_cli("import", str(tmp_path / "jobs"))
    assert "result.csv (a link, not followed)" in result.stderr
    [handed] = [
        json.loads(line)["fact"]
        for line in run_cli(
            "log", "--type", "custody.handed_off", "--format", "jsonl"
        ).stdout.splitlines()
    ]
    assert [entry["path"] for entry in handed["entries"]] == ["artifacts/kept.txt"]
    written = json.loads((run_dir(tmp_path) / "tree.json").read_text())
    assert json.loads(run_cli("export", "tree", RUN).stdout) == written

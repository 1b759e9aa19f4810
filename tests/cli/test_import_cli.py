"""`lineage import` on the shipped examples and the public fixtures: the facts, idempotence, later
states, dry runs."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, Cli

PR = EXAMPLES / "pr-layout"
PUBLIC = EXAMPLES / "public"
ABLATE_OUT = PR / "ablate-2026-11-02__10-15-00"
ABLATE_RUN = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
NIGHTLY = PR / "jobs" / "nightly"
NIGHTLY_RUN = "nightly/csv-dedupe__7c1f2a90"
HOLD_RUN = "nightly/csv-dedupe__d4e5f6a7"
CONTINUED_RUN = "nightly/csv-dedupe__7c1f2a90__continued"
MAINLINE_RUN = "claude-continue/hello-world-task__0000abcd"
HARBOR_RUN = (
    "claude-opus-4-5-0126-wenbo/claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920"
)


def events(run_cli: Cli, run: str | None = None) -> list[dict[str, Any]]:
    args = ["log", "--format", "jsonl", *(["--run", run] if run else [])]
    return [json.loads(line) for line in run_cli(*args).stdout.splitlines()]


def facts(run_cli: Cli, kind: str, run: str | None = None) -> list[dict[str, Any]]:
    return [e["fact"] for e in events(run_cli, run) if e["type"] == kind]


def copy_run(source: Path, jobs: Path) -> Path:
    """A copy of a run directory that keeps its job folder name, so it has the same run key."""
    target = jobs / source.parent.name / source.name
    shutil.copytree(source, target)
    return target


def test_pr_examples_become_the_facts_benchflow_wrote(run_cli: Cli) -> None:
    result = run_cli("import", str(PR))
    assert "4 runs, 3 forks, 8 children" in result.stderr and "0 runs rejected" in result.stderr
    assert result.stdout == ""
    registered = {f["run"]: f for f in facts(run_cli, "run.registered")}
    located = {(f["kind"], f["path"]) for f in facts(run_cli, "run.located", ABLATE_RUN)}
    assert located == {
        ("recorded", "/home/ci/jobs/ablate-2026-11-02__10-15-00/ablation/csv-dedupe"),
        ("read", os.path.realpath(ABLATE_OUT / "ablation" / "csv-dedupe")),
    }
    assert all(fact.get("run_dir") is None for fact in registered.values())
    assert (
        registered[CONTINUED_RUN]["role"] == "continuation"
        and registered[CONTINUED_RUN]["parent_run"] == NIGHTLY_RUN
    )
    assert registered[NIGHTLY_RUN]["config_sha256"].startswith("sha256:")

    [opened] = facts(run_cli, "fork.opened", ABLATE_RUN)
    assert (opened["fork"], opened["node"], opened["stage"], opened["layers"]) == (
        "root",
        "root",
        "env-ready",
        ["sandbox"],
    )
    assert [(c["node"], c["arm"], c["kind"], c["source"]) for c in opened["children"]] == [
        ("n2", "with-skill", "skill-mode", None),
        ("n3", "no-skill", "skill-mode", None),
        ("n4", "inject:prompts/hint.md", "inject", "prompts/hint.md"),
        ("n5", 'config:{"agent": {"max_turns": 40}}', "config-override", None),
    ]
    assert opened["ablation"] == {
        "task": {"id": "csv-dedupe", "path": "tasks/csv-dedupe"},
        "agent": "claude-agent-acp",
        "model": "claude-sonnet-4-5",
        "sandbox": "docker",
        "environment": None,
        "snapshot_layers": ["sandbox"],
    }
    [unscored] = facts(run_cli, "fork.child_unscored", ABLATE_RUN)
    assert (
        unscored["index"],
        unscored["reason"],
        unscored["tests"],
        unscored["wall_clock_sec"],
    ) == (2, "verifier produced no reward: reward.txt missing", None, 136.2)
    scored = facts(run_cli, "fork.child_scored", ABLATE_RUN)
    # raw CTRF names are kept
    assert scored[1]["tests"]["tests/test_outputs.py::test_keeps_order"] == "failed"
    assert facts(run_cli, "fork.closed", ABLATE_RUN) == [
        {"run": ABLATE_RUN, "fork": "root", "outcome": "completed", "value": None, "error": None}
    ]
    assert [f["ref"] for f in facts(run_cli, "snapshot.exported")] == [
        "bf-snap-csv-dedupe-a41c07e95b2d"
    ]
    # ephemeral stage entries discard every ref they hold, the environment snapshot of pre-verify
    # too
    assert len(facts(run_cli, "snapshot.discarded")) == 7


def test_stage_marks_land_on_their_tree_nodes_in_lifecycle_order(run_cli: Cli) -> None:
    run_cli("import", str(NIGHTLY / "csv-dedupe__7c1f2a90"))
    marks = facts(run_cli, "stage.marked", NIGHTLY_RUN)
    assert [(m["stage"], m["node"], m["exchanges_completed"]) for m in marks] == [
        ("env-ready", "root", None),
        ("post-research", "n1", 5),
        ("pre-verify", "n2", 9),
    ]
    [opened] = facts(run_cli, "fork.opened", NIGHTLY_RUN)
    assert opened["stage"] == "pre-verify" and all(
        "delta_execution" not in c or c["delta_execution"] is None for c in opened["children"]
    )
    assert facts(run_cli, "fork.closed", NIGHTLY_RUN)[0]["value"] == 0.5


def test_a_partial_fork_with_a_left_over_hold_records_custody_failure(run_cli: Cli) -> None:
    run_cli("import", str(NIGHTLY / "csv-dedupe__d4e5f6a7"))
    [held] = facts(run_cli, "custody.held", HOLD_RUN)
    assert held["location"] == "branches/n1/parent"
    assert [e["path"] for e in held["entries"]] == [
        "agent/openhands.log",
        "verifier/reward.txt",
        "verifier/test-stdout.txt",
    ]
    [failed] = facts(run_cli, "custody.failed", HOLD_RUN)
    assert (failed["phase"], failed["preserved_location"], failed["entries"]) == (
        "release",
        "branches/n1/parent",
        held["entries"],
    )
    [raised] = facts(run_cli, "fork.child_failed", HOLD_RUN)
    assert raised["index"] == 1 and "raised before an outcome" in raised["error"]
    [closed] = facts(run_cli, "fork.closed", HOLD_RUN)
    assert (closed["outcome"], closed["value"]) == ("partial", None)


def test_what_a_hold_holds_besides_regular_files_is_named_not_dropped_silently(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = copy_run(NIGHTLY / "csv-dedupe__d4e5f6a7", tmp_path / "jobs")
    hold = run / "branches" / "n1" / "parent"
    os.mkfifo(hold / "agent" / "stream")
    os.symlink("openhands.log", hold / "agent" / "latest.log")
    result = run_cli("import", str(run))
    assert (
        f"{hold}: custody entries hold regular files only, so "
        f"agent/latest.log (a link, not followed), agent/stream (a FIFO, "
        "device or socket) are not recorded"
    ) in result.stderr
    [held] = facts(run_cli, "custody.held", HOLD_RUN)
    assert [e["path"] for e in held["entries"]] == [
        "agent/openhands.log",
        "verifier/reward.txt",
        "verifier/test-stdout.txt",
    ]


def test_a_continuation_records_its_served_cut_point(run_cli: Cli) -> None:
    run_cli("import", str(NIGHTLY))
    [cut] = facts(run_cli, "cut_point.served", CONTINUED_RUN)
    assert (
        cut["source_run"],
        cut["accounting"],
        cut["served_k"],
        cut["configured_k"],
        cut["stage"],
    ) == (NIGHTLY_RUN, "served", 5, None, "post-research")
    assert [d["exchange_index"] for d in cut["divergences"]] == [3] and cut["workspace_digest"][
        "root"
    ] == "/app"
    order = [e["fact"]["run"] for e in events(run_cli) if e["type"] == "run.registered"]
    assert order.index(CONTINUED_RUN) > order.index(NIGHTLY_RUN)


def test_a_continuation_imported_before_its_cut_point_was_reconciled_imports_again(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = copy_run(NIGHTLY / "csv-dedupe__7c1f2a90__continued", tmp_path / "jobs")
    copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", tmp_path / "jobs")
    final = (run / "result.json").read_text()
    # as materialized: the configured-basis block, before the served one replaces it
    written = json.loads(final)
    served = written["source"]["cut_point"]
    written["source"]["cut_point"] = {
        "accounting": "configured",
        "n_replayed_exchanges": 5,
        "branch_stage": served["branch_stage"],
        "recorded_request_digest": served["recorded_request_digest"],
        "served_request_digest": None,
        "request_digest_basis": served["request_digest_basis"],
        "divergences": None,
        "workspace_digest": None,
        "workspace_digest_reason": "configured-basis block computed from the recording alone",
    }
    (run / "result.json").write_text(json.dumps(written))
    run_cli("import", str(tmp_path / "jobs"))
    (run / "result.json").write_text(final)
    run_cli("import", str(tmp_path / "jobs"))
    assert [cut["accounting"] for cut in facts(run_cli, "cut_point.served", CONTINUED_RUN)] == [
        "configured",
        "served",
    ]
    [row] = json.loads(
        run_cli(
            "sql",
            f"SELECT accounting, n_divergences FROM cut_points WHERE run = '{CONTINUED_RUN}'",
            "--format",
            "json",
        ).stdout
    )
    assert row == {"accounting": "served", "n_divergences": 1}


@pytest.mark.parametrize(
    ("run", "files"),
    [
        (
            ABLATE_RUN,
            {
                "tree": "ablation/csv-dedupe/tree.json",
                "stages": "ablation/csv-dedupe/stage_snapshots.json",
            },
        ),
        (
            NIGHTLY_RUN,
            {
                "tree": "../jobs/nightly/csv-dedupe__7c1f2a90/tree.json",
                "stages": "../jobs/nightly/csv-dedupe__7c1f2a90/stage_snapshots.json",
            },
        ),
        (
            HOLD_RUN,
            {
                "tree": "../jobs/nightly/csv-dedupe__d4e5f6a7/tree.json",
                "stages": "../jobs/nightly/csv-dedupe__d4e5f6a7/stage_snapshots.json",
            },
        ),
    ],
)
def test_exports_of_imported_runs_equal_the_imported_files(
    run_cli: Cli, run: str, files: dict[str, str]
) -> None:
    run_cli("import", str(PR))
    for export, relative in files.items():
        assert json.loads(run_cli("export", export, run).stdout) == json.loads(
            (ABLATE_OUT / relative).read_text()
        )
    if run == ABLATE_RUN:
        assert json.loads(run_cli("export", "ablation", f"{run}:root").stdout) == json.loads(
            (ABLATE_OUT / "ablation.json").read_text()
        )


def test_importing_again_appends_nothing(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES))
    head = run_cli("head").stdout
    again = run_cli("import", str(EXAMPLES))
    assert (
        "0 events appended (0 runs new, 0 with new facts, 10 already known), 0 runs rejected"
        in again.stderr
    )
    assert run_cli("head").stdout == head


MAINLINE_DIR = (
    PUBLIC
    / "benchflow-ai"
    / "benchflow"
    / "tests"
    / "fixtures"
    / "branch_tree_claude"
    / "claude-continue"
    / "hello-world-task__0000abcd"
)


@pytest.mark.parametrize(
    ("source", "run", "recorded_dir"),
    [
        (
            NIGHTLY / "csv-dedupe__7c1f2a90",
            NIGHTLY_RUN,
            "/home/ci/jobs/nightly/csv-dedupe__7c1f2a90",
        ),  # children's provenance
        (MAINLINE_DIR, MAINLINE_RUN, None),  # nothing in a main-line run names its own directory
    ],
)
def test_a_moved_run_imports_as_a_new_location_and_a_new_sample_only(
    run_cli: Cli, tmp_path: Path, source: Path, run: str, recorded_dir: str | None
) -> None:
    first = copy_run(source, tmp_path / "disk-a" / "jobs")
    run_cli("import", str(first))
    moved = copy_run(first, tmp_path / "archive" / "jobs")
    shutil.rmtree(first)
    before = len(events(run_cli))
    result = run_cli("import", str(moved))
    assert "2 events appended" in result.stderr
    # where it was read, and what solve rates read of it there: its job folder is another one now
    located, sample = events(run_cli)[before:]
    assert (located["type"], located["fact"]["path"]) == ("run.located", os.path.realpath(moved))
    assert (sample["type"], sample["fact"]["job_dir"]) == (
        "run.sample_observed",
        os.path.dirname(os.path.realpath(moved)),
    )
    [row] = json.loads(
        run_cli(
            "sql", f"SELECT run_dir, location FROM runs WHERE run = '{run}'", "--format", "json"
        ).stdout
    )
    assert row == {"run_dir": recorded_dir, "location": os.path.realpath(moved)}
    assert "0 events appended" in run_cli("import", str(moved)).stderr
    assert f"run directory read at {os.path.realpath(moved)}" in run_cli("history", run).stdout


def test_two_copies_of_a_run_import_once_each_and_then_append_nothing(
    run_cli: Cli, tmp_path: Path
) -> None:
    copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", tmp_path / "disk" / "jobs")
    backup = copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", tmp_path / "disk" / "backup")
    # one more spelling of the backup's path
    (tmp_path / "disk" / "link").symlink_to(backup.parent.parent)
    appended = [run_cli("import", str(tmp_path / "disk")).stderr for _ in range(2)]
    assert "1 runs, " in appended[0] and "2 run folders read, 1 of them merged" in appended[0]
    assert "0 events appended (0 runs new, 0 with new facts, 1 already known; " in appended[1]
    # recorded by benchflow, and two places read
    assert len(facts(run_cli, "run.located", NIGHTLY_RUN)) == 3


def test_a_run_path_too_long_for_a_key_still_imports(run_cli: Cli, tmp_path: Path) -> None:
    deep = tmp_path / "/".join(["d" * 50] * 12)
    run = copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", deep / "jobs")
    assert len(str(run)) > 600
    run_cli("import", str(run))
    assert os.path.realpath(run) in {f["path"] for f in facts(run_cli, "run.located", NIGHTLY_RUN)}


def test_a_later_state_of_a_run_appends_only_the_new_facts(run_cli: Cli, tmp_path: Path) -> None:
    run = copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", tmp_path / "jobs")
    result_json = (run / "result.json").read_text()
    # the run is still verifying: forked at pre-verify, no result yet
    (run / "result.json").unlink()
    left_out = run_cli("import", str(run))
    assert "left out, the run may still be running (it has no result.json yet)" in left_out.stderr
    assert "1 runs left out as still running" in left_out.stderr and events(run_cli) == []
    first = run_cli("import", "--unfinished", str(run))
    assert not facts(run_cli, "run.scored") and len(facts(run_cli, "fork.opened")) == 1

    (run / "result.json").write_text(result_json)
    second = len(events(run_cli))
    run_cli("import", str(run))
    # ... and the release-gate evidence of the run and of its two fresh-rollout arms, and what solve
    # rates read of it, once it has finished
    assert [e["type"] for e in events(run_cli)[second:]] == [
        "run.scored",
        "run.finished",
        *["run.evidence_observed"] * 3,
        "run.sample_observed",
    ]

    add_post_research_fork(run)
    third = len(events(run_cli))
    later = run_cli("import", str(run))
    assert [e["type"] for e in events(run_cli)[third:]] == [
        "fork.opened",
        "fork.child_scored",
        "fork.child_scored",
        "fork.closed",
    ]
    assert (
        "1 runs, 2 forks, 4 children, 4 events appended" in later.stderr
        and "appended" in first.stderr
    )
    tree = json.loads(run_cli("export", "tree", NIGHTLY_RUN).stdout)
    assert tree == json.loads((run / "tree.json").read_text())


def add_second_fork_at_n2(run: Path, unscored: str | None) -> None:
    """A second, in-place fork at n2 from a new cursor checkpoint, as tree.json shows it once it
    ended: n5 scored, n6 scored or unscored (benchflow then pops V, so n2 keeps no value)."""
    tree = json.loads((run / "tree.json").read_text())
    n2 = next(node for node in tree["nodes"] if node["id"] == "n2")
    n2["value"] = 0.5
    if unscored:
        del n2["value"]
    for node, prompt in (("n5", "a" * 64), ("n6", "b" * 64)):
        delta = {
            "config_override_sha256": None,
            "environment_ref": None,
            "injected_prompt_sha256": f"sha256:{prompt}",
            "skill_mode": None,
        }
        entry = {"id": node, "parent": "n2", "stage": None, "snapshot": None, "delta": delta}
        entry.update(
            {"unscored": unscored}
            if unscored and node == "n6"
            else {"reward": 1.0 if node == "n5" else 0.0}
        )
        tree["nodes"].append(entry)
        child = run / "branches" / "n2" / "children" / node
        child.mkdir(parents=True)
        provenance = json.loads(
            (run / "branches" / "n2" / "children" / "n3" / "provenance.json").read_text()
        )
        (child / "provenance.json").write_text(
            json.dumps(
                {
                    **provenance,
                    "delta": delta,
                    "branch_stage": "cursor:n2",
                    "snapshot_ref": {"environment": None, "sandbox": "bf-snap-n2-cursor"},
                }
            )
        )
        if "reward" in entry:
            (child / "reward.json").write_text(json.dumps({"reward": entry["reward"]}))
    (run / "tree.json").write_text(json.dumps(tree))


def test_a_left_over_hold_is_not_pinned_on_a_fork_that_settled_with_its_own_value(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", tmp_path / "jobs")
    # a later fork at n2 failed at its hold: no child ran
    hold = run / "branches" / "n2" / "parent" / "agent"
    hold.mkdir(parents=True)
    (hold / "openhands.log").write_text("parent's log\n")
    result = run_cli("import", str(run))
    assert (
        "a custody hold at node 'n2', whose last fork 'n2' settled with "
        "its own V: it is a fork's that failed before any child ran"
    ) in result.stderr
    # hand-offs are the fork's
    assert not [e for e in events(run_cli) if e["type"] in ("custody.held", "custody.failed")]
    assert facts(run_cli, "fork.closed")[0]["outcome"] == "completed"


def test_a_failed_release_after_an_earlier_fork_closes_the_later_one_partial(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", tmp_path / "jobs")
    # n5 1.0, n6 0.0: its mean is the first fork's V by chance
    add_second_fork_at_n2(run, unscored=None)
    tree = json.loads((run / "tree.json").read_text())
    next(node for node in tree["nodes"] if node["id"] == "n6")["reward"] = (
        1.0  # so V 0.5 is the first fork's
    )
    (run / "tree.json").write_text(json.dumps(tree))
    (run / "branches" / "n2" / "children" / "n6" / "reward.json").write_text(
        json.dumps({"reward": 1.0})
    )
    # its release failed, so V was never aggregated
    hold = run / "branches" / "n2" / "parent" / "agent"
    hold.mkdir(parents=True)
    (hold / "openhands.log").write_text("parent's log\n")
    run_cli("import", str(run))
    closed = {f["fork"]: f for f in facts(run_cli, "fork.closed")}
    assert (closed["n2"]["outcome"], closed["n2"]["value"]) == ("completed", 0.5)
    assert (closed["n2.2"]["outcome"], closed["n2.2"]["value"]) == ("partial", None)
    assert "custody hold branches/n2/parent was left behind" in closed["n2.2"]["error"]
    assert [f["fork"] for f in facts(run_cli, "custody.failed")] == ["n2.2"]
    exported = json.loads(run_cli("export", "tree", NIGHTLY_RUN).stdout)
    # the earlier fork's V stays
    assert next(node for node in exported["nodes"] if node["id"] == "n2")["value"] == 0.5


def test_runs_caught_mid_write_are_left_out_unread_not_rejected(
    run_cli: Cli, tmp_path: Path
) -> None:
    nightly = copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", tmp_path / "jobs")
    (nightly / "result.json").unlink()
    ablate = tmp_path / "jobs" / ABLATE_OUT.name
    shutil.copytree(ABLATE_OUT, ablate)
    (ablate / "ablation.json").unlink()
    for half_written in (nightly / "tree.json", ablate / "ablation" / "csv-dedupe" / "tree.json"):
        text = half_written.read_text()
        # the harness is writing it this very moment
        half_written.write_text(text[: len(text) // 2])
    result = run_cli("import", str(tmp_path / "jobs"))
    assert "0 runs rejected, 2 runs left out as still running" in result.stderr
    for why in (
        "it has no result.json yet",
        "bench eval ablate has not written ablation.json yet",
    ):
        assert f"left out, the run may still be running ({why})" in result.stderr
    assert events(run_cli) == []
    refused = run_cli("import", "--unfinished", "--keep-going", str(tmp_path / "jobs"), ok=False)
    assert refused.exit_code == 1 and "2 runs rejected" in refused.stderr


def test_a_result_json_that_does_not_parse_is_corrupt_not_still_running(
    run_cli: Cli, tmp_path: Path
) -> None:
    """A result.json is written once, when the run is over: one cut in half is a corrupt run, named
    with its file and why, for a Harbor trial as for a benchflow run (issue #37)."""
    harbor = copy_run(
        PUBLIC / "benchflow-ai" / "skillsbench-trajectories" / HARBOR_RUN, tmp_path / "jobs"
    )
    text = (harbor / "result.json").read_text()
    (harbor / "result.json").write_text(text[: len(text) // 2])
    result = run_cli("import", str(tmp_path / "jobs"), ok=False)
    assert result.exit_code == 1 and "still running" not in result.stderr
    assert f"Error: {harbor / 'result.json'} is corrupt: line " in result.stderr
    assert events(run_cli) == []


def test_an_ablation_of_a_task_whose_id_has_a_double_underscore_waits_for_its_report(
    run_cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / ABLATE_OUT.name
    shutil.copytree(ABLATE_OUT, out)
    (out / "ablation.json").unlink()
    (out / "ablation" / "csv-dedupe").rename(out / "ablation" / "django__django-11099")
    result = run_cli("import", str(out))
    assert (
        "bench eval ablate has not written ablation.json yet" in result.stderr
        and events(run_cli) == []
    )


def test_a_rollout_in_a_job_named_ablation_is_not_taken_for_an_ablation(
    run_cli: Cli, tmp_path: Path
) -> None:
    run = tmp_path / "jobs" / "ablation" / "csv-dedupe__7c1f2a90"
    shutil.copytree(NIGHTLY / "csv-dedupe__7c1f2a90", run)
    result = run_cli("import", str(run))
    assert "left out" not in result.stderr and len(facts(run_cli, "fork.opened")) == 1


def test_an_ablation_is_imported_once_its_report_is_written(run_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / ABLATE_OUT.name
    shutil.copytree(ABLATE_OUT, out)
    report = (out / "ablation.json").read_text()
    (out / "ablation.json").unlink()
    running = run_cli("import", str(out))
    assert (
        "bench eval ablate has not written ablation.json yet" in running.stderr
        and events(run_cli) == []
    )
    (out / "ablation.json").write_text(report)
    assert "warning" not in run_cli("import", str(out)).stderr
    assert json.loads(run_cli("export", "ablation", f"{ABLATE_RUN}:root").stdout) == json.loads(
        report
    )


def test_a_mainline_run_and_a_harbor_trial_still_running_are_left_out(
    run_cli: Cli, tmp_path: Path
) -> None:
    mainline = copy_run(MAINLINE_DIR, tmp_path / "jobs")
    (mainline / "result.json").unlink()
    harbor = copy_run(
        PUBLIC / "benchflow-ai" / "skillsbench-trajectories" / HARBOR_RUN, tmp_path / "jobs"
    )
    result = json.loads((harbor / "result.json").read_text())
    (harbor / "result.json").write_text(
        json.dumps({**result, "finished_at": None, "verifier_result": None})
    )
    left_out = run_cli("import", str(tmp_path / "jobs"))
    assert (
        "2 runs left out as still running" in left_out.stderr
        and "its result.json has no finished_at yet" in left_out.stderr
    )
    run_cli("import", "--unfinished", str(tmp_path / "jobs"))
    assert {f["run"] for f in facts(run_cli, "run.registered")} == {MAINLINE_RUN, HARBOR_RUN}


def add_post_research_fork(run: Path) -> None:
    """A second, in-place fork from the post-research snapshot at n1, as benchflow would write
    it."""
    tree = json.loads((run / "tree.json").read_text())
    tree["nodes"][1]["value"] = 0.5
    for node, reward, prompt in (("n5", 1.0, "a" * 64), ("n6", 0.0, "b" * 64)):
        delta = {
            "config_override_sha256": None,
            "environment_ref": None,
            "injected_prompt_sha256": f"sha256:{prompt}",
            "skill_mode": None,
        }
        tree["nodes"].append(
            {
                "id": node,
                "parent": "n1",
                "stage": None,
                "snapshot": None,
                "reward": reward,
                "delta": delta,
            }
        )
        child = run / "branches" / "n1" / "children" / node
        child.mkdir(parents=True)
        (child / "provenance.json").write_text(
            json.dumps(
                {
                    "branch_stage": "post-research",
                    "cut_point": None,
                    "delta": delta,
                    "kind": "benchflow-branch",
                    "parent_rollout": "/home/ci/jobs/nightly/csv-dedupe__7c1f2a90",
                    "snapshot_ref": {
                        "environment": None,
                        "sandbox": "bf-snap-csv-dedupe-5a0f9c81e6d3",
                    },
                },
                sort_keys=True,
                indent=2,
            )
        )
        (child / "reward.json").write_text(json.dumps({"reward": reward}) + "\n")
    (run / "tree.json").write_text(json.dumps(tree, sort_keys=True, indent=2) + "\n")


def test_dry_run_prints_ingestable_facts_and_appends_nothing(run_cli: Cli) -> None:
    dry = run_cli("import", "--dry-run", str(NIGHTLY / "csv-dedupe__7c1f2a90"))
    lines = [json.loads(line) for line in dry.stdout.splitlines()]
    assert (
        lines[0]["type"] == "run.registered"
        and lines[0]["occurred_at"] == "2026-11-03T02:00:07.118354+00:00"
    )
    assert (
        "dry run: 1 runs" in dry.stderr and f"{len(lines)} events would be appended" in dry.stderr
    )
    assert events(run_cli) == []
    run_cli("ingest", "-", input=dry.stdout)
    assert len(events(run_cli)) == len(lines)
    assert "0 events appended" in run_cli("import", str(NIGHTLY / "csv-dedupe__7c1f2a90")).stderr


def test_mainline_branched_trial_from_the_public_fixture(run_cli: Cli) -> None:
    result = run_cli("import", str(PUBLIC / "benchflow-ai" / "benchflow"))
    assert "1 runs, 1 forks, 2 children" in result.stderr
    [opened] = facts(run_cli, "fork.opened", MAINLINE_RUN)
    assert (opened["fork"], opened["node"], opened["stage"]) == (
        "00000000000000000000000000000002",
        "n4",
        None,
    )
    assert [(c["node"], c["arm"]) for c in opened["children"]] == [
        ("n5", "baseline"),
        ("n9", "hint-reuse-draft"),
    ]
    assert opened["snapshot"]["sandbox"] == "bf-snap-demo-000000-hello-world-task-000000000000"
    assert [f["node"] for f in facts(run_cli, "run.node_opened", MAINLINE_RUN)] == [
        "n1",
        "n2",
        "n3",
        "n4",
        "n6",
        "n7",
        "n8",
        "n10",
        "n11",
        "n12",
    ]
    assert [f["reward"] for f in facts(run_cli, "fork.child_scored", MAINLINE_RUN)] == [1.0, 0.0]
    assert facts(run_cli, "fork.closed", MAINLINE_RUN)[0]["value"] == 0.5
    assert (
        facts(run_cli, "snapshot.captured")[0]["node"] == "n4"
        and len(facts(run_cli, "snapshot.discarded")) == 1
    )


def test_harbor_trials_and_ctrf_only_folders_from_the_public_fixture(run_cli: Cli) -> None:
    result = run_cli("import", str(PUBLIC / "benchflow-ai" / "skillsbench-trajectories"))
    # the two folders with only verifier/ctrf.json are not runs
    assert "1 runs, 0 forks, 0 children" in result.stderr
    [registered] = facts(run_cli, "run.registered")
    assert (registered["run"], registered["task"], registered["agent"], registered["trial"]) == (
        HARBOR_RUN,
        "powerlifting-coef-calc",
        "claude-code",
        "powerlifting-coef-calc__8rkRX6k",
    )
    assert registered["model"] == "bedrock/us.anthropic.claude-opus-4-5-20251101-v1:0"
    [scored] = facts(run_cli, "run.scored")
    assert scored["reward"] == 1.0 and set(Counter(scored["tests"].values())) == {"passed"}
    [finished] = facts(run_cli, "run.finished")
    assert (
        finished["started_at"] == "2026-01-26T03:23:07.723949"
        and finished["timing"]["total"] == 582.653
    )
    # Harbor's datetime.now(): kept as written, zone not recorded
    assert finished["time_zone"] == "unknown"


def test_a_branch_child_directory_is_not_a_run_of_its_own(run_cli: Cli) -> None:
    child = ABLATE_OUT / "ablation" / "csv-dedupe" / "branches" / "root" / "children" / "n2"
    result = run_cli("import", str(child), ok=False)
    assert result.exit_code == 1 and "a branch child's; import the parent run" in result.stderr


def test_a_folder_without_runs_is_an_error(run_cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run_cli("import", str(tmp_path / "empty"), ok=False)
    assert result.exit_code == 1 and "found no run directories under" in result.stderr


def ablation_variant(tmp_path: Path, raised: str, skipped: list[str]) -> Path:
    """The ablate example where arm node `raised` raised and the arms on `skipped` nodes never
    ran."""
    out = tmp_path / ABLATE_OUT.name
    shutil.copytree(ABLATE_OUT, out)
    run = out / "ablation" / "csv-dedupe"
    tree = json.loads((run / "tree.json").read_text())
    tree["nodes"] = [n for n in tree["nodes"] if n["id"] not in skipped]
    for node in tree["nodes"]:
        if node["id"] == raised:
            node.pop("reward", None), node.pop("unscored", None)
    (run / "tree.json").write_text(json.dumps(tree, sort_keys=True, indent=2) + "\n")
    for node in [raised, *skipped]:
        (run / "branches" / "root" / "children" / node / "reward.json").unlink(missing_ok=True)
    for node in skipped:
        shutil.rmtree(run / "branches" / "root" / "children" / node)
    report = json.loads((out / "ablation.json").read_text())
    for arm in report["arms"]:
        if arm["node"] == raised:
            # outcomes_for_arms still mines the raising child's CTRF (docs/benchflow-formats.md §8),
            # so tests stay
            arm.update(
                reward=None,
                status="error",
                error="RuntimeError: the sandbox died",
                reference=None,
                verdict="errored before scoring — no reward to attribute",
            )
        if arm["node"] in skipped:
            arm.update(
                node=None,
                artifacts=None,
                reward=None,
                status="skipped",
                tests=None,
                error=None,
                reference=None,
                wall_clock_sec=None,
                verdict="not run — an earlier arm errored",
            )
    (out / "ablation.json").write_text(json.dumps(report, sort_keys=True, indent=2) + "\n")
    return out


def test_arms_that_never_ran_are_kept_with_the_fork_that_raised(
    run_cli: Cli, tmp_path: Path
) -> None:
    out = ablation_variant(tmp_path, raised="n4", skipped=["n5"])
    run_cli("import", str(out))
    [opened] = facts(run_cli, "fork.opened")
    assert [c["node"] for c in opened["children"]] == ["n2", "n3", "n4"]
    assert opened["ablation"]["skipped_arms"] == [
        {
            "name": 'config:{"agent": {"max_turns": 40}}',
            "kind": "config-override",
            "source": None,
            "delta": {
                "config_override_keys": ["agent"],
                "config_override_sha256": "sha256:aceb559c2fdd18ae537e9f220613c203b501a840168f192dcd2aa9c4453c971d",  # noqa: E501
                "environment_ref": None,
                "injected_prompt_sha256": None,
                "skill_mode": None,
            },
            "delta_execution": "fresh-rollout",
            "environment": None,
        }
    ]
    [failed] = facts(run_cli, "fork.child_failed")
    assert (failed["index"], failed["error"], failed["wall_clock_sec"]) == (
        2,
        "RuntimeError: the sandbox died",
        136.2,
    )
    assert facts(run_cli, "fork.closed")[0]["outcome"] == "partial"


def test_a_fork_whose_first_child_raised_is_recorded_as_it_happened(
    run_cli: Cli, tmp_path: Path
) -> None:
    out = ablation_variant(tmp_path, raised="n2", skipped=["n3", "n4", "n5"])
    result = run_cli("import", str(out))
    assert "warning" not in result.stderr
    [opened] = facts(run_cli, "fork.opened")
    assert [(c["node"], c["arm"]) for c in opened["children"]] == [("n2", "with-skill")]
    assert [arm["name"] for arm in opened["ablation"]["skipped_arms"]] == [
        "no-skill",
        "inject:prompts/hint.md",
        'config:{"agent": {"max_turns": 40}}',
    ]
    [failed] = facts(run_cli, "fork.child_failed")
    assert (failed["index"], failed["error"]) == (0, "RuntimeError: the sandbox died")
    assert facts(run_cli, "fork.closed")[0]["outcome"] == "partial"
    exported = json.loads(
        run_cli("export", "ablation", "ablate-2026-11-02__10-15-00/ablation/csv-dedupe:root").stdout
    )
    assert [arm["status"] for arm in exported["arms"]] == ["error", "skipped", "skipped", "skipped"]
    assert exported["arms"] == json.loads((out / "ablation.json").read_text())["arms"]


@pytest.mark.parametrize("outcome", [{"reward": 1.0}, {"unscored": "the verifier wrote no reward"}])
@pytest.mark.parametrize(
    "earlier_v", [None, 0.123]
)  # a V left on the node by an earlier fork changes nothing
def test_a_fork_that_stopped_after_its_first_child_closes_partial(
    run_cli: Cli, tmp_path: Path, outcome: dict, earlier_v: float | None
) -> None:
    run = copy_run(NIGHTLY / "csv-dedupe__7c1f2a90", tmp_path / "jobs")
    # child n4 never started (a hand-off failure after n3)
    tree = json.loads((run / "tree.json").read_text())
    tree["nodes"] = [node for node in tree["nodes"] if node["id"] != "n4"]
    n2, n3 = tree["nodes"][2], tree["nodes"][3]
    del n2["value"], n3["reward"]
    n3.update(outcome)
    if earlier_v is not None:
        n2["value"] = earlier_v
    (run / "tree.json").write_text(json.dumps(tree))
    shutil.rmtree(run / "branches" / "n2" / "children" / "n4")
    (run / "branches" / "n2" / "children" / "n3" / "reward.json").unlink()
    run_cli("import", str(run))
    [closed] = facts(run_cli, "fork.closed")
    assert (closed["outcome"], closed["value"]) == ("partial", None)
    assert (
        closed["error"] == "only 1 of the fork's children started (benchflow asks for at least 2)"
    )


def test_arms_that_never_ran_come_back_in_the_exported_report(run_cli: Cli, tmp_path: Path) -> None:
    out = ablation_variant(tmp_path, raised="n4", skipped=["n5"])
    run_cli("import", str(out))
    exported = json.loads(
        run_cli("export", "ablation", "ablate-2026-11-02__10-15-00/ablation/csv-dedupe:root").stdout
    )
    written = json.loads((out / "ablation.json").read_text())
    assert [arm["status"] for arm in exported["arms"]] == ["pass", "fail", "error", "skipped"]
    assert exported["arms"][3] == written["arms"][3]
    assert exported["value"] is None and "config:" not in str(
        exported["test_attribution"]["arms_with_tests"]
    )

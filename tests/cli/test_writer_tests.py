"""Rule 4: per-test outcomes follow benchflow's `artifact_test_outcomes` (docs/benchflow-formats.md
§8).

`branch_report.outcomes_for_arms` mines every child that has a node, the one that raised too (its
mounted/ hand-off runs in a `finally`), through `_child_test_outcomes` (own directory, then
mounted/); a report that is empty, 0 bytes, unparsable or not a CTRF object is "not observed";
`ctrf_test_outcomes` shortens names only when that is injective within the one report it reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.benchflow_writer import Arm, Child, ChildRaised, WriterRun, ablation_report, dump
from tests.conftest import Cli
from tests.writer_stages import TASK, VERIFY_REFS, prompt_delta, snap

OUT = "ablate-2026-11-02__10-15-00"
KEY = f"{OUT}/ablation/{TASK}"


def ctrf(tests: dict[str, str]) -> dict[str, Any]:
    return {
        "results": {
            "tool": {"name": "pytest"},
            "tests": [
                {"name": name, "status": status, "duration": 1} for name, status in tests.items()
            ],
        }
    }


def arms_for(n: int) -> list[Arm]:
    return [
        Arm(f"inject:p{i}.md", "inject", prompt_delta(str(i + 1)), f"p{i}.md") for i in range(n)
    ]


def ablate(tmp_path: Path, stage: str, children: list[Child], arms: list[Arm]) -> tuple[Path, dict]:
    """bench eval ablate at STAGE: _run_parent, _branch_into_arms, _finalize_report,
    write_ablation_report."""
    out = tmp_path / OUT
    run = WriterRun(out / "ablation" / TASK, snapshot_stages={stage})
    run.start(snap("envready000"))
    run.execute(2)
    run.verify(VERIFY_REFS)
    try:
        value, error = run.branch_at_stage(stage, children), None
    except ChildRaised as exc:
        value, error = None, f"ChildRaised: {exc}"
    run.write_run_files(TASK, rewards={"reward": 0.0})
    report = ablation_report(
        run,
        task=TASK,
        stage=stage,
        arms=arms,
        parent_reward=0.0,
        parent_error=None,
        value=value,
        branch_error=error,
    )
    if stage == "env-ready":
        for row in report["arms"]:
            row["delta_execution"] = "fresh-rollout" if row["node"] else None
    dump(out / "ablation.json", report)
    return out, report


def exported(run_cli: Cli, out: Path, fork: str) -> dict:
    run_cli("import", str(out))
    return json.loads(run_cli("export", "ablation", f"{KEY}:{fork}").stdout)


def test_the_child_that_raised_still_has_its_ctrf_mined(run_cli: Cli, tmp_path: Path) -> None:
    """_run_children hands a raising child's mounted output off in a finally; outcomes_for_arms
    mines it."""
    arms = arms_for(3)
    out, report = ablate(
        tmp_path,
        "pre-verify",
        [
            Child(
                arms[0].delta,
                reward=1.0,
                ctrf=ctrf({"t/a.py::test_a": "passed", "t/a.py::test_b": "passed"}),
            ),
            Child(
                arms[1].delta,
                raises="RuntimeError: the agent connection dropped",
                events=3,  # a chain, then it raised
                ctrf=ctrf({"t/a.py::test_a": "passed", "t/a.py::test_b": "failed"}),
            ),
            Child(arms[2].delta, reward=0.0),
        ],
        arms,
    )
    assert [row["status"] for row in report["arms"]] == ["pass", "error", "skipped"]
    assert report["arms"][1]["tests"] == {"test_a": "passed", "test_b": "failed"}
    assert exported(run_cli, out, "n2") == report
    assert json.loads(run_cli("export", "tree", KEY).stdout) == json.loads(
        (out / "ablation" / TASK / "tree.json").read_text()
    )


def test_reports_that_say_nothing_are_not_observed_never_refused(
    run_cli: Cli, tmp_path: Path
) -> None:
    """artifact_test_outcomes: no tests, 0 bytes, unparsable, not a CTRF object -> None; a broken
    report in the child's own directory falls through to its mounted/ hand-off (child_artifact_roots
    order)."""
    arms = arms_for(5)
    children = [
        Child(arm.delta, reward=float(i % 2), ctrf=body)
        for i, (arm, body) in enumerate(
            zip(
                arms,
                (
                    {"results": {"tests": []}},
                    b"",
                    b'{"results": {"tests": [',
                    [1, 2, 3],
                    ctrf({"t::test_a": "passed"}),
                ),
                strict=False,
            )
        )
    ]
    out, report = ablate(tmp_path, "env-ready", children, arms)
    own = out / "ablation" / TASK / "branches" / "root" / "children"
    (own / "n5" / "mounted" / "verifier").mkdir(parents=True)
    (own / "n5" / "verifier" / "ctrf.json").rename(
        own / "n5" / "mounted" / "verifier" / "ctrf.json"
    )
    (own / "n5" / "verifier" / "ctrf.json").write_bytes(b"")
    report = ablation_report_again(out, report)
    assert [row["tests"] for row in report["arms"]] == [
        None,
        None,
        None,
        None,
        {"test_a": "passed"},
    ]
    assert exported(run_cli, out, "root") == report


def ablation_report_again(out: Path, report: dict) -> dict:
    """The same report, its `tests` re-mined from the files as they now are
    (child_test_outcomes)."""
    from tests.benchflow_writer import child_test_outcomes

    for row in report["arms"]:
        row["tests"] = child_test_outcomes(Path(row["artifacts"]))
    dump(out / "ablation.json", report)
    return report


def test_names_are_shortened_only_when_injective_within_the_arms_own_report(
    run_cli: Cli, tmp_path: Path
) -> None:
    """ctrf_test_outcomes decides per report: an arm whose two files both hold test_x keeps raw node
    ids, while the other arm, with one test_x, is shortened."""
    arms = arms_for(2)
    out, report = ablate(
        tmp_path,
        "pre-verify",
        [
            Child(
                arms[0].delta,
                reward=1.0,
                ctrf=ctrf({"a/t.py::test_x": "passed", "b/t.py::test_x": "passed"}),
            ),
            Child(arms[1].delta, reward=0.0, ctrf=ctrf({"b/t.py::test_x": "failed"})),
        ],
        arms,
    )
    assert [sorted(row["tests"]) for row in report["arms"]] == [
        ["a/t.py::test_x", "b/t.py::test_x"],
        ["test_x"],
    ]
    assert exported(run_cli, out, "n2") == report


def test_a_store_that_recorded_the_raised_child_without_tests_takes_the_run_again(
    run_cli: Cli, tmp_path: Path
) -> None:
    """fork.child_failed had no tests before; importing the run again with them is the same outcome,
    not a conflict (nothing is appended)."""
    arms = arms_for(2)
    out, _ = ablate(
        tmp_path,
        "pre-verify",
        [
            Child(arms[0].delta, reward=1.0, ctrf=ctrf({"t.py::test_a": "passed"})),
            Child(
                arms[1].delta, raises="RuntimeError: gone", ctrf=ctrf({"t.py::test_a": "failed"})
            ),
        ],
        arms,
    )
    lines = [
        json.loads(line) for line in run_cli("import", "--dry-run", str(out)).stdout.splitlines()
    ]
    for fact in lines:
        if fact["type"] == "fork.child_failed":
            assert fact.pop("tests") == {"t.py::test_a": "failed"}
    run_cli("ingest", "-", input="".join(json.dumps(fact) + "\n" for fact in lines))
    result = run_cli("import", str(out))
    assert "0 runs rejected" in result.stderr
    added = [json.loads(line) for line in run_cli("log", "--format", "jsonl").stdout.splitlines()][
        len(lines) :
    ]
    assert {e["type"] for e in added} <= {"run.located"}


def test_a_store_that_recorded_an_empty_report_as_observed_exports_it_as_benchflow_reads_it(
    run_cli: Cli, tmp_path: Path
) -> None:
    """Earlier importers recorded a CTRF report listing no test as {} (observed, empty);
    artifact_test_outcomes reads it as None. Importing again appends nothing, and the export says
    null, as the report does."""
    arms = arms_for(2)
    out, report = ablate(
        tmp_path,
        "pre-verify",
        [
            Child(arms[0].delta, reward=1.0, ctrf={"results": {"tests": []}}),
            Child(arms[1].delta, reward=0.0, ctrf=ctrf({"t.py::test_a": "failed"})),
        ],
        arms,
    )
    lines = [
        json.loads(line) for line in run_cli("import", "--dry-run", str(out)).stdout.splitlines()
    ]
    for fact in lines:
        if fact["type"] == "fork.child_scored" and fact["index"] == 0:
            assert fact["tests"] is None
            fact["tests"] = {}
    run_cli("ingest", "-", input="".join(json.dumps(fact) + "\n" for fact in lines))
    assert "0 runs rejected" in run_cli("import", str(out)).stderr
    added = [json.loads(line) for line in run_cli("log", "--format", "jsonl").stdout.splitlines()][
        len(lines) :
    ]
    assert {e["type"] for e in added} <= {"run.located"}
    assert json.loads(run_cli("export", "ablation", f"{KEY}:n2").stdout) == report

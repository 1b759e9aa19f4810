"""`lineage diff`: delta chains from the common ancestor, rewards, per-test outcomes with flips
first."""

from __future__ import annotations

import json

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.projections.reports.diff import compare_tests
from tests import audit_scenarios as s
from tests.conftest import Cli
from tests.scenarios import ABLATE_RUN, ablate_run_facts


def test_flips_come_first_then_changes_then_one_sided_then_ties() -> None:
    a = {
        "t/x.py::test_same": "passed",
        "t/x.py::test_up": "failed",
        "t/x.py::test_down": "passed",
        "t/x.py::test_skip": "passed",
        "t/x.py::test_only_a": "failed",
    }
    b = {
        "t/x.py::test_same": "passed",
        "t/x.py::test_up": "passed",
        "t/x.py::test_down": "failed",
        "t/x.py::test_skip": "skipped",
        "t/x.py::test_only_b": "passed",
    }
    rows = compare_tests(a, b)
    assert [(r["test"], r["change"]) for r in rows] == [
        ("test_down", "passed -> failed"),
        ("test_up", "failed -> passed"),
        ("test_skip", "passed -> skipped"),
        ("test_only_a", "not reported by B"),
        ("test_only_b", "not reported by A"),
        ("test_same", "same"),
    ]
    assert rows[3]["b"] == "not reported" and rows[3]["a"] == "failed"


def test_a_side_without_any_report_is_not_reported_never_failed() -> None:
    rows = compare_tests({"test_a": "passed"}, None)
    assert rows == [
        {
            "test": "test_a",
            "a": "passed",
            "b": "not reported",
            "change": "not reported by B",
            "kind": "not reported",
        }
    ]
    assert compare_tests(None, None) == []


def test_names_stay_raw_when_shortening_would_merge_two_tests() -> None:
    rows = compare_tests({"a.py::test_x": "passed"}, {"b.py::test_x": "failed"})
    assert [r["test"] for r in rows] == ["a.py::test_x", "b.py::test_x"]


def test_two_arms_of_an_ablation(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    result = run_cli("diff", f"{ABLATE_RUN}:root/with-skill", f"{ABLATE_RUN}:root/no-skill")
    assert result.stdout.splitlines()[1:] == [
        f"A  {ABLATE_RUN}:root/with-skill",
        f"B  {ABLATE_RUN}:root/no-skill",
        f"common ancestor: {ABLATE_RUN}",
        "delta chain of A from the common ancestor:",
        f"  {ABLATE_RUN}:n2: child 0 of fork root, arm "
        f"with-skill: skill_mode=with-skill, fresh-rollout",
        "delta chain of B from the common ancestor:",
        f"  {ABLATE_RUN}:n3: child 1 of fork root, arm "
        f"no-skill: skill_mode=no-skill, fresh-rollout",
        "A: reward 1.0 (fork child scored)",
        "B: reward 0.0 (fork child scored)",
        "tests: 2 flipped, 0 changed otherwise, 0 reported by one side only, 2 the same",
        "  test                        A       B       change",
        "  test_keeps_order            passed  failed  passed -> failed",
        "  test_streaming_large_input  passed  failed  passed -> failed",
        "  test_dedupe_exact           passed  passed  same",
        "  test_header_preserved       passed  passed  same",
    ]


def test_an_unscored_arm_reports_no_tests_and_its_reason(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    document = json.loads(
        run_cli("diff", f"{ABLATE_RUN}:n5", f"{ABLATE_RUN}:root/#2", "--format", "json").stdout
    )
    assert document["b"]["outcome"] == "unscored" and document["b"]["reward"] is None
    assert (
        document["b"]["reason"] == "verifier produced no reward: reward.txt missing"
        and document["b"]["reported_tests"] is False
    )
    assert {row["b"] for row in document["tests"]} == {"not reported"}
    assert "failed" not in {row["b"] for row in document["tests"]}
    assert document["counts"] == {"flip": 0, "changed": 0, "not reported": 4, "same": 0}


def test_a_cursor_node_against_a_fork_child_and_row_formats(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    document = json.loads(
        run_cli("diff", f"{ABLATE_RUN}:n1", f"{ABLATE_RUN}:n5", "--format", "json").stdout
    )
    assert document["a"]["delta_chain"] == [
        {
            "node": f"{ABLATE_RUN}:n1",
            "change": "the run's cursor moved on (no delta); stages pre-verify",
        }
    ]
    assert document["a"]["of"] == "run", "a cursor node reports its run's outcome"
    assert document["tests"][0] == {
        "test": "test_keeps_order",
        "a": "failed",
        "b": "passed",
        "change": "failed -> passed",
        "kind": "flip",
    }
    csv_rows = run_cli(
        "diff", f"{ABLATE_RUN}:n1", f"{ABLATE_RUN}:n5", "--format", "csv"
    ).stdout.splitlines()
    assert csv_rows[:2] == [
        "test,a,b,change,kind",
        "test_keeps_order,failed,passed,failed -> passed,flip",
    ]


def test_a_continuation_against_its_source(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.served_cut_point_with_divergence())
    document = json.loads(run_cli("diff", s.SOURCE, s.CONTINUED, "--format", "json").stdout)
    assert document["common_ancestor"] == s.SOURCE
    assert [step["node"] for step in document["b"]["delta_chain"]] == [
        f"{s.SOURCE}:n1",
        s.CONTINUED,
    ]
    assert (
        document["b"]["delta_chain"][1]["change"]
        == f"run {s.CONTINUED}: continuation of {s.SOURCE}, replayed up to K=12"
    )
    assert (
        document["a"]["outcome"] == "failed"
        and document["a"]["reason"] == "provider returned 529 overloaded"
    )
    assert [row["change"] for row in document["tests"]] == [
        "not reported by A",
        "not reported by A",
    ]


def test_unrelated_runs_have_no_common_ancestor(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.duplicate_slot())
    text = run_cli("diff", s.TWIN_A, s.TWIN_B).stdout
    assert "common ancestor: none (unrelated runs)" in text
    assert "tests: 0 flipped, 0 changed otherwise, 0 reported by one side only, 2 the same" in text

"""benchflow's ablation attribution rules (reference §1.7 / §1.7a), string by string."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_lineage.domain.errors import InvalidInput
from rollout_lineage.projections.reports.arms import attribution as attr
from rollout_lineage.projections.reports.arms.attribution import ArmOutcome

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pr-layout"
ABLATIONS = sorted(EXAMPLES.glob("ablate-*/ablation.json"))


def scored(name: str, reward: float, tests: dict[str, str] | None = None) -> ArmOutcome:
    return ArmOutcome(name=name, reward=reward, tests=tests)


def errored(name: str, error: str = "verifier produced no reward") -> ArmOutcome:
    return ArmOutcome(name=name, reward=None, error=error)


def skipped(name: str) -> ArmOutcome:
    return ArmOutcome(name=name, reward=None, ran=False)


# --- the spec's illustrative example (§1.7): scalar tie hiding flipped sub-tests ------------------


def spec_example_arms() -> list[ArmOutcome]:
    return [
        scored("with-skill", 0.0, {"test_a": "passed", "test_b": "failed"}),
        scored("no-skill", 0.0, {"test_a": "failed", "test_b": "passed"}),
    ]


def test_spec_example_test_attribution():
    assert attr.test_attribution(spec_example_arms()) == {
        "arms_with_tests": ["with-skill", "no-skill"],
        "arms_without_tests": [],
        "differing_tests": [
            {"test": "test_a", "outcomes": {"no-skill": "failed", "with-skill": "passed"}},
            {"test": "test_b", "outcomes": {"no-skill": "passed", "with-skill": "failed"}},
        ],
        "tying_tests": [],
        "scalar_tie": True,
        "summary": "scalar rewards tie, but 2 sub-test outcome(s) differ: test_a, test_b",
    }


def test_spec_example_references_statuses_verdicts_and_value():
    arms = spec_example_arms()
    assert [attr.arm_status(arm) for arm in arms] == ["fail", "fail"]
    assert attr.arm_references(arms, parent_reward=0.0) == ["no-skill", "with-skill"]
    tail = "scalar rewards tie, but 2 sub-test outcome(s) differ: test_a, test_b"
    assert attr.arm_verdicts(arms, "env-ready", 0.0) == [
        f"matches no-skill at env-ready (both 0.00) — {tail}",
        f"matches with-skill at env-ready (both 0.00) — {tail}",
    ]
    assert attr.report_value(arms) == 0.0


def test_differing_outcomes_keys_are_sorted_for_sort_keys_output():
    entry = attr.test_attribution(spec_example_arms())["differing_tests"][0]
    assert list(entry["outcomes"]) == ["no-skill", "with-skill"]


# --- status ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arm", "status"),
    [
        (scored("with-skill", 1.0), "pass"),
        (scored("with-skill", 1.5), "pass"),
        (scored("with-skill", 0.999), "fail"),
        (scored("with-skill", 0.0), "fail"),
        (errored("inject:hint.md"), "error"),
        (skipped("inject:hint.md"), "skipped"),
    ],
)
def test_arm_status(arm, status):
    assert attr.arm_status(arm) == status


def test_a_skipped_arm_cannot_carry_an_outcome():
    with pytest.raises(InvalidInput, match="never ran"):
        ArmOutcome(name="no-skill", reward=0.0, ran=False)
    with pytest.raises(InvalidInput, match="never ran"):
        ArmOutcome(name="no-skill", reward=None, error="boom", ran=False)


def test_an_arm_that_ran_needs_a_reward_or_an_error():
    with pytest.raises(InvalidInput, match="neither a reward nor an error"):
        ArmOutcome(name="no-skill", reward=None)


def test_a_pending_arm_carries_nothing_and_is_judged_pending():
    with pytest.raises(InvalidInput, match="is pending but carries"):
        ArmOutcome(name="no-skill", reward=1.0, pending=True)
    with pytest.raises(InvalidInput, match="is pending but never ran"):
        ArmOutcome(name="no-skill", reward=None, ran=False, pending=True)
    arms = [ArmOutcome("with-skill", 1.0), ArmOutcome("no-skill", None, pending=True)]
    assert [attr.arm_status(arm) for arm in arms] == ["pass", "pending"]
    assert attr.arm_references(arms, 0.0) == ["parent", None]
    assert attr.arm_verdicts(arms, "env-ready", 0.0)[1] == (
        "no outcome recorded yet — the arm is still running"
    )
    assert attr.report_value(arms) is None


# --- test name normalisation ----------------------------------------------------------------------


def test_short_test_name_drops_node_id_path_segments():
    assert attr.short_test_name("a/b.py::Cls::test_x[p]") == "test_x[p]"
    assert attr.short_test_name("tests/test_outputs.py::test_keeps_order") == "test_keeps_order"
    assert attr.short_test_name("test_plain") == "test_plain"
    assert attr.short_test_name("t.py::test_x[a::b]") == "test_x[a::b]"


def test_names_are_shortened_when_injective_within_each_arms_report():
    arms = [
        scored(
            "with-skill",
            1.0,
            {"tests/t.py::test_a": "passed", "tests/t.py::Cls::test_b[1]": "failed"},
        ),
        scored("no-skill", 0.0, {"tests/t.py::test_a": "failed"}),
        errored("inject:hint.md"),
    ]
    assert attr.normalise_test_names(arms) == [
        {"test_a": "passed", "test_b[1]": "failed"},
        {"test_a": "failed"},
        None,
    ]


def test_each_arm_is_shortened_on_its_own_like_ctrf_test_outcomes():
    # benchflow decides per CTRF report (one arm): a collision in one arm keeps that arm raw, not
    # the others.
    arms = [
        scored("with-skill", 1.0, {"a/t.py::test_x": "passed", "b/t.py::test_x": "failed"}),
        scored("no-skill", 0.0, {"b/t.py::test_x": "failed"}),
    ]
    assert attr.normalise_test_names(arms) == [
        {"a/t.py::test_x": "passed", "b/t.py::test_x": "failed"},
        {"test_x": "failed"},
    ]


def test_names_stay_raw_when_a_short_and_a_long_name_collide():
    arms = [scored("with-skill", 1.0, {"test_x": "passed", "t.py::test_x": "failed"})]
    assert attr.normalise_test_names(arms) == [{"test_x": "passed", "t.py::test_x": "failed"}]


def test_statuses_are_verbatim_and_empty_differs_from_none():
    arms = [
        scored("with-skill", 1.0, {"t.py::test_a": "pending", "t.py::test_b": "other"}),
        scored("no-skill", 1.0, {}),
        skipped("inject:x.md"),
    ]
    assert attr.normalise_test_names(arms) == [{"test_a": "pending", "test_b": "other"}, {}, None]


def test_ctrf_outcomes_keep_the_first_entry_and_only_valid_ones():
    document = {
        "results": {
            "tests": [
                {"name": "t.py::test_a", "status": "failed"},
                {"name": "t.py::test_a", "status": "passed"},
                {"name": "", "status": "passed"},
                {"name": "t.py::test_b", "status": None},
                "not an object",
                {"name": "t.py::test_c", "status": "skipped"},
            ]
        }
    }
    assert attr.ctrf_test_outcomes(document) == {
        "t.py::test_a": "failed",
        "t.py::test_c": "skipped",
    }
    assert attr.ctrf_test_outcomes({"results": {"tests": []}}) == {}
    assert attr.ctrf_test_outcomes({"results": {}}) is None
    assert attr.ctrf_test_outcomes([]) is None


# --- test_attribution -----------------------------------------------------------------------------


def test_only_tested_arms_take_part_and_missing_tests_are_null():
    arms = [
        scored("with-skill", 1.0, {"test_a": "passed", "test_b": "passed", "test_c": "passed"}),
        scored("no-skill", 0.0, {"test_a": "passed", "test_b": "failed"}),
        scored("config:{}", 0.0, None),
    ]
    result = attr.test_attribution(arms)
    assert result["arms_with_tests"] == ["with-skill", "no-skill"]
    assert result["arms_without_tests"] == ["config:{}"]
    assert result["differing_tests"] == [
        {"test": "test_b", "outcomes": {"no-skill": "failed", "with-skill": "passed"}},
        {"test": "test_c", "outcomes": {"no-skill": None, "with-skill": "passed"}},
    ]
    assert result["tying_tests"] == ["test_a"]
    assert result["scalar_tie"] is False
    assert result["summary"] == "2 sub-test outcome(s) differ: test_b, test_c"


def test_scalar_only_attribution_with_fewer_than_two_tested_arms():
    arms = [
        scored("with-skill", 1.0, {"test_b": "passed", "test_a": "failed"}),
        scored("no-skill", 1.0),
        errored("inject:hint.md"),
    ]
    result = attr.test_attribution(arms)
    assert result["differing_tests"] == []
    assert result["tying_tests"] == ["test_a", "test_b"]
    assert result["scalar_tie"] is True
    assert result["summary"] == (
        "scalar-only attribution — 1 of 3 arms reported "
        "per-test outcomes, so no sub-test comparison was made"
    )


def test_scalar_only_attribution_with_no_tested_arm():
    result = attr.test_attribution([scored("with-skill", 1.0), scored("no-skill", 0.0)])
    assert result["arms_with_tests"] == []
    assert result["arms_without_tests"] == ["with-skill", "no-skill"]
    assert result["summary"].startswith("scalar-only attribution — 0 of 2 arms")


def test_all_tests_tie():
    arms = [
        scored("with-skill", 1.0, {"test_a": "passed", "test_b": "passed"}),
        scored("no-skill", 0.0, {"test_b": "passed", "test_a": "passed"}),
    ]
    result = attr.test_attribution(arms)
    assert result["differing_tests"] == []
    assert result["tying_tests"] == ["test_a", "test_b"]
    assert result["summary"] == (
        "2 arms reported per-test outcomes and all 2 "
        "tie — no sub-test difference in this comparison"
    )


def test_more_than_three_differing_names_roll_up():
    names = ["test_e", "test_a", "test_d", "test_c", "test_b"]
    arms = [
        scored("with-skill", 0.0, dict.fromkeys(names, "passed")),
        scored("no-skill", 0.0, dict.fromkeys(names, "failed")),
    ]
    summary = attr.test_attribution(arms)["summary"]
    assert (
        summary
        == "scalar rewards tie, but 5 sub-test outcome(s) differ: test_a, test_b, test_c (+2 more)"
    )
    verdict = attr.arm_verdicts(arms, "pre-verify", None)[0]
    assert verdict.endswith("differ: test_a, test_b, test_c (+2 more)")


def test_exactly_three_differing_names_have_no_roll_up():
    arms = [
        scored("with-skill", 1.0, {"t1": "passed", "t2": "passed", "t3": "passed"}),
        scored("no-skill", 0.0, {"t1": "failed", "t2": "failed", "t3": "failed"}),
    ]
    assert attr.test_attribution(arms)["summary"] == "3 sub-test outcome(s) differ: t1, t2, t3"


@pytest.mark.parametrize(
    ("rewards", "tie"),
    [
        ([0.5, 0.5], True),
        ([0.5, None], False),
        ([0.5, 0.25], False),
        ([1.0], False),
        ([0.0, 0.0, None], True),
    ],
)
def test_scalar_tie_needs_two_equal_rewards(rewards, tie):
    arms = [
        scored(f"inject:{i}.md", reward) if reward is not None else errored(f"inject:{i}.md")
        for i, reward in enumerate(rewards)
    ]
    assert attr.test_attribution(arms)["scalar_tie"] is tie


def test_explicit_tests_per_arm_must_match_the_arms():
    with pytest.raises(InvalidInput, match="for 2 arms, found 1"):
        attr.test_attribution(spec_example_arms(), [None])


# --- references -----------------------------------------------------------------------------------


def test_skill_arms_reference_each_other_other_arms_the_parent():
    arms = [scored("with-skill", 1.0), scored("no-skill", 0.0), scored("inject:hint.md", 0.5)]
    assert attr.arm_references(arms, parent_reward=0.0) == ["no-skill", "with-skill", "parent"]


def test_no_parent_reward_leaves_other_arms_without_reference():
    arms = [scored("with-skill", 1.0), scored("env:registry/x@1", 0.5)]
    assert attr.arm_references(arms, parent_reward=None) == [None, None]


def test_skill_arm_falls_back_to_parent_when_counterpart_has_no_reward():
    arms = [scored("with-skill", 1.0), errored("no-skill"), skipped("inject:hint.md")]
    assert attr.arm_references(arms, parent_reward=0.0) == ["parent", None, None]


# --- verdicts -------------------------------------------------------------------------------------


def test_errored_and_skipped_verdicts():
    arms = [errored("with-skill"), skipped("no-skill")]
    assert attr.arm_verdicts(arms, "env-ready", 1.0) == [
        "errored before scoring — no reward to attribute",
        "not run — an earlier arm errored",
    ]


def test_no_reference_verdict():
    assert attr.arm_verdicts([scored("inject:hint.md", 0.25)], "post-verify", None) == [
        "scores 0.25 at post-verify — no counterpart arm or parent reward to compare against"
    ]


def test_pass_fail_delta_verdicts():
    arms = [scored("with-skill", 1.0), scored("no-skill", 0.0)]
    decides = "this delta decides the outcome when applied at env-ready (1 run per arm)"
    assert attr.arm_verdicts(arms, "env-ready", None) == [
        f"passes (1.00) where no-skill fails (0.00) at env-ready — {decides}",
        f"fails (0.00) where with-skill passes (1.00) at env-ready — {decides}",
    ]


def test_higher_and_lower_verdicts_against_the_parent():
    arms = [scored('config:{"agent": {}}', 0.75), scored("inject:hint.md", 0.125)]
    assert attr.arm_verdicts(arms, "pre-verify", 0.5) == [
        "scores 0.75 vs parent 0.50 at pre-verify — higher reward in this single comparison",
        "scores 0.12 vs parent 0.50 at pre-verify — lower reward in this single comparison",
    ]
    assert attr.arm_references(arms, 0.5) == ["parent", "parent"]


def test_both_passing_with_different_rewards_is_higher_not_decisive():
    arms = [scored("with-skill", 1.0), scored("no-skill", 2.0)]
    assert attr.arm_verdicts(arms, "env-ready", None)[0] == (
        "scores 1.00 vs no-skill 2.00 at env-ready — lower reward in this single comparison"
    )


def test_tie_with_parent_has_no_sub_test_comparison():
    arms = [scored("inject:hint.md", 1.0, {"test_a": "passed"})]
    assert attr.arm_verdicts(arms, "env-ready", 1.0) == [
        "matches parent at env-ready (both 1.00) — no difference in this comparison"
    ]


def test_tie_verdict_compares_only_the_two_arms():
    # A third arm disagrees on test_a, but the skill pair agrees, so their verdicts see no
    # difference.
    arms = [
        scored("with-skill", 0.0, {"test_a": "passed"}),
        scored("no-skill", 0.0, {"test_a": "passed"}),
        scored("inject:hint.md", 0.0, {"test_a": "failed"}),
    ]
    verdicts = attr.arm_verdicts(arms, "env-ready", None)
    assert (
        verdicts[0]
        == "matches no-skill at env-ready (both 0.00) — no difference in this comparison"
    )
    assert verdicts[2] == (
        "scores 0.00 at env-ready — no counterpart arm or parent reward to compare against"
    )
    assert (
        attr.test_attribution(arms)["summary"]
        == "scalar rewards tie, but 1 sub-test outcome(s) differ: test_a"
    )


def test_tie_verdict_without_the_counterparts_tests_says_no_difference():
    arms = [scored("with-skill", 0.0, {"test_a": "passed"}), scored("no-skill", 0.0, None)]
    assert attr.arm_verdicts(arms, "env-ready", None)[0] == (
        "matches no-skill at env-ready (both 0.00) — no difference in this comparison"
    )


def test_tie_verdict_counts_a_test_missing_from_one_arm():
    arms = [
        scored("with-skill", 0.0, {"test_a": "passed", "test_z": "failed"}),
        scored("no-skill", 0.0, {"test_a": "passed"}),
    ]
    assert attr.arm_verdicts(arms, "env-ready", None)[1] == (
        "matches with-skill at env-ready (both 0.00) — "
        "scalar rewards tie, but 1 sub-test outcome(s) differ: test_z"
    )


# --- value ----------------------------------------------------------------------------------------


def test_report_value_is_the_mean_only_when_every_arm_scored():
    assert attr.report_value([scored("with-skill", 1.0), scored("no-skill", 0.0)]) == 0.5
    assert attr.report_value([scored("with-skill", 1.0), errored("no-skill")]) is None
    assert attr.report_value([scored("with-skill", 1.0), skipped("no-skill")]) is None
    assert attr.report_value([]) is None


# --- the checked-in example report ----------------------------------------------------------------


@pytest.mark.skipif(not ABLATIONS, reason="no examples/pr-layout/ablate-*/ablation.json checked in")
@pytest.mark.parametrize("path", ABLATIONS, ids=lambda path: path.parent.name)
def test_example_ablation_report_recomputes(path: Path):
    report = json.loads(path.read_text(encoding="utf-8"))
    rows = report["arms"]
    arms = [
        ArmOutcome(
            name=row["name"],
            reward=row["reward"],
            error=row["error"],
            ran=row["node"] is not None,
            tests=row["tests"],
        )
        for row in rows
    ]
    tests = attr.normalise_test_names(arms)
    parent_reward = report["parent"]["reward"]
    assert tests == [row["tests"] for row in rows]
    assert [attr.arm_status(arm) for arm in arms] == [row["status"] for row in rows]
    assert attr.arm_references(arms, parent_reward) == [row["reference"] for row in rows]
    assert attr.arm_verdicts(arms, report["stage"], parent_reward, tests) == [
        row["verdict"] for row in rows
    ]
    assert attr.test_attribution(arms, tests) == report["test_attribution"]
    assert attr.report_value(arms) == report["value"]

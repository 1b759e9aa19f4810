"""benchflow's ablation attribution rules (§1.7, §1.7a), as pure functions over the arms' outcomes:
every derived field of `ablation.json` (`status`, `reference`, `verdict`, `test_attribution`,
`value`) recomputed from the few facts the log holds per arm, so `lineage export ablation` writes
the file `bench eval ablate` writes, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# No I/O, and nothing imported beyond the standard library, the project's error family and the
# pass threshold, so the rules can be tested exhaustively and reused by any reader.
from ....domain.errors import InvalidInput
from ...read_models.outcome_words import PASS_REWARD

WITH_SKILL = "with-skill"
NO_SKILL = "no-skill"
PARENT = "parent"
SHOWN_TEST_NAMES = 3
# What benchflow records on an arm whose child ran but carries neither a reward nor an unscored
# reason.
NO_REWARD_REASON = "the branch ended without a reward"

OutcomeMap = dict[str, str]


@dataclass(frozen=True)
class ArmOutcome:
    """One arm as the log knows it. `tests` holds raw CTRF names; None means "not observed", unlike
    {}."""

    name: str
    reward: float | None
    error: str | None = None
    ran: bool = True
    tests: Mapping[str, str] | None = None
    #: Ran (or is running) but has no outcome yet at the point asked about (`--as-of`,
    #: `--occurred-before`).
    pending: bool = False

    def __post_init__(self) -> None:
        problem = self._contradiction()
        if problem is not None:
            raise InvalidInput(f"arm {self.name!r} {problem[0]}", hint=problem[1])

    def _contradiction(self) -> tuple[str, str] | None:
        """What benchflow never writes (refusing it keeps `status` and `ran` in agreement), or
        None."""
        without_outcome = self.pending or not self.ran
        carries = any(value is not None for value in (self.reward, self.error, self.tests))
        if self.pending and not self.ran:
            return (
                "is pending but never ran",
                "an arm still running has ran=True; one that never ran is skipped",
            )
        if without_outcome and carries:
            what = "is pending" if self.pending else "never ran"
            return (
                f"{what} but carries a reward, error or test outcomes",
                "a pending or skipped arm has reward, error and tests all null",
            )
        if not without_outcome and self.reward is None and self.error is None:
            return (
                "ran but has neither a reward nor an error",
                f"record the unscored reason, or benchflow's default {NO_REWARD_REASON!r}",
            )
        return None


def ctrf_test_outcomes(document: object) -> OutcomeMap | None:
    """`{raw name: status}` from a parsed ctrf.json; None when it is not a CTRF report at all.

    Only `results.tests[]` objects with a non-empty string `name` and `status` count, as in
    benchflow; the first entry for a name wins. A report listing no usable tests is `{}`: observed,
    and empty.
    """
    results = document.get("results") if isinstance(document, dict) else None
    tests = results.get("tests") if isinstance(results, dict) else None
    if not isinstance(tests, list):
        return None
    outcomes: OutcomeMap = {}
    for entry in tests:
        if not isinstance(entry, dict):
            continue
        name, status = entry.get("name"), entry.get("status")
        if isinstance(name, str) and name and isinstance(status, str) and status:
            outcomes.setdefault(name, status)
    return outcomes


def short_test_name(raw: str) -> str:
    """`a/b.py::Cls::test_x[p]` -> `test_x[p]`: the node id's path segments dropped, the parameters
    kept. As benchflow's `_display_test_name` decides, a `::` inside a pytest parametrisation id
    (`test_x[a::b]`) is not a path separator."""
    bracket = raw.find("[")
    head, params = (raw, "") if bracket < 0 else (raw[:bracket], raw[bracket:])
    # Even when that leaves nothing ("t.py::" -> ""): benchflow's _display_test_name keeps the empty
    # name too.
    return head.rsplit("::", 1)[-1] + params


def normalise_test_names(arms: Sequence[ArmOutcome]) -> list[OutcomeMap | None]:
    """Each arm's tests under short names if shortening is injective within that arm's own report,
    else raw.

    benchflow shortens inside `ctrf_test_outcomes`, one CTRF report (one arm) at a time, and never
    renames afterwards (docs/benchflow-formats.md §8): two arms may therefore name one test
    differently.
    """
    normalised: list[OutcomeMap | None] = []
    for arm in arms:
        if arm.tests is None:
            normalised.append(None)
            continue
        short = {name: short_test_name(name) for name in arm.tests}
        injective = len(set(short.values())) == len(short)
        outcomes: OutcomeMap = {}
        for name, status in arm.tests.items():
            outcomes.setdefault(short[name] if injective else name, status)
        normalised.append(dict(sorted(outcomes.items())))
    return normalised


def arm_status(arm: ArmOutcome) -> str:
    if arm.pending:
        return "pending"
    if arm.reward is not None:
        return "pass" if arm.reward >= PASS_REWARD else "fail"
    return "error" if arm.error is not None else "skipped"


def _score(reward: float) -> str:
    return f"{reward:.2f}"


def _name_list(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN_TEST_NAMES])
    more = len(names) - SHOWN_TEST_NAMES
    return f"{shown} (+{more} more)" if more > 0 else shown


def _differing(named_tests: Sequence[tuple[str, OutcomeMap | None]]) -> list[dict]:
    """Tests whose outcome is not the same in every tested arm; a tested arm not naming a test has
    None."""
    tested = [(name, tests) for name, tests in named_tests if tests is not None]
    if len(tested) < 2:
        return []
    differing = []
    for test in sorted({test for _, tests in tested for test in tests}):
        outcomes = {name: tests.get(test) for name, tests in tested}
        if len(set(outcomes.values())) > 1:
            differing.append({"test": test, "outcomes": dict(sorted(outcomes.items()))})
    return differing


def _tests_or_normalised(
    arms: Sequence[ArmOutcome], tests_per_arm: Sequence[OutcomeMap | None] | None
) -> list[OutcomeMap | None]:
    tests = normalise_test_names(arms) if tests_per_arm is None else list(tests_per_arm)
    if len(tests) != len(arms):
        raise InvalidInput(f"expected test outcomes for {len(arms)} arms, found {len(tests)}")
    return tests


def scalar_tie(arms: Sequence[ArmOutcome]) -> bool:
    rewards = [arm.reward for arm in arms if arm.reward is not None]
    return len(rewards) >= 2 and len(set(rewards)) == 1


def test_attribution(
    arms: Sequence[ArmOutcome], tests_per_arm: Sequence[OutcomeMap | None] | None = None
) -> dict:
    """The report's `test_attribution` section (tests default to `normalise_test_names(arms)`)."""
    tests = _tests_or_normalised(arms, tests_per_arm)
    named = [(arm.name, arm_tests) for arm, arm_tests in zip(arms, tests, strict=False)]
    tested = [arm_tests for _, arm_tests in named if arm_tests is not None]
    differing = _differing(named)
    differing_names = [entry["test"] for entry in differing]
    tying = sorted({test for arm_tests in tested for test in arm_tests} - set(differing_names))
    tie = scalar_tie(arms)
    if len(tested) < 2:
        summary = (
            f"scalar-only attribution — {len(tested)} of "
            f"{len(arms)} arms reported per-test outcomes, "
            "so no sub-test comparison was made"
        )
    elif not differing:
        summary = (
            f"{len(tested)} arms reported per-test outcomes and all {len(tying)} tie — "
            "no sub-test difference in this comparison"
        )
    elif tie:
        summary = (
            f"scalar rewards tie, but {len(differing)} sub-test "
            f"outcome(s) differ: {_name_list(differing_names)}"
        )
    else:
        summary = f"{len(differing)} sub-test outcome(s) differ: {_name_list(differing_names)}"
    return {
        "arms_with_tests": [name for name, arm_tests in named if arm_tests is not None],
        "arms_without_tests": [name for name, arm_tests in named if arm_tests is None],
        "differing_tests": differing,
        "tying_tests": tying,
        "scalar_tie": tie,
        "summary": summary,
    }


# A library function, not a pytest test, wherever it is imported. pytest reads `__test__` off the
# function; mypy knows no such attribute on a function object, hence the one ignore.
test_attribution.__test__ = False  # type: ignore[attr-defined]


def _reference(
    arm: ArmOutcome, by_name: Mapping[str, ArmOutcome], parent_reward: float | None
) -> tuple[str, float] | None:
    """(name, reward) this arm compares against: its skill counterpart if scored, else the parent if
    scored. §1.7a is silent on a skill arm whose counterpart has no reward; falling back to the
    parent is what benchflow's report module does."""
    counterpart = {WITH_SKILL: NO_SKILL, NO_SKILL: WITH_SKILL}.get(arm.name)
    other = by_name.get(counterpart) if counterpart else None
    if counterpart is not None and other is not None and other.reward is not None:
        return counterpart, other.reward
    if parent_reward is not None:
        return PARENT, parent_reward
    return None


def arm_references(arms: Sequence[ArmOutcome], parent_reward: float | None) -> list[str | None]:
    by_name = {arm.name: arm for arm in arms}
    references: list[str | None] = []
    for arm in arms:
        reference = None if arm.reward is None else _reference(arm, by_name, parent_reward)
        references.append(None if reference is None else reference[0])
    return references


def arm_verdicts(
    arms: Sequence[ArmOutcome],
    stage: str,
    parent_reward: float | None,
    tests_per_arm: Sequence[OutcomeMap | None] | None = None,
) -> list[str]:
    tests = _tests_or_normalised(arms, tests_per_arm)
    by_name = {arm.name: arm for arm in arms}
    tests_by_name = {arm.name: arm_tests for arm, arm_tests in zip(arms, tests, strict=False)}
    verdicts = []
    for arm, arm_tests in zip(arms, tests, strict=False):
        if arm.reward is None:
            verdicts.append(_without_reward(arm))
            continue
        reference = _reference(arm, by_name, parent_reward)
        if reference is None:
            verdicts.append(
                f"scores {_score(arm.reward)} at {stage} — no "
                f"counterpart arm or parent reward to compare against"
            )
            continue
        pair = [(arm.name, arm_tests)]
        if reference[0] in by_name:
            pair.append((reference[0], tests_by_name[reference[0]]))
        verdicts.append(_compared(arm.reward, reference, stage, pair))
    return verdicts


def _without_reward(arm: ArmOutcome) -> str:
    """The verdict of an arm with no reward: still running, errored, or never run."""
    status = arm_status(arm)
    if status == "pending":
        return "no outcome recorded yet — the arm is still running"
    if status == "error":
        return "errored before scoring — no reward to attribute"
    return "not run — an earlier arm errored"


def _compared(
    reward: float,
    reference: tuple[str, float],
    stage: str,
    pair: Sequence[tuple[str, OutcomeMap | None]],
) -> str:
    """The verdict of a scored arm against the scored reference it compares with. A tie compares
    only the two arms' own tests (`pair`), as benchflow's report module does where §1.7a is
    silent."""
    ref_name, ref_reward = reference
    if reward == ref_reward:
        differing = [entry["test"] for entry in _differing(pair)]
        tail = (
            f"scalar rewards tie, but {len(differing)} sub-test "
            f"outcome(s) differ: {_name_list(differing)}"
            if differing
            else "no difference in this comparison"
        )
        return f"matches {ref_name} at {stage} (both {_score(reward)}) — {tail}"
    if (reward >= PASS_REWARD) != (ref_reward >= PASS_REWARD):
        passes = reward >= PASS_REWARD
        return (
            f"{'passes' if passes else 'fails'} ({_score(reward)}) where {ref_name} "
            f"{'fails' if passes else 'passes'} ({_score(ref_reward)}) at {stage} — "
            f"this delta decides the outcome when applied at {stage} (1 run per arm)"
        )
    direction = "higher" if reward > ref_reward else "lower"
    return (
        f"scores {_score(reward)} vs {ref_name} {_score(ref_reward)} at {stage} — "
        f"{direction} reward in this single comparison"
    )


def report_value(arms: Sequence[ArmOutcome]) -> float | None:
    """V: the mean arm reward, None when there are no arms or any arm has no reward."""
    rewards = [arm.reward for arm in arms if arm.reward is not None]
    if not rewards or len(rewards) != len(arms):
        return None
    return sum(rewards) / len(rewards)

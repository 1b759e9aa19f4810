"""The one word and the one text every reader prints for what became of a run or a fork child.

benchflow's own vocabulary (`ablate.ArmOutcome.status`): `pass` (reward >= 1.0), `fail` (a lower
reward), `error` (no reward, with a reason: unscored or raised), `skipped` (no reward and no reason:
a child the fork ended before, a run scored only by its fork's aggregate). `pending` is ours: no
outcome recorded yet. The `children` view computes the word in SQL (`CHILD_STATUS`), the `runs` view
too (`RUN_STATUS`, its `status` column); `run_status` reads it. The tree, the report, `arms`,
`lineage runs`, `lineage serve`, the views and the OpenLineage export all print these, so one node
reads the same everywhere. How a run's outcome was recorded (`OUTCOME_KINDS`: scored, unscored,
failed, ...) is the `runs.outcome` column; `--outcome` filters on it, `--status` on the word.
"""

from __future__ import annotations

from typing import Any

#: benchflow's pass line (`ablate`): a reward at or above it is a pass.
PASS_REWARD = 1.0

#: Each word with what it means, in the order legends list them.
STATUS_WORDS = {
    "pass": f"scored, reward >= {PASS_REWARD!r}",
    "fail": f"scored, reward below {PASS_REWARD!r}",
    "error": "no reward, and a reason (unscored, or it raised)",
    "skipped": "no reward and no reason (the fork ended "
    "first, or only a fork's aggregate scored it, or its fork discarded it by design)",
    "pending": "no outcome recorded yet",
}

#: What V is, wherever it is printed (tree, report, `forks.value`).
V_MEANING = (
    "V: a fork's value, the mean reward of its children; undefined unless every child was scored"
)

#: The `children` view's status: `o` is the child's outcome row, `cl` its fork's closure.
CHILD_STATUS = f"""CASE WHEN o.kind = 'scored' AND o.reward >= {PASS_REWARD!r} THEN 'pass'
                       WHEN o.kind = 'scored' THEN 'fail'
                       WHEN o.kind IN ('unscored', 'failed') THEN 'error' WHEN cl.fork IS NOT NULL THEN 'skipped'
                       ELSE 'pending' END"""  # noqa: E501


#: How a run's outcome was recorded (the `runs` view's `outcome`), each with what it means.
OUTCOME_KINDS = {
    "scored": "a verified reward (run.scored)",
    "branch_aggregate": "a reward that is its fork's V, not its own",
    "unscored": "the verifier gave no reward, and said why (run.unscored)",
    "failed": "the run raised before a reward (run.failed)",
    "pending": "no outcome recorded yet",
}

#: The `runs` view's status, the rule of `CHILD_STATUS` applied to a run: `s`, `u` and `f` are its
#: scored, unscored and failed rows of `run_outcomes`.
RUN_STATUS = f"""CASE WHEN s.basis = 'branch_aggregate' THEN 'skipped'
                       WHEN s.run IS NOT NULL AND s.reward >= {PASS_REWARD!r} THEN 'pass'
                       WHEN s.run IS NOT NULL THEN 'fail'
                       WHEN u.run IS NOT NULL OR f.run IS NOT NULL THEN 'error'
                       WHEN t.parent = 'discarded' THEN 'skipped'
                       ELSE 'pending' END"""


def run_status(row: dict[str, Any]) -> str:
    """A `runs` row's own outcome as one word: its `status` column (`RUN_STATUS`)."""
    status: str = row["status"]
    return status


def run_reason(row: dict[str, Any]) -> str | None:
    """Why a run has no reward of its own, when it has none."""
    if row["outcome"] == "branch_aggregate":
        value = row["branch_value"]
        return "no reward of its own: only its fork's aggregate" + (
            f" (V={value!r})" if value is not None else ""
        )
    if row["outcome"] == "discarded":
        return (
            "unscored by design: its fork discarded the parent (--parent discard), so it was "
            "never verified; its children carry the scores"
        )
    return row["unscored_reason"] or row["error"]


#: What a node without a recorded reason reads, by status.
WITHOUT_REASON = {
    "pending": "no outcome yet",
    "skipped": "the fork ended before it had an outcome",
}


def reward_text(reward: float) -> str:
    """A reward as the row printer writes a float: its shortest exact form (1.0, 0.123456789)."""
    return repr(float(reward))


def outcome_text(status: str, reward: float | None, reason: str | None) -> str:
    """`pass: reward 1.0`, `error: verifier produced no reward`, `pending: no outcome yet`."""
    if reward is not None and status in ("pass", "fail"):
        return f"{status}: reward {reward_text(reward)}"
    if reason:
        return f"{status}: {reason}"
    return f"{status}: {WITHOUT_REASON.get(status, 'no reason recorded')}"

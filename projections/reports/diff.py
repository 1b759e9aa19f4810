"""`lineage diff A B`: two nodes or two arms side by side (any two addresses of `lineage history`):
each side's delta chain from the common ancestor, both outcomes, and per-test outcomes, flips first.
An absent CTRF entry is missing evidence, never a failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..read_models.outcome_words import reward_text
from .arms.attribution import short_test_name
from .history import NodeRef, Step, ancestry, resolve_node
from .history_text import as_json, delta_label
from .text_lines import one_line

if TYPE_CHECKING:
    from ...adapters.duckdb_store import ReadModelDB

NOT_REPORTED = "not reported"
FLIPS = {("passed", "failed"), ("failed", "passed")}


def _step_change(db: ReadModelDB, step: Step) -> str:
    ref = step.ref
    if step.kind == "child":
        child = db.rows(
            "SELECT delta, delta_execution, arm FROM "
            "fork_children WHERE run = ? AND fork = ? AND idx = ?",
            [ref.run, ref.fork, ref.child_index],
        )[0]
        return (
            f"child {ref.child_index} of fork {ref.fork}"
            + (f", arm {child['arm']}" if child["arm"] else "")
            + f": {delta_label(child['delta'])}"
            + (f", {child['delta_execution']}" if child["delta_execution"] else "")
        )
    if step.kind == "root":
        run = db.rows(
            "SELECT r.role, r.parent_run, c.configured_k, c.served_k, c.stage FROM runs r "
            "LEFT JOIN cut_points c USING (run) WHERE r.run = ?",
            [ref.run],
        )[0]
        if not run["parent_run"]:
            return f"run {ref.run}"
        cut = f", replayed up to K={run['served_k']}" if run["served_k"] is not None else ""
        return f"run {ref.run}: {run['role']} of {run['parent_run']}{cut}"
    stages = [
        r["stage"]
        for r in db.rows(
            "SELECT stage FROM stages WHERE run = ? AND node = ? ORDER BY position",
            [ref.run, ref.node],
        )
    ]
    return "the run's cursor moved on (no delta)" + (
        f"; stages {', '.join(stages)}" if stages else ""
    )


def _outcome(db: ReadModelDB, ref: NodeRef) -> dict[str, Any]:
    """A fork child's own outcome; for a run's root or cursor node, the run's."""
    if ref.fork is not None:
        row = db.rows(
            "SELECT outcome, reward, reason, tests FROM children "
            "WHERE run = ? AND fork = ? AND child_index = ?",
            [ref.run, ref.fork, ref.child_index],
        )[0]
        return {
            "of": "fork child",
            "outcome": row["outcome"] or "pending",  # no outcome at this point: still running
            "reward": row["reward"],
            "reason": row["reason"],
            "tests": as_json(row["tests"]),
        }
    row = db.rows(
        "SELECT outcome, reward, coalesce(unscored_reason, "
        "error) AS reason FROM runs WHERE run = ?",
        [ref.run],
    )[0]
    tests = db.scalar("SELECT tests FROM run_outcomes WHERE run = ? AND kind = 'scored'", [ref.run])
    return {
        "of": "run",
        "outcome": row["outcome"],
        "reward": row["reward"],
        "reason": row["reason"],
        "tests": as_json(tests),
    }


def short_names(*sides: dict[str, str] | None) -> list[dict[str, str] | None]:
    """Short test names when shortening stays one-to-one over both sides, else the raw names.

    The shortening is `ablation.json`'s (`short_test_name`), but checked over both sides together,
    where benchflow checks each report on its own (`attribution.normalise_test_names`): a diff
    never puts two tests on one row."""
    raw = {name for side in sides for name in (side or {})}
    short = {name: short_test_name(name) for name in raw}
    keep = len(set(short.values())) == len(raw)
    return [
        None if side is None else {(short[n] if keep else n): s for n, s in side.items()}
        for side in sides
    ]


# In the order rows are listed: flips (passed -> failed, failed -> passed), other changes, tests
# only one side reported ("not reported" by A or B), ties.
KINDS = ("flip", "changed", NOT_REPORTED, "same")


def _change(a: str, b: str) -> tuple[str, str]:
    if a == NOT_REPORTED or b == NOT_REPORTED:
        return NOT_REPORTED, f"{NOT_REPORTED} by {'A' if a == NOT_REPORTED else 'B'}"
    if (a, b) in FLIPS:
        return "flip", f"{a} -> {b}"
    return ("changed", f"{a} -> {b}") if a != b else ("same", "same")


def compare_tests(a: dict[str, str] | None, b: dict[str, str] | None) -> list[dict[str, str]]:
    """Per-test rows, flips first; a side with no CTRF report at all reports nothing, not
    failures."""
    a, b = short_names(a, b)
    rows = []
    for test in sorted(set(a or {}) | set(b or {})):
        left, right = (a or {}).get(test, NOT_REPORTED), (b or {}).get(test, NOT_REPORTED)
        kind, change = _change(left, right)
        rows.append({"test": test, "a": left, "b": right, "change": change, "kind": kind})
    rows.sort(key=lambda row: (KINDS.index(row["kind"]), row["test"]))
    return rows


def diff_document(db: ReadModelDB, a: str, b: str, position: int) -> dict[str, Any]:
    """A and B are addresses of `lineage history` (`RUN`, `RUN:NODE`, `RUN:FORK/ARM`,
    `RUN:FORK/#INDEX`), so two arms of one fork, two nodes of one tree, or nodes of a run and its
    continuation can be compared. Each side's delta chain holds every step that is not shared,
    with the delta that made it."""
    sides = [(address, resolve_node(db, address)) for address in (a, b)]
    chains = [ancestry(db, ref) for _, ref in sides]
    keys = [[(s.ref.run, s.ref.node) for s in chain] for chain in chains]
    shared = 0
    while shared < min(map(len, keys)) and keys[0][shared] == keys[1][shared]:
        shared += 1
    common = chains[0][shared - 1].ref if shared else None
    out: dict[str, Any] = {
        "position": position,
        "common_ancestor": common.address if common else None,
    }
    outcomes = []
    for name, (address, ref), chain in zip("ab", sides, chains, strict=True):
        outcome = _outcome(db, ref)
        outcomes.append(outcome)
        out[name] = {
            "address": address,
            "run": ref.run,
            "node": ref.node,
            "fork": ref.fork,
            "child_index": ref.child_index,
            "arm": ref.arm,
            "delta_chain": [
                {"node": s.ref.address, "change": _step_change(db, s)} for s in chain[shared:]
            ],
            **{k: v for k, v in outcome.items() if k != "tests"},
            "reported_tests": outcome["tests"] is not None,
        }
    out["tests"] = compare_tests(outcomes[0]["tests"], outcomes[1]["tests"])
    out["counts"] = {kind: sum(1 for row in out["tests"] if row["kind"] == kind) for kind in KINDS}
    return out


def _result(side: dict[str, Any]) -> str:
    if side["reward"] is not None:
        return f"reward {reward_text(side['reward'])} ({side['of']} {side['outcome']})"
    return f"no reward ({side['of']} {side['outcome']}" + (
        f": {side['reason']})" if side["reason"] else ")"
    )


def render_diff(document: dict[str, Any]) -> str:
    a, b = document["a"], document["b"]
    lines = [
        f"diff at log position {document['position']}",
        f"A  {a['address']}",
        f"B  {b['address']}",
        f"common ancestor: {document['common_ancestor'] or 'none (unrelated runs)'}",
    ]
    for name, side in (("A", a), ("B", b)):
        lines.append(f"delta chain of {name} from the common ancestor:")
        lines += [f"  {step['node']}: {step['change']}" for step in side["delta_chain"]] or [
            "  (none: it is the common ancestor)"
        ]
    lines += [f"A: {_result(a)}", f"B: {_result(b)}"]
    tests = document["tests"]
    counts = document["counts"]
    lines.append(
        f"tests: {counts['flip']} flipped, {counts['changed']} changed otherwise, "
        f"{counts[NOT_REPORTED]} reported by one side only, {counts['same']} the same"
    )
    if tests:
        widths = [
            max(len(h), *(len(row[k]) for row in tests))
            for h, k in (("test", "test"), ("A", "a"), ("B", "b"))
        ]
        lines.append(f"  {'test':<{widths[0]}}  {'A':<{widths[1]}}  {'B':<{widths[2]}}  change")
        lines += [
            f"  {row['test']:<{widths[0]}}  {row['a']:<{widths[1]}}  "
            f"{row['b']:<{widths[2]}}  {row['change']}"
            for row in tests
        ]
    return "\n".join(one_line(line) for line in lines) + "\n"  # a recorded newline draws no line


def differs(document: dict[str, Any]) -> bool:
    """Whether the two sides of a diff disagree on anything it compares: reward, outcome or a
    test."""
    a, b = document["a"], document["b"]
    return (a["reward"], a["outcome"]) != (b["reward"], b["outcome"]) or any(
        count for change, count in document["counts"].items() if change != "same"
    )

"""`lineage audit --parity A B`: the review skill's Daytona-vs-Docker check, slot by slot over two
batches: the data is not published from either backend until every difference is explained, so
each one is a blocker. Pure: the rows come from each batch's audit.
"""

from __future__ import annotations

from typing import Any

from .checks import BLOCKER, Finding

#: A slot pairs runs of the same task, agent, model and skill mode (`_slots`).
GROUP = ("task", "agent", "model", "skill_mode")
#: What is compared, in the order findings name them, and how a row says it (`_aspects`). SKILL.md
#: compares "artifact schema and semantics, not exact model wording": trajectory files,
#: `results.jsonl`, token usage, timing, result status, reward; token usage or timing missing in
#: one backend is a blocker like any other difference.
ASPECTS = ("artifact schema", "trajectory presence", "token usage", "timing", "status", "reward")


def _aspects(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "artifact schema": tuple(row["schema"]),
        "trajectory presence": (row["acp_present"], row["llm_present"], row["results_present"]),
        "token usage": "present" if row["tokens"] else "missing",
        "timing": "present" if row["timed"] else "missing",
        "status": row["result"] or f"unhealthy ({row['class']})",
        "reward": row["reward"],
    }


def _slots(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Each run under its slot (GROUP's values and k). Within a group the runs are taken in order
    of their trial (a benchflow trial is its rollout name, whose hash differs between backends),
    so the k-th run of a group in A meets the k-th in B."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: (str(r["trial"]), r["run"])):
        groups.setdefault(tuple(row[k] for k in GROUP), []).append(row)
    return {(*key, k + 1): row for key, members in groups.items() for k, row in enumerate(members)}


def _label(slot: tuple[Any, ...]) -> str:
    return (
        "slot ("
        + ", ".join(str(v) if v is not None else "-" for v in slot[:-1])
        + f", #{slot[-1]})"
    )


def _shown(value: Any) -> str:
    if isinstance(value, tuple) and value and isinstance(value[0], bool):
        return ", ".join(
            f"{n} {'present' if p else 'missing'}"
            for n, p in zip(("acp", "llm", "results"), value, strict=True)
        )
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def compare_batches(
    a: list[dict[str, Any]], b: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """One row per slot (its runs and the aspects that differ) and a blocker for every
    difference, and for a slot only one batch has a run in."""
    slots_a, slots_b = _slots(a), _slots(b)
    rows, findings = [], []
    for slot in sorted(set(slots_a) | set(slots_b), key=lambda s: tuple(map(str, s))):
        one, other = slots_a.get(slot), slots_b.get(slot)
        label = _label(slot)
        if one is None or other is None:
            where, present = ("A", other) if one is None else ("B", one)
            assert present is not None
            message = f"{label}: no run in {where}; the other batch has {present['run']}"
            findings.append(Finding("parity", BLOCKER, label, message, present["run"]))
            rows.append(
                {
                    "slot": label,
                    "a": one and one["run"],
                    "b": other and other["run"],
                    "differs": ["missing"],
                }
            )
            continue
        mine, theirs = _aspects(one), _aspects(other)
        differs = [k for k in ASPECTS if mine[k] != theirs[k]]
        findings += [
            Finding(
                "parity",
                BLOCKER,
                label,
                f"{label}: {aspect} differs: A {one['run']} has {_shown(mine[aspect])}, "
                f"B {other['run']} has {_shown(theirs[aspect])}",
                one["run"],
            )
            for aspect in differs
        ]
        rows.append({"slot": label, "a": one["run"], "b": other["run"], "differs": differs})
    return rows, findings

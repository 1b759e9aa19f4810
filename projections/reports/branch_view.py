"""`lineage export branch-view RUN`: benchflow's `benchflow.branch-view/1` document (version 1.1)
for one trial, rebuilt from the log.

The document is benchflow's contract for viewers (its `docs/reference/branch-view.md`): every fork
(nested forks and checkpoint retries too) and every child, with what was requested, reward and
advantage, tokens, USD, sandbox-seconds, timings and where the child's files are. Its fields are
derived here from the branch records (`fork.described`, `fork.child_described`,
`run.trial_described`) by the contract's rules (docs/benchflow-formats.md §17), so it equals what
benchflow builds from the same trial's files. Snapshot refs never appear, nor do prompts or error
messages. `prices` is the document's own `pricing` object; without it `usd_estimate` is null
(except 0 for a child that used no tokens).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ...adapters.duckdb_store import ReadModelDB
from ...domain.errors import InvalidInput, UnknownSubject
from .exports.exports import require_run

KIND = "benchflow.branch-view"
SCHEMA = "benchflow.branch-view/1"
SCHEMA_VERSION = "1.1"
#: The view's token classes and the usage counters they sum, in the document's order.
USAGE_CLASSES = (
    ("input", "n_input_tokens"),
    ("output", "n_output_tokens"),
    ("cache_read", "n_cache_read_tokens"),
    ("cache_creation", "n_cache_creation_tokens"),
    ("total", "total_tokens"),
)
PARENT_FATES = ("discarded", "kept")


PRICED = ("input", "output", "cache_read", "cache_creation")


def check_prices(document: Any, where: str) -> dict[str, Any]:
    """A `pricing` object in the document's own shape: `{model, source, usd_per_token: {input,
    output, cache_read, cache_creation}}`, each price a number of USD per token or null."""
    per = document.get("usd_per_token") if isinstance(document, dict) else None
    if not isinstance(per, dict):
        raise InvalidInput(
            f"{where}: expected a JSON object with usd_per_token (the branch view's pricing: "
            "{model, source, usd_per_token: {input, output, cache_read, cache_creation}}), "
            f"found {type(document).__name__ if not isinstance(document, dict) else 'none'}",
            hint="write the prices as the document's own pricing object",
        )
    for name, price in per.items():
        number = isinstance(price, (int, float)) and not isinstance(price, bool)
        if price is not None and (not number or not math.isfinite(price) or price < 0):
            raise InvalidInput(
                f"{where}: usd_per_token.{name}: expected a price (USD per token, 0 or more) "
                f"or null, found {price!r}"
            )
    for name in ("model", "source"):
        if document.get(name) is not None and not isinstance(document[name], str):
            raise InvalidInput(f"{where}: {name}: expected text or null, found {document[name]!r}")
    return document


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> float | None:
    """A number as a float; anything else (a bool too) is none."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _count(value: Any) -> bool:
    """An integer token count (a bool is none)."""
    return isinstance(value, int) and not isinstance(value, bool)


def usage_classes(usages: list[Any]) -> dict[str, int] | None:
    """The token classes summed over usage records; none without any record. A counter that is
    not an integer (a float, a string) counts nothing, a missing one 0."""
    records = [usage for usage in usages if isinstance(usage, dict)]
    if not records:
        return None
    return {
        name: sum(
            int(usage.get(key) or 0)
            for usage in records
            if _count(usage.get(key) or 0) and not isinstance(usage.get(key), bool)
        )
        for name, key in USAGE_CLASSES
    }


def usd_estimate(usage: Any, prices: dict[str, Any] | None) -> float | None:
    """A child's USD at list price: each token class times its price (cache creation at the input
    price when it has none; the total is not priced). 0 when it used no tokens at all, none without
    a usage record or a price."""
    classes = usage_classes([usage])
    if classes is None:
        return None
    if not any(classes.values()):
        return 0.0
    per = _obj(_obj(prices).get("usd_per_token"))
    if not per:
        return None

    def price(name: str) -> float:
        if name == "cache_creation":
            return float(per.get(name) or per.get("input") or 0.0)
        return float(per.get(name) or 0.0)

    return round(
        math.fsum(
            classes[name] * price(name)
            for name in ("input", "output", "cache_read", "cache_creation")
        ),
        8,
    )


def _sum_or_none(values: list[float | None]) -> float | None:
    if not values or any(value is None for value in values):
        return None
    return round(math.fsum(value for value in values if value is not None), 8)


def _error(value: Any) -> dict[str, Any] | None:
    record = _obj(_json(value))
    return {"type": record.get("type"), "code": record.get("code")} if record else None


def _archive(child: dict[str, Any]) -> dict[str, Any]:
    path = child["archive"]
    if not path:
        return {"path": None, "observation": None, "result": None}
    return {
        "path": path,
        "observation": f"{path}/observation.json" if child["observation"] else None,
        "result": f"{path}/result.json" if child["result"] else None,
    }


def cost_totals(forks: list[dict[str, Any]]) -> dict[str, Any]:
    """The trial's cost summed over its forks when result.json gives none: a nested fork's parent
    sandbox is an isolated child's, already in that child's seconds."""
    child_nodes = {child["node"] for fork in forks for child in fork["children"]}
    costs = [(fork, _obj(fork["cost"])) for fork in forks]
    usds = [cost.get("usd") for _, cost in costs]
    known = bool(usds) and all(
        isinstance(usd, (int, float)) and not isinstance(usd, bool) for usd in usds
    )
    seconds = 0.0
    for fork, cost in costs:
        seconds += cost.get("children_sandbox_seconds") or 0.0
        if fork["rollout"] not in child_nodes:
            seconds += cost.get("parent_sandbox_seconds") or 0.0
    return {
        "tokens": sum(cost.get("tokens") or 0 for _, cost in costs),
        "usd": round(math.fsum(usd for usd in usds if isinstance(usd, (int, float))), 6)
        if known
        else None,
        "usd_known": known,
        "sandbox_seconds": round(seconds, 3),
    }


def _records(db: ReadModelDB, run: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The trial's latest reading and its described forks in `tree.json` order, each with its
    described children in index order."""
    trials = db.rows("SELECT * FROM trials WHERE run = ?", [run])
    if not trials and not db.scalar("SELECT count(*) FROM fork_openings WHERE run = ?", [run]):
        # A trial that never forked, retried or kept a checkpoint wrote no branch files: its view
        # has no fork, and names the trial by its folder and task.
        registered = db.rows("SELECT task FROM runs WHERE run = ?", [run])[0]
        return {
            "folder": run.rsplit("/", 1)[-1],
            "rollout_name": None,
            "task_name": registered["task"],
            "parent": None,
            "cost": None,
            "retry": None,
            "checkpoint_source": None,
        }, []
    if not trials:
        raise UnknownSubject(
            f"expected the branch records of run {run!r} (a benchflow trial's tree.json and "
            "result.json as imported), found forks without them",
            hint="a trial imported by an earlier version gets them when it is imported again "
            "(`lineage import` its folder); a PR-#1046 run has no branch view",
        )
    forks = db.rows(
        """SELECT o.fork, o.kind, o.reason, o.checkpoint, o.node, o.rollout, d.fork_order, d.status,
                  d.value, d.value_stderr, d.parent_restore, d.error, d.children_mode, d.timing_sec,
                  d.cost, d.snapshot
           FROM fork_openings o JOIN fork_descriptions d USING (run, fork)
           WHERE o.run = ? ORDER BY d.fork_order""",
        [run],
    )
    children: dict[str, list[dict[str, Any]]] = {}
    for child in db.rows(
        "SELECT * FROM child_descriptions WHERE run = ? ORDER BY fork, idx", [run]
    ):
        children.setdefault(child["fork"], []).append(child)
    for fork in forks:
        for name in ("children_mode", "timing_sec", "cost", "snapshot"):
            fork[name] = _json(fork[name])
        fork["children"] = children.get(fork["fork"], [])
        for child in fork["children"]:
            for name in ("cost", "usage", "timing_sec", "snapshot_start"):
                child[name] = _json(child[name])
    return trials[0], forks


def _child(
    child: dict[str, Any], value: float | None, made: dict[str, list[str]], prices: Any
) -> dict[str, Any]:
    reward = _num(child["reward"])
    node = child["node"]
    return {
        "node_id": node,
        "index": child["idx"],
        "label": child["label"],
        "requested": child["requested"],
        "execution": child["execution"],
        "status": child["status"],
        "reward": reward,
        "reward_source": child["reward_source"],
        "advantage": round(reward - value, 6) if reward is not None and value is not None else None,
        "error": _error(child["error"]),
        "attempts": child["attempts"],
        "retried_after": _error(child["retried_after"]),
        "cost": child["cost"],
        "usage": child["usage"],
        "usd_estimate": usd_estimate(child["usage"], prices),
        "timing_sec": child["timing_sec"],
        "snapshot_start": child["snapshot_start"],
        "archive": _archive(child),
        "nested_forks": list(made.get(node, [])) if node else [],
    }


def _snapshot(fork: dict[str, Any]) -> dict[str, Any]:
    snapshot = _obj(fork["snapshot"])
    return {
        "layers_requested": list(snapshot.get("requested_layers") or []),
        "layers_captured": list(snapshot.get("captured_layers") or []),
        "agent_session": snapshot.get("agent_session"),
        "retention": snapshot.get("retention"),
        "provider": snapshot.get("provider"),
        "reused": snapshot.get("reused") is True,
    }


def _forks(raw: list[dict[str, Any]], prices: Any) -> list[dict[str, Any]]:
    # A child's node -> its fork and label: a fork whose rollout is a child's node was made by it.
    child_of: dict[str, tuple[str, Any]] = {}
    for fork in raw:
        for child in fork["children"]:
            if child["node"]:
                child_of[child["node"]] = (fork["fork"], child["label"])
    by_id = {fork["fork"]: fork for fork in raw}
    made: dict[str, list[str]] = {}
    for fork in raw:
        if fork["rollout"]:
            made.setdefault(fork["rollout"], []).append(fork["fork"])

    def depth(fork: dict[str, Any], seen: frozenset[str] = frozenset()) -> int:
        owner = fork["rollout"]
        if owner in child_of and fork["fork"] not in seen:
            parent = by_id.get(child_of[owner][0])
            if parent is not None:
                return 1 + depth(parent, seen | {fork["fork"]})
        return 1

    out = []
    for fork in raw:
        value = _num(fork["value"])
        owner = fork["rollout"]
        nested = owner if owner in child_of else None
        children = [_child(child, value, made, prices) for child in fork["children"]]
        out.append(
            {
                "id": fork["fork"],
                "kind": fork["kind"] or "fork",
                "reason": fork["reason"],
                "checkpoint": fork["checkpoint"],
                "parent_node": fork["node"],
                "depth": depth(fork),
                "forked_by": {
                    "rollout": owner,
                    "child_node": nested,
                    "child_label": child_of[nested][1] if nested else None,
                },
                "status": fork["status"],
                "value": value,
                "value_stderr": _num(fork["value_stderr"]),
                "parent_restore": fork["parent_restore"],
                "error": _error(fork["error"]),
                "children_mode": fork["children_mode"],
                "snapshot": _snapshot(fork),
                "timing_sec": fork["timing_sec"],
                "cost": fork["cost"],
                "usage": usage_classes([child["usage"] for child in children]),
                "usd_estimate": _sum_or_none([child["usd_estimate"] for child in children]),
                "children": children,
            }
        )
    return out


def _trial(trial: dict[str, Any], reward: float | None, raw: list[dict[str, Any]]) -> dict:
    source = _obj(_json(trial["checkpoint_source"]))
    parent = trial["parent"]
    if parent not in PARENT_FATES:
        children = {child["node"] for fork in raw for child in fork["children"] if child["node"]}
        top = [fork for fork in raw if fork["rollout"] not in children]
        parent = (
            None
            if not top
            else "discarded"
            if any(fork["parent_restore"] == "skipped" for fork in top)
            else "kept"
        )
    return {
        "name": trial["rollout_name"] or trial["folder"],
        "task": trial["task_name"],
        "reward": reward,
        "retry": _json(trial["retry"]),
        "checkpoint_source": {
            "trial": source.get("trial"),
            "checkpoint": source.get("checkpoint"),
            "provider": source.get("provider"),
            "prefix_events": source.get("prefix_events")
            if _count(source.get("prefix_events"))
            else None,
        }
        if any(value is not None for value in source.values())
        else None,
        "parent": parent,
        "unscored_by_design": parent == "discarded" and reward is None,
    }


def _totals(
    trial: dict[str, Any], raw: list[dict[str, Any]], forks: list[dict[str, Any]]
) -> dict[str, Any]:
    cost = _json(trial["cost"])
    if not isinstance(cost, dict):
        cost = cost_totals(raw) if any(fork["cost"] is not None for fork in raw) else None
    children = [child for fork in forks for child in fork["children"]]
    scored = sum(child["reward"] is not None for child in children)
    estimate = _sum_or_none([child["usd_estimate"] for child in children])
    usage = usage_classes([child["usage"] for child in children])
    figures = _obj(cost)
    tokens = (
        usage["total"]
        if usage is not None
        else figures.get("tokens")
        if isinstance(figures.get("tokens"), int)
        else None
    )
    usd, seconds = figures.get("usd"), figures.get("sandbox_seconds")
    return {
        "forks": len(forks),
        "children": len(children),
        "cost": cost,
        "usage": usage,
        "usd_estimate": estimate,
        "per_scored_child": {
            "scored": scored,
            "tokens": tokens // scored if scored and tokens is not None else None,
            "usd": round(usd / scored, 6) if scored and isinstance(usd, (int, float)) else None,
            "usd_estimate": round(estimate / scored, 8)
            if scored and estimate is not None
            else None,
            "sandbox_seconds": round(seconds / scored, 3)
            if scored and isinstance(seconds, (int, float))
            else None,
        },
    }


def branch_view(db: ReadModelDB, run: str, prices: dict[str, Any] | None = None) -> dict[str, Any]:
    """RUN's branch view, with `prices` (`{model, source, usd_per_token}`) for the estimates."""
    row = require_run(db, run)
    trial, raw = _records(db, run)
    reward = row["branch_value"] if row["outcome"] == "branch_aggregate" else row["reward"]
    forks = _forks(raw, prices)
    return {
        "kind": KIND,
        "schema_version": SCHEMA_VERSION,
        "schema": SCHEMA,
        "trial": _trial(trial, _num(reward), raw),
        "totals": _totals(trial, raw, forks),
        "pricing": prices,
        "forks": forks,
    }


# --- the same records in words, for the tree, the report and `lineage serve` ----------------------

UNKNOWN_USD = "unknown"


def fork_kind_text(fork: dict[str, Any]) -> str:
    """`fork`, or `retry (failure) from prompt:1`: a checkpoint retry is never an arm."""
    if fork.get("kind") != "retry":
        return "fork"
    return f"retry ({fork.get('reason') or '-'}) from {fork.get('checkpoint') or '-'}"


def cost_text(row: dict[str, Any]) -> str | None:
    """`5000 tokens · USD unknown · 80.0 sandbox-s` from a row's `tokens`, `usd` and
    `sandbox_seconds`; USD a provider did not report is unknown, never 0. None without a cost."""
    tokens, usd, seconds = row.get("tokens"), row.get("usd"), row.get("sandbox_seconds")
    if tokens is None and usd is None and seconds is None:
        return None
    return " · ".join(
        [
            f"{tokens if tokens is not None else '-'} tokens",
            f"USD {usd!r}" if usd is not None else f"USD {UNKNOWN_USD}",
            f"{seconds!r} sandbox-s" if seconds is not None else "- sandbox-s",
        ]
    )


def retry_text(run: dict[str, Any]) -> str | None:
    """A run's checkpoint retry beside its own reward: `completed: reward 1.0 (the trial's own
    reward stands)`; None without one."""
    status = run.get("retry_status")
    if status is None:
        return None
    reward = run.get("retry_reward")
    return (
        f"{status}"
        + (f": reward {reward!r}" if reward is not None else "")
        + " (the trial's own reward stands)"
    )


def _usd_text(usd: Any) -> str:
    return f"USD {usd!r}" if isinstance(usd, (int, float)) else f"USD {UNKNOWN_USD}"


def _child_line(child: dict[str, Any]) -> dict[str, Any]:
    cost = _obj(child["cost"])
    start = _obj(child["snapshot_start"])
    timing = _obj(child["timing_sec"])
    setup = [timing.get(k) for k in ("sandbox_from_snapshot", "install_agent", "finalize")]
    return {
        **child,
        "tokens": cost.get("tokens"),
        "usd_text": _usd_text(cost.get("usd")) if cost else None,
        "sandbox_seconds": cost.get("sandbox_seconds"),
        "setup_seconds": round(math.fsum(s for s in setup if isinstance(s, (int, float))), 3)
        if any(isinstance(s, (int, float)) for s in setup)
        else None,
        "reused": ", ".join(f"{key} {value}" for key, value in start.items()) or None,
        "recaptured": start.get("verifier_baseline") == "recaptured",
        "error_text": " ".join(str(v) for v in _obj(child["error"]).values() if v) or None,
    }


def _fork_lines(fork: dict[str, Any]) -> dict[str, Any]:
    cost = _obj(fork["cost"])
    mode = _obj(fork["children_mode"])
    timing = _obj(fork["timing_sec"])
    if fork["kind"] == "retry":
        title = f"Retry ({fork['reason'] or '-'}) from {fork['checkpoint'] or '-'}"
    else:
        label = fork["forked_by"]["child_label"] or fork["forked_by"]["child_node"]
        title = f"Fork at {fork['parent_node']}" + (f", forked from {label}" if label else "")
    return {
        **fork,
        "title": title,
        "mode_text": (
            f"own sandboxes, {mode.get('concurrency')} at once, {mode.get('prewarm')} prepared "
            "ahead"
            if mode.get("isolated")
            else "in place"
        )
        if mode
        else None,
        "cost_text": " · ".join(
            [
                f"{cost.get('tokens')} tokens",
                _usd_text(cost.get("usd") if cost.get("usd_known") else None),
                f"{cost.get('sandbox_seconds')!r} sandbox-s",
                f"{cost.get('wall_seconds')!r} s wall",
            ]
        )
        if cost
        else None,
        "time_text": " · ".join(
            f"{name} {timing[key]!r} s"
            for name, key in (
                ("snapshot", "checkpoint"),
                ("children", "children"),
                ("parent restore", "parent_restore"),
            )
            if timing.get(key) is not None
        )
        or None,
        "children": [_child_line(child) for child in fork["children"]],
    }


def branch_page(document: dict[str, Any]) -> dict[str, Any]:
    """The branch view as `lineage serve`'s run page shows it: forks by depth, retries apart, a
    cost line per fork and per child (USD unknown, never 0, when a provider reported none)."""
    forks = [_fork_lines(fork) for fork in document["forks"]]
    depths: dict[int, list[dict[str, Any]]] = {}
    for fork in forks:
        if fork["kind"] != "retry":
            depths.setdefault(fork["depth"], []).append(fork)
    trial = document["trial"]
    retry = _obj(trial["retry"])
    cost = _obj(document["totals"]["cost"])
    return {
        "depths": sorted(depths.items()),
        "retries": [fork for fork in forks if fork["kind"] == "retry"],
        "cost_text": " · ".join(
            [
                f"{cost.get('tokens')} tokens",
                _usd_text(cost.get("usd") if cost.get("usd_known") else None),
                f"{cost.get('sandbox_seconds')!r} sandbox-s",
            ]
        )
        if cost
        else None,
        "retry_text": (
            f"Retry from {retry.get('checkpoint') or '-'} ({retry.get('reason') or '-'}): "
            f"{retry.get('status')}, reward {retry.get('reward')!r}; trial reward "
            f"{trial['reward']!r}"
        )
        if retry
        else None,
        "parent_text": "parent discarded by design (unscored by design)"
        if trial["unscored_by_design"]
        else None,
        "totals": document["totals"],
    }

"""How the events of a history read: one line of plain words per fact (`summarise`), a delta in a
few words (`delta_label`, shared with `diff` and the tree), and the whole history as text or as rows
(`lineage history`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .text_lines import one_line

if TYPE_CHECKING:
    from .history import NodeRef


def as_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def short_digest(digest: str | None) -> str:
    return digest[:19] if digest else "-"


#: What `delta_label` says of a delta that changes nothing.
ZERO_DELTA = "zero delta"


def delta_label(delta: Any) -> str:
    """A delta (benchflow's provenance dict) in a few words; raw prompts are never recorded, only
    digests."""
    delta = as_json(delta) or {}
    parts = [f"{key}={delta[key]}" for key in ("skill_mode", "environment_ref") if delta.get(key)]
    if delta.get("config_override_sha256"):
        keys = delta.get("config_override_keys")
        parts.append(
            f"config_override {short_digest(delta['config_override_sha256'])}"
            + (f" keys {','.join(keys)}" if keys else "")
        )
    if delta.get("injected_prompt_sha256"):
        parts.append(f"injected_prompt {short_digest(delta['injected_prompt_sha256'])}")
    return ", ".join(parts) or ZERO_DELTA


def _num(value: Any) -> str:
    """A number as every reader prints it: a float in its shortest exact form (a reward 0.123456789
    is not 0.123457, and 1.0 reads as the tree and the report print it)."""
    if value is None:
        return "-"
    return repr(float(value)) if isinstance(value, float) else str(value)


def _tests(tests: dict[str, str] | None) -> str:
    if not tests:
        return ""
    counts: dict[str, int] = {}
    for status in tests.values():
        counts[status] = counts.get(status, 0) + 1
    return " (tests: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + ")"


def _fork_opened(fact: dict[str, Any], where: NodeRef) -> str:
    if where.node != fact["node"]:
        child = next(c for c in fact["children"] if c["node"] == where.node)
        return (
            f"created as child {child['index']} of fork {fact['fork']}"
            + (f", arm {child['arm']}" if child.get("arm") else "")
            + f": delta {delta_label(child.get('delta'))}"
            + (f", {child['delta_execution']}" if child.get("delta_execution") else "")
        )
    at = fact.get("stage") or f"cursor {fact['node']}"
    n = len(fact["children"])
    if fact.get("kind") == "retry":
        return (
            f"retry {fact['fork']} of the finished trial ({fact.get('reason') or '-'}) from "
            f"checkpoint {fact.get('checkpoint') or '-'} at {at}: not an arm"
        )
    return f"fork {fact['fork']} opened at {at} into {n} {'child' if n == 1 else 'children'}"


def _error_code(error: Any) -> str:
    """benchflow's `{type, code}` error record in a few words."""
    if not error:
        return "-"
    return "/".join(part for part in (error.get("type"), error.get("code")) if part) or "-"


def _fork_described(fact: dict[str, Any], where: NodeRef) -> str:
    cost = fact.get("cost") or {}
    return (
        f"fork {fact['fork']} recorded {fact['status']}"
        + (f", parent {fact['parent_restore']}" if fact.get("parent_restore") else "")
        + (f", error {_error_code(fact['error'])}" if fact.get("error") else "")
        + (
            f", cost {cost.get('tokens', '-')} tokens, USD "
            f"{_num(cost.get('usd')) if cost.get('usd') is not None else 'unknown'}, "
            f"{_num(cost.get('sandbox_seconds'))} sandbox-seconds"
            if cost
            else ""
        )
    )


def _child_described(fact: dict[str, Any], where: NodeRef) -> str:
    return (
        f"child {fact['index']} recorded {fact['status']}"
        + (f" ({fact['label']})" if fact.get("label") else "")
        + (f", error {_error_code(fact['error'])}" if fact.get("error") else "")
        + (f", {fact['attempts']} attempts" if (fact.get("attempts") or 0) > 1 else "")
    )


def _trial_described(fact: dict[str, Any], where: NodeRef) -> str:
    retry = fact.get("retry") or {}
    return (
        "trial files read"
        + (f": parent {fact['parent']}" if fact.get("parent") else "")
        + (
            f", retry {retry.get('status')} (reward {_num(retry.get('reward'))}, beside the "
            f"trial's own)"
            if retry
            else ""
        )
        + (
            f", started from checkpoint {fact['checkpoint_source'].get('checkpoint') or '-'} of "
            f"{fact['checkpoint_source'].get('trial') or '-'}"
            if fact.get("checkpoint_source")
            else ""
        )
        + (
            f", {len(fact['checkpoints'].get('checkpoints') or [])} checkpoints"
            if fact.get("checkpoints")
            else ""
        )
    )


SUMMARIES: dict[str, Any] = {
    "run.registered": lambda f, w: (
        f"run registered: task {f['task']}, agent {f.get('agent') or '-'}, model "
        f"{f.get('model') or '-'}, skill mode {f.get('skill_mode') or '-'}, "
        f"trial {f.get('trial') or '-'}, role {f['role']}"
        + (f", from {f['parent_run']}" if f.get("parent_run") else "")
    ),
    "run.located": lambda f, w: (
        f"run directory read at {f['path']}"
        if f.get("kind", "read") == "read"
        else f"the harness recorded the run directory as {f['path']}"
    ),
    "run.node_opened": lambda f, w: f"cursor moved to node {f['node']} (from {f['parent']})",
    "stage.marked": lambda f, w: (
        f"stage {f['stage']} marked: exchanges {_num(f.get('exchanges_completed'))}, "
        f"sandbox {f.get('sandbox_ref') or '-'}, environment {f.get('environment_ref') or '-'}"
    ),
    "snapshot.captured": lambda f, w: f"snapshot {f['ref']} captured ({f['layer']} layer)",
    "snapshot.exported": lambda f, w: (
        f"snapshot {f['ref']} exported to {f['path']} ({short_digest(f['sha256'])})"
    ),
    "snapshot.export_failed": lambda f, w: f"export of snapshot {f['ref']} failed: {f['error']}",
    "snapshot.discarded": lambda f, w: f"snapshot {f['ref']} discarded",
    "snapshot.imported": lambda f, w: (
        f"snapshot {f['ref']} imported into {f['engine']} as {short_digest(f['image_id'])}"
    ),
    "snapshot.import_rejected": lambda f, w: (
        f"import of snapshot {f['ref']} rejected: {f['reason']}"
    ),
    "snapshot.adopted": lambda f, w: (
        f"snapshot {f['ref']} adopted from a tar of unknown provenance"
    ),
    "fork.opened": _fork_opened,
    "fork.child_restored": lambda f, w: (
        f"restored from sandbox {f['snapshot'].get('sandbox') or '-'}, "
        f"environment {f['snapshot'].get('environment') or '-'}"
    ),
    "fork.child_scored": lambda f, w: f"scored: reward {_num(f['reward'])}{_tests(f.get('tests'))}",
    "fork.child_unscored": lambda f, w: f"unscored: {f['reason']}{_tests(f.get('tests'))}",
    "fork.child_failed": lambda f, w: f"failed: {f['error']}{_tests(f.get('tests'))}",
    "ablation.reported": lambda f, w: (
        f"ablation report at {f['stage']}"
        + (f" on fork {f['fork']}" if f.get("fork") else ": no arm ran")
        + f"; parent reward {_num(f.get('parent_reward'))}"
        + (f", parent error: {f['parent_error']}" if f.get("parent_error") else "")
        + (f", error: {f['error']}" if f.get("error") else "")
    ),
    "fork.described": _fork_described,
    "fork.child_described": _child_described,
    "run.trial_described": _trial_described,
    "fork.closed": lambda f, w: (
        f"fork {f['fork']} closed {f['outcome']}, V {_num(f.get('value'))}"
        + (f", error: {f['error']}" if f.get("error") else "")
    ),
    "custody.held": lambda f, w: (
        f"custody of fork {f['fork']} held at {f['location']} ({len(f['entries'])} entries)"
    ),
    "custody.handed_off": lambda f, w: (
        f"custody handed to child {f['index']}"
        + (f" at {f['location']}" if f.get("location") else "")
    ),
    "custody.released": lambda f, w: (
        f"custody of fork {f['fork']} released ({len(f['entries'])} entries)"
    ),
    "custody.failed": lambda f, w: (
        f"custody of fork {f['fork']} failed at {f['phase']}: {f['error']}; "
        + (
            f"preserved at {f['preserved_location']}"
            if f.get("preserved_location")
            else "nothing preserved"
        )
    ),
    # Stored facts are read with today's meaning (see the upcasters in domain/facts/__init__.py): a
    # branch-aggregate reward, a request_global category.
    "run.scored": lambda f, w: (
        (
            f"run reports the branch aggregate V={_num(f['reward'])}, not verified itself"
            if (f.get("rewards") or {}).get("source") == "branch_aggregate"
            else f"run scored: reward {_num(f['reward'])}{_tests(f.get('tests'))}"
        )
        + (f", verifier error: {f['verifier_error']}" if f.get("verifier_error") else "")
    ),
    "run.unscored": lambda f, w: (
        f"run unscored: {f['reason']}"
        + (
            f", verifier error: {f['verifier_error']}"
            if f.get("verifier_error") and f["verifier_error"] != f["reason"]
            else ""
        )
    ),
    "run.failed": lambda f, w: (
        f"run failed ({f.get('category') or 'uncategorised'}"
        + (
            ", request-global"
            if f.get("request_global") or f.get("category") == "request_global"
            else ""
        )
        + f"): {f['error']}"
    ),
    "run.finished": lambda f, w: (
        f"run finished {f['status']}"
        + (f", trajectory {f['trajectory']}" if f.get("trajectory") else "")
    ),
    "run.evidence_observed": lambda f, w: _evidence(f),
    "run.sample_observed": lambda f, w: _sample(f),
    "scorer.drained": lambda f, w: f"scorer drained: history {short_digest(f['history_digest'])}",
    "scorer.preservation_receipted": lambda f, w: (
        f"preservation attempt {f['result']}: history {short_digest(f['history_digest'])}"
        + (f", {f['checkpoint']}" if f.get("checkpoint") else "")
        + (f": {f['error']}" if f.get("error") else "")
    ),
    "cut_point.served": lambda f, w: (
        f"replayed {f['source_run']} up to K={f['served_k']} ({f['accounting']} "
        f"accounting, configured K={_num(f.get('configured_k'))}"
        + (f", stage {f['stage']}" if f.get("stage") else "")
        + f"), {len(f.get('divergences') or [])} divergences"
    ),
}


def _evidence(fact: dict[str, Any]) -> str:
    files = [
        f"{name} {'present' if part['present'] else 'missing'}"
        for name, part in (
            ("acp", fact.get("acp_trajectory")),
            ("llm", fact.get("llm_trajectory")),
            ("atif", fact.get("atif_trajectory")),
            ("results.jsonl", fact.get("results")),
        )
        if part is not None
    ]
    usage = fact.get("token_usage") or {}
    return (
        "evidence read: "
        + ", ".join([*files, f"tokens {usage.get('total_tokens') or '-'}"])
        + (f", trial {fact['trial']}" if fact.get("trial") else "")
    )


def _sample(fact: dict[str, Any]) -> str:
    """What benchflow's solve rates read of the trial folder."""
    withheld = fact.get("integration_failure")
    return (
        f"solve-rate sample read in job {fact['job_dir'].rstrip('/').rsplit('/', 1)[-1]}"
        + (
            f" of {fact.get('alias') or '-'}, trial {fact['trial_number']}"
            if fact.get("trial_number") is not None
            else ""
        )
        + f": task {fact.get('task') or '-'}, reward {_num(fact.get('reward'))}"
        + (f", {fact['control']} control" if fact.get("control") else "")
        + (f", reward withheld (integration failure {withheld})" if withheld else "")
    )


def summarise(kind: str, fact: dict[str, Any], where: NodeRef) -> str:
    """One line of plain words per fact, as an auditor would read it."""
    describe = SUMMARIES.get(kind)
    return describe(fact, where) if describe else kind


def history_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "step": i + 1,
            "run": step["run"],
            "node": step["node"],
            **{
                k: e[k]
                for k in ("position", "occurred_at", "recorded_at", "actor", "type", "summary")
            },
        }
        for i, step in enumerate(document["steps"])
        for e in step["events"]
    ]


def render_history(document: dict[str, Any]) -> str:
    lines = [f"history of {document['address']} at log position {document['position']}"]
    for i, step in enumerate(document["steps"], 1):
        what = (
            f"child {step['child_index']} of fork {step['fork']}"
            + (f", arm {step['arm']}" if step["arm"] else "")
            if step["kind"] == "child"
            else step["kind"]
        )
        lines.append(f"{i}. {step['run']} : {step['node']}  ({what})")
        for e in step["events"]:
            lines.append(f"     #{e['position']} {e['type']}: {e['summary']}")
            lines.append(
                f"         happened {e['occurred_at']}, "
                f"recorded {e['recorded_at']}, by {e['actor']}"
            )
        if not step["events"]:
            lines.append("     (no events on this step)")
    return "\n".join(one_line(line) for line in lines) + "\n"  # a recorded newline draws no line

"""The experiment-review skill's validator (`scripts/validate_run_artifacts.py`), rule for rule, on
a `Rollout`.

The validator is the skill's fail-closed judge of one rollout folder: both trajectories, the
trainer-facing `results.jsonl` row and result.json's metadata. Each rule here makes the check it
makes, in its default mode, and names itself by a stable id (docs/review-skill.md lists them with
the validator's words); an issue says the file and line it rests on. The code is ours; the rules are
the validator's at `RULES`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TypeGuard

from ...domain.facts.review_facts import ArtifactIssue
from .review_input import Jsonl, Rollout

#: The revision of benchflow's experiment-review skill these rules follow.
RULES = "benchflow-experiment-review@17a3573b"

TOKEN_KEYS = frozenset(
    (
        "input_tokens",
        "output_tokens",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "inputTokens",
        "outputTokens",
        "totalTokens",
        "promptTokenCount",
        "candidatesTokenCount",
        "totalTokenCount",
    )
)
ROLES = frozenset(("system", "user", "assistant", "tool"))
BANNED_ROW_KEYS = frozenset(
    (
        "gold",
        "gold_solution",
        "verify_source",
        "tools_py",
        "initial_db",
        "db_json",
        "target_constants",
        "private_reasoning",
        "reasoning_content",
        "thinking_blocks",
    )
)
BANNED_MESSAGE_KEYS = frozenset(
    (
        "reasoning_content",
        "thinking_blocks",
        "private_reasoning",
        "provider_specific_fields",
        "function_call",
    )
)
#: Words in result.json's error fields that mean the attempt was not a normal one (the validator's
#: list).
INFRA_MARKERS = (
    "missing required",
    "api key",
    "credential",
    "provider",
    "sandbox",
    "docker",
    "daytona",
    "no space left",
    "transport",
    "pipe closed",
    "connection",
)
ERROR_FIELDS = ("error", "verifier_error", "error_category", "verifier_error_category")


class Issues:
    """The issues found so far, each added with its rule id, file and line."""

    def __init__(self) -> None:
        self.found: list[ArtifactIssue] = []

    def add(
        self, check: str, detail: str, file: str | None = None, line: int | None = None
    ) -> None:
        self.found.append(ArtifactIssue(check=check, detail=detail, file=file, line=line))


# --- values ---------------------------------------------------------------------------------------


def _integer(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _objects(value: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    if depth > 64:
        return
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _objects(child, depth + 1)
    elif isinstance(value, list):
        for child in value:
            yield from _objects(child, depth + 1)


def has_token_usage(value: Any) -> bool:
    """Positive token usage under any provider's key, anywhere in `value`."""
    return any(positive(o.get(k)) for o in _objects(value) for k in TOKEN_KEYS)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _body(record: dict[str, Any], part: str) -> dict[str, Any] | None:
    holder = record.get(part)
    body = holder.get("body") if isinstance(holder, dict) else None
    return body if isinstance(body, dict) else None


# --- result.json ----------------------------------------------------------------------------------


def _pair_total(source: dict[str, Any], first: str, second: str) -> int | None:
    a, b = source.get(first), source.get(second)
    return a + b if _integer(a) and _integer(b) else None


def token_total(result: dict[str, Any]) -> int | None:
    """Tokens from result.json as the validator sums them: agent_result, then token_usage, then the
    top."""
    sources = [result.get("agent_result"), result.get("token_usage"), result]
    for source in (s for s in sources if isinstance(s, dict)):
        total = source.get("total_tokens") or source.get("n_total_tokens")
        if _integer(total):
            return int(total)
        first = "n_input_tokens" if source.get("n_input_tokens") is not None else "input_tokens"
        second = "n_output_tokens" if source.get("n_output_tokens") is not None else "output_tokens"
        for pair in ((first, second), ("prompt_tokens", "completion_tokens")):
            summed = _pair_total(source, *pair)
            if summed is not None:
                return summed
    return None


def timing_present(result: dict[str, Any]) -> bool:
    given = result.get("timing")
    timing = given if isinstance(given, dict) else {}
    top = bool(result.get("started_at")) and bool(
        result.get("finished_at") or timing.get("total") is not None
    )
    nested = bool(timing.get("started_at")) and bool(
        timing.get("ended_at") or timing.get("duration_seconds") is not None
    )
    return top or nested


def tool_usage(result: dict[str, Any]) -> int | None:
    calls = result.get("n_tool_calls")
    if _integer(calls):
        return int(calls)
    usage = result.get("tool_usage")
    counts = [v for v in usage.values() if _integer(v)] if isinstance(usage, dict) else []
    return sum(counts) if counts else None


def reward_present(result: dict[str, Any]) -> bool:
    rewards = result.get("rewards")
    if isinstance(rewards, dict):
        return rewards.get("reward") is not None
    return result.get("reward") is not None


def terminal_error(result: dict[str, Any]) -> bool:
    return bool(result.get("error") or result.get("verifier_error")) or (
        result.get("partial_trajectory") is True
    )


def is_oracle(result: dict[str, Any], config: dict[str, Any] | None) -> bool:
    names = [result.get("agent"), result.get("agent_name")]
    if config:
        names += [config.get("agent"), config.get("harness")]
    return any(str(n).strip().lower() == "oracle" for n in names if n)


def check_result(result: dict[str, Any], issues: Issues) -> None:
    tokens = token_total(result)
    if not tokens or tokens <= 0:
        issues.add(
            "result.token_usage", "missing or zero token usage in result metadata", "result.json"
        )
    if not timing_present(result):
        issues.add("result.timing", "missing timing metadata", "result.json")
    tools = tool_usage(result)
    if tools is None or tools <= 0:
        issues.add("result.tool_usage", "missing or zero tool usage metadata", "result.json")
    if not reward_present(result):
        issues.add("result.reward", "missing verifier reward/score", "result.json")
    text = " ".join(str(result.get(key) or "") for key in ERROR_FIELDS).lower()
    if any(marker in text for marker in INFRA_MARKERS):
        issues.add(
            "result.infra_error", "result carries infra/provider error markers", "result.json"
        )


# --- JSONL files ----------------------------------------------------------------------------------


def check_jsonl(file: Jsonl, prefix: str, issues: Issues) -> bool:
    """Present, parsable, not empty; False when the file is missing (nothing more to check)."""
    if not file.present:
        issues.add(f"{prefix}.missing", f"missing required artifact: {file.name}", file.name)
        return False
    for line, why in file.malformed:
        issues.add(f"{prefix}.malformed", why, file.name, line)
    if not file.rows and not file.malformed:
        issues.add(f"{prefix}.empty", "empty JSONL", file.name)
    return True


def check_acp(file: Jsonl, issues: Issues) -> None:
    if not check_jsonl(file, "acp", issues):
        return
    agent_events = 0
    for line, row in file.rows:
        kind = row.get("type")
        if not isinstance(kind, str) or not kind:
            # The validator names the record's index among parsed records; the line is the file's.
            issues.add("acp.type", "missing string 'type'", file.name, line)
        agent_events += str(row.get("phase") or "").lower() != "verifier"
    if agent_events == 0:
        issues.add("acp.no_agent_events", "no agent-side events", file.name)


# --- llm_trajectory.jsonl -------------------------------------------------------------------------


def _named(call: dict[str, Any]) -> str | None:
    function = call.get("function")
    if isinstance(function, dict) and function.get("name"):
        return str(function["name"])
    return str(call["name"]) if call.get("name") else None


def _message_calls(message: Any) -> list[tuple[str, str | None]]:
    if not isinstance(message, dict):
        return []
    return [
        (str(c.get("id") or c.get("tool_call_id")), _named(c))
        for c in message.get("tool_calls") or []
        if isinstance(c, dict) and (c.get("id") or c.get("tool_call_id"))
    ]


def response_tool_calls(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(call id, tool name) of every tool call a response body makes, in any of the providers'
    shapes."""
    calls = [
        (
            str(item.get("call_id") or item.get("id")),
            str(item["name"]) if item.get("name") else None,
        )
        for item in body.get("output") or []
        if isinstance(item, dict)
        and item.get("type") in ("function_call", "tool_call")
        and (item.get("call_id") or item.get("id"))
    ]
    choices = body.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        calls += _message_calls(choice.get("message") if isinstance(choice, dict) else None)
    return calls + _message_calls(body.get("message"))


def _completed(record: dict[str, Any], body: dict[str, Any]) -> bool:
    response = record["response"]
    return (
        response.get("status_code") == 200
        and body.get("status") in (None, "completed")
        and not body.get("incomplete_details")
    )


def _consumed(bodies: list[str], calls: list[tuple[str, str | None]], index: int) -> bool:
    """A later request carries one of the response's call ids: the agent went on from this
    response."""
    ids = {call_id for call_id, _ in calls}
    return bool(ids) and any(i in later for later in bodies[index + 1 :] for i in ids)


def _safe_unconsumed(
    rows: list[dict[str, Any]], calls: list[tuple[str, str | None]], index: int
) -> bool:
    """A response nobody went on from still counts when it calls no tool but `finish`, or is the
    last."""
    if not calls or all(name == "finish" for _, name in calls):
        return True
    return not any(_body(later, "request") is not None for later in rows[index + 1 :])


def successful_exchanges(rows: list[dict[str, Any]]) -> list[tuple[int, bool]]:
    """(record index, has usage) of the completed responses the run went on from, one per distinct
    request.

    Retries repeat a request; of a request's completed responses the validator keeps the latest one
    a later request consumed, else the latest that is safe without consumption, else none."""
    bodies = [canonical(_body(r, "request") or {}) for r in rows]
    by_request: dict[str, list[tuple[int, bool, list[tuple[str, str | None]]]]] = {}
    for index, record in enumerate(rows):
        body = _body(record, "response")
        if body is not None and _completed(record, body):
            by_request.setdefault(bodies[index], []).append(
                (index, has_token_usage(body), response_tool_calls(body))
            )
    selected = []
    for candidates in by_request.values():
        consumed = [c for c in candidates if _consumed(bodies, c[2], c[0])]
        safe = [c for c in candidates if _safe_unconsumed(rows, c[2], c[0])]
        chosen = consumed or safe
        if chosen:
            index, usage, _ = max(chosen, key=lambda c: c[0])
            selected.append((index, usage))
    return sorted(selected)


def _count_bodies(file: Jsonl, issues: Issues) -> tuple[int, int, int]:
    requests = responses = with_usage = 0
    for line, record in file.rows:
        for part in ("request", "response"):
            holder = record.get(part)
            if not isinstance(holder, dict):
                continue
            if not isinstance(holder.get("body"), dict):
                issues.add(f"llm.{part}_body", f"{part} missing object body", file.name, line)
            elif part == "request":
                requests += 1
            else:
                responses += 1
                with_usage += has_token_usage(holder["body"])
    return requests, responses, with_usage


def check_llm(file: Jsonl, issues: Issues) -> list[int] | None:
    """The LLM trajectory's checks; the indices of its successful exchanges (None when it is
    missing)."""
    if not check_jsonl(file, "llm", issues):
        return None
    requests, responses, with_usage = _count_bodies(file, issues)
    if requests == 0:
        issues.add("llm.no_requests", "no provider request bodies", file.name)
    if responses == 0:
        issues.add("llm.no_responses", "no provider response bodies", file.name)
    if requests and responses and responses < requests:
        issues.add(
            "llm.fewer_responses",
            f"provider response count {responses} < request count {requests}",
            file.name,
        )
    if with_usage == 0:
        issues.add("llm.no_usage", "no provider token usage in response bodies", file.name)
    rows = [record for _, record in file.rows]
    selected = successful_exchanges(rows)
    lacking = [file.rows[index][0] for index, usage in selected if not usage]
    if lacking:
        issues.add(
            "llm.usage_per_response",
            f"completed responses with usage {len(selected) - len(lacking)} < completed responses "
            f"{len(selected)}",
            file.name,
            lacking[0],
        )
    return [index for index, _ in selected]


# --- results.jsonl --------------------------------------------------------------------------------


class RowCheck:
    """The checks on one results.jsonl row; `where` names it as `results.jsonl:LINE` in every
    issue."""

    def __init__(self, row: dict[str, Any], line: int, result: dict[str, Any], issues: Issues):
        self.row, self.line, self.result, self.issues = row, line, result, issues
        given = row.get("info")
        self.info: dict[str, Any] = given if isinstance(given, dict) else {}
        self.ready = self.info.get("training_ready")

    def add(self, check: str, detail: str) -> None:
        self.issues.add(f"results.{check}", detail, "results.jsonl", self.line)

    def identity(self) -> None:
        leaked = sorted(BANNED_ROW_KEYS.intersection(self.row))
        if leaked:
            self.add("banned_row_keys", f"banned leakage keys present: {', '.join(leaked)}")
        if not isinstance(self.row.get("info"), dict):
            self.add("info", "missing object info")
        task = self.result.get("task_name")
        row_task = (
            self.info.get("task_id") or self.info.get("task_name") or self.row.get("task_name")
        )
        if task and row_task and str(task) != str(row_task):
            self.add("task_mismatch", f"task mismatch result={task!r} row={row_task!r}")

    def readiness(self) -> None:
        errored = terminal_error(self.result)
        if not isinstance(self.ready, bool):
            self.add("training_ready_type", "info.training_ready must be boolean")
        if errored and self.ready:
            self.add(
                "ready_despite_error", "terminal errored/partial rollout marked training_ready=true"
            )
        if not errored and self.ready is False:
            self.add("healthy_not_ready", "healthy rollout marked training_ready=false")
        if self.ready:
            self._ready_row()
        else:
            if not self.info.get("training_ready_reason"):
                self.add("unready_no_reason", "non-training-ready row lacks training_ready_reason")
            if self.row.get("error") is None:
                self.add("unready_no_error", "non-training-ready row lacks error payload")

    def _ready_row(self) -> None:
        row = self.row
        if row.get("error") is not None:
            self.add("ready_error", "training_ready row carries non-null error")
        if self.info.get("training_ready_reason") is not None:
            self.add("ready_reason", "training_ready row has non-null training_ready_reason")
        if row.get("is_completed") is not True:
            self.add("ready_not_completed", "training_ready row is not completed")
        if row.get("is_truncated") is True:
            self.add("ready_truncated", "training_ready row is truncated")
        if row.get("stop_condition") not in (None, "agent_completed"):
            self.add("ready_stop_condition", "unexpected stop_condition for training-ready row")

    def messages(self) -> list[dict[str, Any]]:
        messages = self.row.get("messages")
        prompt, completion = self.row.get("prompt"), self.row.get("completion")
        if messages is None and isinstance(prompt, list) and isinstance(completion, list):
            messages = prompt + completion
        if not isinstance(messages, list) or not messages:
            self.add("messages", "missing non-empty messages or prompt+completion")
            return []
        for index, message in enumerate(messages):
            if not isinstance(message, dict):
                self.add("messages", f"messages[{index}] must be an object")
        return [m for m in messages if isinstance(m, dict)]

    def tool_defs(self) -> list[Any] | None:
        tools = self.row.get("tool_defs", self.row.get("tools"))
        if isinstance(tools, str):
            try:
                tools = json.loads(tools)
            except ValueError as exc:
                self.add("tool_defs", f"tool_defs/tools is not valid JSON: {exc}")
                return None
        if tools is not None and not isinstance(tools, list):
            self.add("tool_defs", "tool_defs/tools must be a list")
            return None
        return tools


def _message_problems(index: int, message: dict[str, Any]) -> Iterator[tuple[str, str]]:
    leaked = sorted(BANNED_MESSAGE_KEYS.intersection(message))
    if leaked:
        yield "banned_message_keys", f"messages[{index}] has banned keys: {', '.join(leaked)}"
    role = message.get("role")
    if role not in ROLES:
        yield "message_role", f"messages[{index}].role invalid: {role!r}"
    if role == "system" and index != 0:
        yield "system_position", f"system message must be at index 0, got index {index}"
    if "content" not in message and "tool_calls" not in message:
        yield "message_content", f"messages[{index}] needs content or tool_calls"
    if message.get("tool_calls") and role != "assistant":
        yield "tool_calls_role", "only assistant messages may contain tool_calls"
    if role == "tool" and not message.get("tool_call_id"):
        yield "tool_call_id", "tool message requires tool_call_id"


def check_messages(
    messages: list[dict[str, Any]], tools: list[Any] | None, row: RowCheck, where: str = ""
) -> None:
    """The validator's training-message rules, for a row's messages or one trajectory step's."""
    for index, message in enumerate(messages):
        for check, detail in _message_problems(index, message):
            row.add(check, where + detail)
    if not any(m.get("role") == "assistant" for m in messages):
        row.add("no_assistant", where + "no assistant message")
    if any(m.get("tool_calls") for m in messages) and not tools:
        row.add(
            "tool_calls_without_defs",
            where + "assistant tool_calls require non-empty tool_defs/tools",
        )
    for index, tool in enumerate(tools or []):
        if not isinstance(tool, dict):
            row.add("tool_defs", f"{where}tool_defs[{index}] must be an object")


def _step(row: RowCheck, index: int, step: Any, tools: list[Any] | None) -> int | None:
    """One trajectory step's checks; its exchange index when it names one."""
    where = f"trajectory[{index}]: "
    if not isinstance(step, dict):
        row.add("trajectory_step", f"trajectory[{index}] must be an object")
        return None
    parts = [step.get("prompt"), step.get("completion")]
    if not all(isinstance(p, list) for p in parts):
        row.add("trajectory_step", where + "missing prompt/completion lists")
    extras = step.get("extras")
    if isinstance(extras, dict) and extras.get("source") != "llm_trajectory":
        row.add("trajectory_source", where + "source is not llm_trajectory")
    if step.get("is_truncated") is True:
        row.add("trajectory_truncated", where + "is incorrectly truncated")
    messages = [m for p in parts if isinstance(p, list) for m in p if isinstance(m, dict)]
    check_messages(messages, tools, row, where)
    exchange = extras.get("exchange_index") if isinstance(extras, dict) else None
    return exchange if _integer(exchange) else None


def _trajectory(row: RowCheck, tools: list[Any] | None, exchanges: list[int] | None) -> None:
    trajectory = row.row.get("trajectory")
    if not isinstance(trajectory, list):
        return
    expected = exchanges or []
    if expected and len(trajectory) != len(expected):
        row.add(
            "trajectory_steps",
            f"results trajectory steps {len(trajectory)} "
            f"!= successful LLM responses {len(expected)}",
        )
    observed = {i for n, s in enumerate(trajectory) if (i := _step(row, n, s, tools)) is not None}
    if expected and observed != set(expected):
        row.add(
            "exchange_indices",
            f"results exchange indices {sorted(observed)} != successful LLM exchange indices "
            f"{sorted(expected)}",
        )


def _ready_payload(row: RowCheck) -> None:
    for name in ("prompt", "completion", "trajectory"):
        value = row.row.get(name)
        if not isinstance(value, list) or not value:
            row.add("ready_payload", f"training_ready row missing non-empty {name}")
    usage = row.row.get("token_usage")
    if not isinstance(usage, dict):
        row.add("row_token_usage", "missing object token_usage")
    else:
        total = positive(usage.get("total_tokens"))
        if not (
            total
            or positive(usage.get("final_input_tokens"))
            or positive(usage.get("input_tokens"))
        ):
            row.add("row_token_usage", "missing positive input/total token usage")
        if not (
            total
            or positive(usage.get("final_output_tokens"))
            or positive(usage.get("output_tokens"))
        ):
            row.add("row_token_usage", "missing positive output/total token usage")
    metrics = row.row.get("metrics")
    if not isinstance(metrics, dict):
        row.add("metrics", "missing object metrics")
    elif not positive(metrics.get("n_tool_calls")) and tool_usage(row.result):
        row.add("metrics", "metrics missing positive n_tool_calls")
    if row.row.get("reward") is None and row.row.get("score") is None:
        row.add("row_reward", "missing reward/score")


def check_results(
    file: Jsonl, result: dict[str, Any], exchanges: list[int] | None, issues: Issues
) -> None:
    if not check_jsonl(file, "results", issues):
        return
    if len(file.rows) != 1:
        issues.add(
            "results.row_count",
            f"expected exactly one rollout results row, got {len(file.rows)}",
            file.name,
        )
    for line, record in file.rows:
        row = RowCheck(record, line, result, issues)
        row.identity()
        row.readiness()
        messages = row.messages()
        tools = row.tool_defs()
        check_messages(messages, tools, row)
        if row.ready:
            _ready_payload(row)
            _trajectory(row, tools, exchanges)


# --- the whole contract ---------------------------------------------------------------------------


def check_rollout(rollout: Rollout) -> tuple[ArtifactIssue, ...]:
    """Every issue the validator raises for this rollout, in its default mode (no flag bypasses a
    file)."""
    issues = Issues()
    if rollout.result_error:
        issues.add("result.parse", rollout.result_error, "result.json")
    result = rollout.result or {}
    check_acp(rollout.acp, issues)
    exchanges = check_llm(rollout.llm, issues)
    check_results(rollout.results, result, exchanges, issues)
    check_result(result, issues)
    return tuple(issues.found)

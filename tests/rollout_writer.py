"""One rollout directory written the way benchflow's rollout writers write it.

Each function mirrors one benchflow writer function and is named after it; the steps and their order
are the writer's, the code is ours. Mirrored at benchflow commit 17a3573b (branch
todo5/native-subscription-artifacts, 2026-08-22: the newest revision of the writers on any branch; the
rollout modules are identical on main 62cc7e41). Paths below are in benchflow's repository. What each file
holds and when it exists is summarised in /work/notes/rollout-writer.md.

A test describes a rollout with `Rollout` (task, agent, model, skill mode, `Exchange`s, `AcpEvent`s,
outcome) and calls `write_rollout(jobs_dir, rollout)`: `_init_rollout`, `_write_config`, the live ACP and
LLM writers during execution, `cleanup` (`_write_llm_trajectory`), then `_build_rollout_result` (result.json,
timing.json, prompts.json, rewards.jsonl, results.jsonl via `build_rollout_results_record`).
`write_job_results_jsonl` aggregates a job. `damage` holds one function per defect class the experiment-
review validator checks.

Not mirrored: `_write_trainer_artifact` (trainer/verifiers.jsonl, atif.json, adp.jsonl: no reviewer
reads them), secret redaction (`redact_trajectory_obj`: the identity on inputs that carry no secret, so
descriptions must not carry secret-shaped strings), verifier/ contents, and `_maybe_classify_api_error`
(a test that wants a provider api error passes its error text and diagnostic itself).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

COMMIT = "17a3573b"
STARTED_AT = datetime(2026, 11, 3, 9, 12, 44, 208311)  # str(datetime.now()): naive, local
INSTALL_TIMEOUT = (
    900  # agents/registry.py:456, AgentConfig.install_timeout for every agent named here
)
DIAGNOSTIC_FIELDS = (  # diagnostics.py:338 DIAGNOSTIC_REGISTRY, in its order
    "idle_timeout_info",
    "agent_timeout_info",
    "sandbox_startup_info",
    "transport_error_info",
    "verifier_timeout_info",
    "api_error_info",
    "suspected_api_error_info",
)


# The description of one rollout --------------------------------------------------------------------


@dataclass
class ToolCall:
    """One tool call in a provider response (chat-completions `tool_calls` entry)."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Exchange:
    """One provider exchange as LiteLLM's callback records it (providers/litellm_logging.py:235).

    `messages` and `tools` are the request body; `reply`/`tool_calls`/`usage` the response. A
    `status_code` other than 200 with `error` is a provider failure (the body then carries `error`).
    """

    messages: list[dict[str, Any]]
    tools: list[str] = field(default_factory=list)
    reply: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    status_code: int = 200
    error: str | None = None
    cost_usd: float | None = None


@dataclass
class AcpEvent:
    """One ACP trajectory event as `_events_to_trajectory` records it (trajectories/_capture.py:60).

    benchflow keeps no raw tool input: a tool call's input shows in its `title` (the harness renders
    the command or path there) and its result in `content` blocks.
    """

    type: str  # tool_call | agent_message | agent_thought | user_message
    text: str = ""
    tool_call_id: str = ""
    kind: str = "execute"
    title: str = ""
    status: str = "completed"
    content: list[dict[str, Any]] = field(default_factory=list)

    def to_event(self) -> dict[str, Any]:
        if self.type == "tool_call":
            return {
                "type": "tool_call",
                "tool_call_id": self.tool_call_id,
                "kind": self.kind,
                "title": self.title,
                "status": self.status,
                "content": self.content,
            }
        return {"type": self.type, "text": self.text}


def tool_event(call_id: str, title: str, output: str, kind: str = "execute") -> AcpEvent:
    """An ACP tool call whose result is one text block (ACP ToolCallContent `content`)."""
    block = {"type": "content", "content": {"type": "text", "text": output}}
    return AcpEvent("tool_call", tool_call_id=call_id, kind=kind, title=title, content=[block])


@dataclass
class Rollout:
    """What happened in one rollout; the writers derive every file from it."""

    task: str
    agent: str = "claude-agent-acp"
    agent_name: str | None = (
        None  # what the ACP agent reports; None = the agent; "" = never connected
    )
    model: str | None = "claude-sonnet-4-5"
    environment: str = "docker"  # docker | daytona
    skill_mode: str = "no-skill"  # no-skill | with-skill
    instruction: str = "Fix the failing tests."
    exchanges: list[Exchange] = field(default_factory=list)
    acp: list[AcpEvent] = field(default_factory=list)
    rewards: dict[str, Any] | None = None
    error: str | None = None
    verifier_error: str | None = None
    diagnostics: dict[str, dict[str, Any]] = field(default_factory=dict)
    timed_out_after: int | None = None  # an agent wall-clock timeout (acp/runtime.py:772)
    partial_trajectory: bool = False
    reached: str = "verify"  # how far the lifecycle got: setup | start | execute | verify
    timeout_sec: int = 900
    agent_env: dict[str, str] = field(default_factory=dict)
    sandbox_id: str | None = None
    rollout_name: str | None = None
    job_name: str = "2026-11-03__09-12-44"
    duration: float = 378.3  # seconds from started_at to finished_at

    @property
    def name(self) -> str:
        return self.rollout_name or f"{self.task}__5e0d1c2b"


TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "bash": {"command": {"type": "string"}},
    "str_replace_based_edit_tool": {"command": {"type": "string"}, "path": {"type": "string"}},
    "read_file": {"path": {"type": "string"}},
    "Skill": {"skill": {"type": "string"}},
    "invoke_skill": {"name": {"type": "string"}},
    "finish": {"message": {"type": "string"}},
}


def tool_def(name: str) -> dict[str, Any]:
    """A request `tools` entry in chat-completions shape."""
    params = TOOL_SCHEMAS.get(name, {})
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": params},
        },
    }


def conversation(
    system: str,
    prompt: str,
    turns: list[tuple[str, list[ToolCall], list[str]]],
    *,
    tools: list[str],
    usage: list[dict[str, Any] | None] | None = None,
) -> list[Exchange]:
    """Exchanges an agent harness sends: each request carries the whole history so far.

    A turn is (reply, tool calls, their outputs); the next request appends the assistant message and
    one tool message per call, so each response's call ids are consumed by the following request
    (what `_training_success_exchange_indices` keys on).
    """
    history: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": prompt},
    ]
    out: list[Exchange] = []
    for index, (reply, calls, outputs) in enumerate(turns):
        tokens = usage[index] if usage is not None else default_usage(len(history))
        out.append(Exchange(list(history), tools, reply, calls, tokens))
        assistant: dict[str, Any] = {"role": "assistant", "content": reply}
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ]
        history.append(assistant)
        for call, output in zip(calls, outputs, strict=True):
            history.append({"role": "tool", "tool_call_id": call.id, "content": output})
    return out


def default_usage(n_messages: int) -> dict[str, Any]:
    prompt = 1200 + 350 * n_messages
    return {"prompt_tokens": prompt, "completion_tokens": 180, "total_tokens": prompt + 180}


# _init_rollout: src/benchflow/rollout/_setup.py:256 --------------------------------------------------


def _init_rollout(jobs_dir: Path, rollout: Rollout) -> Path:
    """`jobs/<job>/<task>__<8 hex>/` and its four empty subdirectories, before anything else."""
    rollout_dir = jobs_dir / rollout.job_name / rollout.name
    rollout_dir.mkdir(parents=True, exist_ok=True)
    for subdir in ("agent", "verifier", "artifacts", "trajectory"):
        (rollout_dir / subdir).mkdir(exist_ok=True)
    return rollout_dir


# TaskSkillPolicy.config_metadata: src/benchflow/skill_policy.py:60 (resolve_task_skill_policy :.. ) --


def skill_metadata(rollout: Rollout) -> dict[str, Any]:
    """with-skill mounts the task's bundled `environment/skills` at `/skills`; no-skill mounts none."""
    if rollout.skill_mode == "with-skill":
        return {
            "skill_mode": "with-skill",
            "skill_source": "task_bundled",
            "requested_skills_dir": None,
            "effective_skills_dir": f"tasks/{rollout.task}/environment/skills",
            "skills_sandbox_dir": "/skills",
            "include_task_skills": True,
        }
    if rollout.skill_mode != "no-skill":
        raise ValueError(f"skill_mode {rollout.skill_mode!r}: expected no-skill or with-skill")
    return {
        "skill_mode": "no-skill",
        "skill_source": "none",
        "requested_skills_dir": None,
        "effective_skills_dir": None,
        "skills_sandbox_dir": None,
        "include_task_skills": False,
    }


def _is_secret_env_key(name: str) -> bool:
    """rollout/_results.py:98 (substring denylist, :83)."""
    secret = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIALS", "COOKIE", "AUTHORIZATION")
    return any(s in name.upper() for s in (*secret, "AUTH", "BEARER", "SESSION"))


# _write_config: src/benchflow/rollout/_results.py:136 (called from Rollout.setup, __init__.py:1062) -


def _write_config(rollout_dir: Path, rollout: Rollout) -> dict[str, Any]:
    """config.json: `json.dumps(indent=2)`, insertion order, no trailing newline; secrets dropped."""
    transport = {"docker": "docker-stdio", "daytona": "ssh" if rollout.agent == "gemini" else "pty"}
    config = {
        "task_path": rollout.task,  # task_path.name
        "agent": rollout.agent,
        "model": rollout.model,
        "reasoning_effort": None,
        "environment": rollout.environment,
        "acp_transport": transport.get(rollout.environment, "provider-default"),
        "environment_manifest": None,
        **skill_metadata(rollout),
        "sandbox_user": None,
        "sandbox_locked_paths": None,
        "sandbox_setup_timeout": 120,
        "skip_install": False,
        "agent_install_timeout": None if rollout.agent == "oracle" else INSTALL_TIMEOUT,
        "context_root": None,
        "base_image_override": None,
        "timeout_sec": rollout.timeout_sec,
        "concurrency": None,
        "agent_idle_timeout_sec": None,
        "started_at": str(STARTED_AT),
        "agent_env": {k: v for k, v in rollout.agent_env.items() if not _is_secret_env_key(k)},
        "scenes": [],
        "loop": {"strategy": "single-shot"},  # loop_strategies.loop_block(None)
        "usage_tracking": {"requested": "auto"},  # UsageTrackingConfig.to_config_artifact
    }
    (rollout_dir / "config.json").write_text(json.dumps(config, indent=2))
    return config


def persist_sandbox_info(rollout_dir: Path, rollout: Rollout) -> None:
    """sandbox/metadata.py:14: sandbox.json once the sandbox exists, only when it has a string id."""
    if rollout.sandbox_id is None:
        return
    provider = {"daytona": "DaytonaSandbox", "docker": "DockerSandbox"}[rollout.environment]
    info = {"sandbox_id": rollout.sandbox_id, "provider": provider, "created_at": str(STARTED_AT)}
    (rollout_dir / "sandbox.json").write_text(json.dumps(info, indent=2))


# The ACP trajectory: TrajectoryWriter (trajectories/_capture.py:127) -------------------------------


def write_acp_trajectory(rollout_dir: Path, events: list[dict[str, Any]]) -> None:
    """`TrajectoryWriter.write_final` / the live sink: one `json.dumps` line per event, joined by
    newlines, no trailing newline (redact_acp_trajectory_jsonl, trajectories/types.py:560)."""
    path = rollout_dir / "trajectory" / "acp_trajectory.jsonl"
    path.write_text("\n".join(json.dumps(json.loads(json.dumps(e, default=str))) for e in events))


def acp_events(rollout: Rollout) -> list[dict[str, Any]]:
    """The session's events, the user prompt first; a wall-clock timeout appends its marker
    (ACPSession.record_agent_timeout, acp/session.py:304)."""
    events = [{"type": "user_message", "text": rollout.instruction}]
    events += [event.to_event() for event in rollout.acp]
    if rollout.timed_out_after is not None:
        events.append(
            {
                "type": "agent_timeout",
                "reason": "wall_clock_timeout",
                "timeout_sec": float(rollout.timed_out_after),
                "pending_tool_call_ids": pending_tool_calls(rollout),
                "terminal_trajectory_complete": not pending_tool_calls(rollout),
            }
        )
    return events


def pending_tool_calls(rollout: Rollout) -> list[str]:
    return [
        e.tool_call_id
        for e in rollout.acp
        if e.type == "tool_call" and e.status in {"pending", "in_progress"}
    ]


# The LLM trajectory: LiteLLM callback -> Trajectory.to_jsonl (trajectories/types.py:677) ------------


def exchange_record(exchange: Exchange, index: int, rollout: Rollout) -> dict[str, Any]:
    """`LLMExchange.model_dump(mode="json")` of what `trajectory_from_litellm_callback_log`
    (providers/litellm_logging.py:569) builds: request body from `_base_record`, response body from
    `_record_response_body` (usage folded in, model added, `error` on a failure)."""
    start = STARTED_AT + timedelta(seconds=20 + 30 * index)
    end = start + timedelta(seconds=6)
    request_body: dict[str, Any] = {"model": rollout.model, "messages": exchange.messages}
    if exchange.tools:
        request_body["tools"] = [tool_def(name) for name in exchange.tools]
    request_body = {k: v for k, v in request_body.items() if v is not None}
    if exchange.status_code == 200:
        message: dict[str, Any] = {"content": exchange.reply or None, "role": "assistant"}
        if exchange.tool_calls:
            message["tool_calls"] = [
                {
                    "function": {"arguments": json.dumps(c.arguments), "name": c.name},
                    "id": c.id,
                    "type": "function",
                }
                for c in exchange.tool_calls
            ]
        message["function_call"] = None  # LiteLLM's Message carries both; Prime-SFT drops them
        message["provider_specific_fields"] = None
        body: dict[str, Any] = {
            "id": f"chatcmpl-{index:04d}",
            "created": int(start.timestamp()),
            "model": rollout.model,
            "object": "chat.completion",
            "choices": [
                {
                    "finish_reason": "tool_calls" if exchange.tool_calls else "stop",
                    "index": 0,
                    "message": message,
                }
            ],
        }
        if exchange.usage is not None:
            body["usage"] = exchange.usage
    else:
        body = {"raw": None, "model": rollout.model}
        body["error"] = {"type": "APIError", "message": exchange.error or "LiteLLM error"}
        body["error"]["traceback"] = ""
    return {
        "request": {
            "timestamp": start.isoformat(),
            "method": "POST",
            "path": "/v1/chat/completions",
            "headers": {},
            "body": request_body,
        },
        "response": {
            "timestamp": end.isoformat(),
            "status_code": exchange.status_code,
            "headers": {},
            "body": body,
        },
        "duration_ms": 6000.0,
        "metadata": {
            "request_model": rollout.model,
            "provider_model": rollout.model,
            "call_type": "acompletion",
            "input_shape": {
                "has_messages": True,
                "has_input": False,
                "n_messages": len(exchange.messages),
            },
            "call_purpose": "agent",  # call_purpose.infer_call_purpose: "agent" but for opencode
        },
    }


# Rollout._write_llm_trajectory: src/benchflow/rollout/__init__.py:2486 ------------------------------


def _write_llm_trajectory(rollout_dir: Path, rollout: Rollout) -> None:
    """LiveLLMTrajectoryWriter.reconcile (trajectories/_llm_capture.py:39): nothing when no exchange
    was captured; otherwise one line per exchange, no trailing newline."""
    if not rollout.exchanges:
        return
    lines = [json.dumps(exchange_record(e, i, rollout)) for i, e in enumerate(rollout.exchanges)]
    (rollout_dir / "trajectory" / "llm_trajectory.jsonl").write_text("\n".join(lines))


def _first_int(*values: Any) -> int:
    for value in values:
        if value is not None:
            try:
                return int(value)
            except (TypeError, ValueError):
                continue
    return 0


def _exchange_token_usage(usage: dict[str, Any]) -> tuple[int, int, int, int, int | None]:
    """trajectories/types.py:93, for an OpenAI/Anthropic-style `usage` block: input includes cache."""
    details = usage.get("prompt_tokens_details") or {}
    additive_read = _first_int(usage.get("cache_read_input_tokens"))
    creation = _first_int(usage.get("cache_creation_input_tokens"))
    inclusive_read = _first_int(details.get("cached_tokens"))
    raw_input = _first_int(usage.get("input_tokens"), usage.get("prompt_tokens"))
    input_tokens = raw_input + (0 if inclusive_read else additive_read) + creation
    output_tokens = _first_int(usage.get("output_tokens"), usage.get("completion_tokens"))
    total = usage.get("total_tokens")
    return (
        input_tokens,
        output_tokens,
        additive_read or inclusive_read,
        creation,
        None if total is None else int(total),
    )


def extract_usage(rollout: Rollout) -> dict[str, Any]:
    """providers/litellm_logging.py:627 `extract_usage_from_trajectory` (usage_unavailable at
    usage_tracking.py:70 when no exchange has provider usage)."""
    usages = [
        e.usage
        for e in rollout.exchanges
        if isinstance(e.usage, dict) and any(v is not None for v in e.usage.values())
    ]
    if not usages:
        return {
            "n_input_tokens": 0,
            "n_output_tokens": 0,
            "n_cache_read_tokens": 0,
            "n_cache_creation_tokens": 0,
            "total_tokens": 0,
            "cost_usd": None,
            "usage_source": "unavailable",
            "price_source": None,
        }
    parts = [_exchange_token_usage(e.usage or {}) for e in rollout.exchanges]
    costs = [e.cost_usd for e in rollout.exchanges if e.cost_usd is not None]
    cost = round(sum(costs), 10) if costs else None
    return {
        "n_input_tokens": sum(p[0] for p in parts),
        "n_output_tokens": sum(p[1] for p in parts),
        "n_cache_read_tokens": sum(p[2] for p in parts),
        "n_cache_creation_tokens": sum(p[3] for p in parts),
        "total_tokens": sum(p[4] if p[4] is not None else p[0] + p[1] for p in parts),
        "cost_usd": cost,
        "usage_source": "provider_response",
        "price_source": "litellm" if cost is not None else None,
    }


def usage_tracking_metadata(rollout: Rollout, usage: dict[str, Any]) -> dict[str, Any]:
    """Rollout._usage_tracking_metadata (__init__.py:2524) + UsageTrackingConfig.to_result_metadata."""
    source = usage["usage_source"]
    available = source in {"provider_response", "agent_native_acp"}
    endpoint = "sandbox" if rollout.environment == "daytona" else "host"
    if source == "agent_native_acp":
        endpoint = "agent_native"
    elif source == "unavailable":
        endpoint = "none"
    return {
        "requested": "auto",
        "status": "enabled" if available else "unavailable",
        "environment": rollout.environment,
        "endpoint_kind": endpoint,
        "usage_source": source,
    }


# Error classification: src/benchflow/_utils/scoring.py:119 and :208 --------------------------------


def classify_error(error: str | None) -> str | None:
    """The categories a test can reach; the first matching rule wins, in the writer's order."""
    if not error:
        return None
    lower = error.lower()
    if "agent idle for" in lower:
        return "idle_timeout"
    if "install failed" in lower:
        return "install_failure"
    if "closed stdout" in lower:
        return "pipe_closed"
    if "suspected provider api error" in lower:
        return "suspected_api_error"
    if "provider api error" in lower:
        return "api_error"
    if "acp error" in lower or "was rejected as invalid" in lower:
        auth = ("permission_denied", "leaked", "failed to authenticate", "invalid bearer token")
        auth += ("invalid api key", "was rejected as invalid", "unauthorized")
        auth += ("provider auth failed", "http 401", "http 403")
        if any(m in lower for m in auth):
            return "provider_auth"
        if any(m in lower for m in ("provider rate limited", "rate limit", "too many requests")):
            return "provider_rate_limit"
        if "http 429" in lower:
            return "provider_rate_limit"
        if "provider unavailable" in lower or "http 503" in lower:
            return "infra_failure"
        if "provider rejected request" in lower or "http 400" in lower:
            return "provider_rejected"
        return "acp_error"
    if "sandbox startup" in lower or "sandbox creation" in lower:
        return "sandbox_setup"
    if "docker compose command failed" in lower and "failed to resolve source metadata" in lower:
        return "sandbox_setup"
    if "prompt exceeded wall-clock budget" in lower:
        return "timeout"
    infra = ("connection lost", "connection reset", "connection refused", "broken pipe")
    infra += ("failed to get session command", "sandbox not found", "workspace not found")
    infra += ("api connection", "api timeout", "temporarily unavailable")
    if any(m in lower for m in infra):
        return "infra_failure"
    if "timed out" in lower:
        return "timeout"
    return "other"


def classify_verifier_error(verifier_error: str | None) -> str | None:
    if not verifier_error:
        return None
    if "verifier crashed" in verifier_error:
        return "verifier_failure"
    if "verifier timed out" in verifier_error:
        return "verifier_timeout"
    return "verifier_other"


# Skill invocations: trajectories/metrics.py:139 is_skill_invocation_event -------------------------

_SKILL_NAMES = {"invoke_skill", "activate_skill", "skill"}
_SKILL_ENVELOPE = re.compile(
    r"\A\s*(?:<skill_content\s+name\s*=\s*\"[^\"]+\"|#{1,6}\s*Skill:\s*\S|Launching\s+skill:\s*\S)",
    re.IGNORECASE,
)


def _norm(value: Any) -> str:
    return value.strip().lower().replace("-", "_") if isinstance(value, str) else ""


def is_skill_invocation_event(event: dict[str, Any]) -> bool:
    """Canonical `kind == "skill"`, an explicit skill title, or (unclassified kinds only) a bare
    `skill` title or a skill-result envelope at the start of a text block."""
    if event.get("type") != "tool_call":
        return False
    kind, title = _norm(event.get("kind")), _norm(event.get("title"))
    if kind in _SKILL_NAMES or title in _SKILL_NAMES - {"skill"}:
        return True
    if kind not in {"", "other", "tool"}:
        return False
    if title in _SKILL_NAMES:
        return True
    for block in event.get("content") or []:
        body = block.get("content") if isinstance(block, dict) else None
        text = body.get("text") if isinstance(body, dict) else block.get("text")
        if isinstance(text, str):
            header = re.match(r"\A\s*Tool:\s*(?:invoke_skill|activate_skill)\b", text, re.I)
            if (header and "[skill:" in text.lower()) or _SKILL_ENVELOPE.match(text):
                return True
    return False


# _build_rollout_result: src/benchflow/rollout/_results.py:259 --------------------------------------


def trajectory_summary(events: list[dict[str, Any]], rollout: Rollout, source: str | None) -> dict:
    """_utils/result_metadata.py:40 trajectory_summary_from_events."""
    types: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for event in events:
        kind = str(event.get("type") or "unknown")
        types[kind] = types.get(kind, 0) + 1
        if kind == "tool_call":
            status = str(event.get("status") or "unknown")
            statuses[status] = statuses.get(status, 0) + 1
    steps = sum(types.values())
    named = sum(types.get(k, 0) for k in ("user_message", "agent_message", "agent_thought"))
    return {
        "steps": steps,
        "tool_call_steps": types.get("tool_call", 0),
        "user_message_steps": types.get("user_message", 0),
        "agent_message_steps": types.get("agent_message", 0),
        "agent_thought_steps": types.get("agent_thought", 0),
        "other_steps": steps - types.get("tool_call", 0) - named,
        "event_type_counts": types,
        "tool_call_status_counts": statuses,
        "partial_trajectory": rollout.partial_trajectory,
        "trajectory_source": source,
    }


def outcome(rollout: Rollout) -> dict[str, Any]:
    """Rollout._run_lifecycle (__init__.py:2100) + _record_agent_timeout (:2064): the error, rewards,
    diagnostics, prompts, trajectory and tool count the result is built from."""
    executed = rollout.reached in {"execute", "verify"}
    events = acp_events(rollout) if executed else []
    error, diagnostics = rollout.error, dict(rollout.diagnostics)
    rewards = rollout.rewards if rollout.reached == "verify" else None
    if rollout.timed_out_after is not None:
        error = error or f"Agent prompt exceeded wall-clock budget {rollout.timed_out_after}s"
        diagnostics["agent_timeout_info"] = {
            "reason": "wall_clock_timeout",
            "timeout_sec": float(rollout.timed_out_after),
            "n_tool_calls": sum(1 for e in rollout.acp if e.type == "tool_call"),
            "pending_tool_call_ids": pending_tool_calls(rollout),
            "terminal_event_recorded": True,
            "terminal_trajectory_complete": not pending_tool_calls(rollout),
        }
        if rollout.reached == "verify" and rewards is None and rollout.verifier_error is None:
            rewards = {"reward": 0.0}  # a timed-out agent the verifier did not score scores 0
    if rollout.partial_trajectory:
        source: str | None = "partial_acp"
    else:
        source = "acp" if executed else None
    return {
        "events": events,
        "error": error,
        "rewards": rewards,
        "diagnostics": diagnostics,
        "source": source,
        "n_tool_calls": sum(1 for e in events if e.get("type") == "tool_call"),
    }


def timing(rollout: Rollout) -> dict[str, float]:
    """Phase timings in the order the phases set them, `total` last, each rounded to 0.1 s."""
    out: dict[str, float] = {}
    if rollout.reached != "setup":
        out["environment_setup"] = 41.23
    if rollout.reached in {"execute", "verify"}:
        out["agent_setup"] = 12.48
        out["agent_execution"] = float(rollout.timed_out_after or 290.02)
    if rollout.reached == "verify":
        out["verifier"] = 31.77
    out["total"] = rollout.duration
    return {k: round(v, 1) for k, v in out.items()}


def _build_rollout_result(rollout_dir: Path, rollout: Rollout) -> dict[str, Any]:
    """Writes, in order: trajectory/acp_trajectory.jsonl (final), result.json, timing.json,
    prompts.json, rewards.jsonl (when rewards has events), then results.jsonl. Returns result.json."""
    facts = outcome(rollout)
    finished_at = STARTED_AT + timedelta(seconds=rollout.duration)
    usage = extract_usage(rollout)
    events = facts["events"]
    n_skill = sum(1 for e in events if is_skill_invocation_event(e))
    error, verifier_error = facts["error"], rollout.verifier_error
    diag_categories = {"agent_timeout_info": "timeout", "idle_timeout_info": "idle_timeout"}
    diag_categories.update(sandbox_startup_info="sandbox_setup", transport_error_info="pipe_closed")
    error_category = next(
        (diag_categories[f] for f in facts["diagnostics"] if f in diag_categories and error),
        None,
    ) or classify_error(error)
    prompts = [rollout.instruction]
    agent_result = {
        "n_tool_calls": facts["n_tool_calls"],
        "n_skill_invocations": n_skill,
        "n_prompts": len(prompts),
        **{k: usage[k] for k in ("n_input_tokens", "n_output_tokens", "n_cache_read_tokens")},
        "n_cache_creation_tokens": usage["n_cache_creation_tokens"],
        "total_tokens": usage["total_tokens"],
        "cost_usd": usage["cost_usd"],
        "usage_source": usage["usage_source"],
        "price_source": usage["price_source"],
    }
    write_acp_trajectory(rollout_dir, events)
    times = timing(rollout)
    agent_name = rollout.agent_name
    if agent_name is None:
        agent_name = rollout.agent if rollout.reached in {"execute", "verify"} else ""
    result = {
        "task_name": rollout.task,
        "rollout_name": rollout.name,
        "rewards": facts["rewards"],
        "agent": rollout.agent,
        "agent_name": agent_name,
        "model": rollout.model,
        **skill_metadata(rollout),
        "n_tool_calls": facts["n_tool_calls"],
        "n_skill_invocations": n_skill,
        "n_prompts": len(prompts),
        "agent_result": agent_result,
        "final_metrics": {  # result_metadata.final_metrics_from_agent_result
            "total_prompt_tokens": usage["n_input_tokens"],
            "total_completion_tokens": usage["n_output_tokens"],
            "total_cached_tokens": usage["n_cache_read_tokens"],
            "total_cost_usd": usage["cost_usd"],
        },
        "trajectory_summary": trajectory_summary(events, rollout, facts["source"]),
        "usage_tracking": usage_tracking_metadata(rollout, usage),
        "error": error,
        "error_category": error_category,
        "verifier_error": verifier_error,
        "verifier_error_category": classify_verifier_error(verifier_error),
        "export_error": None,
        **{f: facts["diagnostics"].get(f) for f in DIAGNOSTIC_FIELDS},
        "partial_trajectory": rollout.partial_trajectory,
        "trajectory_source": facts["source"],
        "started_at": str(STARTED_AT),
        "finished_at": str(finished_at),
        "timing": times,
        "scenes": [],
        "loop": {"strategy": "single-shot"},
        "sandbox_id": rollout.sandbox_id,
    }
    (rollout_dir / "result.json").write_text(json.dumps(result, indent=2))
    (rollout_dir / "timing.json").write_text(json.dumps(times, indent=2))
    (rollout_dir / "prompts.json").write_text(json.dumps(prompts, indent=2))
    _write_rewards_jsonl(rollout_dir, facts["rewards"], finished_at)
    record = build_rollout_results_record(
        rollout_dir,
        task_name=rollout.task,
        rollout_name=rollout.name,
        agent=rollout.agent,
        agent_name=agent_name,
        model=rollout.model,
        n_tool_calls=facts["n_tool_calls"],
        prompts=prompts,
        partial_trajectory=rollout.partial_trajectory,
        rewards=facts["rewards"],
        error=error,
        verifier_error=verifier_error,
        timing=times,
        agent_result=agent_result,
    )
    (rollout_dir / "results.jsonl").write_text(json.dumps(record, default=str) + "\n")
    return result


def _write_rewards_jsonl(rollout_dir: Path, rewards: dict | None, finished_at: datetime) -> None:
    """rollout/_results.py:54 + _utils/reward_events.py:12 (the scalar reward; no rubric here)."""
    if not rewards or rewards.get("reward") is None:
        return
    event = {
        "ts": finished_at.isoformat(),
        "type": "terminal",
        "source": "verifier",
        "value": rewards["reward"],
        "tag": "reward",
        "step_index": None,
        "space": rewards.get("space", "output"),
        "granularity": rewards.get("granularity", "terminal"),
        "meta": {
            k: v
            for k, v in rewards.items()
            if k not in {"reward", "rubric", "space", "granularity"}
        },
    }
    (rollout_dir / "rewards.jsonl").write_text(json.dumps(event, default=str) + "\n")


# Prime-SFT normalisation: src/benchflow/trajectories/export_prime_sft.py --------------------------


def _content_to_text(content: Any) -> str:
    """:222."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, str):
                parts.append(item)
            elif isinstance(item, dict):
                text = item.get("text") if item.get("text") is not None else item.get("content")
                if isinstance(text, str):
                    parts.append(text)
        return "\n".join(parts)
    return str(content)


def _normalize_tool_call(call: dict[str, Any], index: int) -> dict[str, Any]:
    """:274 (+ `_json_tool_call_arguments` :250: a JSON-object string is kept as it is)."""
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    arguments = function.get("arguments", call.get("arguments", {}))
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            parsed = {"_malformed_json_arguments": arguments}
        arguments = arguments if isinstance(parsed, dict) else json.dumps({"_non_object": parsed})
    else:
        arguments = json.dumps(arguments if isinstance(arguments, dict) else {})
    return {
        "id": str(call.get("id") or call.get("tool_call_id") or f"call_{index:06d}"),
        "type": "function",
        "function": {
            "name": str(function.get("name") or call.get("name") or "tool"),
            "arguments": arguments,
        },
    }


def _normalize_message(message: dict[str, Any]) -> dict[str, Any]:
    """:292, chat-completions messages: role, tool_call_id (tool), content as text, tool_calls;
    every other key (function_call, provider_specific_fields, reasoning_content, ...) is dropped."""
    role = message.get("role")
    role = (
        "system" if role == "developer" else "assistant" if role == "model" else str(role or "user")
    )
    out: dict[str, Any] = {"role": role}
    if role == "tool" and message.get("tool_call_id") is not None:
        out["tool_call_id"] = str(message["tool_call_id"])
    out["content"] = _content_to_text(message.get("content"))
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [
            _normalize_tool_call(c, i) for i, c in enumerate(calls) if isinstance(c, dict)
        ]
    return out


def normalize_prime_sft_exchange(
    exchange: dict[str, Any],
) -> tuple[dict[str, Any] | None, str | None]:
    """:1114 over `_exchange_to_messages_and_tools` (:540), chat-completions path: the request's
    messages then the response's first choice; later system messages become user (:341)."""
    request_body = exchange["request"]["body"]
    choices = exchange["response"]["body"].get("choices") or []
    if not choices or not isinstance(choices[0].get("message"), dict):
        return None, "no_assistant"
    messages = [
        _normalize_message(m)
        for m in request_body.get("messages") or []
        if isinstance(m, dict) and m.get("type") != "reasoning"
    ]
    messages.append(_normalize_message(choices[0]["message"]))
    messages = [
        {**m, "role": "user"} if m["role"] == "system" and i else m for i, m in enumerate(messages)
    ]
    tool_defs = []
    for tool in request_body.get("tools") or []:
        function = dict(tool["function"])
        function.setdefault("description", "")
        function.setdefault("parameters", {"type": "object", "properties": {}})
        tool_defs.append({"type": "function", "function": function})
    if any(m.get("tool_calls") for m in messages) and not tool_defs:
        return None, "missing_tool_defs"
    return {"messages": messages, "tool_defs": tool_defs}, None


def prime_sft_last_user_training_window(messages: list[dict[str, Any]]) -> tuple[list, list] | None:
    """:355: the last user message that some assistant message follows, and everything after it."""
    for idx in range(len(messages) - 2, -1, -1):
        if messages[idx].get("role") != "user":
            continue
        completion = messages[idx + 1 :]
        if any(item.get("role") == "assistant" for item in completion):
            return [messages[idx]], completion
    return None


# build_rollout_results_record: src/benchflow/trajectories/results.py:422 --------------------------


def _response_call_ids(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """results.py:346 `_response_tool_calls`, chat-completions choices."""
    calls = []
    for choice in body.get("choices") or []:
        for call in (choice.get("message") or {}).get("tool_calls") or []:
            calls.append((str(call.get("id")), (call.get("function") or {}).get("name")))
    return calls


def training_success_exchange_indices(exchanges: list[dict[str, Any]]) -> set[int]:
    """results.py:263: per distinct request body, the last 200/completed response whose call ids a
    later request consumes, else the last one that is safe unconsumed (no calls, only `finish`, or
    no later request)."""
    bodies = [
        json.dumps(e["request"]["body"], sort_keys=True, separators=(",", ":"), default=str)
        for e in exchanges
    ]
    by_request: dict[str, list[int]] = {}
    for index, exchange in enumerate(exchanges):
        response = exchange["response"]
        body = response.get("body") or {}
        if response.get("status_code") != 200 or body.get("status") not in {None, "completed"}:
            continue
        if body.get("incomplete_details"):
            continue
        by_request.setdefault(bodies[index], []).append(index)
    selected = set()
    for candidates in by_request.values():
        consumed = [
            i
            for i in candidates
            if (ids := {c for c, _ in _response_call_ids(exchanges[i]["response"]["body"])})
            and any(any(c in later for c in ids) for later in bodies[i + 1 :])
        ]
        if consumed:
            selected.add(max(consumed))
            continue
        safe = [
            i
            for i in candidates
            if all(n == "finish" for _, n in _response_call_ids(exchanges[i]["response"]["body"]))
            or i == len(exchanges) - 1
        ]
        if safe:
            selected.add(max(safe))
    return selected


def _llm_steps_from_trajectory(
    rollout_dir: Path, *, reward: float, is_truncated: bool, prefix: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """results.py:152: one step per selected exchange; tool_defs merged by name, first seen wins."""
    path = rollout_dir / "trajectory" / "llm_trajectory.jsonl"
    if not path.exists():
        return [], [], None
    exchanges = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            return (
                [],
                [],
                f"Invalid LLM trajectory JSONL: {path}: line {number}: invalid JSON: {exc}",
            )
        exchanges.append(record)
    selected = training_success_exchange_indices(exchanges)
    steps: list[dict[str, Any]] = []
    tool_defs: list[dict[str, Any]] = []
    skipped = []
    for index, exchange in enumerate(exchanges):
        if index not in selected:
            continue
        normalized, reason = normalize_prime_sft_exchange(exchange)
        if normalized is None:
            skipped.append(f"exchange {index}: {reason or 'normalization failed'}")
            continue
        known = {tool["function"]["name"] for tool in tool_defs}
        tool_defs += [t for t in normalized["tool_defs"] if t["function"]["name"] not in known]
        response_body = exchange["response"]["body"]
        extras = {"source": "llm_trajectory", "tracking_source": "litellm_callback"}
        extras["exchange_index"] = index
        extras.update({k: v for k, v in exchange.get("metadata", {}).items() if k not in extras})
        steps.append(
            {
                "prompt": normalized["messages"][:-1],
                "completion": normalized["messages"][-1:],
                "response": response_body,
                "tokens": None,
                "reward": reward,
                "advantage": 0.0,
                "is_truncated": bool(response_body.get("incomplete_details")) or is_truncated,
                "trajectory_id": f"{prefix}__llm_{index}",
                "extras": extras,
            }
        )
    if skipped:
        return (
            steps,
            tool_defs,
            "Successful LLM exchanges were omitted from results.jsonl: " + "; ".join(skipped),
        )
    return steps, tool_defs, None


def build_rollout_results_record(
    rollout_dir: Path,
    *,
    task_name: str,
    rollout_name: str,
    agent: str,
    agent_name: str,
    model: str | None,
    n_tool_calls: int,
    prompts: list[str],
    partial_trajectory: bool,
    rewards: dict[str, Any] | None,
    error: str | None,
    verifier_error: str | None,
    timing: dict[str, Any],
    agent_result: dict[str, Any],
    export_error: str | None = None,
) -> dict[str, Any]:
    """The row, key for key. `training_ready` needs steps, a completion, no export error and no
    terminal error (agent error, verifier error or partial trajectory); the reason is the first of
    the writer's ladder that applies; an unready row always carries an error payload unless it is a
    healthy native-subscription run without LLM capture."""
    reward = rewards.get("reward") if isinstance(rewards, dict) else None
    reward = (
        float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else 0.0
    )
    prefix = (
        rollout_name
        if rollout_name.startswith(f"{task_name}__")
        else f"{task_name}__{rollout_name}"
    )
    steps, tool_defs, llm_error = _llm_steps_from_trajectory(
        rollout_dir, reward=reward, is_truncated=partial_trajectory, prefix=prefix
    )
    if steps:
        final = steps[-1]
        full = final["prompt"] + final["completion"]
        window = prime_sft_last_user_training_window(full)
        prompt, completion = window or (steps[0]["prompt"], full[len(steps[0]["prompt"]) :])
    else:
        prompt, completion = [{"role": "user", "content": p} for p in prompts], None
    effective_export_error = export_error or llm_error
    error_obj = None
    for key, value in (
        ("agent_error", error),
        ("verifier_error", verifier_error),
        ("export_error", effective_export_error),
    ):
        if value:
            error_obj = {"error": key, "error_chain_str": value, "error_chain_repr": value}
            break
    terminal = bool(error or verifier_error or partial_trajectory)
    native_without_llm = bool(
        agent_result.get("usage_source") == "agent_native_acp"
        and not (rollout_dir / "trajectory" / "llm_trajectory.jsonl").exists()
        and effective_export_error is None
        and not terminal
    )
    training_ready = bool(steps and completion and effective_export_error is None and not terminal)
    reason = None
    if not training_ready:
        if llm_error:
            invalid = llm_error.startswith("Invalid LLM trajectory JSONL:")
            reason = "invalid_llm_trajectory_jsonl" if invalid else "export_error"
        elif effective_export_error:
            reason = "export_error"
        elif not steps or not completion:
            reason = "missing_healthy_structured_llm_trajectory"
        elif partial_trajectory:
            reason = "partial_trajectory"
        elif error:
            reason = "agent_error"
        elif verifier_error:
            reason = "verifier_error"
        else:
            reason = "missing_healthy_structured_llm_trajectory"
        if error_obj is None and not native_without_llm:
            name = (
                reason
                if reason in {"agent_error", "verifier_error", "partial_trajectory"}
                else "missing_llm_trajectory"
            )
            text = f"Rollout is not training-ready: {reason}"
            error_obj = {"error": name, "error_chain_str": text, "error_chain_repr": text}
    if partial_trajectory:
        stop = "partial_trajectory"
    elif error:
        stop = "agent_error"
    elif verifier_error:
        stop = "verifier_error"
    elif effective_export_error:
        stop = "export_error"
    else:
        stop = "agent_completed"
    inputs = _nonnegative(agent_result.get("n_input_tokens"))
    outputs = _nonnegative(agent_result.get("n_output_tokens"))
    total = _nonnegative(agent_result.get("total_tokens"))
    if inputs + outputs == 0 and total > 0:
        inputs = total
    metrics: dict[str, Any] = {"n_tool_calls": n_tool_calls, "n_prompts": len(prompts)}
    for key, value in (rewards or {}).items():
        if key != "rubric" and isinstance(value, (int, float)) and not isinstance(value, bool):
            metrics[str(key)] = float(value)
    info = {
        "task_id": task_name,
        "task_name": task_name,
        "rollout_name": rollout_name,
        "environment": task_name,
        "agent": agent,
        "agent_name": agent_name,
        "model": model,
        "source": "benchflow",
        "rollout_dir": str(rollout_dir),
        "training_ready": training_ready,
        "training_ready_reason": reason,
    }
    return {
        "example_id": 0,
        "prompt": prompt,
        "completion": completion,
        "info": info,
        "reward": reward,
        "error": error_obj,
        "timing": timing or {},
        "is_completed": error_obj is None and not partial_trajectory,
        "is_truncated": bool(partial_trajectory),
        "stop_condition": stop,
        "metrics": metrics,
        "tool_defs": tool_defs,
        "token_usage": {
            "input_tokens": inputs,
            "output_tokens": outputs,
            "final_input_tokens": inputs,
            "final_output_tokens": outputs,
            "total_tokens": total,
        },
        "score": reward,
        "total_tool_calls": float(n_tool_calls),
        "trajectory": steps,
    }


def _nonnegative(value: Any) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else 0.0


# write_job_results_jsonl: src/benchflow/trajectories/results.py:606 -------------------------------


def write_job_results_jsonl(job_dir: Path) -> Path | None:
    """Every `*/results.jsonl` in path order, one line per row, `example_id` renumbered per task id
    (first seen = 0); unreadable rows go to results.errors.json, which is removed when there are none."""
    files = sorted(job_dir.glob("*/results.jsonl")) if job_dir.is_dir() else []
    if not files:
        return None
    example_ids: dict[str, int] = {}
    skipped: list[dict[str, Any]] = []
    lines = []
    for src in files:
        for number, line in enumerate(src.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                skipped.append(
                    {
                        "path": str(src),
                        "line": number,
                        "error": "invalid_results_artifact_json",
                        "message": str(exc),
                    }
                )
                continue
            if not isinstance(row, dict):
                skipped.append(
                    {"path": str(src), "line": number, "error": "non_object_results_artifact_row"}
                )
                continue
            info = row.get("info") if isinstance(row.get("info"), dict) else {}
            key = str(
                info.get("task_id")
                or info.get("task_name")
                or row.get("task_id")
                or src.parent.name
            )
            row["example_id"] = example_ids.setdefault(key, len(example_ids))
            lines.append(json.dumps(row, default=str) + "\n")
    out = job_dir / "results.jsonl"
    out.write_text("".join(lines))
    errors = job_dir / "results.errors.json"
    if skipped:
        payload = {"schema_version": 1, "error": "skipped_results_artifact_rows"}
        payload.update(skipped_count=len(skipped), skipped=skipped)
        errors.write_text(json.dumps(payload) + "\n")
    else:
        errors.unlink(missing_ok=True)
    return out


# The whole lifecycle ---------------------------------------------------------------------------------


def write_rollout(jobs_dir: Path, rollout: Rollout) -> Path:
    """Rollout.run in the writers' order: _init_rollout, _write_config (setup), sandbox.json (start),
    the live ACP trajectory (execute), _write_llm_trajectory (cleanup), _build_rollout_result."""
    rollout_dir = _init_rollout(jobs_dir, rollout)
    _write_config(rollout_dir, rollout)
    if rollout.reached != "setup":
        persist_sandbox_info(rollout_dir, rollout)
    if rollout.reached in {"execute", "verify"}:
        write_acp_trajectory(rollout_dir, acp_events(rollout))  # the live sink's last snapshot
        _write_llm_trajectory(rollout_dir, rollout)
    _build_rollout_result(rollout_dir, rollout)
    return rollout_dir


# Damage: one defect per function, applied to a written rollout directory ---------------------------


class damage:  # a namespace: `damage.strip_usage(run_dir, 1)`
    """Each function breaks one thing the experiment-review validator checks, and nothing else."""

    @staticmethod
    def delete(run_dir: Path, relative: str) -> None:
        """A required artifact is missing (e.g. "trajectory/llm_trajectory.jsonl")."""
        (run_dir / relative).unlink()

    @staticmethod
    def truncate_line(run_dir: Path, relative: str, line: int = -1) -> None:
        """A JSONL line cut in half, as a crash mid-write leaves it."""
        path = run_dir / relative
        lines = path.read_text().split("\n")
        lines[line] = lines[line][: len(lines[line]) // 2]
        path.write_text("\n".join(lines))

    @staticmethod
    def _edit_llm(run_dir: Path, index: int, edit: Any) -> None:
        path = run_dir / "trajectory" / "llm_trajectory.jsonl"
        records = [json.loads(line) for line in path.read_text().splitlines()]
        edit(records[index])
        path.write_text("\n".join(json.dumps(r) for r in records))

    @staticmethod
    def strip_usage(run_dir: Path, index: int) -> None:
        """One completed provider response without its usage block."""
        damage._edit_llm(run_dir, index, lambda r: r["response"]["body"].pop("usage"))

    @staticmethod
    def _edit_row(run_dir: Path, edit: Any) -> None:
        path = run_dir / "results.jsonl"
        row = json.loads(path.read_text())
        edit(row)
        path.write_text(json.dumps(row) + "\n")

    @staticmethod
    def set_training_ready(run_dir: Path, value: bool) -> None:
        """The row's info.training_ready flipped, nothing else changed."""
        damage._edit_row(run_dir, lambda row: row["info"].__setitem__("training_ready", value))

    @staticmethod
    def banned_message_key(run_dir: Path, key: str = "reasoning_content") -> None:
        """A banned key on the row's first completion message (private reasoning leaked)."""
        damage._edit_row(run_dir, lambda row: row["completion"][0].__setitem__(key, "thinking..."))

    @staticmethod
    def banned_row_key(run_dir: Path, key: str = "gold") -> None:
        """A banned top-level key on the training row (answer leakage)."""
        damage._edit_row(run_dir, lambda row: row.__setitem__(key, "the expected answer"))

    @staticmethod
    def mismatched_task(run_dir: Path, task: str = "another-task") -> None:
        """The row names another task than result.json."""
        damage._edit_row(run_dir, lambda row: row["info"].__setitem__("task_id", task))

    @staticmethod
    def drop_trajectory_step(run_dir: Path) -> None:
        """The row's trajectory loses its last step (steps != successful LLM responses)."""
        damage._edit_row(run_dir, lambda row: row["trajectory"].pop())

    @staticmethod
    def _edit_result(run_dir: Path, edit: Any) -> None:
        path = run_dir / "result.json"
        result = json.loads(path.read_text())
        edit(result)
        path.write_text(json.dumps(result, indent=2))

    @staticmethod
    def zero_tool_calls(run_dir: Path) -> None:
        """result.json reports no tool use."""
        damage._edit_result(run_dir, lambda result: result.__setitem__("n_tool_calls", 0))

    @staticmethod
    def drop_reward(run_dir: Path) -> None:
        """No verifier reward in result.json."""
        damage._edit_result(run_dir, lambda result: result.__setitem__("rewards", None))

    @staticmethod
    def drop_timing(run_dir: Path) -> None:
        """No started_at/finished_at/timing in result.json."""

        def edit(result: dict[str, Any]) -> None:
            for key in ("started_at", "finished_at", "timing"):
                result.pop(key)

        damage._edit_result(run_dir, edit)


# Ready-made descriptions: a small claude-agent-acp run that reads, fixes and re-runs a test ---------

TOOLS = ["bash", "str_replace_based_edit_tool", "finish"]


def fixing_run(task: str = "csv-dedupe", **overrides: Any) -> Rollout:
    """Four provider exchanges (three tool calls, then a final answer) and the matching ACP events."""
    calls = [
        ToolCall("call_1", "bash", {"command": "pytest -q tests/test_dedupe.py"}),
        ToolCall(
            "call_2", "str_replace_based_edit_tool", {"command": "str_replace", "path": "dedupe.py"}
        ),
        ToolCall("call_3", "bash", {"command": "pytest -q tests/test_dedupe.py"}),
    ]
    turns = [
        ("Running the tests first.", [calls[0]], ["1 failed, 2 passed"]),
        ("The key ignores case; fixing.", [calls[1]], ["The file dedupe.py has been edited."]),
        ("Re-running the tests.", [calls[2]], ["3 passed"]),
        ("Fixed: rows are now compared case-insensitively.", [], []),
    ]
    exchanges = conversation(
        "You are a coding agent.", "Fix the failing tests.", turns, tools=TOOLS
    )
    acp = [
        AcpEvent("agent_message", text="Running the tests first."),
        tool_event("call_1", "pytest -q tests/test_dedupe.py", "1 failed, 2 passed"),
        tool_event("call_2", "Edit dedupe.py", "The file dedupe.py has been edited.", kind="edit"),
        tool_event("call_3", "pytest -q tests/test_dedupe.py", "3 passed"),
        AcpEvent("agent_message", text="Fixed: rows are now compared case-insensitively."),
    ]
    description = Rollout(task, exchanges=exchanges, acp=acp, rewards={"reward": 1.0})
    for key, value in overrides.items():
        setattr(description, key, value)
    return description

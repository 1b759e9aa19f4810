"""One rollout directory written the way benchflow's rollout writers write it.

Each function mirrors one benchflow writer function and is named after it; the steps and their order
are the writer's, the code is ours. Mirrored at benchflow commit 17a3573b (branch
todo5/native-subscription-artifacts, 2026-08-22: the newest revision of the writers on any branch;
the rollout modules are identical on main 62cc7e41). Paths below are in benchflow's repository. What
each file holds and when it exists is summarised in /work/notes/rollout-writer.md.

A test describes a rollout with `Rollout` (task, agent, model, skill mode, `Exchange`s on the
agent's own wire, `AcpEvent`s, outcome) or takes `fixing_run(...)`, and calls
`write_rollout(jobs_dir, rollout)`: `_init_rollout`, `_write_config`, sandbox.json, the live ACP and
LLM trajectories, verify's agent/acp_trajectory.jsonl, `cleanup` (`_write_llm_trajectory`), then
`_build_rollout_result` (result.json, timing.json, prompts.json, rewards.jsonl, results.jsonl via
`build_rollout_results_record`). `write_job_results_jsonl` aggregates a job. `damage` holds one
function per defect class the experiment- review validator checks.

Not mirrored: `_write_trainer_artifact` (trainer/verifiers.jsonl, atif.json, adp.jsonl: no reviewer
reads them); secret redaction (`redact_trajectory_obj`: the identity on inputs that carry no secret,
so descriptions must not carry secret-shaped strings); the proxy-proven `provider api error` of
`_maybe_classify_api_error` (refused: pass the error and diagnostic yourself); multi-scene runs,
oracle runs, native-subscription (agent_native_acp) usage; Gemini's native GenerateContent capture
(gemini and pi-acp are written as chat completions, an assumption).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
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


# The description of one rollout -------------------------------------------------------------------


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
    timed_out_after: int | None = None  # the wall-clock budget ran out (acp/runtime.py:772)
    idle_after: int | None = None  # the idle watchdog fired after this many seconds (:880)
    verifier_timed_out_after: int | None = None  # the verifier's budget ran out (_setup.py:507)
    partial_trajectory: bool = False  # forced; otherwise derived as benchflow derives it
    # How far the lifecycle got: setup | start | execute | verify. "execute" means execute()
    # raised (ACP error, lost connection): no verify, and cleanup captures a partial trajectory.
    reached: str = "verify"
    oracle_return_code: int = 0  # agent "oracle": what oracle/solve.sh returned
    timeout_sec: int = 900
    agent_env: dict[str, str] = field(default_factory=dict)
    sandbox_id: str | None = None
    rollout_name: str | None = None
    job_name: str = "2026-11-03__09-12-44"
    duration: float | None = None  # started_at to finished_at; None = the phases + 2.83 s
    # what the task's verifier leaves in verifier/ (its own files, not benchflow's); None =
    # reward.txt
    verifier_outputs: dict[str, str] | None = None
    # the task's source provenance as artifact_source_provenance leaves it (no local_path); None = a
    # task without provenance, so neither config.json nor result.json carries `source`
    source: dict[str, Any] | None = None
    # the host skills dir a with-skill run was given (Rollout(skills_dir=...)): skill_source
    # custom_runtime; None = the task's bundled environment/skills
    skills_dir: str | None = None
    # effective_skills_dir of a task_bundled run: the temp copy of the task
    # (rollout/__init__.py:988), removed at cleanup (:2031); None = the relative
    # `tasks/<task>/environment/skills`
    bundled_skills_dir: str | None = None

    @property
    def name(self) -> str:
        """`<task>__<8 hex>` as `_init_rollout` names it; the hex is a digest of the description
        (not uuid4) so a scenario keeps its name and two different runs never share one."""
        if self.rollout_name:
            return self.rollout_name
        fields = {k: v for k, v in asdict(self).items() if k != "rollout_name"}
        digest = hashlib.sha256(
            json.dumps(fields, sort_keys=True, default=str).encode()
        ).hexdigest()
        return f"{self.task}__{digest[:8]}"


# Harness wire formats: what each agent sends through benchflow's LiteLLM proxy --------------------
#
# The agent registry names each harness's API protocol (agents/registry.py: claude-agent-acp
# "anthropic-messages", codex-acp "openai-responses"; OpenHands uses LiteLLM chat completions;
# pi-acp and gemini leave it to the provider). `_base_record` (providers/litellm_logging.py:235)
# keeps only model/messages/input/tools/stream of the call, so an Anthropic `system` and a Responses
# `instructions` never reach llm_trajectory.jsonl. Gemini's native GenerateContent capture is not
# reproduced: gemini (and pi-acp) are written as chat completions, an assumption, not the writer's.

WIRES = {"claude-agent-acp": "anthropic", "codex-acp": "responses"}
CALL_TYPES = {"chat": "acompletion", "anthropic": "anthropic_messages", "responses": "aresponses"}
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "bash": {"command": {"type": "string"}},
    "str_replace_based_edit_tool": {"command": {"type": "string"}, "path": {"type": "string"}},
    "read_file": {"path": {"type": "string"}},
    "Skill": {"skill": {"type": "string"}},
    "invoke_skill": {"name": {"type": "string"}},
    "activate_skill": {"name": {"type": "string"}},
    "finish": {"message": {"type": "string"}},
}


def wire_of(agent: str) -> str:
    return WIRES.get(agent, "chat")


def tool_def(name: str, wire: str = "chat") -> dict[str, Any]:
    """A request `tools` entry in the wire's own shape."""
    schema = {"type": "object", "properties": TOOL_SCHEMAS.get(name, {})}
    if wire == "anthropic":
        return {"name": name, "description": f"{name} tool", "input_schema": schema}
    if wire == "responses":
        return {
            "type": "function",
            "name": name,
            "description": f"{name} tool",
            "parameters": schema,
        }
    function = {"name": name, "description": f"{name} tool", "parameters": schema}
    return {"type": "function", "function": function}


#: Where each harness keeps its own (harness-global) skills, outside benchflow's /skills mount: the
#: SOP's Codex sample lists `/home/agent/.codex/skills/.system/<name>/SKILL.md`; the others are
#: ours.
HARNESS_SKILL_ROOTS = {
    "codex-acp": "/home/agent/.codex/skills/.system",
    "claude-agent-acp": "/home/agent/.claude/skills",
    "gemini": "/home/agent/.gemini/skills",
    "openhands": "/home/agent/.openhands/skills",
    "pi-acp": "/home/agent/.pi/skills",
}


def skill_path(agent: str, skill: str, harness_skills: tuple[str, ...] = ()) -> str:
    """A skill's SKILL.md: under benchflow's `/skills` mount, or the harness's own root for a
    harness-global skill (one named in `harness_skills`)."""
    root = (
        HARNESS_SKILL_ROOTS.get(agent, "/home/agent/.skills")
        if skill in harness_skills
        else "/skills"
    )
    return f"{root}/{skill}/SKILL.md"


def skill_catalog_text(
    agent: str, catalog: list[tuple[str, str]], harness_skills: tuple[str, ...] = ()
) -> str:
    """The startup skill catalog as each harness renders it (the experiment-review skill's
    references/harness-skill-catalog-sop.md); pi-acp serialises none."""
    if not catalog or agent == "pi-acp":
        return ""
    if agent == "openhands":
        items = "".join(
            f"<skill><name>{n}</name><description>{d}</description></skill>" for n, d in catalog
        )
        return (
            "<SKILLS>\nThe following skills are available. To use a skill, call "
            f'invoke_skill(name="...").\n<available_skills>{items}</available_skills>\n</SKILLS>'
        )
    if agent == "claude-agent-acp":
        bullets = "\n".join(f"- {n}: {d}" for n, d in catalog)
        return (
            "<system-reminder>\nThe following skills are available for use with the Skill tool:"
            f"\n\n{bullets}\n</system-reminder>"
        )
    if agent == "codex-acp":
        bullets = "\n".join(
            f"- {n}: {d} (file: {skill_path(agent, n, harness_skills)})" for n, d in catalog
        )
        return (
            f"<skills_instructions>\n## Skills\n"
            f"### Available skills\n{bullets}\n</skills_instructions>"
        )
    items = "".join(
        f"<skill><name>{n}</name><description>{d}</description>"
        f"<location>{skill_path(agent, n, harness_skills)}</location></skill>"
        for n, d in catalog
    )
    return f"# Available Agent Skills\n<available_skills>{items}</available_skills>"


SYSTEM_PROMPTS = {
    "openhands": "You are OpenHands agent, a helpful AI assistant.",
    "claude-agent-acp": "You are Claude Code, Anthropic's official CLI for Claude.",
    "codex-acp": "You are Codex, a coding agent.",
    "gemini": "You are Gemini CLI, an interactive CLI agent.",
    "pi-acp": "You are pi, a coding agent harness.",
}


def start_history(
    agent: str, prompt: str, catalog: list[tuple[str, str]], harness_skills: tuple[str, ...] = ()
) -> list[dict[str, Any]]:
    """The first request's messages (or Responses `input`), catalog included where it shows."""
    system = SYSTEM_PROMPTS.get(agent, "You are a coding agent.")
    shown = skill_catalog_text(agent, catalog, harness_skills)
    wire = wire_of(agent)
    if wire == "anthropic":  # `system` is dropped by _base_record; Claude Code's reminder is not
        blocks = [{"type": "text", "text": shown}] if shown else []
        return [{"role": "user", "content": [*blocks, {"type": "text", "text": prompt}]}]
    if wire == "responses":
        developer = shown or "Follow the repository's conventions."
        return [
            {"role": "developer", "content": [{"type": "input_text", "text": developer}]},
            {"role": "user", "content": [{"type": "input_text", "text": prompt}]},
        ]
    text = f"{system}\n{shown}" if shown else system
    return [{"role": "system", "content": text}, {"role": "user", "content": prompt}]


def turn_messages(
    wire: str, reply: str, calls: list[ToolCall], outputs: list[str]
) -> list[dict[str, Any]]:
    """What the next request appends after a response: the assistant turn and each call's output."""
    if wire == "anthropic":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": reply}] if reply else []
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in calls
        ]
        results = [
            {"type": "tool_result", "tool_use_id": c.id, "content": o}
            for c, o in zip(calls, outputs, strict=True)
        ]
        return [{"role": "assistant", "content": blocks}] + (
            [{"role": "user", "content": results}] if results else []
        )
    if wire == "responses":
        items: list[dict[str, Any]] = []
        if reply:
            text = [{"type": "output_text", "text": reply}]
            items.append({"type": "message", "role": "assistant", "content": text})
        for call, output in zip(calls, outputs, strict=True):
            arguments = json.dumps(call.arguments)
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": arguments,
                }
            )
            items.append({"type": "function_call_output", "call_id": call.id, "output": output})
        return items
    assistant: dict[str, Any] = {"role": "assistant", "content": reply}
    if calls:
        assistant["tool_calls"] = [_chat_tool_call(c) for c in calls]
    tools = [
        {"role": "tool", "tool_call_id": c.id, "content": o}
        for c, o in zip(calls, outputs, strict=True)
    ]
    return [assistant, *tools]


def _chat_tool_call(call: ToolCall) -> dict[str, Any]:
    function = {"name": call.name, "arguments": json.dumps(call.arguments)}
    return {"id": call.id, "type": "function", "function": function}


def default_usage(wire: str, n_messages: int) -> dict[str, Any]:
    """Provider usage in the wire's own keys: 1200 + 350 per history item in, 180 out."""
    prompt = 1200 + 350 * n_messages
    if wire == "anthropic":
        return {"input_tokens": prompt, "output_tokens": 180}
    if wire == "responses":
        return {"input_tokens": prompt, "output_tokens": 180, "total_tokens": prompt + 180}
    return {"prompt_tokens": prompt, "completion_tokens": 180, "total_tokens": prompt + 180}


def conversation(
    agent: str,
    prompt: str,
    turns: list[tuple[str, list[ToolCall], list[str]]],
    *,
    tools: list[str],
    catalog: list[tuple[str, str]] | None = None,
    usage: list[dict[str, Any] | None] | None = None,
    harness_skills: tuple[str, ...] = (),
) -> list[Exchange]:
    """Exchanges an agent harness sends: each request carries the whole history so far.

    A turn is (reply, tool calls, their outputs); the next request appends the assistant turn and
    each call's output, so a response's call ids are consumed by the following request (what
    `_training_success_exchange_indices` keys on for the chat and Responses wires).
    """
    wire = wire_of(agent)
    history = start_history(agent, prompt, catalog or [], harness_skills)
    out: list[Exchange] = []
    for index, (reply, calls, outputs) in enumerate(turns):
        tokens = usage[index] if usage is not None else default_usage(wire, len(history))
        out.append(Exchange(list(history), tools, reply, calls, tokens))
        history = history + turn_messages(wire, reply, calls, outputs)
    return out


def skill_call(
    agent: str, skill: str, call_id: str, harness_skills: tuple[str, ...] = ()
) -> tuple[ToolCall, AcpEvent, str]:
    """How each harness loads a skill, as a provider tool call and the ACP event benchflow records
    (the envelopes `is_skill_invocation_event` knows, trajectories/metrics.py:133). Codex and pi
    read the SKILL.md file, which benchflow does not count as an invocation."""
    path = skill_path(agent, skill, harness_skills)
    if agent == "openhands":
        text = f"Tool: invoke_skill\n[skill: {skill}] loaded"
        call = ToolCall(call_id, "invoke_skill", {"name": skill})
        return call, tool_event(call_id, "invoke_skill", text, kind="other"), text
    if agent == "claude-agent-acp":
        text = f"Launching skill: {skill}"
        call = ToolCall(call_id, "Skill", {"skill": skill})
        return call, tool_event(call_id, "Skill", text, kind="other"), text
    if agent == "gemini":
        text = f'<activated_skill name="{skill}">instructions</activated_skill>'
        call = ToolCall(call_id, "activate_skill", {"name": skill})
        return call, tool_event(call_id, "activate_skill", text, kind="other"), text
    text = f"---\nname: {skill}\n---\ninstructions"
    call = ToolCall(call_id, "bash", {"command": f"cat {path}"})
    return call, tool_event(call_id, f"cat {path}", text, kind="read"), text


# _init_rollout: src/benchflow/rollout/_setup.py:256 -----------------------------------------------


def _init_rollout(jobs_dir: Path, rollout: Rollout) -> Path:
    """`jobs/<job>/<task>__<8 hex>/` and its four empty subdirectories, before anything else."""
    rollout_dir = jobs_dir / rollout.job_name / rollout.name
    rollout_dir.mkdir(parents=True, exist_ok=True)
    for subdir in ("agent", "verifier", "artifacts", "trajectory"):
        (rollout_dir / subdir).mkdir(exist_ok=True)
    return rollout_dir


# TaskSkillPolicy.config_metadata: src/benchflow/skill_policy.py:60 + resolve_task_skill_policy :107
# --


def skill_metadata(rollout: Rollout) -> dict[str, Any]:
    """with-skill mounts the task's bundled `environment/skills` at `/skills`, or the runtime skills
    dir it was given (custom_runtime, also at `/skills`, include_task_skills false); no-skill mounts
    none."""
    if rollout.skill_mode == "with-skill" and rollout.skills_dir is not None:
        return {
            "skill_mode": "with-skill",
            "skill_source": "custom_runtime",
            "requested_skills_dir": rollout.skills_dir,
            "effective_skills_dir": rollout.skills_dir,
            "skills_sandbox_dir": "/skills",
            "include_task_skills": False,
        }
    if rollout.skill_mode == "with-skill":
        return {
            "skill_mode": "with-skill",
            "skill_source": "task_bundled",
            "requested_skills_dir": None,
            "effective_skills_dir": rollout.bundled_skills_dir
            or f"tasks/{rollout.task}/environment/skills",
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


# The task's source provenance: src/benchflow/_utils/benchmark_repos.py task_file_hashes :281,
# _source_provenance :301, task_source_provenance :373; artifact_source_provenance
# (source_provenance.py :153) drops local_path before config.json and result.json carry it
# -------------------------------


def write_task(root: Path, task: str, skills: dict[str, str]) -> Path:
    """A benchflow task directory (task.toml, instruction.md, environment/, tests/, solution/) whose
    bundled skills are `environment/skills/<name>/SKILL.md`, where `task_bundled_skills_dir`
    looks."""
    task_dir = root / task
    files = {
        "task.toml": f'version = "1.0"\n\n[metadata]\nname = "{task}"\n',
        "instruction.md": "Fix the failing tests.\n",
        "environment/Dockerfile": "FROM python:3.12-slim\nCOPY . /app\n",
        "tests/test.sh": "#!/bin/bash\npytest -q /tests\n",
        "solution/solve.sh": "#!/bin/bash\ntrue\n",
        **{f"environment/skills/{name}/SKILL.md": text for name, text in skills.items()},
    }
    for relative, text in files.items():
        (task_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        (task_dir / relative).write_text(text)
    return task_dir


def task_file_hashes(task_path: Path) -> dict[str, str]:
    """SHA-256 of every regular file under the task, by its posix path relative to the task."""
    if task_path.is_symlink():
        raise ValueError(f"Task path {task_path} must not be a symlink")
    hashes: dict[str, str] = {}
    for path in sorted(task_path.rglob("*")):
        if path.is_symlink():
            raise ValueError(f"Task path {task_path} contains symlink {path}")
        if not path.is_file():
            continue
        parts = path.relative_to(task_path).parts
        if parts == (".benchflow-source.json",) or ".git" in parts or "__pycache__" in parts:
            continue
        hashes[Path(*parts).as_posix()] = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def task_source(task_dir: Path, repo: str = "benchflow-ai/skillsbench", path: str = "") -> dict:
    """The artifact form of a GitHub task's provenance: what config.json and result.json carry."""
    return {
        "type": "github",
        "repo": repo,
        "requested_ref": "main",
        "resolved_sha": "4f1c2a9e" * 5,
        "path": path or f"tasks/{task_dir.name}",
        "dirty": False,
        "file_hashes": task_file_hashes(task_dir),
    }


def _is_secret_env_key(name: str) -> bool:
    """rollout/_results.py:98 (substring denylist, :83)."""
    secret = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIALS", "COOKIE", "AUTHORIZATION")
    return any(s in name.upper() for s in (*secret, "AUTH", "BEARER", "SESSION"))


# _write_config: src/benchflow/rollout/_results.py:136 (called from Rollout.setup, __init__.py:1062)
# -


def _write_config(rollout_dir: Path, rollout: Rollout) -> dict[str, Any]:
    """config.json: `json.dumps(indent=2)`, insertion order, no trailing newline; secrets
    dropped."""
    transport = {"docker": "docker-stdio", "daytona": "ssh" if rollout.agent == "gemini" else "pty"}
    config = {
        # artifact_source["path"] when the task has provenance, else task_path.name
        "task_path": (rollout.source or {}).get("path") or rollout.task,
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
    if rollout.source is not None:  # artifact_source: the task's provenance without local_path
        config["source"] = rollout.source
    (rollout_dir / "config.json").write_text(json.dumps(config, indent=2))
    return config


def persist_sandbox_info(rollout_dir: Path, rollout: Rollout) -> None:
    """sandbox/metadata.py:14: sandbox.json once the sandbox exists, only when it has a string
    id."""
    if rollout.sandbox_id is None:
        return
    provider = {"daytona": "DaytonaSandbox", "docker": "DockerSandbox"}[rollout.environment]
    info = {"sandbox_id": rollout.sandbox_id, "provider": provider, "created_at": str(STARTED_AT)}
    (rollout_dir / "sandbox.json").write_text(json.dumps(info, indent=2))


# The ACP trajectory: TrajectoryWriter (trajectories/_capture.py:127) ------------------------------


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


# The LLM trajectory: LiteLLM callback -> Trajectory.to_jsonl (trajectories/types.py:677) ----------


def response_body(exchange: Exchange, index: int, rollout: Rollout, wire: str) -> dict[str, Any]:
    """The provider's response as LiteLLM's `_jsonable` leaves it, in the wire's own shape."""
    calls = exchange.tool_calls
    if wire == "anthropic":
        blocks: list[dict[str, Any]] = (
            [{"type": "text", "text": exchange.reply}] if exchange.reply else []
        )
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in calls
        ]
        body: dict[str, Any] = {
            "id": f"msg_{index:04d}",
            "type": "message",
            "role": "assistant",
            "model": rollout.model,
            "content": blocks,
            "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None,
        }
    elif wire == "responses":
        output: list[dict[str, Any]] = []
        if exchange.reply:
            text = [{"type": "output_text", "text": exchange.reply, "annotations": []}]
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{index:04d}",
                    "role": "assistant",
                    "status": "completed",
                    "content": text,
                }
            )
        output += [
            {
                "type": "function_call",
                "id": f"fc_{c.id}",
                "call_id": c.id,
                "name": c.name,
                "arguments": json.dumps(c.arguments),
                "status": "completed",
            }
            for c in calls
        ]
        body = {
            "id": f"resp_{index:04d}",
            "object": "response",
            "status": "completed",
            "model": rollout.model,
            "output": output,
            "incomplete_details": None,
        }
    else:
        message: dict[str, Any] = {"content": exchange.reply or None, "role": "assistant"}
        if calls:
            message["tool_calls"] = [
                {
                    "function": {"arguments": json.dumps(c.arguments), "name": c.name},
                    "id": c.id,
                    "type": "function",
                }
                for c in calls
            ]
        message["function_call"] = None  # LiteLLM's Message carries both; Prime-SFT drops them
        message["provider_specific_fields"] = None
        choice = {
            "finish_reason": "tool_calls" if calls else "stop",
            "index": 0,
            "message": message,
        }
        body = {
            "id": f"chatcmpl-{index:04d}",
            "created": int(exchange_times(rollout, index)[0].timestamp()),
            "model": rollout.model,
            "object": "chat.completion",
            "choices": [choice],
        }
    if exchange.usage is not None:
        body["usage"] = exchange.usage
    return body


def exchange_times(rollout: Rollout, index: int) -> tuple[datetime, datetime]:
    """Provider calls spread evenly over agent_execution, after environment and agent setup."""
    phases = phase_seconds(rollout)
    began = phases.get("environment_setup", 0.0) + phases.get("agent_setup", 0.0)
    step = phases.get("agent_execution", 60.0) / (len(rollout.exchanges) + 1)
    start = STARTED_AT + timedelta(seconds=began + step * index + 1.0)
    return start, start + timedelta(seconds=min(6.0, step / 2))


def exchange_record(exchange: Exchange, index: int, rollout: Rollout) -> dict[str, Any]:
    """`LLMExchange.model_dump(mode="json")` of what `trajectory_from_litellm_callback_log`
    (providers/litellm_logging.py:569) builds: request body from `_base_record` (model, messages or
    input, tools, stream; None dropped), response body from `_record_response_body` (usage folded
    in, model added, `{"raw": null}` plus `error` on a failure), empty headers, metadata from
    `_exchange_metadata`."""
    wire = wire_of(rollout.agent)
    start, end = exchange_times(rollout, index)
    history_key = "input" if wire == "responses" else "messages"
    request_body: dict[str, Any] = {"model": rollout.model, history_key: exchange.messages}
    if exchange.tools:
        request_body["tools"] = [tool_def(name, wire) for name in exchange.tools]
    if wire != "chat":
        request_body["stream"] = True
    request_body = {k: v for k, v in request_body.items() if v is not None}
    if exchange.status_code == 200:
        body = response_body(exchange, index, rollout, wire)
    else:
        body = {"raw": None, "model": rollout.model}
        body["error"] = {"type": "APIError", "message": exchange.error or "LiteLLM error"}
        body["error"]["traceback"] = ""
    return {
        "request": {
            "timestamp": start.isoformat(),
            "method": "POST",
            "path": "/v1/messages" if wire == "anthropic" else "/v1/chat/completions",
            "headers": {},
            "body": request_body,
        },
        "response": {
            "timestamp": end.isoformat(),
            "status_code": exchange.status_code,
            "headers": {},
            "body": body,
        },
        "duration_ms": (end - start).total_seconds() * 1000,
        "metadata": {
            "request_model": rollout.model,
            "provider_model": rollout.model,
            "call_type": CALL_TYPES[wire],
            "input_shape": {
                "has_messages": wire != "responses",
                "has_input": wire == "responses",
                "n_messages": 0 if wire == "responses" else len(exchange.messages),
            },
            "call_purpose": "agent",  # call_purpose.infer_call_purpose: "agent" but for opencode
        },
    }


# Rollout._write_llm_trajectory: src/benchflow/rollout/__init__.py:2486 ----------------------------


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
    """trajectories/types.py:93, for an OpenAI/Anthropic-style `usage` block: input includes
    cache."""
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
    """Rollout._usage_tracking_metadata (__init__.py:2524) +
    UsageTrackingConfig.to_result_metadata."""
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


# Error classification: src/benchflow/_utils/scoring.py:119 and :208 -------------------------------


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


# Skill invocations: trajectories/metrics.py:133 is_skill_invocation_event -------------------------

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


# _build_rollout_result: src/benchflow/rollout/_results.py:259 -------------------------------------


def trajectory_summary(events: list[dict[str, Any]], partial: bool, source: str | None) -> dict:
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
        "partial_trajectory": partial,
        "trajectory_source": source,
    }


def committed(rollout: Rollout) -> bool:
    """Whether execute() committed its ACP snapshot (`_commit_acp_execution`, __init__.py:1641):
    on completion and on a BenchFlow wall-clock timeout (:1617), not when it raised otherwise."""
    if rollout.agent == "oracle" or rollout.reached not in {"execute", "verify"}:
        return False
    return rollout.reached == "verify" and rollout.idle_after is None


def outcome(rollout: Rollout) -> dict[str, Any]:
    """Rollout._run_lifecycle (__init__.py:2100), _record_agent_timeout (:2064), execute (:1564),
    cleanup's _capture_partial_acp_trajectory (:1491), _verify_rollout (_setup.py:451) and
    _maybe_classify_api_error (:2546): what the result is built from."""
    executed = rollout.reached in {"execute", "verify"}
    error, diagnostics = rollout.error, dict(rollout.diagnostics)
    rewards = rollout.rewards if rollout.reached == "verify" else None
    verifier_error = rollout.verifier_error
    if rollout.agent == "oracle":  # _run_oracle (_setup.py:369): one event, agent_name "oracle"
        events: list[dict[str, Any]] = []
        if executed:
            stdout = "oracle solve.sh output"
            command = "oracle/solve.sh"
            code = rollout.oracle_return_code
            events = [{"type": "oracle", "command": command, "return_code": code, "stdout": stdout}]
    else:
        events = acp_events(rollout) if executed else []
    timed_out = rollout.timed_out_after is not None or rollout.idle_after is not None
    n_tool_calls = sum(1 for e in events if e.get("type") == "tool_call")
    if rollout.timed_out_after is not None:
        error = error or f"Agent prompt exceeded wall-clock budget {rollout.timed_out_after}s"
        diagnostics["agent_timeout_info"] = {
            "reason": "wall_clock_timeout",
            "timeout_sec": float(rollout.timed_out_after),
            "n_tool_calls": n_tool_calls,
            "pending_tool_call_ids": pending_tool_calls(rollout),
            "terminal_event_recorded": True,
            "terminal_trajectory_complete": not pending_tool_calls(rollout),
        }
    if rollout.idle_after is not None:
        idle = rollout.idle_after
        error = error or (
            f"Agent idle for {idle}s with no new tool call, message, or thought "
            f"(last activity {idle}s ago, {n_tool_calls} tool calls so far)"
        )
        diagnostics["idle_timeout_info"] = {
            "reason": "idle_timeout",
            "idle_timeout_sec": idle,
            "idle_duration_sec": idle,
            "wall_clock_elapsed_sec": int(phase_seconds(rollout)["agent_execution"]),
            "n_tool_calls": n_tool_calls,
            "n_message_chunks": sum(1 for e in rollout.acp if e.type == "agent_message"),
            "n_thought_chunks": sum(1 for e in rollout.acp if e.type == "agent_thought"),
            "last_activity_at": "2026-11-03T09:17:20.114002+00:00",
        }
    if rollout.verifier_timed_out_after is not None and rollout.reached == "verify":
        budget = rollout.verifier_timed_out_after
        verifier_error = verifier_error or f"verifier timed out after {budget}s"
        rewards = None
        diagnostics["verifier_timeout_info"] = {
            "timeout_budget_sec": float(budget),
            "elapsed_sec": round(phase_seconds(rollout)["verifier"], 1),
            "task_name": rollout.task,
        }
    elif verifier_error:
        rewards = None  # a crashed verifier returns no rewards
    if timed_out and rollout.reached == "verify" and rewards is None and verifier_error is None:
        rewards = {"reward": 0.0}  # __init__.py:2161: a timed-out agent the verifier left unscored
    if error is None and committed(rollout) and extract_usage(rollout)["total_tokens"] == 0:
        failed = sum(1 for e in rollout.exchanges if e.status_code != 200)
        if failed and failed == len(rollout.exchanges):
            raise ValueError(
                "every provider call failed with no error set: benchflow writes a 'provider api "
                "error [...]' error and api_error_info here, which this writer does not derive; "
                "pass Rollout.error and Rollout.diagnostics['api_error_info'] yourself"
            )
        if n_tool_calls == 0:  # _usage.classify_api_failure: the zero-signal heuristic
            error = (
                "suspected provider api error: agent ended with zero tokens "
                "and zero tool calls (no scoreable model activity)"
            )
            diagnostics["suspected_api_error_info"] = {
                "total_tokens": 0,
                "n_tool_calls": 0,
                "total_requests": len(rollout.exchanges),
                "failed_requests": failed,
            }
            rewards = None  # unhealthy by definition: the slot leaves the score denominators
    # A wall-clock timeout with calls in flight commits a partial snapshot; an execute() that
    # raised leaves its whole session for cleanup to capture, which marks it partial.
    partial = rollout.partial_trajectory or bool(
        (rollout.timed_out_after is not None and pending_tool_calls(rollout))
        or (executed and rollout.agent != "oracle" and not committed(rollout) and events)
    )
    if rollout.agent == "oracle" or not executed:
        source: str | None = None
    else:
        source = "partial_acp" if partial else "acp"
    return {
        "events": events,
        "error": error,
        "verifier_error": verifier_error,
        "rewards": rewards,
        "diagnostics": diagnostics,
        "source": source,
        "partial": partial,
        "n_tool_calls": n_tool_calls,
    }


def phase_seconds(rollout: Rollout) -> dict[str, float]:
    """The phases' own timings in the order they set them (environment_setup in start,
    agent_setup in connect, agent_execution when execute commits, verifier in verify), unrounded."""
    out: dict[str, float] = {}
    if rollout.reached != "setup":
        out["environment_setup"] = 41.23
    if rollout.reached in {"execute", "verify"} and rollout.agent != "oracle":
        out["agent_setup"] = 12.48
        budget = rollout.timed_out_after or rollout.idle_after
        out["agent_execution"] = float(budget or 290.02)
    if rollout.reached == "verify":
        out["verifier"] = float(rollout.verifier_timed_out_after or 31.77)
    return out


def timing(rollout: Rollout) -> dict[str, float]:
    """_results.py:355: `total` set last, then every entry rounded to 0.1 s; agent_execution only
    when execute() committed (an idle timeout or ACP error leaves none)."""
    out = phase_seconds(rollout)
    if not committed(rollout):
        out.pop("agent_execution", None)
    out["total"] = total_seconds(rollout)
    return {k: round(v, 1) for k, v in out.items()}


def total_seconds(rollout: Rollout) -> float:
    """finished_at - started_at: the phases plus setup/install/teardown overhead."""
    if rollout.duration is not None:
        return rollout.duration
    return sum(phase_seconds(rollout).values()) + 2.83


def _build_rollout_result(rollout_dir: Path, rollout: Rollout) -> dict[str, Any]:
    """Writes, in order: trajectory/acp_trajectory.jsonl (final), result.json, timing.json,
    prompts.json, rewards.jsonl (when rewards has events), then results.jsonl. Returns
    result.json."""
    facts = outcome(rollout)
    finished_at = STARTED_AT + timedelta(seconds=total_seconds(rollout))
    usage = extract_usage(rollout)
    events = facts["events"]
    n_skill = sum(1 for e in events if is_skill_invocation_event(e))
    error, verifier_error = facts["error"], facts["verifier_error"]
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
    if agent_name is None:  # what ACP initialize reports; _run_oracle returns "oracle"
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
        "trajectory_summary": trajectory_summary(events, facts["partial"], facts["source"]),
        "usage_tracking": usage_tracking_metadata(rollout, usage),
        "error": error,
        "error_category": error_category,
        "verifier_error": verifier_error,
        "verifier_error_category": classify_verifier_error(verifier_error),
        "export_error": None,
        **{f: facts["diagnostics"].get(f) for f in DIAGNOSTIC_FIELDS},
        "partial_trajectory": facts["partial"],
        "trajectory_source": facts["source"],
        "started_at": str(STARTED_AT),
        "finished_at": str(finished_at),
        "timing": times,
        "scenes": [],
        "loop": {"strategy": "single-shot"},
        **({"source": rollout.source} if rollout.source is not None else {}),
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
        partial_trajectory=facts["partial"],
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
                text = item.get("text")
                if text is None:
                    text = item.get("content")
                if isinstance(text, str):
                    parts.append(text)
        return "\n".join(parts)
    return str(content)


def _json_tool_call_arguments(arguments: Any) -> str:
    """:250 (no secret in our inputs, so redaction changes nothing and a JSON-object string stays
    byte for byte)."""
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            parsed = {"_malformed_json_arguments": arguments}
        else:
            if isinstance(parsed, dict):
                return arguments
            parsed = {"_non_object_json_arguments": parsed}
    elif isinstance(arguments, dict):
        parsed = arguments
    elif arguments is None:
        parsed = {}
    else:
        parsed = {"_non_object_arguments": arguments}
    return json.dumps(parsed, allow_nan=False, default=str)


def _normalize_tool_call(call: dict[str, Any], index: int = 0) -> dict[str, Any]:
    """:274."""
    function = call.get("function")
    if not isinstance(function, dict):
        function = {}
    name = function.get("name") or call.get("name") or "tool"
    arguments = function.get("arguments", call.get("arguments", {}))
    return {
        "id": str(call.get("id") or call.get("tool_call_id") or f"call_{index:06d}"),
        "type": "function",
        "function": {"name": str(name), "arguments": _json_tool_call_arguments(arguments)},
    }


def _normalize_message(message: dict[str, Any], index: int) -> dict[str, Any]:
    """:292: Responses function_call / function_call_output items become assistant / tool
    messages; otherwise role, tool_call_id (tool), content as text, tool_calls. Every other key
    (function_call, provider_specific_fields, reasoning_content, ...) is dropped."""
    if message.get("type") == "function_call":
        call = {
            "id": message.get("call_id") or message.get("id"),
            "type": "function",
            "function": {"name": message.get("name"), "arguments": message.get("arguments", {})},
        }
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [_normalize_tool_call(call, index)],
        }
    if message.get("type") == "function_call_output":
        return {
            "role": "tool",
            "tool_call_id": str(message.get("call_id") or message.get("id") or ""),
            "content": _content_to_text(message.get("output")),
        }
    role = message.get("role")
    role = (
        "system" if role == "developer" else "assistant" if role == "model" else str(role or "user")
    )
    out: dict[str, Any] = {"role": role}
    if role == "tool" and message.get("tool_call_id") is not None:
        out["tool_call_id"] = str(message["tool_call_id"])
    out["content"] = _content_to_text(message.get("content"))
    calls = message.get("tool_calls")
    if calls is None and isinstance(message.get("function_call"), dict):
        calls = [message["function_call"]]
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [
            _normalize_tool_call(c, i) for i, c in enumerate(calls) if isinstance(c, dict)
        ]
    return out


def _tool_defs_from_body(body: dict[str, Any]) -> list[dict[str, Any]]:
    """:414: every wire's tools as chat-completions function tools (Anthropic's `input_schema` is
    not read: its tools get the empty default parameters)."""
    tools = []
    for item in body.get("tools") or body.get("tool_defs") or []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("function"), dict):
            function = dict(item["function"])
        else:
            function = {
                "name": item.get("name"),
                "description": item.get("description", ""),
                "parameters": item.get("parameters", {"type": "object", "properties": {}}),
            }
        if not function.get("name"):
            continue
        function.setdefault("description", "")
        function.setdefault("parameters", {"type": "object", "properties": {}})
        tools.append({"type": "function", "function": function})
    return tools


def _assistant_from_responses_response(body: dict[str, Any]) -> dict[str, Any] | None:
    """:501."""
    output = body.get("output")
    if not isinstance(output, list):
        return None
    texts, calls = [], []
    for item in output:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts.append(_content_to_text(item.get("content")))
        elif item.get("type") in {"function_call", "tool_call"}:
            function = {"name": item.get("name"), "arguments": item.get("arguments", {})}
            calls.append({"id": item.get("call_id") or item.get("id"), "function": function})
    if not texts and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": "\n".join(t for t in texts if t)}
    if calls:
        message["tool_calls"] = [_normalize_tool_call(c, i) for i, c in enumerate(calls)]
    return message


def _assistant_from_chat_response(body: dict[str, Any]) -> dict[str, Any] | None:
    """:478: the first choice's message, else `message`, else Anthropic content blocks (:440,
    tool_use blocks kept as tool calls), else a Responses output."""
    choices = body.get("choices")
    if isinstance(choices, list) and choices:
        first = choices[0]
        if isinstance(first, dict) and isinstance(first.get("message"), dict):
            return _normalize_message(first["message"], 0)
    if isinstance(body.get("message"), dict):
        return _normalize_message(body["message"], 0)
    content = body.get("content")
    if content:
        if not isinstance(content, list):
            return {"role": "assistant", "content": _content_to_text(content)}
        calls = [
            {
                "id": b.get("id"),
                "function": {"name": b.get("name"), "arguments": b.get("input", {})},
            }
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        message: dict[str, Any] = {"role": "assistant", "content": _content_to_text(content)}
        if calls:
            message["tool_calls"] = [_normalize_tool_call(c, i) for i, c in enumerate(calls)]
        return message
    return _assistant_from_responses_response(body)


def _exchange_to_messages_and_tools(
    exchange: dict[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """:540: a body with `messages` is chat (or Anthropic); otherwise Responses `instructions` +
    `input`. Reasoning items are skipped; a system message after index 0 becomes user (:341)."""
    request = exchange.get("request") if isinstance(exchange.get("request"), dict) else {}
    response = exchange.get("response") if isinstance(exchange.get("response"), dict) else {}
    body = request.get("body") if isinstance(request.get("body"), dict) else {}
    reply = response.get("body") if isinstance(response.get("body"), dict) else {}
    if "messages" in body:
        raw = body["messages"] if isinstance(body["messages"], list) else []
        messages = [
            _normalize_message(m, i)
            for i, m in enumerate(raw)
            if isinstance(m, dict) and m.get("type") != "reasoning"
        ]
        assistant = _assistant_from_chat_response(reply)
    else:
        messages = []
        if body.get("instructions"):
            messages.append({"role": "system", "content": _content_to_text(body["instructions"])})
        raw_input = body.get("input")
        if isinstance(raw_input, str):
            messages.append({"role": "user", "content": raw_input})
        elif isinstance(raw_input, list):
            messages += [
                _normalize_message(m, i)
                for i, m in enumerate(raw_input)
                if isinstance(m, dict) and m.get("type") != "reasoning"
            ]
        assistant = _assistant_from_responses_response(reply)
    if assistant is None:
        return [], [], "no_assistant"
    messages.append(assistant)
    messages = [
        {**m, "role": "user"} if m.get("role") == "system" and i else dict(m)
        for i, m in enumerate(messages)
    ]
    return messages, _tool_defs_from_body(body), None


def _align_legacy_tool_call_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:693: consecutive tool messages for one id are merged; a tool message whose id no pending
    call has takes over the oldest pending call's id."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for raw in messages:
        message = json.loads(json.dumps(raw))
        if message.get("role") == "assistant" and isinstance(message.get("tool_calls"), list):
            pending.extend(c for c in message["tool_calls"] if isinstance(c, dict))
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if out and out[-1].get("role") == "tool" and out[-1].get("tool_call_id") == call_id:
                joined = (
                    _content_to_text(out[-1].get("content")),
                    _content_to_text(message.get("content")),
                )
                out[-1]["content"] = "\n".join(p for p in joined if p)
                continue
            match = next((i for i, c in enumerate(pending) if c.get("id") == call_id), None)
            if match is not None:
                pending.pop(match)
            elif pending and call_id:
                pending.pop(0)["id"] = call_id
        out.append(message)
    return out


BANNED_ROW_KEYS = {"gold", "gold_solution", "verify_source", "tools_py", "initial_db", "db_json"}
BANNED_ROW_KEYS |= {"target_constants", "private_reasoning", "reasoning_content", "thinking_blocks"}
BANNED_MESSAGE_KEYS = {"reasoning_content", "thinking_blocks", "private_reasoning"}
BANNED_MESSAGE_KEYS |= {"provider_specific_fields", "function_call"}


def validate_prime_sft_row(row: dict[str, Any], row_num: int = 1) -> None:
    """:791, raising ValueError with the writer's sentence on the first defect."""
    leaked = sorted(BANNED_ROW_KEYS.intersection(row))
    if leaked:
        raise ValueError(f"row {row_num}: banned leakage keys present: {', '.join(leaked)}")
    messages = row.get("messages")
    if not (isinstance(messages, list) and messages):
        prompt, completion = row.get("prompt"), row.get("completion")
        messages = (
            prompt + completion if isinstance(prompt, list) and isinstance(completion, list) else []
        )
    if not messages:
        raise ValueError(f"row {row_num}: expected non-empty messages or prompt+completion lists")
    tools = row.get("tool_defs", row.get("tools"))
    if tools is not None and not isinstance(tools, list):
        raise ValueError(f"row {row_num}: tool_defs/tools must be a list")
    known = {
        (t.get("function") or {}).get("name")
        if isinstance(t.get("function"), dict)
        else t.get("name")
        for t in tools or []
        if isinstance(t, dict)
    } - {None, ""}
    pending: set[str] = set()
    for idx, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"row {row_num}: messages[{idx}] must be object")
        banned = sorted(BANNED_MESSAGE_KEYS.intersection(message))
        if banned:
            raise ValueError(f"row {row_num}: messages[{idx}] has banned keys: {', '.join(banned)}")
        role = message.get("role")
        if role not in {"system", "user", "assistant", "tool"}:
            raise ValueError(f"row {row_num}: messages[{idx}].role invalid: {role!r}")
        if role == "system" and idx != 0:
            raise ValueError(f"row {row_num}: system message must be at index 0, got index {idx}")
        if "content" not in message and "tool_calls" not in message:
            raise ValueError(f"row {row_num}: messages[{idx}] needs content or tool_calls")
        calls = message.get("tool_calls")
        if calls and role != "assistant":
            raise ValueError(f"row {row_num}: only assistant messages may contain tool_calls")
        if role == "tool" and not message.get("tool_call_id"):
            raise ValueError(f"row {row_num}: tool message requires tool_call_id")
        if role == "tool" and message.get("tool_call_id") not in pending:
            raise ValueError(f"row {row_num}: tool message references unknown tool_call_id")
        if role == "tool":
            pending.discard(message["tool_call_id"])
        if calls is not None and not isinstance(calls, list):
            raise ValueError(f"row {row_num}: messages[{idx}].tool_calls must be a list")
        for n, call in enumerate(calls or []):
            prefix = f"row {row_num}: messages[{idx}].tool_calls[{n}]"
            if not isinstance(call, dict):
                raise ValueError(f"{prefix} must be object")
            function = call.get("function")
            if not isinstance(function, dict):
                raise ValueError(f"{prefix}.function must be object")
            if not isinstance(call.get("id"), str) or not call["id"]:
                raise ValueError(f"{prefix}.id must be a non-empty string")
            if call.get("type") != "function":
                raise ValueError(f"{prefix}.type must be 'function'")
            name = function.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"{prefix}.function.name must be a non-empty string")
            if known and name not in known:
                raise ValueError(f"{prefix}.function.name {name!r} not found in tool_defs/tools")
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    parsed = json.loads(arguments)
                except json.JSONDecodeError as exc:
                    raise ValueError(
                        f"{prefix}.function.arguments is not valid JSON: {exc}"
                    ) from exc
                if not isinstance(parsed, dict):
                    raise ValueError(f"{prefix}.function.arguments must be a JSON object")
            elif not isinstance(arguments, dict):
                raise ValueError(
                    f"{prefix}.function.arguments must be a JSON object or JSON-encoded object"
                )
            pending.add(call["id"])
    if not any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages):
        raise ValueError(f"row {row_num}: no assistant message")
    if any(isinstance(m, dict) and m.get("tool_calls") for m in messages) and not tools:
        raise ValueError(f"row {row_num}: assistant tool_calls require non-empty tool_defs/tools")
    for idx, tool in enumerate(tools or []):
        if not isinstance(tool, dict):
            raise ValueError(f"row {row_num}: tool_defs[{idx}] must be object")
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else tool.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"row {row_num}: tool_defs[{idx}] missing function name")


def normalize_prime_sft_exchange(
    exchange: dict[str, Any],
) -> tuple[dict[str, Any] | None, str | None]:
    """:1114: messages + tool_defs of one exchange, or the reason it cannot be a training step."""
    messages, tool_defs, skip = _exchange_to_messages_and_tools(exchange)
    if skip:
        return None, skip
    messages = _align_legacy_tool_call_ids(messages)
    if any(m.get("tool_calls") for m in messages) and not tool_defs:
        return None, "missing_tool_defs"
    try:
        validate_prime_sft_row({"messages": messages, "tool_defs": tool_defs}, 1)
    except ValueError as exc:
        return None, f"invalid_prime_sft_row: {exc}"
    return {"messages": messages, "tool_defs": tool_defs}, None


def prime_sft_last_user_training_window(
    messages: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """:355: the last user message some assistant message follows, and everything after it."""
    for idx in range(len(messages) - 2, -1, -1):
        if messages[idx].get("role") != "user":
            continue
        completion = messages[idx + 1 :]
        if any(item.get("role") == "assistant" for item in completion):
            return [messages[idx]], completion
    return None


# build_rollout_results_record: src/benchflow/trajectories/results.py:422 --------------------------


def _response_tool_calls(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """results.py:346: (call id, name) from Responses `output`, chat `choices` and a bare `message`;
    Anthropic `content` tool_use blocks are not read, so Anthropic responses never count as
    consumed and every distinct request keeps its last completed response."""

    def from_message(message: Any) -> list[tuple[str, str | None]]:
        if not isinstance(message, dict):
            return []
        out = []
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and (call.get("id") or call.get("tool_call_id")):
                function = call.get("function")
                name = function.get("name") if isinstance(function, dict) else None
                name = name or call.get("name")
                out.append(
                    (str(call.get("id") or call.get("tool_call_id")), str(name) if name else None)
                )
        return out

    calls = [
        (
            str(item.get("call_id") or item.get("id")),
            str(item["name"]) if item.get("name") else None,
        )
        for item in body.get("output") or []
        if isinstance(item, dict)
        and item.get("type") in {"function_call", "tool_call"}
        and (item.get("call_id") or item.get("id"))
    ]
    for choice in body.get("choices") or [] if isinstance(body.get("choices"), list) else []:
        calls += from_message(choice.get("message") if isinstance(choice, dict) else None)
    return calls + from_message(body.get("message"))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _response_is_training_success(response: Any) -> bool:
    """results.py:251: HTTP 200, an object body, status absent or "completed", not incomplete."""
    if not isinstance(response, dict) or response.get("status_code") != 200:
        return False
    body = response.get("body")
    if not isinstance(body, dict):
        return False
    if body.get("status") is not None and body.get("status") != "completed":
        return False
    return not body.get("incomplete_details")


def training_success_exchange_indices(exchanges: list[dict[str, Any]]) -> set[int]:
    """results.py:263: per distinct request body, the last successful response whose call ids a
    later request's body mentions; else the last one that is safe unconsumed (no calls, only
    `finish` calls, or no later request with an object body)."""
    bodies = [
        json.dumps(
            _dict(_dict(e.get("request")).get("body")),
            sort_keys=True,
            separators=(",", ":"),
            default=str,
        )
        for e in exchanges
    ]
    by_request: dict[str, list[int]] = {}
    for index, exchange in enumerate(exchanges):
        if _response_is_training_success(exchange.get("response")):
            by_request.setdefault(bodies[index], []).append(index)

    def calls_of(i: int) -> list[tuple[str, str | None]]:
        return _response_tool_calls(_dict(_dict(exchanges[i].get("response")).get("body")))

    def later_request(i: int) -> bool:
        return any(
            isinstance(_dict(later.get("request")).get("body"), dict)
            for later in exchanges[i + 1 :]
        )

    selected = set()
    for candidates in by_request.values():
        consumed = [
            i
            for i in candidates
            if (ids := {c for c, _ in calls_of(i)})
            and any(any(c in later for c in ids) for later in bodies[i + 1 :])
        ]
        if consumed:
            selected.add(max(consumed))
            continue
        safe = [
            i
            for i in candidates
            if not calls_of(i) or all(n == "finish" for _, n in calls_of(i)) or not later_request(i)
        ]
        if safe:
            selected.add(max(safe))
    return selected


def load_llm_trajectory_jsonl(path: Path) -> list[dict[str, Any]]:
    """export_prime_sft.py:121 with strict=True: a bad line is an error naming its number."""
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {number}: invalid JSON: {exc}") from exc
        if not isinstance(record, dict):
            raise ValueError(f"{path}: line {number}: top-level record must be an object")
        records.append(record)
    return records


def _llm_steps_from_trajectory(
    rollout_dir: Path, *, reward: float, is_truncated: bool, prefix: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """results.py:152: one step per selected exchange; tool_defs merged by name, first seen wins;
    a selected exchange that does not normalise is an export error naming it."""
    path = rollout_dir / "trajectory" / "llm_trajectory.jsonl"
    if not path.exists():
        return [], [], None
    try:
        exchanges = load_llm_trajectory_jsonl(path)
    except ValueError as exc:
        return [], [], f"Invalid LLM trajectory JSONL: {exc}"
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
        known = {tool["function"].get("name") for tool in tool_defs}
        tool_defs += [t for t in normalized["tool_defs"] if t["function"].get("name") not in known]
        response_body = _dict(_dict(exchange.get("response")).get("body"))
        extras: dict[str, Any] = {"source": "llm_trajectory", "tracking_source": "litellm_callback"}
        extras["exchange_index"] = index
        metadata = _dict(exchange.get("metadata"))
        extras.update({str(k): v for k, v in metadata.items() if k not in extras})
        truncated = bool(response_body.get("incomplete_details")) or (
            response_body.get("status") == "incomplete"
        )
        steps.append(
            {
                "prompt": normalized["messages"][:-1],
                "completion": normalized["messages"][-1:],
                "response": response_body,
                "tokens": None,
                "reward": reward,
                "advantage": 0.0,
                "is_truncated": truncated or is_truncated,
                "trajectory_id": f"{prefix}__llm_{index}",
                "extras": extras,
            }
        )
    if skipped:
        omitted = "Successful LLM exchanges were omitted from results.jsonl: " + "; ".join(skipped)
        return steps, tool_defs, omitted
    return steps, tool_defs, None


def _prime_sft_validation_error(
    prompt: list[dict[str, Any]], completion: list[dict[str, Any]] | None, tool_defs: list
) -> str | None:
    """results.py:572: the top-level prompt/completion must itself be a valid Prime-SFT row."""
    if not completion:
        return None
    try:
        validate_prime_sft_row({"prompt": prompt, "completion": completion, "tool_defs": tool_defs})
    except ValueError as exc:
        return f"Prime-SFT results row validation failed: {exc}"
    return None


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
        first = list(steps[0]["prompt"])
        if window is not None:
            prompt, completion = window
        elif first and len(full) >= len(first):
            prompt, completion = first, full[len(first) :]
        else:
            prompt, completion = first, list(final["completion"])
    else:  # results.py:399 _top_level_prompt_completion
        prompt, completion = [{"role": "user", "content": p} for p in prompts], None
    validation_error = _prime_sft_validation_error(prompt, completion, tool_defs)
    effective_export_error = export_error or llm_error or validation_error
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
        elif validation_error:
            reason = "invalid_prime_sft_row"
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
    for key, value in (rewards or {}).items():  # results.py:56 _metrics_from_rewards
        if key != "rubric" and isinstance(value, (int, float)) and not isinstance(value, bool):
            metrics[str(key)] = float(value)
    for key, value in _dict((rewards or {}).get("metrics")).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            metrics[str(key)] = float(value)
    rubric = (rewards or {}).get("rubric")
    for idx, item in enumerate(rubric if isinstance(rubric, list) else []):
        score = item.get("score") if isinstance(item, dict) else None
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            metrics[str(item.get("name") or f"rubric_{idx}")] = float(score)
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
    if isinstance(_dict(rewards).get("details"), dict):
        info["reward_details"] = _dict(rewards)["details"]
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
    (first seen = 0); unreadable rows go to results.errors.json, which is removed when there are
    none."""
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


# The whole lifecycle ------------------------------------------------------------------------------


def _publish_trajectory_for_verifier(rollout_dir: Path, events: list[dict[str, Any]]) -> None:
    """rollout/_setup.py:425, at the start of verify: agent/acp_trajectory.jsonl, the same events
    with a trailing newline, only when the trajectory is not empty."""
    if events:
        text = "\n".join(json.dumps(json.loads(json.dumps(e, default=str))) for e in events)
        (rollout_dir / "agent" / "acp_trajectory.jsonl").write_text(text + "\n")


def write_verifier_outputs(rollout_dir: Path, rollout: Rollout, facts: dict[str, Any]) -> None:
    """The task's test.sh writes /logs/verifier/ (bind-mounted on Docker, downloaded on Daytona):
    by default reward.txt with the scalar reward; a crashed or timed-out verifier leaves nothing."""
    outputs = rollout.verifier_outputs
    if outputs is None:
        reward = (rollout.rewards or {}).get("reward")  # what the verifier itself produced
        failed = reward is None or facts["verifier_error"]
        outputs = {} if failed else {"reward.txt": f"{reward}\n"}
    for name, text in outputs.items():
        path = rollout_dir / "verifier" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def write_rollout(jobs_dir: Path, rollout: Rollout) -> Path:
    """Rollout.run (__init__.py:2100) in the writers' order: _init_rollout and _write_config
    (setup), sandbox.json (start), the live ACP and LLM trajectories (execute; an oracle has
    neither, its solve.sh log lands in agent/oracle.txt), agent/acp_trajectory.jsonl and the
    verifier's files (verify), _write_llm_trajectory (cleanup), _build_rollout_result."""
    facts = outcome(rollout)
    rollout_dir = _init_rollout(jobs_dir, rollout)
    _write_config(rollout_dir, rollout)
    if rollout.reached != "setup":
        persist_sandbox_info(rollout_dir, rollout)
    if rollout.reached in {"execute", "verify"} and rollout.agent == "oracle":
        (rollout_dir / "agent" / "oracle.txt").write_text("oracle solve.sh output\n")
    elif rollout.reached in {"execute", "verify"}:
        write_acp_trajectory(rollout_dir, facts["events"])  # the live sink's last snapshot
        _write_llm_trajectory(rollout_dir, rollout)  # the live writer's last poll
    if rollout.reached == "verify":
        # verify sees only what execute committed: after an idle timeout self._trajectory is
        # still empty (cleanup captures it later), so nothing is published (gemini's scrape of
        # its own session file is not mirrored)
        if committed(rollout) or rollout.agent == "oracle":
            _publish_trajectory_for_verifier(rollout_dir, facts["events"])
        write_verifier_outputs(rollout_dir, rollout, facts)
    _write_llm_trajectory(rollout_dir, rollout)  # cleanup: reconcile, the same bytes
    _build_rollout_result(rollout_dir, rollout)
    return rollout_dir


# Damage: one defect per function, applied to a written rollout directory --------------------------


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


# Ready-made descriptions: a small claude-agent-acp run that reads, fixes and re-runs a test -------

TOOLS = ["bash", "str_replace_based_edit_tool", "finish"]


SKILL_TOOLS = {"openhands": "invoke_skill", "claude-agent-acp": "Skill", "gemini": "activate_skill"}


@dataclass
class Action:
    """One agent step: optional text, then one tool call and what it returned.

    It becomes a provider tool call in the LLM trajectory (with `arguments`) and an ACP tool_call
    event (`title`, default the command or path, and `output` as its content), sharing one id.
    `status` "in_progress" is a call still running when the rollout stopped (no output returned).
    """

    tool: str
    arguments: dict[str, Any]
    output: str = ""
    reply: str = ""
    title: str | None = None
    kind: str = "execute"
    status: str = "completed"

    def acp_title(self) -> str:
        if self.title is not None:
            return self.title
        return str(self.arguments.get("command") or self.arguments.get("path") or self.tool)


def bash(command: str, output: str, reply: str = "", **kw: Any) -> Action:
    return Action("bash", {"command": command}, output, reply, **kw)


def edit(path: str, output: str = "", reply: str = "", **kw: Any) -> Action:
    arguments = {"command": "str_replace", "path": path}
    output = output or f"The file {path} has been edited."
    return Action(
        "str_replace_based_edit_tool", arguments, output, reply, f"Edit {path}", "edit", **kw
    )


def scripted_run(
    task: str,
    actions: list[Action],
    *,
    final: str | None = "Done.",
    agent: str = "claude-agent-acp",
    catalog: list[tuple[str, str]] | None = None,
    load_skills: tuple[str, ...] = (),
    harness_skills: tuple[str, ...] = (),
    **overrides: Any,
) -> Rollout:
    """A rollout whose agent takes `actions` in order, on its own wire, then answers `final`
    (None: it never answered, e.g. it ran out of time). Each skill in `load_skills` is loaded first,
    the harness's way (`skill_call`); `catalog` is the startup skill catalog the harness shows.
    Skills named in `harness_skills` are the harness's own, kept outside `/skills` (`skill_path`).
    `overrides` set any other Rollout field."""
    turns: list[tuple[str, list[ToolCall], list[str]]] = []
    acp: list[AcpEvent] = []
    for n, skill in enumerate(load_skills):
        call, event, output = skill_call(agent, skill, f"call_s{n}", harness_skills)
        turns.append(("", [call], [output]))
        acp.append(event)
    for n, action in enumerate(actions, start=1):
        call = ToolCall(f"call_{n}", action.tool, action.arguments)
        turns.append((action.reply, [call], [action.output]))
        if action.reply:
            acp.append(AcpEvent("agent_message", text=action.reply))
        event = tool_event(call.id, action.acp_title(), action.output, kind=action.kind)
        if action.status != "completed":
            event.status, event.content = action.status, []
        acp.append(event)
    if final is not None:
        turns.append((final, [], []))
        acp.append(AcpEvent("agent_message", text=final))
    tools = list(TOOLS)
    tools += sorted({a.tool for a in actions} - set(tools))
    if agent in SKILL_TOOLS and (catalog or load_skills):
        tools.append(SKILL_TOOLS[agent])
    instruction = overrides.get("instruction", "Fix the failing tests.")
    exchanges = conversation(
        agent, instruction, turns, tools=tools, catalog=catalog, harness_skills=harness_skills
    )
    description = Rollout(task, agent=agent, exchanges=exchanges, acp=acp, rewards={"reward": 1.0})
    for key, value in overrides.items():
        setattr(description, key, value)
    return description


FIXING = [
    bash("pytest -q tests/test_dedupe.py", "1 failed, 2 passed", "Running the tests first."),
    edit("dedupe.py", reply="The key ignores case; fixing."),
    bash("pytest -q tests/test_dedupe.py", "3 passed", "Re-running the tests."),
]


def fixing_run(task: str = "csv-dedupe", **kw: Any) -> Rollout:
    """Reads, fixes and re-runs a test (three tool calls), then answers: a healthy pass."""
    return scripted_run(
        task, FIXING, final="Fixed: rows are now compared case-insensitively.", **kw
    )

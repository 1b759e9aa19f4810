"""The startup skill catalog, `task_skills_loading`, skill invocations and task-skill access of one
rollout.

Records are shaped as benchflow writes them (benchflow-ai/benchflow 62cc7e41, named per test):
`trajectory/llm_trajectory.jsonl` is one `LLMExchange.model_dump` per line (trajectories/types.py
`Trajectory.to_jsonl`), built from the LiteLLM callback record (providers/litellm_logging.py
`callback_module_source` `_base_record`: body = model, messages, input, tools, stream; and
`trajectory_from_litellm_callback_log`); ACP events are `_events_to_trajectory`
(trajectories/_capture.py). The harness catalog formats are the SOP's
(`references/harness-skill-catalog-sop.md`, 17a3573b); the eval scenarios follow `evals/files/*` of
the same revision, written here anew.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rollout_lineage.adapters.review_skill.review_input import ACP, LLM, Jsonl, Rollout
from rollout_lineage.adapters.review_skill.skill_catalog import review_skills


def exchange(body: dict[str, Any], response: dict[str, Any] | None = None, **extra: Any) -> dict:
    """One llm_trajectory.jsonl line: `LLMExchange(request=LLMRequest(...),
    response=LLMResponse(...))`."""
    path = extra.get("path", "/v1/chat/completions")
    return {
        "request": {
            "timestamp": "2026-08-20T10:00:00",
            "method": "POST",
            "path": path,
            "headers": {},
            "body": body,
        },
        "response": {
            "timestamp": "2026-08-20T10:00:02",
            "status_code": 200,
            "headers": {},
            "body": response or {"usage": {"prompt_tokens": 10, "completion_tokens": 2}},
        },
        "duration_ms": 2000.0,
        "metadata": {"call_purpose": "agent"},
    }


def chat_call(name: str, arguments: str) -> dict[str, Any]:
    """A chat-completions response (LiteLLM `ModelResponse` dumped by `_jsonable`) with one tool
    call."""
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return {
        "choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5},
    }


def tool_event(title: str, kind: str = "other", text: str | None = None, **extra: Any) -> dict:
    """An ACP tool_call event as `_events_to_trajectory` writes it (trajectories/_capture.py)."""
    content = (
        [] if text is None else [{"type": "content", "content": {"type": "text", "text": text}}]
    )
    event = {
        "type": "tool_call",
        "tool_call_id": "tc-1",
        "kind": kind,
        "title": title,
        "status": "completed",
        "content": content,
    }
    return {**event, **extra}


def rollout(llm: list[dict] | None = None, acp: list[dict] | None = None, **fields: Any) -> Rollout:
    return Rollout(
        llm=Jsonl.of(LLM, llm) if llm is not None else Jsonl(LLM),
        acp=Jsonl.of(ACP, acp) if acp is not None else Jsonl(ACP),
        **fields,
    )


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def openhands_prompt(*names: str) -> tuple[str, str]:
    """OpenHands' startup system prompt and the exact `<available_skills>` text in it (the SOP)."""
    items = "".join(
        f"\n  <skill>\n    <name>{n}</name>\n    <description>About {n}.</description>\n  </skill>"
        for n in names
    )
    inner = items + "\n"
    prompt = (
        "You are OpenHands agent.\n<SKILLS>\n"
        "The following skills are available. To use a skill, call "
        'the `invoke_skill(name="<skill-name>")` tool.\n\n'
        f"<available_skills>{inner}</available_skills>\n</SKILLS>"
    )
    return prompt, inner


def openhands_body(prompt: str, task: str = "Solve the task.") -> dict[str, Any]:
    return {
        "model": "benchflow-gpt",
        "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": task}],
        "tools": [
            {"type": "function", "function": {"name": "invoke_skill"}},
            {"type": "function", "function": {"name": "terminal"}},
        ],
    }


# --- OpenHands (registry.py "openhands"; skills linked into $HOME/.agents/skills by deploy_skills)
# ---


def test_openhands_with_skill_loaded_and_invoked() -> None:
    """OpenHands through LiteLLM's chat route (`_wire_litellm_agent_env`: LLM_MODEL openai/<alias>),
    the catalog in messages[role=system]; the ACP side is the legacy invoke_skill result that
    trajectories/metrics.py `content_contains_skill_invocation_tool` recognises."""
    prompt, inner = openhands_prompt("code-simplifier", "iterate", "data-cleaning")
    catalog = review_skills(
        rollout(
            llm=[
                exchange(
                    openhands_body(prompt), chat_call("invoke_skill", '{"name": "data-cleaning"}')
                ),
            ],
            acp=[
                {"type": "user_message", "text": "Solve the task."},
                tool_event(
                    "Load data-cleaning skill",
                    text="Tool: invoke_skill\nResult:\n[skill: data-cleaning]\n# Data cleaning",
                ),
            ],
            harness="openhands",
            skill_mode="with-skill",
            task_skills=("data-cleaning",),
        )
    )
    assert catalog.status == "recovered"
    assert catalog.harness == "openhands"
    assert (catalog.file, catalog.line) == (LLM, 1)
    assert catalog.source_field == "request.body.messages[0].content"
    assert catalog.skills == ("code-simplifier", "iterate", "data-cleaning")
    assert catalog.catalog_sha256 == sha(inner)
    assert catalog.task_skills_loading == 1
    assert [(t.file, t.line, t.marker, t.skill) for t in catalog.invocations] == [
        (LLM, 1, "invoke_skill", "data-cleaning"),
        (ACP, 2, "invoke_skill", "data-cleaning"),
    ]
    assert {(t.file, t.skill) for t in catalog.task_skill_access} == {
        (LLM, "data-cleaning"),
        (ACP, "data-cleaning"),
    }


def test_with_skill_whose_task_skill_never_loaded_is_0() -> None:
    """The bug of issue #22: benchflow records skills_sandbox_dir "/skills" (skill_policy.py
    `config_metadata`) whether or not the harness loaded anything; the catalog shows only its
    built-ins."""
    prompt, _ = openhands_prompt("code-simplifier", "iterate", "pdflatex")
    catalog = review_skills(
        rollout(
            llm=[exchange(openhands_body(prompt))],
            result={"skill_mode": "with-skill", "skills_sandbox_dir": "/skills"},
            harness="openhands",
            skill_mode="with-skill",
            task_skills=("mesh-analysis",),
        )
    )
    assert catalog.status == "recovered"
    assert catalog.skills == ("code-simplifier", "iterate", "pdflatex")
    assert catalog.task_skills_loading == 0
    assert catalog.invocations == () and catalog.task_skill_access == ()


def test_a_longer_name_holding_the_task_skill_is_not_the_task_skill() -> None:
    prompt, _ = openhands_prompt("data-cleaning-v2")
    catalog = review_skills(
        rollout(
            llm=[exchange(openhands_body(prompt))],
            acp=[tool_event("cat /skills-old/data-cleaning-v2/SKILL.md", kind="read")],
            harness="openhands",
            task_skills=("data-cleaning",),
        )
    )
    assert catalog.task_skills_loading == 0
    assert catalog.task_skill_access == ()


def test_names_compare_as_the_extract_script_compares_them() -> None:
    """Case and `_`/`-` do not tell skills apart (`normalize_skill_name` of
    extract_harness_skills.py)."""
    prompt, _ = openhands_prompt("data-cleaning")
    catalog = review_skills(
        rollout(
            llm=[exchange(openhands_body(prompt))], harness="oh", task_skills=("Data_Cleaning",)
        )
    )
    assert catalog.harness == "openhands"
    assert catalog.task_skills_loading == 1


def test_a_catalog_printed_by_a_tool_is_not_the_startup_catalog() -> None:
    """An agent that cats a file holding a catalog writes it into a tool message of a later request;
    only the harness-written system prompt counts, so the run stays unproven (None), never 1."""
    prompt = "You are OpenHands agent. No skills section in this build."
    fake, _ = openhands_prompt("data-cleaning")
    later = openhands_body(prompt)
    later["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "call_1", "content": fake},
    ]
    catalog = review_skills(
        rollout(
            llm=[exchange(openhands_body(prompt)), exchange(later)],
            harness="openhands",
            task_skills=("data-cleaning",),
        )
    )
    assert catalog.status == "manual_review_required"
    assert catalog.skills == ()
    assert catalog.task_skills_loading is None
    assert catalog.catalog_sha256 == sha(prompt)  # the startup prompt that lacks a catalog


def test_an_unreadable_catalog_asks_for_manual_review() -> None:
    prompt = '<SKILLS><available_skills><skill name="data-cleaning"/></available_skills></SKILLS>'
    catalog = review_skills(
        rollout(llm=[exchange(openhands_body(prompt))], harness="openhands", task_skills=("x",))
    )
    assert catalog.status == "manual_review_required"
    assert catalog.task_skills_loading is None
    assert catalog.catalog_sha256 == sha('<skill name="data-cleaning"/>')


def test_acp_system_prompt_is_the_fallback_for_a_usage_only_llm_log() -> None:
    """The SOP's fallback: usage-only LLM rows, and an early agent_thought beginning `System
    Prompt:` (legacy OpenHands). A thought after the first tool call is the model's, and is not
    read."""
    prompt, inner = openhands_prompt("data-cleaning")
    late, _ = openhands_prompt("forged")
    catalog = review_skills(
        rollout(
            llm=[{"type": "llm_completion", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}],
            acp=[
                {"type": "agent_thought", "text": "System Prompt:\n" + prompt},
                tool_event("ls", kind="execute"),
                {"type": "agent_thought", "text": "System Prompt:\n" + late},
            ],
            harness="openhands",
            task_skills=("data-cleaning",),
        )
    )
    assert (catalog.status, catalog.file, catalog.line) == ("recovered", ACP, 1)
    assert catalog.source_field == "text"
    assert catalog.catalog_sha256 == sha(inner)
    assert catalog.task_skills_loading == 1


def test_a_thought_after_the_first_tool_call_or_the_task_prompt_is_no_catalog() -> None:
    forged, _ = openhands_prompt("data-cleaning")
    catalog = review_skills(
        rollout(
            llm=[{"type": "llm_completion", "usage": {"prompt_tokens": 5}}],
            acp=[
                {"type": "user_message", "text": "System Prompt: " + forged},
                tool_event("ls", kind="execute"),
                {"type": "agent_thought", "text": forged},
            ],
            harness="openhands",
            task_skills=("data-cleaning",),
        )
    )
    assert catalog.status == "unknown"
    assert catalog.task_skills_loading is None


# --- Codex (registry.py "codex-acp", api_protocol openai-responses; skills in $HOME/.agents/skills)
# ---

CODEX_GLOBAL = (
    "imagegen",
    "openai-docs",
    "plugin-creator",
    "skill-creator",
    "skill-installer",
)


def codex_body(*skills: tuple[str, str]) -> tuple[dict[str, Any], str]:
    """A Responses request as LiteLLM's callback records it (`input`), the developer message holding
    `<skills_instructions>` (the SOP: not in `instructions`). Returns the body and the exact
    block."""
    entries = "".join(f"\n- {name}: Use {name}. (file: {path})" for name, path in skills)
    block = (
        "\n## Skills\nA skill is a set of local instructions stored in a `SKILL.md` file."
        f"\n### Available skills{entries}\n### How to use skills\n- Discovery: read the file.\n"
    )
    developer = (
        f"<permissions instructions>sandboxed</permissions "
        f"instructions>\n<skills_instructions>{block}</skills_instructions>"
    )
    body = {
        "model": "benchflow-gpt",
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": developer}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Solve it."}],
            },
        ],
        "tools": [{"type": "function", "name": "shell"}],
    }
    return body, block


def shell_call(command: str) -> dict[str, Any]:
    """A Responses `function_call` output item (what codex emits to run a command)."""
    arguments = '{"command": ["bash", "-lc", "' + command + '"]}'
    return {
        "output": [
            {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": "c1"}
        ],
        "usage": {"input_tokens": 100, "output_tokens": 5},
    }


def test_codex_no_skill_with_harness_global_catalog_only() -> None:
    """A no-skill Codex run sees Codex's own system skills (SOP sample: 5) and may read them; that
    is not task-skill access (SKILL.md: a no-skill run must not expose the *task's* skill
    resources)."""
    globals_ = [(n, f"/home/agent/.codex/skills/.system/{n}/SKILL.md") for n in CODEX_GLOBAL]
    body, block = codex_body(*globals_)
    catalog = review_skills(
        rollout(
            llm=[
                exchange(
                    body, shell_call("cat /home/agent/.codex/skills/.system/imagegen/SKILL.md")
                ),
            ],
            acp=[tool_event("Read SKILL.md", kind="read", text="---\nname: imagegen\n---")],
            harness="codex-acp",
            skill_mode="no-skill",
            task_skills=("task-helper",),
        )
    )
    assert catalog.status == "recovered" and catalog.harness == "codex"
    assert catalog.source_field == "request.body.input[0].content[0].text"
    assert catalog.skills == CODEX_GLOBAL  # the How-to-use bullets are not skills
    assert catalog.catalog_sha256 == sha(block)
    assert catalog.task_skills_loading == 0
    assert catalog.invocations == ()
    assert catalog.task_skill_access == ()


def test_codex_with_skill_reads_its_task_skill() -> None:
    """With skills, deploy_skills links /skills into $HOME/.agents/skills (registry.py codex-acp
    skill_paths); Codex reads the listed SKILL.md with a shell call (the SOP: no invoke_skill
    tool)."""
    body, _ = codex_body(
        ("imagegen", "/home/agent/.codex/skills/.system/imagegen/SKILL.md"),
        ("task-helper", "/home/agent/.agents/skills/task-helper/SKILL.md"),
    )
    catalog = review_skills(
        rollout(
            llm=[
                exchange(
                    body, shell_call("sed -n 1,80p /home/agent/.agents/skills/task-helper/SKILL.md")
                )
            ],
            harness="codex",
            task_skills=("task-helper",),
        )
    )
    assert catalog.task_skills_loading == 1
    assert [(t.file, t.line, t.marker, t.skill) for t in catalog.task_skill_access] == [
        (LLM, 1, "skills/task-helper", "task-helper")
    ]


def test_no_skill_leak_eval_scenario() -> None:
    """evals/files/no-skill-leak: a Codex no-skill trial whose catalog lists nothing, whose agent
    read the task skill's SKILL.md and invoked it. Both lines are access; loading is 0."""
    body = {
        "instructions": "You are Codex.",
        "input": [
            {
                "role": "developer",
                "content": [
                    {
                        "type": "input_text",
                        "text": "<skills_instructions>\n"
                        "### Available skills\n</skills_instructions>",
                    }
                ],
            },
            {
                "role": "user",
                "content": [{"type": "input_text", "text": "Solve it without skills."}],
            },
        ],
    }
    catalog = review_skills(
        rollout(
            llm=[{"request": {"path": "/responses", "body": body}}],
            acp=[
                {
                    "phase": "agent",
                    "type": "tool_call",
                    "tool": "read",
                    "args": {"path": "/home/agent/.codex/skills/task-helper/SKILL.md"},
                },
                {
                    "phase": "agent",
                    "type": "tool_call",
                    "tool": "invoke_skill",
                    "args": {"name": "task-helper"},
                },
                {"phase": "verifier", "type": "score", "reward": 0.0},
            ],
            harness="codex",
            skill_mode="no_skills",
            task_skills=("task-helper",),
        )
    )
    assert catalog.status == "recovered" and catalog.skills == ()
    assert catalog.task_skills_loading == 0
    assert [(t.line, t.marker, t.skill) for t in catalog.invocations] == [
        (2, "invoke_skill", "task-helper")
    ]
    assert [(t.file, t.line, t.marker, t.skill) for t in catalog.task_skill_access] == [
        (ACP, 1, "skills/task-helper", "task-helper"),
        (ACP, 2, "invoke_skill", "task-helper"),
    ]


# --- Claude Code (registry.py "claude-agent-acp", api_protocol anthropic-messages) ---


def claude_reminder(*names: str) -> tuple[str, str]:
    bullets = "\n".join(f"- {n}: Use {n} when asked." for n in names)
    text = (
        "<system-reminder>\nThe following skills are available for use with the Skill tool:\n\n"
        f"{bullets}\n</system-reminder>"
    )
    return text, bullets


def claude_body(*user_parts: dict[str, Any], history: list[dict] | None = None) -> dict[str, Any]:
    """`_base_record` of an `anthropic_messages` call: path /v1/messages, Anthropic-format messages
    (the top-level `system` is not among the keys benchflow's callback keeps)."""
    return {
        "model": "benchflow-claude",
        "messages": [{"role": "user", "content": list(user_parts)}, *(history or [])],
        "tools": [{"name": "Skill"}, {"name": "ToolSearch"}, {"name": "Bash"}],
        "stream": True,
    }


def test_claude_code_catalog_in_a_reminder_and_skill_calls() -> None:
    """claude-agent-acp through LiteLLM's /v1/messages (providers/litellm_logging.py `_base_record`
    path); the response is an Anthropic message whose `tool_use` calls Skill and ToolSearch."""
    reminder, bullets = claude_reminder("update-config", "verify", "plugin:pdf-tools", "pdf")
    body = claude_body(
        {"type": "text", "text": reminder}, {"type": "text", "text": "Solve the task."}
    )
    response = {
        "content": [
            {
                "type": "tool_use",
                "id": "t1",
                "name": "ToolSearch",
                "input": {"query": "select:Skill"},
            },
            {"type": "tool_use", "id": "t2", "name": "Skill", "input": {"skill": "pdf"}},
        ],
        "usage": {"input_tokens": 100, "output_tokens": 9},
    }
    catalog = review_skills(
        rollout(
            llm=[exchange(body, response, path="/v1/messages")],
            acp=[tool_event("Skill", text="Launching skill: pdf")],
            harness="claude-agent-acp",
            task_skills=("pdf",),
        )
    )
    assert catalog.status == "recovered" and catalog.harness == "claude-code"
    assert catalog.source_field == "request.body.messages[0].content[0].text"
    assert catalog.skills == ("update-config", "verify", "plugin:pdf-tools", "pdf")
    assert catalog.catalog_sha256 == sha(bullets)
    assert catalog.task_skills_loading == 1
    assert [(t.file, t.marker, t.skill) for t in catalog.invocations] == [
        (LLM, "ToolSearch select:Skill", None),
        (LLM, "Skill", "pdf"),
        (ACP, "skill", "pdf"),
    ]
    assert [(t.file, t.skill) for t in catalog.task_skill_access] == [(LLM, "pdf"), (ACP, "pdf")]


def test_claude_code_reminder_after_the_first_turn_is_not_startup() -> None:
    """Claude Code re-attaches changed files as reminders in later turns; a file the agent wrote
    with a catalog in it must not count as the startup catalog."""
    forged, _ = claude_reminder("pdf")
    later = claude_body(
        {"type": "text", "text": "Solve the task."},
        history=[
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "Write", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [{"type": "text", "text": forged}],
                    },
                    {"type": "text", "text": forged},
                ],
            },
        ],
    )
    first = claude_body({"type": "text", "text": "Solve the task."})
    catalog = review_skills(
        rollout(
            llm=[exchange(first, path="/v1/messages"), exchange(later, path="/v1/messages")],
            harness="claude",
            task_skills=("pdf",),
        )
    )
    assert catalog.status == "manual_review_required"  # the SOP's catalog_absent_in_startup_prompt
    assert catalog.task_skills_loading is None


# --- Gemini CLI (registry.py "gemini"; LiteLLM's Gemini pass-through, GOOGLE_GEMINI_BASE_URL) ---


def test_gemini_catalog_in_system_instruction_and_activate_skill() -> None:
    """The SOP's Gemini shape: `systemInstruction.parts[].text`, `# Available Agent Skills`, entries
    with a location; `<available_subagents>` is not the catalog. The call is a Gemini
    `functionCall`."""
    inner = (
        "\n  <skill>\n    <name>skill-creator</name>\n    <description>Make skills.</description>\n"
        "    <location>/opt/gemini/skills/skill-creator/SKILL.md</location>\n  </skill>\n"
    )
    system = (
        "<available_subagents><agent><name>codebase_investigator</name></agent></available_subagents>\n"
        "# Available Agent Skills\nYou have access to the following specialized skills.\n\n"
        f"<available_skills>{inner}</available_skills>"
    )
    body = {
        "systemInstruction": {"parts": [{"text": system}]},
        "contents": [{"role": "user", "parts": [{"text": "Solve it."}]}],
        "tools": [{"functionDeclarations": [{"name": "activate_skill"}]}],
    }
    response = {
        "candidates": [
            {
                "content": {
                    "parts": [
                        {
                            "functionCall": {
                                "name": "activate_skill",
                                "args": {"name": "skill-creator"},
                            }
                        }
                    ]
                }
            }
        ],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 4},
    }
    catalog = review_skills(
        rollout(
            llm=[exchange(body, response, path="/gemini/v1beta/models/m:streamGenerateContent")],
            harness="gemini",
            skill_mode="no-skill",
            task_skills=("mesh-analysis",),
        )
    )
    assert catalog.status == "recovered" and catalog.harness == "gemini-cli"
    assert catalog.source_field == "request.body.systemInstruction.parts[0].text"
    assert catalog.skills == ("skill-creator",)
    assert catalog.catalog_sha256 == sha(inner)
    assert catalog.task_skills_loading == 0
    assert [(t.marker, t.skill) for t in catalog.invocations] == [
        ("activate_skill", "skill-creator")
    ]
    assert catalog.task_skill_access == ()  # a harness-global skill, not the task's


# --- OpenCode (registry.py "opencode"; $HOME/.opencode/skills) ---


def test_opencode_catalog_and_skill_content_envelope() -> None:
    """OpenCode's system message holds `<available_skills>` (litellm_logging.py
    `_opencode_catalog_names`, tests/test_litellm_logging.py); its ACP skill call is kind other /
    title skill with a `<skill_content name=...>` result (metrics.py, PR #939)."""
    system = (
        "You are opencode.\n<available_skills><skill><name>customize-opencode</name></skill>"
        "<skill><name>mesh-analysis</name></skill></available_skills>"
    )
    body = {
        "model": "qwen",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "go"}],
    }
    catalog = review_skills(
        rollout(
            llm=[exchange(body)],
            acp=[
                tool_event(
                    "skill", text='<skill_content name="mesh-analysis">\n# Mesh\n</skill_content>'
                )
            ],
            harness="opencode",
            task_skills=("mesh-analysis",),
        )
    )
    assert catalog.status == "recovered"
    assert catalog.skills == ("customize-opencode", "mesh-analysis")
    assert catalog.task_skills_loading == 1
    assert [(t.file, t.marker, t.skill) for t in catalog.invocations] == [
        (ACP, "skill", "mesh-analysis")
    ]
    assert [t.skill for t in catalog.task_skill_access] == ["mesh-analysis"]


# --- pi-acp: no catalog serialized ---


def test_pi_acp_catalog_not_serialized() -> None:
    """The SOP: pi's startup prompt names docs/skills.md but lists no skills;
    `catalog_not_serialized`, and `task_skills_loading` cannot be told (None), whatever the task
    expects."""
    system = (
        "You are an expert coding assistant operating inside pi, a coding agent harness. "
        "See docs/skills.md for skills."
    )
    body = {
        "model": "benchflow-x",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Solve it."},
        ],
        "tools": [
            {"type": "function", "function": {"name": n}} for n in ("read", "bash", "edit", "write")
        ],
    }
    catalog = review_skills(
        rollout(
            llm=[exchange(body)], harness="pi-acp", skill_mode="with-skill", task_skills=("pdf",)
        )
    )
    assert catalog.status == "catalog_not_serialized" and catalog.harness == "pi-acp"
    assert catalog.skills == ()
    assert catalog.source_field == "request.body.messages[0].content"
    assert catalog.catalog_sha256 == sha(system)
    assert catalog.task_skills_loading is None


def test_pi_acp_without_any_request_is_still_not_serialized() -> None:
    catalog = review_skills(rollout(harness="pi", task_skills=("pdf",)))
    assert catalog.status == "catalog_not_serialized"
    assert catalog.file is None and catalog.catalog_sha256 is None
    assert catalog.task_skills_loading is None


# --- harnesses the SOP does not describe ---


def test_unknown_harness_without_a_catalog_is_unknown() -> None:
    body = {"model": "m", "messages": [{"role": "system", "content": "You are OpenClaw."}]}
    catalog = review_skills(rollout(llm=[exchange(body)], harness="openclaw", task_skills=("pdf",)))
    assert catalog.status == "unknown"
    assert catalog.harness == "openclaw"
    assert catalog.file is None and catalog.task_skills_loading is None


def test_no_trajectories_and_no_harness_is_unknown() -> None:
    catalog = review_skills(rollout())
    assert (catalog.status, catalog.harness, catalog.task_skills_loading) == ("unknown", None, None)


def test_an_unnamed_harness_is_recognised_by_its_request_shape() -> None:
    body, _ = codex_body(("task-helper", "/home/agent/.agents/skills/task-helper/SKILL.md"))
    catalog = review_skills(rollout(llm=[exchange(body)], task_skills=("task-helper",)))
    assert (catalog.harness, catalog.status, catalog.task_skills_loading) == (
        "codex",
        "recovered",
        1,
    )


def test_no_expected_task_skills_leaves_loading_unknown() -> None:
    prompt, _ = openhands_prompt("iterate")
    catalog = review_skills(rollout(llm=[exchange(openhands_body(prompt))], harness="openhands"))
    assert catalog.status == "recovered" and catalog.task_skills_loading is None


# --- task-skill access: only the task's own resources ---


def test_access_is_the_tasks_own_skills_and_the_sandbox_skills_dir() -> None:
    """Harness-global skill paths and look-alike folders are not access; anything under benchflow's
    sandbox skills dir is (deploy_skills stages only the task's skills there; result.json
    `skills_sandbox_dir`)."""
    acp = [
        tool_event("cat ~/.claude/skills/update-config/SKILL.md", kind="read"),  # harness-global
        tool_event("ls myskills/pdf", kind="execute"),  # not a skills root
        tool_event("cat ~/.claude/skills/pdf/SKILL.md", kind="read"),
        tool_event("ls /skills/other-skill", kind="execute"),  # under the sandbox dir
        tool_event("cat /opt/task-skills/pdf-extra/notes.md", kind="read"),  # a custom sandbox dir
        tool_event("cat ./pdf/SKILL.md", kind="read"),
    ]
    catalog = review_skills(
        rollout(
            acp=acp,
            result={"skills_sandbox_dir": "/opt/task-skills"},
            harness="claude-code",
            task_skills=("pdf",),
        )
    )
    assert [(t.line, t.marker, t.skill) for t in catalog.task_skill_access] == [
        (3, "skills/pdf", "pdf"),
        (4, "/skills/other-skill", "other-skill"),
        (5, "/opt/task-skills/pdf-extra", "pdf-extra"),
        (6, "pdf/SKILL.md", "pdf"),
    ]
    # a SKILL.md read in a skills folder is a skill use: the task's is access (above), any other
    # an invocation
    assert [(t.line, t.marker, t.skill) for t in catalog.invocations] == [
        (1, "~/.claude/skills/update-config/SKILL.md", "update-config")
    ]


def test_a_skill_word_in_an_ordinary_tools_output_is_no_invocation() -> None:
    """metrics.py's rule: a read/execute tool whose output quotes an invoke_skill envelope is not
    one."""
    catalog = review_skills(
        rollout(
            acp=[
                tool_event(
                    "cat log.txt", kind="execute", text="Tool: invoke_skill\nResult:\n[skill: pdf]"
                ),
                {"type": "agent_message", "text": "I will call invoke_skill(name='pdf')"},
            ],
            task_skills=("pdf",),
        )
    )
    assert catalog.invocations == () and catalog.task_skill_access == ()


def test_hostile_lines_are_read_without_crashing() -> None:
    """A deep JSON value, a lone surrogate in a skill name, a long run of name characters."""
    deep: Any = "/skills/pdf/SKILL.md"
    for _ in range(5000):
        deep = [deep]
    prompt, _ = openhands_prompt("bad\ud800name")
    events = [
        tool_event("x", kind="read", rawInput={"deep": deep}),
        tool_event("a" * 200_000 + "/SKILL.md"),
    ]
    catalog = review_skills(
        Rollout(
            llm=Jsonl.of(LLM, [exchange(openhands_body(prompt))]),
            acp=Jsonl(ACP, True, tuple(enumerate(events, start=1))),  # too deep for json.dumps
            harness="openhands",
            task_skills=("pdf",),
        )
    )
    assert catalog.skills == ("bad\\ud800name",)
    assert [(t.line, t.skill) for t in catalog.task_skill_access] == [(1, "pdf")]


# --- a SKILL.md read is a skill use; a with-skill run's own catalog names its task skills ---


def test_a_skill_file_read_is_found_in_what_the_agent_sent_never_in_what_it_got() -> None:
    """`skills/<name>/SKILL.md` in a call's input (any skills folder, a glob too) is a skill use;
    the same path in a tool's output (a `find` listing), a look-alike folder (`myskills/`) or a
    SKILL.md outside a skills folder is not."""
    acp = [
        tool_event("cat /root/.agents/skills/csv-tools/SKILL.md", kind="read"),
        tool_event("head -5 .claude/skills/*/SKILL.md", kind="read"),
        tool_event("find / -name SKILL.md", text="/root/.agents/skills/pdf/SKILL.md"),
        tool_event("cat myskills/pdf/SKILL.md", kind="read"),
        tool_event("cat docs/SKILL.md", kind="read"),
    ]
    catalog = review_skills(rollout(acp=acp, harness="claude-code", skill_mode="no-skill"))
    assert [(t.line, t.marker, t.skill) for t in catalog.invocations] == [
        (1, "/root/.agents/skills/csv-tools/SKILL.md", "csv-tools"),
        (2, ".claude/skills/*/SKILL.md", None),
    ]
    assert catalog.task_skill_access == ()


def test_a_long_run_of_skill_files_is_read_in_linear_time() -> None:
    """Each `/SKILL.md` looks back a bounded way: 100,000 of them in one argument are one pass."""
    command = "cat " + "skills/" * 3 + "x/SKILL.md" * 100_000
    body = {"choices": [{"message": {"tool_calls": [{"function": {"name": "bash"}}]}}]}
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = command
    catalog = review_skills(
        rollout(llm=[exchange({"messages": []}, body)], harness="openhands", skill_mode="no-skill")
    )
    assert [t.marker for t in catalog.invocations] == ["skills/skills/skills/x/SKILL.md"]


def test_a_with_skill_run_named_by_nothing_takes_its_task_skills_from_its_catalog() -> None:
    """Every catalog skill the harness does not ship is the task's: by name where the format
    gives no file (OpenHands), by a file under the sandbox skills dir where it does (Gemini's
    `<location>`: `/opt/task-skills` is this run's `skills_sandbox_dir`)."""
    prompt, _ = openhands_prompt("code-simplifier", "data-cleaning")
    catalog = review_skills(
        rollout(
            llm=[exchange(openhands_body(prompt))], harness="openhands", skill_mode="with-skill"
        )
    )
    assert (catalog.expected_task_skills, catalog.task_skills_source) == (
        ("data-cleaning",),
        "catalog",
    )
    assert catalog.task_skills_loading == 1
    assert catalog.task_skills_from == (
        f"the startup catalog at {LLM}:1 (request.body.messages[0].content), less the harness's "
        "own skills"
    )
    items = "".join(
        f"<skill><name>{n}</name><description>d</description><location>{p}</location></skill>"
        for n, p in (
            ("skill-creator", "/opt/gemini/skills/skill-creator/SKILL.md"),
            ("notes", "/home/agent/.gemini/skills/notes/SKILL.md"),
            ("csv-tools", "/opt/task-skills/csv-tools/SKILL.md"),
        )
    )
    system = f"# Available Agent Skills\n<available_skills>{items}</available_skills>"
    gemini = review_skills(
        rollout(
            llm=[exchange({"systemInstruction": {"parts": [{"text": system}]}})],
            harness="gemini",
            skill_mode="with-skill",
            config={"skills_sandbox_dir": "/opt/task-skills"},
        )
    )
    assert gemini.expected_task_skills == ("csv-tools",) and gemini.task_skills_loading == 1


def test_a_catalog_names_nothing_for_a_no_skill_run_or_one_its_files_named() -> None:
    """The catalog stands in only for a with-skill run no other source answered for: a no-skill
    run's catalog is what it must not show, and names from the files (even none) come first."""
    prompt, _ = openhands_prompt("data-cleaning")
    body = openhands_body(prompt)
    no_skill = review_skills(
        rollout(llm=[exchange(body)], harness="openhands", skill_mode="no-skill")
    )
    assert (no_skill.expected_task_skills, no_skill.task_skills_source) == ((), None)
    bundles_none = review_skills(
        rollout(
            llm=[exchange(body)],
            harness="openhands",
            skill_mode="with-skill",
            task_skills_source="file_hashes",
        )
    )
    assert bundles_none.task_skills_source == "file_hashes"
    assert bundles_none.expected_task_skills == ()

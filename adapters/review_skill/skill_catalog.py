"""The startup skill catalog of one rollout, recovered per the experiment-review skill's harness
SOP.

`references/harness-skill-catalog-sop.md` (benchflow 17a3573b) says where each harness puts the
skills it offers the model at startup, and SKILL.md asks for `task_skills_loading`: 1 when every
expected task skill is in that catalog. benchflow's `skills_sandbox_dir` is no such evidence (it is
`/skills` whenever skills were staged, loaded or not). The catalog is read only from harness-written
startup fields (system, developer and instruction text, and for Claude Code the user reminders
before the model's first turn), never from tool output or model text, so an agent cannot print a
catalog into its own run. ACP system-prompt traces are the SOP's fallback when the LLM log holds no
request bodies. Skill invocations and task-skill access come from `skill_traces`. Pure: the rollout
is parsed already (`review_input.read_rollout`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ...domain.facts.review_facts import CatalogStatus, SkillCatalog
from .review_input import Jsonl, Rollout
from .skill_traces import normalize_skill, safe_text, sandbox_dirs, skill_traces
from .task_skills import Named, from_catalog

Field = tuple[str, str]  # a JSON path inside one record, the string found there


@dataclass(frozen=True)
class Parsed:
    """A catalog anchor found in one string: the exact catalog text, and its names (None:
    unparsable), with where each entry says its SKILL.md is (Codex's `file:`, Gemini's
    `<location>`; None where the format names no file)."""

    block: str
    names: tuple[str, ...] | None
    places: tuple[str | None, ...] = ()


def _between(text: str, start: str, end: str, since: int = 0) -> tuple[int, int] | None:
    """Where the text between the first `start` (from `since`) and the next `end` begins and ends;
    None when either is missing. Index-based, so a catalog of many entries is read in one pass."""
    first = text.find(start, since)
    last = text.find(end, first + len(start)) if first >= 0 else -1
    return None if last < 0 else (first + len(start), last)


def _inside(text: str, start: str, end: str) -> str | None:
    span = _between(text, start, end)
    return None if span is None else text[span[0] : span[1]]


def parse_available_skills(text: str) -> Parsed | None:
    """`<available_skills><skill><name>..</name>..</skill>..</available_skills>`: OpenHands, Gemini
    CLI, OpenCode (the SOP's rules; benchflow's `_opencode_catalog_names` in
    providers/litellm_logging.py). Any other content (an item without a name, attributes instead of
    elements) is unparsable, not empty."""
    if "<available_skills>" not in text:
        return None
    inner = _inside(text, "<available_skills>", "</available_skills>")
    if inner is None:
        return Parsed(text, None)  # opened, never closed
    names: list[str] = []
    places: list[str | None] = []
    span = _between(inner, "<skill>", "</skill>")
    while span is not None:
        item = inner[span[0] : span[1]]
        name = _inside(item, "<name>", "</name>")
        if name is None or not name.strip():
            return Parsed(inner, None)
        names.append(name.strip())
        place = _inside(item, "<location>", "</location>")
        places.append(place.strip() if place and place.strip() else None)
        span = _between(inner, "<skill>", "</skill>", span[1])
    if inner.count("<skill>") != len(names) or (not names and inner.strip()):
        return Parsed(inner, None)
    return Parsed(inner, tuple(names), tuple(places))


CODEX_ENTRY = re.compile(r"- ([^:\n]+): ")


def _codex_file(line: str) -> str | None:
    """The path of a Codex bullet's closing `(file: path)`, if it ends with one."""
    line = line.rstrip()
    start = line.rfind("(file: ")
    if start < 0 or not line.endswith(")"):
        return None
    return line[start + len("(file: ") : -1].strip() or None


def parse_codex(text: str) -> Parsed | None:
    """`<skills_instructions>` with `### Available skills` bullets `- name: description (file:
    path)`; only that section is read (the `### How to use skills` bullets are instructions, not
    skills)."""
    if "<skills_instructions>" not in text:
        return None
    block = _inside(text, "<skills_instructions>", "</skills_instructions>")
    if block is None:
        return Parsed(text, None)
    match = re.search(r"^### Available skills[ \t]*$", block, re.M)
    if match is None:
        return Parsed(block, None)
    section = block[match.end() :]
    following = re.search(r"^### ", section, re.M)
    names: list[str] = []
    places: list[str | None] = []
    for line in section[: following.start() if following else None].splitlines():
        if not line.startswith("- "):
            continue
        entry = CODEX_ENTRY.match(line)
        if entry is None:
            return Parsed(block, None)
        names.append(entry.group(1).strip())
        places.append(_codex_file(line))
    return Parsed(block, tuple(names), tuple(places))


CLAUDE_MARKER = "The following skills are available for use with the Skill tool:"
CLAUDE_ENTRY = re.compile(r"- (\S+): ")


def parse_claude(text: str) -> Parsed | None:
    """The bullets after Claude Code's marker, up to the reminder's end or the first line that is
    neither a bullet nor an indented continuation. The marker with no bullets is unparsable, not an
    empty catalog."""
    start = text.find(CLAUDE_MARKER)
    if start < 0:
        return None
    rest = text[start + len(CLAUDE_MARKER) :].split("</system-reminder>", 1)[0]
    kept: list[str] = []
    names: list[str] = []
    for line in rest.lstrip("\n").splitlines():
        if line.startswith("- "):
            entry = CLAUDE_ENTRY.match(line)
            if entry is None:
                return Parsed(rest, None)
            names.append(entry.group(1))
        elif not (line[:1].isspace() and line.strip()) and (names or line.strip()):
            break
        kept.append(line)
    block = "\n".join(kept).strip("\n")
    return Parsed(block, tuple(names) if names else None)


# --- where each harness writes its startup prompt (request bodies as benchflow's LiteLLM callback
# logs them: `_base_record` in providers/litellm_logging.py keeps model, messages, input, tools,
# stream) ---


def _content(value: Any, path: str) -> Iterator[Field]:
    """The text of a message content: a string, or parts with `text` (tool results are not startup
    text)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for index, part in enumerate(value):
            if isinstance(part, str):
                yield f"{path}[{index}]", part
            elif (
                isinstance(part, dict)
                and isinstance(part.get("text"), str)
                and part.get("type") in (None, "text", "input_text")
            ):
                yield f"{path}[{index}].text", part["text"]
    elif isinstance(value, dict) and isinstance(value.get("text"), str):
        yield f"{path}.text", value["text"]


def _before_first_turn(body: dict[str, Any], key: str, roles: tuple[str, ...]) -> Iterator[Field]:
    """Messages of `roles` that come before the model's first turn: the startup context, which only
    the harness writes (a later reminder can quote a file the agent wrote)."""
    messages = body.get(key)
    if not isinstance(messages, list):
        return
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        if message.get("role") in ("assistant", "model") or message.get("type") == "function_call":
            return
        if message.get("role") in roles:
            yield from _content(message.get("content"), f"{key}[{index}].content")


def _system_field(body: dict[str, Any], key: str) -> Iterator[Field]:
    value = body.get(key)
    if isinstance(value, dict):
        yield from _content(value.get("parts"), f"{key}.parts")
    else:
        yield from _content(value, key)


def chat_system(body: dict[str, Any]) -> Iterator[Field]:
    """OpenHands, OpenCode, pi: `messages[role=system]`; Bedrock's top-level `system` (the SOP)."""
    yield from _system_field(body, "system")
    yield from _before_first_turn(body, "messages", ("system",))


def codex_fields(body: dict[str, Any]) -> Iterator[Field]:
    """Codex (OpenAI Responses): `input[role=developer]`; `instructions`; a chat bridge's system
    message."""
    yield from _system_field(body, "instructions")
    yield from _before_first_turn(body, "input", ("developer", "system"))
    yield from _before_first_turn(body, "messages", ("developer", "system"))


def gemini_fields(body: dict[str, Any]) -> Iterator[Field]:
    """Gemini CLI: `systemInstruction.parts[].text` (the SOP), or a translated system message."""
    yield from _system_field(body, "systemInstruction")
    yield from _system_field(body, "system_instruction")
    yield from _before_first_turn(body, "messages", ("system",))


def claude_fields(body: dict[str, Any]) -> Iterator[Field]:
    """Claude Code: `system`, and the `<system-reminder>` user text before the model's first
    turn."""
    yield from _system_field(body, "system")
    yield from _before_first_turn(body, "messages", ("system", "user"))


@dataclass(frozen=True)
class Harness:
    """One harness of the SOP: where its startup prompt is, how its catalog reads, what names it
    alone."""

    name: str
    fields: Callable[[dict[str, Any]], Iterator[Field]]
    parse: Callable[[str], Parsed | None]
    sniff: tuple[str, ...]  # text only this harness's startup prompt carries
    serializes: bool = True  # False: no catalog is written (pi-acp), so none is inferred


PI_PROMPT = ("pi, a coding agent harness", "pi-coding-agent", "operating inside pi")
#: In the SOP's order of recognition, most distinctive anchor first.
HARNESSES = (
    Harness("codex", codex_fields, parse_codex, ("<skills_instructions>",)),
    Harness("openhands", chat_system, parse_available_skills, ("<SKILLS>",)),
    Harness("gemini-cli", gemini_fields, parse_available_skills, ("# Available Agent Skills",)),
    Harness("claude-code", claude_fields, parse_claude, (CLAUDE_MARKER,)),
    Harness("opencode", chat_system, parse_available_skills, ("<available_skills>",)),
    Harness("pi-acp", chat_system, parse_available_skills, PI_PROMPT, serializes=False),
)
BY_NAME = {harness.name: harness for harness in HARNESSES}
#: benchflow's agent names (agents/registry.py `AGENTS`, `AGENT_ALIASES`) and the fixtures' harness
#: names.
ALIASES = {
    "claude-agent-acp": "claude-code",
    "claude": "claude-code",
    "codex-acp": "codex",
    "gemini": "gemini-cli",
    "pi": "pi-acp",
    "pi-agent": "pi-acp",
    "oh": "openhands",
    "mimo": "opencode",  # an OpenCode fork (registry.py: agentInfo.name "OpenCode")
}


def harness_named(declared: str | None) -> Harness | None:
    if not declared:
        return None
    name = declared.strip().lower()
    for prefix in ("acpx/", "acpx:"):
        name = name.removeprefix(prefix)
    return BY_NAME.get(ALIASES.get(name, name))


@dataclass(frozen=True)
class Found:
    """Where the startup prompt was: file, line, field; the catalog parsed from it, if its anchor
    was there."""

    harness: Harness
    file: str
    line: int
    field: str
    text: str
    parsed: Parsed | None


def _bodies(llm: Jsonl) -> Iterator[tuple[int, dict[str, Any]]]:
    for line, row in llm.rows:
        request = row.get("request")
        body = request.get("body") if isinstance(request, dict) else None
        if isinstance(body, dict):
            yield line, body


def _sniffed(llm: Jsonl) -> Harness | None:
    """The harness whose distinctive startup text appears first, for a run that does not name
    one."""
    for _, body in _bodies(llm):
        for harness in HARNESSES:
            if any(mark in text for _, text in harness.fields(body) for mark in harness.sniff):
                return harness
    return None


def from_llm(llm: Jsonl, harness: Harness) -> Found | None:
    """The first request whose startup fields hold the harness's catalog; else its first startup
    prompt."""
    first: Found | None = None
    for line, body in _bodies(llm):
        for path, text in harness.fields(body):
            parsed = harness.parse(text)
            field = f"request.body.{path}"
            if parsed is not None:
                return Found(harness, llm.name, line, field, text, parsed)
            if first is None and text.strip():
                first = Found(harness, llm.name, line, field, text, None)
    return first


SYSTEM_PROMPT = "System Prompt:"


def _acp_prompts(acp: Jsonl) -> Iterator[tuple[int, str, str]]:
    """`agent_thought` events carrying a system prompt before the first tool call: the SOP's legacy
    fallback (OpenHands' early thought `System Prompt: ...`). A user message is the task's text, not
    the harness's."""
    anchors = (SYSTEM_PROMPT, *(mark for harness in HARNESSES for mark in harness.sniff))
    for line, row in acp.rows:
        if row.get("type") == "tool_call":
            return
        text = row.get("text")
        if not (row.get("type") == "agent_thought" and isinstance(text, str)):
            continue
        if any(anchor in text for anchor in anchors):
            yield line, "text", text.split(SYSTEM_PROMPT, 1)[-1].strip()


def from_acp(acp: Jsonl, declared: Harness | None) -> Found | None:
    """A declared harness takes the first prompt; otherwise the first whose text names its
    harness."""
    for line, key, text in _acp_prompts(acp):
        if declared is not None:
            return Found(declared, acp.name, line, key, text, declared.parse(text))
        for harness in HARNESSES:
            if any(mark in text for mark in harness.sniff):
                return Found(harness, acp.name, line, key, text, harness.parse(text))
    return None


def locate(rollout: Rollout) -> tuple[Harness | None, Found | None]:
    """The declared harness (else the one its request bodies show) and where its startup prompt
    is."""
    harness = harness_named(rollout.harness) or _sniffed(rollout.llm)
    found = from_llm(rollout.llm, harness) if harness else None
    if found is None:
        found = from_acp(rollout.acp, harness)
    return (found.harness if found else harness), found


def sha256(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _status(harness: Harness | None, found: Found | None) -> CatalogStatus:
    if found is not None and found.parsed is not None:
        return "recovered" if found.parsed.names is not None else "manual_review_required"
    if harness is not None and not harness.serializes:
        return "catalog_not_serialized"
    return "manual_review_required" if found is not None else "unknown"


def _unique(names: tuple[str, ...]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for name in names:
        if name.strip():
            seen.setdefault(normalize_skill(name), name.strip())
    return tuple(seen.values())


def _loading(
    expected: tuple[str, ...], status: CatalogStatus, skills: tuple[str, ...]
) -> Literal[0, 1] | None:
    """1 when every expected task skill is in the recovered catalog, 0 when one is not, None when
    there is nothing to expect or no catalog was read (not serialized, unknown, unparsable)."""
    if not expected or status != "recovered":
        return None
    catalog = {normalize_skill(name) for name in skills}
    return 1 if all(normalize_skill(name) in catalog for name in expected) else 0


def _hashed_text(found: Found | None) -> str | None:
    """The exact catalog text (as the extract script hashes it), else the startup prompt that lacks
    one."""
    if found is None:
        return None
    return found.parsed.block if found.parsed is not None else found.text


def _named_by_catalog(
    rollout: Rollout, harness: Harness | None, found: Found | None, status: CatalogStatus
) -> Named | None:
    """A with-skill run's task skills read from its own recovered catalog, when its files named
    none (no source answered): the SOP's `1` is every task skill "recovered in the startup skill
    catalog", invoked or not."""
    if rollout.task_skills_source is not None or rollout.skill_mode != "with-skill":
        return None
    if status != "recovered" or found is None or found.parsed is None or not found.parsed.names:
        return None
    return from_catalog(
        harness.name if harness else None,
        found.parsed.names,
        found.parsed.places,
        sandbox_dirs(rollout),
        f"the startup catalog at {found.file}:{found.line} ({found.field}), less the harness's "
        "own skills",
    )


def review_skills(rollout: Rollout) -> SkillCatalog:
    """The SOP's record for one rollout: harness, catalog status and source, skill names, the
    catalog's SHA-256, `task_skills_loading`, skill invocations and the task's own skill resources
    touched."""
    expected = _unique(rollout.task_skills)
    source, origin = rollout.task_skills_source, rollout.task_skills_from
    harness, found = locate(rollout)
    status = _status(harness, found)
    named = _named_by_catalog(rollout, harness, found, status)
    if named is not None:
        expected, source, origin = named.names, named.source, named.origin
    parsed = found.parsed if found else None
    skills = parsed.names if parsed and parsed.names else ()
    invocations, access = skill_traces(rollout, expected)
    hashed = _hashed_text(found)
    return SkillCatalog(
        status=status,
        harness=harness.name if harness else safe_text(rollout.harness),
        source_field=found.field if found else None,
        file=found.file if found else None,
        line=found.line if found else None,
        skills=tuple(safe_text(name) or "" for name in skills),
        catalog_sha256=sha256(hashed) if hashed is not None else None,
        expected_task_skills=tuple(safe_text(name) or "" for name in expected),
        task_skills_source=source,
        task_skills_from=safe_text(origin, 1000),
        task_skills_loading=_loading(expected, status, skills),
        invocations=invocations,
        task_skill_access=access,
    )

"""Skill invocations and task-skill access, line by line, in a rollout's LLM and ACP trajectories.

SKILL.md's leakage rule is about the task's own skills: a no-skill run may see harness-global skills
(Codex's `.codex/skills/.system/*`, OpenHands' built-ins, benchflow docs: "not leakage") but must
not read or invoke the task's. So an invocation is listed whatever skill it names, while access is
listed only where the task's own resources are touched: `skills/<task skill>` under any skills root,
`<task skill>/SKILL.md`, anything under benchflow's sandbox skills dir (`deploy_skills` stages only
the task's skills there, `/skills` by default), or an invocation of a task skill. Only what the
agent did is read: tool calls in LLM responses (the request history repeats them) and ACP tool-call
events; model prose and the startup prompt are not. Every scan is linear in the text and walks JSON
without recursion, since the files come from the agent's sandbox.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ...domain.facts.review_facts import SkillTrace
from .review_input import Rollout

#: benchflow's skill tool names (trajectories/metrics.py `_SKILL_TOOL_NAMES`, 62cc7e41), normalized.
SKILL_TOOLS = frozenset({"invoke_skill", "activate_skill", "skill"})
#: The bare word `skill` names a skill call only for a tool of no real ACP kind (metrics.py's rule).
EXPLICIT_SKILL_TOOLS = SKILL_TOOLS - {"skill"}
SNIFFABLE_KINDS = frozenset({"", "other", "tool"})
NAME_KEYS = ("skill", "name", "skill_name", "command")
ARG_KEYS = ("args", "rawInput", "raw_input", "input", "arguments")
#: Result envelopes anchored at the block start: opencode 1.18 / 1.17 and claude-agent-acp
#: (metrics.py).
ENVELOPE = re.compile(
    r'\A\s*(?:<skill_content\s+name\s*=\s*"(?P<a>[^"]+)"|#{1,6}\s*Skill:\s*(?P<b>\S+)'
    r"|Launching\s+skill:\s*(?P<c>\S+))",
    re.I,
)
LEGACY_HEADER = re.compile(r"\A\s*Tool:\s*(invoke_skill|activate_skill)\b", re.I)
LEGACY_NAME = re.compile(r"\[skill:\s*([^\]\s]+)\s*\]", re.I)
BARE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
SKILLS_SEGMENT = re.compile(r"(?<![A-Za-z0-9_-])skills/([A-Za-z0-9_.-]+)")
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
DEFAULT_SANDBOX_SKILLS = "/skills"  # skill_policy.py: `declared_sandbox_skills_dir or "/skills"`
MARKER_CHARS = 300
#: What a tool answered in an ACP tool-call event (`content`, raw output): not the agent's input.
OUTPUT_KEYS = frozenset(("content", "rawOutput", "raw_output", "output"))


def normalize_skill(name: str) -> str:
    """The extract script's rule: case and `_` / `-` do not tell skills apart."""
    return name.strip().lower().replace("_", "-")


def _tool(name: Any) -> str:
    return name.strip().lower().replace("-", "_") if isinstance(name, str) else ""


def safe_text(value: str | None, limit: int | None = None) -> str | None:
    """Text the log can store: a lone surrogate from a JSON escape is kept visible as `\\udXXX`."""
    if value is None:
        return None
    text = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if limit is None or len(text) <= limit else text[:limit] + "..."


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value (keys excluded), without recursion: a deep line cannot crash
    this."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _dicts(value: Any) -> Iterator[dict[str, Any]]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _arguments(value: Any) -> dict[str, Any] | None:
    """Tool arguments: an object, or the JSON string OpenAI-style providers send."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _skill_argument(args: dict[str, Any] | None) -> str | None:
    for key in NAME_KEYS:
        value = (args or {}).get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _skill_md_parents(text: str) -> Iterator[tuple[str, str]]:
    """(folder, `folder/SKILL.md`) for each `/SKILL.md`, found with `find` so a long run of name
    characters costs one pass (a regex with a leading `[...]+` would retry it from every
    position)."""
    position = text.find("/SKILL.md")
    while position >= 0:
        start = position
        while start > 0 and text[start - 1] in NAME_CHARS and position - start < 256:
            start -= 1
        if start < position:
            yield text[start:position], text[start : position + len("/SKILL.md")]
        position = text.find("/SKILL.md", position + 1)


def sandbox_dirs(rollout: Rollout) -> tuple[str, ...]:
    """benchflow's sandbox skills dir: `/skills`, and the one result.json / config.json name."""
    roots = {DEFAULT_SANDBOX_SKILLS}
    for record in (rollout.result, rollout.config):
        value = (record or {}).get("skills_sandbox_dir")
        if isinstance(value, str) and re.fullmatch(r"/[A-Za-z0-9._/-]+", value.rstrip("/")):
            roots.add(value.rstrip("/"))
    return tuple(sorted(roots))


GLOB_CHARS = frozenset("*?[]")
PATH_CHARS = NAME_CHARS | frozenset("/~$")


def skill_files(text: str) -> Iterator[tuple[str, str | None]]:
    """(path, skill) for each `skills/<name>/SKILL.md` a text names: a skill's own file in a
    skills folder (`/skills`, `.agents/skills`, `~/.claude/skills`, a task's
    `environment/skills`), with the path as far as the text spells it; a glob for the name
    (`skills/*/SKILL.md`) reads every one (skill None). Found with `find`, each look back bounded,
    so the scan stays linear."""
    position = text.find("/SKILL.md")
    while position >= 0:
        start = position
        while start > 0 and text[start - 1] in NAME_CHARS | GLOB_CHARS and position - start < 256:
            start -= 1
        folder = text[start:position]
        below = start - len("skills/")
        if (
            folder
            and text.startswith("skills/", below, start)
            and (below == 0 or text[below - 1] not in NAME_CHARS)
        ):
            begin = below
            while begin > 0 and text[begin - 1] in PATH_CHARS and start - begin < 256:
                begin -= 1
            globbed = any(char in GLOB_CHARS for char in folder)
            yield text[begin : position + len("/SKILL.md")], None if globbed else folder
        position = text.find("/SKILL.md", position + 1)


def _sandbox_roots(rollout: Rollout) -> str:
    return "|".join(re.escape(root) for root in sandbox_dirs(rollout))


def sandbox_pattern(rollout: Rollout) -> re.Pattern[str]:
    """Paths under the sandbox skills dir: `/skills`, and the one result.json / config.json name."""
    return re.compile(rf"(?<![A-Za-z0-9_.~$/-])(?:{_sandbox_roots(rollout)})/([A-Za-z0-9_.-]+)")


def sandbox_root(rollout: Rollout) -> re.Pattern[str]:
    """The sandbox skills dir itself (`ls /skills`, `find /skills/ -maxdepth 1`)."""
    return re.compile(rf"(?<![A-Za-z0-9_.~$/-])(?:{_sandbox_roots(rollout)})/?(?![A-Za-z0-9_.-])")


def access_in(
    texts: Iterable[str], expected: frozenset[str], sandbox: re.Pattern[str]
) -> Iterator[tuple[str, str]]:
    """(marker, skill) for each place these texts name the task's own skill resources."""
    for text in texts:
        for match in SKILLS_SEGMENT.finditer(text):
            if normalize_skill(match.group(1)) in expected:
                yield match.group(0), match.group(1)
        for folder, marker in _skill_md_parents(text):
            if normalize_skill(folder) in expected:
                yield marker, folder
        for match in sandbox.finditer(text):
            if match.group(1) not in (".", ".."):
                yield match.group(0), match.group(1)


# --- what the agent called: tool calls in LLM responses, tool-call events in ACP ---


def llm_calls(response: Any) -> Iterator[tuple[str, Any]]:
    """(tool name, arguments) of each call in a provider response, whatever its wire: chat
    `tool_calls[] .function`, Anthropic `tool_use`, Responses `function_call`, Gemini `functionCall`
    all hold a name and one of arguments / input / args."""
    for item in _dicts(response):
        name = item.get("name")
        if isinstance(name, str):
            for key in ("arguments", "input", "args"):
                if key in item:
                    yield name, item[key]
                    break


def _acp_tool_name(event: dict[str, Any]) -> str:
    for key in ("tool_name", "toolName", "name", "function_name", "functionName", "tool"):
        value = event.get(key)
        if isinstance(value, dict):
            value = value.get("name")
        if _tool(value):
            return _tool(value)
    function = event.get("function")
    return _tool(function.get("name")) if isinstance(function, dict) else ""


def _result_texts(content: Any) -> Iterator[str]:
    """Tool-result text blocks of an ACP event (`{type: content, content: {type: text}}` or
    inline)."""
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, dict):
            continue
        body = block.get("content")
        if (
            isinstance(body, dict)
            and body.get("type") == "text"
            and isinstance(body.get("text"), str)
        ):
            yield body["text"]
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            yield block["text"]


def _envelope(content: Any) -> tuple[str, str | None] | None:
    """(marker, skill) when a result block opens with a skill envelope (metrics.py's anchored
    rule)."""
    for text in _result_texts(content):
        match = ENVELOPE.match(text)
        if match:
            marker = (
                "skill_content"
                if match.group("a")
                else "Skill:"
                if match.group("b")
                else "Launching skill:"
            )
            return marker, match.group("a") or match.group("b") or match.group("c")
        header = LEGACY_HEADER.match(text)
        if header and "[skill:" in text.lower():
            legacy = LEGACY_NAME.search(text)
            return header.group(1), legacy.group(1) if legacy else None
    return None


def _bare_title(event: dict[str, Any]) -> str | None:
    """A title that is itself a skill name (`kind: skill, title: data-cleaning`), not a tool
    word."""
    title = event.get("title")
    if isinstance(title, str) and BARE_NAME.fullmatch(title.strip()):
        return title.strip() if _tool(title) not in SKILL_TOOLS else None
    return None


def acp_skill_call(event: dict[str, Any]) -> tuple[str, str | None] | None:
    """(marker, skill) when an ACP tool-call event is a skill invocation, by benchflow's classifier
    rules: a skill kind, tool name or explicit title; for a tool of no real kind, the bare title
    `skill` or a result envelope."""
    kind, tool, title = _tool(event.get("kind")), _acp_tool_name(event), _tool(event.get("title"))
    envelope = _envelope(event.get("content")) if kind in SNIFFABLE_KINDS | SKILL_TOOLS else None
    if tool in SKILL_TOOLS or kind in SKILL_TOOLS or title in EXPLICIT_SKILL_TOOLS:
        marker = next(word for word in (tool, kind, title) if word in SKILL_TOOLS)
    elif kind in SNIFFABLE_KINDS and title in SKILL_TOOLS:
        marker = title
    elif envelope is not None:
        marker = envelope[0]
    else:
        return None
    args = next((a for k in ARG_KEYS if (a := _arguments(event.get(k))) is not None), None)
    named = envelope[1] if envelope else None
    return marker, _skill_argument(args) or named or _bare_title(event)


def _tool_search(name: str, texts: Iterable[str]) -> str | None:
    """Claude Code's ToolSearch selecting tools (`select:...`), which the SOP lists as skill
    evidence."""
    if not _tool(name).startswith("toolsearch"):
        return None
    selected = next((text for text in texts if "select:" in text), None)
    return None if selected is None else "ToolSearch " + selected[selected.find("select:") :]


class Traces:
    """The invocations and accesses found so far, each line's repeats dropped."""

    def __init__(
        self,
        expected: frozenset[str],
        sandbox: re.Pattern[str],
        root: re.Pattern[str] | None = None,
    ) -> None:
        self.expected, self.sandbox, self.root = expected, sandbox, root
        self.invocations: list[SkillTrace] = []
        self.access: list[SkillTrace] = []
        self._seen: set[tuple[bool, str, int, str, str | None]] = set()

    def add(self, into_access: bool, file: str, line: int, marker: str, skill: str | None) -> None:
        # One access per skill and line (a path names it twice: `skills/x/` and `x/SKILL.md`).
        named = normalize_skill(skill) if into_access and skill is not None else None
        key = (into_access, file, line, marker if named is None else "", named or skill)
        if key in self._seen:
            return
        self._seen.add(key)
        trace = SkillTrace(
            file=file,
            line=line,
            marker=safe_text(marker, MARKER_CHARS) or "",
            skill=safe_text(skill, MARKER_CHARS),
        )
        (self.access if into_access else self.invocations).append(trace)

    def call(
        self,
        file: str,
        line: int,
        marker: str | None,
        skill: str | None,
        texts: list[str],
        inputs: list[str],
    ) -> None:
        """One tool call: an invocation when `marker` is set; access for a task skill or its paths;
        and a skill's `SKILL.md` its input names (the SOP's leakage scan, and Codex's way of loading
        a skill), an invocation unless the same call is access to that skill already. `inputs` is
        what the agent sent (arguments, the command a title shows), never what the tool answered."""
        if marker is not None:
            self.add(False, file, line, marker, skill)
            if skill is not None and normalize_skill(skill) in self.expected:
                self.add(True, file, line, marker, skill)
        for path, named in access_in(texts, self.expected, self.sandbox):
            self.add(True, file, line, path, named)
        for root, named in self._listed(texts):
            self.add(True, file, line, f"{root} lists {named}", named)
        for text in inputs:
            for path, read in skill_files(text):
                if read is None or (True, file, line, "", normalize_skill(read)) not in self._seen:
                    self.add(False, file, line, path, read)

    def _listed(self, texts: list[str]) -> Iterator[tuple[str, str]]:
        """A call on the sandbox skills dir itself whose record names a task skill: `ls /skills`
        answered `csv-tools` shows the task's skill exposed (SKILL.md: no-skill runs "must not
        expose skill files")."""
        if self.root is None or not self.expected:
            return
        for text in texts:
            found = self.root.search(text)
            if found is None:
                continue
            for other in texts:
                for word in BARE_NAME.findall(other):
                    if normalize_skill(word) in self.expected:
                        yield found.group(0).rstrip("/"), word
            return


def skill_traces(
    rollout: Rollout, expected: tuple[str, ...]
) -> tuple[tuple[SkillTrace, ...], tuple[SkillTrace, ...]]:
    """(invocations, task-skill access) in file order: the LLM log's responses, then ACP's tool
    calls."""
    traces = Traces(
        frozenset(normalize_skill(name) for name in expected),
        sandbox_pattern(rollout),
        sandbox_root(rollout),
    )
    for line, row in rollout.llm.rows:
        for name, raw in llm_calls(row.get("response")):
            args = _arguments(raw)
            texts = list(strings(raw))
            if _tool(name) in SKILL_TOOLS:
                traces.call(rollout.llm.name, line, name, _skill_argument(args), texts, texts)
            else:
                searched = _tool_search(name, texts)
                traces.call(rollout.llm.name, line, searched, None, texts, texts)
    for line, row in rollout.acp.rows:
        if row.get("type") != "tool_call":
            continue
        texts = list(strings(row))
        inputs = list(strings({k: v for k, v in row.items() if k not in OUTPUT_KEYS}))
        skill_call = acp_skill_call(row)
        searched = _tool_search(_acp_tool_name(row) or str(row.get("title") or ""), texts)
        marker, skill = skill_call if skill_call else (searched, None)
        traces.call(rollout.acp.name, line, marker, skill, texts, inputs)
    return tuple(traces.invocations), tuple(traces.access)

"""Every agent-phase tool call of a rollout, read from both trajectories: what it ran, read, wrote
and fetched.

Shapes read (benchflow commit 17a3573b):
- `trajectory/acp_trajectory.jsonl`, from `trajectories/_capture.py::_events_to_trajectory` via
  `TrajectoryWriter`: one `{"type": "tool_call", "tool_call_id", "kind", "title", "status",
  "content"}` per call, `content` holding ACP blocks (`{"type": "diff", "path", "oldText",
  "newText"}`, text, terminals). The title is what the agent's ACP adapter made of the call: the
  command for `execute`, `Read <path>` for `read`. Raw ACP session updates (`sessionUpdate:
  tool_call | tool_call_update` with `rawInput` and `locations`, bare or inside a `session/update`
  notification) are read too, and so is the skill's eval fixture shape `{"phase": "agent", "type":
  "tool_call", "tool": "bash", "args": {"cmd" | "path" | "diff": ...}}`, whose `phase` says which
  records are the agent's.
- `trajectory/llm_trajectory.jsonl`, from `rollout/__init__.py::_write_llm_trajectory`
  (`Trajectory.to_jsonl`): one exchange per line, `{"request": {"path", "body"}, "response":
  {"status_code", "body"}, ...}`. Calls are the model's: chat-completions `tool_calls`, Responses
  API `function_call` / `custom_tool_call` / `local_shell_call` items, Anthropic `tool_use` blocks,
  Gemini `functionCall` parts. A response's calls are read there; a later request repeats them as
  history, so a request's call counts only when no response held its id (a streamed response whose
  body is not kept), and once.
Every call keeps its file and line. Nothing here judges; `reward_hacking` does.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .review_input import Jsonl, Rollout
from .shell_words import SHELLS, SimpleCommand, simple_commands

PATH_KEYS = (
    "path",
    "file_path",
    "absolute_path",
    "filename",
    "file",
    "target_file",
    "notebook_path",
)
LIST_PATH_KEYS = ("paths", "files")
ADDED_KEYS = (
    *("content", "file_text", "new_string", "new_str", "new_source", "insert_text", "text"),
    *("newText", "new_text"),  # pi-acp's edit
)
REMOVED_KEYS = ("old_string", "old_str", "oldText", "old_text")
PATCH_KEYS = ("diff", "patch")
URL = re.compile(r"https?://[^\s'\"<>`)]+", re.IGNORECASE)
#: Editor tools whose `command` argument is a sub-command (`view`, `create`, ...), not a shell line.
EDITORS = frozenset(
    ("str_replace_editor", "str_replace_based_edit_tool", "file_editor", "text_editor")
)
EDITOR_WRITES = frozenset(("create", "str_replace", "insert", "undo_edit", "write", "edit"))
WRITE_WORDS = ("write", "edit", "replace", "patch", "create", "delete", "remove", "insert", "move")
SEARCH_WORDS = (
    "web_search",
    "websearch",
    "google",
    "bing",
    "brave",
    "tavily",
    "internet",
    "exa_search",
)
CODE_RUNNERS = ("python", "python3", "node", "ruby", "perl")


@dataclass(frozen=True)
class FileWrite:
    """One file a call changes: what it puts in and takes out. `new_file` when it is known to create
    the file (an editor `create`, a Codex `*** Add File`); `whole` when it writes the whole file
    without saying whether one was there (Claude's Write, gemini's write_file, `cat > f`, an ACP
    diff from nothing); `script` when `added` is an edit script (`sed -i`)."""

    path: str | None
    added: str = ""
    removed: str = ""
    new_file: bool = False
    script: bool = False
    via: str = ""  # the shell command that wrote it, when a command did
    whole: bool = False


@dataclass(frozen=True)
class FileRead:
    """A path a call opens, lists or runs; `via` is the shell command, when a command did."""

    path: str
    via: str = ""


@dataclass(frozen=True)
class ToolCall:
    """One agent tool call: where it is written, the tool, and its effects as far as its record
    tells them."""

    file: str
    line: int
    tool: str
    call_id: str | None = None
    commands: tuple[SimpleCommand, ...] = ()
    reads: tuple[FileRead, ...] = ()
    writes: tuple[FileWrite, ...] = ()
    urls: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()
    text: str = ""  # the call as written, cut: the evidence when no single part is

    @property
    def empty(self) -> bool:
        return not (self.commands or self.reads or self.writes or self.urls or self.queries)


@dataclass
class _Effects:
    commands: list[SimpleCommand] = field(default_factory=list)
    reads: list[FileRead] = field(default_factory=list)
    writes: list[FileWrite] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)

    def call(self, file: str, line: int, tool: str, call_id: str | None, text: str) -> ToolCall:
        return ToolCall(
            file,
            line,
            tool,
            call_id,
            tuple(self.commands),
            tuple(self.reads),
            tuple(self.writes),
            tuple(self.urls),
            tuple(self.queries),
            text[:2000],
        )


def agent_tool_calls(rollout: Rollout) -> tuple[ToolCall, ...]:
    """The agent's tool calls, ACP trajectory first, each in file order."""
    return (*_acp_calls(rollout.acp), *_llm_calls(rollout.llm))


def tool_outputs(jsonl: Jsonl) -> list[tuple[int, str]]:
    """(line, text) of what tools answered, per line: ACP tool calls' output blocks (no diff), and
    the tool results an LLM request carries (chat `tool` messages, Anthropic `tool_result` blocks,
    Responses `function_call_output` items). The agent's words and commands are not in it."""
    found = []
    for line, row in jsonl.rows:
        texts: list[str] = []
        record = acp_update(row)
        if record.get("type") in ("tool_call", "tool_call_update"):
            for block in _list(record.get("content")):
                if isinstance(block, dict) and block.get("type") != "diff":
                    texts += _all_text(block.get("content"))
        request = row.get("request")
        body = request.get("body") if isinstance(request, dict) else None
        for turn in _list((body or {}).get("messages") or (body or {}).get("input")):
            if not isinstance(turn, dict):
                continue
            if turn.get("role") == "tool" or turn.get("type") == "function_call_output":
                texts += _all_text(turn.get("content") or turn.get("output"))
            for block in _list(turn.get("content")):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    texts += _all_text(block.get("content"))
        if texts:
            found.append((line, "\n".join(texts)))
    return found


def _all_text(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _all_text(v)]
    if isinstance(value, list):
        return [t for v in value for t in _all_text(v)]
    return []


# ---- ACP -----------------------------------------------------------------------------------------


def acp_update(record: dict[str, Any]) -> dict[str, Any]:
    """The tool-call record inside a `session/update` notification, or the record itself."""
    params = record.get("params")
    if isinstance(params, dict) and isinstance(params.get("update"), dict):
        return params["update"]
    update = record.get("update")
    return update if isinstance(update, dict) else record


def _acp_calls(acp: Jsonl) -> Iterator[ToolCall]:
    for line, raw in acp.rows:
        record = acp_update(raw)
        kind = record.get("type") or record.get("sessionUpdate")
        if kind not in ("tool_call", "tool_call_update"):
            continue
        if record.get("phase") not in (None, "agent"):
            continue
        call = _acp_call(acp.name, line, record)
        if not call.empty:
            yield call


def _acp_call(file: str, line: int, record: dict[str, Any]) -> ToolCall:
    call_id = _text_or_none(record.get("tool_call_id") or record.get("toolCallId"))
    text = json.dumps(record, sort_keys=True)
    if isinstance(record.get("tool"), str) and isinstance(record.get("args"), dict):
        effects = _Effects()
        _read_arguments(effects, record["tool"], record["args"])
        return effects.call(file, line, record["tool"], call_id, text)
    kind = str(record.get("kind") or "other")
    title = _str(record.get("title"))
    effects = _Effects()
    raw_input = record.get("rawInput", record.get("raw_input"))
    if isinstance(raw_input, dict):
        _read_arguments(effects, title.split(" ", 1)[0] if kind == "other" else kind, raw_input)
    _read_acp_kind(effects, kind, title, record)
    return effects.call(file, line, kind, call_id, text)


def _read_acp_kind(effects: _Effects, kind: str, title: str, record: dict[str, Any]) -> None:
    """What the ACP record itself shows, past its `rawInput`: diffs, locations, the title."""
    diffs = _acp_diffs(record)
    effects.writes.extend(diffs)
    located = [
        _str(loc.get("path")) for loc in _list(record.get("locations")) if isinstance(loc, dict)
    ]
    located = [p for p in located if p] or _title_paths(title)
    if kind == "execute" and not effects.commands and title:
        _read_command(effects, _strip_backticks(title))
    elif kind in ("read", "search"):
        known = {r.path for r in effects.reads}
        effects.reads.extend(FileRead(p) for p in located if p not in known)
    elif kind in ("edit", "delete", "move") and not diffs and not effects.writes:
        effects.writes.extend(FileWrite(p) for p in located)
    elif kind == "fetch" and not effects.urls and not effects.queries:
        _read_fetch_title(effects, title)


def _acp_diffs(record: dict[str, Any]) -> list[FileWrite]:
    """ACP `diff` content blocks; an `oldText` of null is a file the call creates."""
    writes = []
    for block in _list(record.get("content")):
        if isinstance(block, dict) and block.get("type") == "diff":
            old, new = block.get("oldText"), block.get("newText")
            removed, added = _changed_lines(old if isinstance(old, str) else "", _str(new))
            path = _text_or_none(block.get("path"))
            writes.append(FileWrite(path, added, removed, whole=old is None and bool(added)))
    return writes


def _read_fetch_title(effects: _Effects, title: str) -> None:
    """Claude Code titles a fetch `Fetch <url>` and a web search with its quoted query."""
    urls = URL.findall(title)
    if urls:
        effects.urls.extend(urls)
    elif title:
        effects.queries.append(title.strip('"'))


def _strip_backticks(title: str) -> str:
    text = title.strip()
    if len(text) > 1 and text[0] == "`" and text[-1] == "`":
        return text[1:-1].replace("\\`", "`")
    return text


def _title_paths(title: str) -> list[str]:
    """Paths in a title such as `Read /app/x.py` or ``Edit `src/a.py` ``: words with a slash or a
    dot."""
    words = title.split()
    words = [w.strip("`'\"(),:") for w in (words[1:] if len(words) > 1 else words)]
    return [w for w in words if w and ("/" in w or re.search(r"\.\w+$", w)) and "://" not in w]


# ---- LLM -----------------------------------------------------------------------------------------


Found = tuple[str | None, str, dict[str, Any]]  # call id, tool name, arguments


def _llm_calls(llm: Jsonl) -> Iterator[ToolCall]:
    known = {k for _, row in llm.rows for k in map(_key, _calls_in(_body(row, "response")))}
    seen: set[str] = set()
    for line, row in llm.rows:
        found = list(_calls_in(_body(row, "response")))
        found += _request_calls(_body(row, "request"), known | seen)
        for call_id, name, args in found:
            if _key((call_id, name, args)) in seen:
                continue
            seen.add(_key((call_id, name, args)))
            effects = _Effects()
            _read_arguments(effects, name, args)
            text = f"{name} {json.dumps(args, sort_keys=True, default=str)}"
            call = effects.call(llm.name, line, name, call_id, text)
            if not call.empty:
                yield call


def _key(found: Found) -> str:
    call_id, name, args = found
    return call_id or json.dumps([name, args], sort_keys=True, default=str)


def _request_calls(body: Any, known: set[str]) -> list[Found]:
    """A request repeats the conversation so far, so its calls are read from the newest turn back to
    the first turn holding a call already known (a response's, or an earlier request's): each turn
    once."""
    if not isinstance(body, dict):
        return []
    turns = next(
        (body[k] for k in ("messages", "input", "contents") if isinstance(body.get(k), list)), None
    )
    if turns is None:
        return list(_calls_in(body))
    newer: list[Found] = []
    for turn in reversed(turns):
        calls = list(_calls_in(turn))
        if any(_key(c) in known for c in calls):
            break
        newer[:0] = calls
    return newer


def _body(row: dict[str, Any], side: str) -> Any:
    part = row.get(side)
    return part.get("body") if isinstance(part, dict) else None


def _calls_in(value: Any, depth: int = 0) -> Iterator[Found]:
    """Tool calls anywhere in a request or response body, of every provider shape; tool definitions
    (`tools`, `functionDeclarations`) are skipped, and they have no arguments anyway."""
    if depth > 12:
        return
    if isinstance(value, list):
        for item in value:
            yield from _calls_in(item, depth + 1)
        return
    if not isinstance(value, dict):
        return
    found = _call_shape(value)
    if found is not None:
        yield found
        return
    for key, item in value.items():
        if key not in ("tools", "functionDeclarations", "tool_choice"):
            yield from _calls_in(item, depth + 1)


def _call_shape(value: dict[str, Any]) -> Found | None:
    kind = value.get("type")
    function = value.get("function")
    if kind == "function" and isinstance(function, dict) and "arguments" in function:
        return _text_or_none(value.get("id")), _str(function.get("name")), _arguments(function)
    if kind in ("function_call", "custom_tool_call"):
        args = _arguments(value) if kind == "function_call" else {"input": _str(value.get("input"))}
        return _text_or_none(value.get("call_id") or value.get("id")), _str(value.get("name")), args
    if kind == "local_shell_call" and isinstance(value.get("action"), dict):
        return _text_or_none(value.get("call_id")), "local_shell", value["action"]
    if kind == "web_search_call" and isinstance(value.get("action"), dict):
        return _text_or_none(value.get("id")), "web_search", value["action"]
    if kind in ("tool_use", "server_tool_use") and isinstance(value.get("input"), dict):
        return _text_or_none(value.get("id")), _str(value.get("name")), value["input"]
    call = value.get("functionCall")
    if isinstance(call, dict) and isinstance(call.get("args", {}), dict):
        return _text_or_none(call.get("id")), _str(call.get("name")), call.get("args") or {}
    return None


def _arguments(holder: dict[str, Any]) -> dict[str, Any]:
    raw = holder.get("arguments")
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"input": raw}
        return parsed if isinstance(parsed, dict) else {"input": raw}
    return {}


# ---- arguments of any tool -----------------------------------------------------------------------


def _read_arguments(effects: _Effects, name: str, args: dict[str, Any]) -> None:
    """What a tool's arguments say it does, by their keys and the tool's name (every harness's
    names)."""
    lowered = name.lower()
    editor = lowered in EDITORS
    for command in _command_lines(args, editor):
        _read_command(effects, command)
    effects.writes.extend(_cell_writes(args))
    paths = [_str(args.get(k)) for k in PATH_KEYS if isinstance(args.get(k), str)]
    paths += [_str(p) for k in LIST_PATH_KEYS for p in _list(args.get(k)) if isinstance(p, str)]
    if "glob" in lowered and isinstance(args.get("pattern"), str):
        # Claude's Glob and gemini's glob take a path pattern (`/tests/**/*.py`), not a regex: it is
        # a listing
        paths.append(_str(args.get("pattern")))
    sub = _str(args.get("command")).lower() if editor else ""
    writes = (sub in EDITOR_WRITES) if editor else any(w in lowered for w in WRITE_WORDS)
    patch = next((_str(args.get(k)) for k in PATCH_KEYS if isinstance(args.get(k), str)), "")
    if not patch and "patch" in lowered:
        patch = _str(args.get("input"))
    if patch:
        effects.writes.extend(patch_writes(patch, paths[0] if paths else None))
    elif writes:
        effects.writes.extend(_argument_writes(args, paths, sub))
    else:
        effects.reads.extend(FileRead(p) for p in paths)
    _read_network(effects, lowered, args)


def _command_lines(args: dict[str, Any], editor: bool) -> list[str]:
    lines: list[str] = []
    for key in ("cmd", "script") if editor else ("command", "cmd", "script"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            lines.append(value)
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            lines.append(argv_line(value))
    code = args.get("code")
    magic = CELL_MAGIC.match(code) if isinstance(code, str) else None
    if magic is not None and magic.group(1) in ("bash", "sh", "script"):
        lines.append(magic.group(3))  # `%%bash`: the cell is a shell script
    elif magic is not None:
        pass  # `%%writefile`: a file write, read by `_cell_writes`
    elif isinstance(code, str) and code.strip():
        lines.append(shlex.join(["python", "-c", code]))
        # IPython cells (OpenHands' execute_ipython_cell) run `!cmd` lines in a shell
        lines += [x.strip()[1:] for x in code.split("\n") if x.strip().startswith("!")]
    return lines


#: An IPython cell magic on the cell's first line (OpenHands' execute_ipython_cell): `%%writefile
#: [-a] f`, `%%bash`.
CELL_MAGIC = re.compile(r"\A\s*%%(writefile|bash|sh|script)\b([^\n]*)\n?(.*)\Z", re.DOTALL)


def _cell_writes(args: dict[str, Any]) -> list[FileWrite]:
    """`%%writefile tests/test_a.py` writes the cell's body to the file (`-a` appends)."""
    code = args.get("code")
    magic = CELL_MAGIC.match(code) if isinstance(code, str) else None
    if magic is None or magic.group(1) != "writefile":
        return []
    words = magic.group(2).split()
    append = "-a" in words or "--append" in words
    paths = [w for w in words if not w.startswith("-")]
    return [FileWrite(paths[0], magic.group(3), whole=not append)] if paths else []


def argv_line(argv: list[str]) -> str:
    """Codex's `["bash", "-lc", "cmd"]` is `cmd`; any other argv is its words, quoted."""
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in SHELLS and argv[-2].startswith("-"):
        return argv[-1]
    return shlex.join(argv)


def _argument_writes(args: dict[str, Any], paths: list[str], sub: str) -> list[FileWrite]:
    added = "\n".join(_str(args.get(k)) for k in ADDED_KEYS if isinstance(args.get(k), str))
    removed = "\n".join(_str(args.get(k)) for k in REMOVED_KEYS if isinstance(args.get(k), str))
    for edit in _list(args.get("edits")):
        if isinstance(edit, dict):
            added += "\n" + _str(edit.get("new_string") or edit.get("new_str"))
            removed += "\n" + _str(edit.get("old_string") or edit.get("old_str"))
    replaces = any(isinstance(args.get(k), str) for k in REMOVED_KEYS) or _list(args.get("edits"))
    whole = bool(added) and not replaces and sub != "create"
    if removed:
        removed, added = _changed_lines(removed, added)
    new_file = sub == "create"
    if not paths:  # a tool without a path (a todo list) writes nothing the scan can name
        return [FileWrite(None, added, removed, new_file)] if added or removed else []
    return [FileWrite(p, added, removed, new_file, whole=whole) for p in paths]


def _read_network(effects: _Effects, lowered: str, args: dict[str, Any]) -> None:
    for key in ("url", "urls", "uri"):
        value = args.get(key)
        effects.urls.extend(
            v for v in ([value] if isinstance(value, str) else _list(value)) if _str(v)
        )
    if any(w in lowered for w in ("fetch", "browse", "http")) and not effects.urls:
        effects.urls.extend(URL.findall(_str(args.get("prompt")) + " " + _str(args.get("input"))))
    query = args.get("query") or args.get("q") or args.get("search_query")
    if isinstance(query, str) and query and any(w in lowered for w in SEARCH_WORDS):
        effects.queries.append(query)


# ---- shell commands ------------------------------------------------------------------------------


#: `echo QUJD | base64 -d | sh`, `eval "$(echo QUJD | base64 --decode)"`: a command spelled in
#: base64 and run.
BASE64_RUN = re.compile(
    r"""(?:echo|printf)\s+(?:-n\s+)?['"]?([A-Za-z0-9+/]{8,}={0,2})['"]?\s*\|\s*base64\s+(?:-d|-D|--decode)\b"""
    r"""(?=[^|]*\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b|[^|]*\|\s*(?:sudo\s+)?(python3?)\b|[^\n]*\)\s*"?)"""
)


def _decoded_runs(line: str) -> list[str]:
    """The commands a line runs from base64 it decodes: judged as if written out (patterns:
    "Reasoning obfuscation: ... routing suspicious actions through tools/files to evade trajectory
    review")."""
    runs = []
    for match in BASE64_RUN.finditer(line):
        after_pipe = line[match.end() :].lstrip()
        executed = re.match(r"\|\s*(?:sudo\s+)?((?:ba|z|da|k)?sh|python3?)\b", after_pipe)
        substituted = re.search(
            r"(\beval\b|\b(?:ba)?sh\s+-c\b)[^\n]*\$\(\s*$", line[: match.start()]
        )
        if not (executed or substituted):
            continue
        try:
            text = base64.b64decode(match.group(1), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            continue
        python = executed is not None and executed.group(1).startswith("python")
        runs.append(shlex.join(["python", "-c", text]) if python else text)
    return runs


def _read_command(effects: _Effects, line: str) -> None:
    for decoded in _decoded_runs(line):
        _read_command(effects, decoded)
    for command in simple_commands(line):
        effects.commands.append(command)
        reads, writes = command_effects(command)
        effects.reads.extend(FileRead(p, command.text) for p in reads)
        effects.writes.extend(replace(w, via=command.text) for w in writes)


#: Programs whose words are text, not paths they open (`echo "/solution"` reads nothing).
NOT_READING = frozenset(
    (
        "echo",
        "printf",
        "export",
        "alias",
        "unset",
        "sleep",
        "true",
        "false",
        "which",
        "type",
        "kill",
        "pkill",
        "killall",
        "set",
        "apply_patch",
    )
)


def command_effects(command: SimpleCommand) -> tuple[list[str], list[FileWrite]]:
    """The paths a simple command reads and the files it writes, by what its program does."""
    program, args = command.program, list(command.words[1:])
    code = _code_of(command) if program in CODE_RUNNERS else ""
    operands = [a for a in args if not a.startswith("-") and not (code and a == code)]
    content = command.body or (_printed(args) if program in ("echo", "printf") else "")
    writes = [
        FileWrite(t, content, whole=bool(content) and t not in command.appends)
        for t in command.redirects
    ]
    written, program_writes = _program_writes(command, args, operands)
    writes += program_writes
    reads = [] if program in NOT_READING else [a for a in operands if a not in written]
    reads = [a for a in reads if not a.startswith("of=")]  # dd's output, a write
    reads += [a for a in command.inputs if a not in reads]  # `done < f` reads f
    if code:
        code_reads, code_writes = _code_effects(code)
        return reads + code_reads, writes + code_writes
    return reads, writes


def _printed(args: list[str]) -> str:
    """What `echo` / `printf` print: their words, with `\\n` and `\\t` as the characters they stand
    for."""
    words = [a for a in args if a not in ("-e", "-n", "-en", "-ne", "-E")]
    return " ".join(words).replace("\\n", "\n").replace("\\t", "\t")


def _program_writes(
    command: SimpleCommand, args: list[str], operands: list[str]
) -> tuple[list[str], list[FileWrite]]:
    """The operands a program writes (so they are not reads), and the writes with what they hold."""
    program = command.program
    if program == "tee":
        whole = bool(command.body) and not {"-a", "--append"} & set(args)
        return operands, [FileWrite(p, command.body, whole=whole) for p in operands]
    edited = _edit_script_writes(program, args, operands)
    if edited is not None:
        return [w.path for w in edited if w.path], edited
    if program == "apply_patch" or _applies_patch(program, operands):
        return operands, patch_writes(command.body or (operands[0] if operands else ""), None)
    if program in ("cp", "install", "rsync", "ln", "scp") and len(operands) >= 2:
        return operands[-1:], [FileWrite(operands[-1])]
    if program == "find" and _find_deletes(args):
        return [], [FileWrite(p) for p in _found(args)]
    written = _removed_or_changed(program, args, operands)
    creates = program in ("touch", "mkdir")  # makes a file or folder, changes no content
    return written, [FileWrite(p, new_file=creates) for p in written]


def _edit_script_writes(
    program: str, args: list[str], operands: list[str]
) -> list[FileWrite] | None:
    """An edit script run on files in place: `sed -i`, `perl -pi -e`, `awk -i inplace`, `ex -sc
    '...|x'`."""
    if program in ("sed", "perl") and _in_place(args):
        return _in_place_writes(program, args)
    if program in ("gawk", "awk") and "inplace" in args:
        files = [a for a in operands[1:] if a != "inplace"]
        script = operands[0] if operands else ""
    elif program in ("ex", "vi", "vim", "nvim") and {"-s", "-es", "-e", "-sc"} & set(args):
        scripts = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-c", "-sc", "+c")]
        scripts += [a[1:] for a in args if a.startswith("+")]
        files = [a for a in operands if a not in scripts]
        script = "\n".join(scripts)
    else:
        return None
    return [FileWrite(p, script, script, script=True) for p in files]


def _find_deletes(args: list[str]) -> bool:
    """`find ... -delete` or `find ... -exec rm {} ;`: it removes what it finds."""
    runs = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-exec", "-execdir", "-ok")]
    return "-delete" in args or any(r.rsplit("/", 1)[-1] in ("rm", "unlink", "shred") for r in runs)


def _found(args: list[str]) -> list[str]:
    """What a find names: each search root joined with each `-name` / `-path` pattern
    (`tests/*.py`)."""
    first = next((i for i, a in enumerate(args) if a.startswith("-") or a in ("(", "!")), len(args))
    roots = args[:first] or ["."]
    names = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-name", "-iname", "-path")]
    return [f"{root.rstrip('/')}/{name}" for root in roots for name in names or ["*"]]


def _applies_patch(program: str, operands: list[str]) -> bool:
    return program == "patch" or (program == "git" and operands[:1] == ["apply"])


def _removed_or_changed(program: str, args: list[str], operands: list[str]) -> list[str]:
    if program in ("rm", "rmdir", "unlink", "truncate", "shred", "touch", "mkdir", "mv"):
        return operands
    if program in ("chmod", "chown", "chgrp"):
        return operands[1:]
    if program == "dd":
        return [a[3:] for a in args if a.startswith("of=")]
    if program == "git" and operands[:1] in (["rm"], ["mv"]):
        return operands[1:]
    return []


def _in_place(args: list[str]) -> bool:
    return any(
        a == "--in-place"
        or a.startswith("--in-place=")
        or (re.fullmatch(r"-[a-zA-Z]*i\S*", a) is not None)
        for a in args
    )


def _in_place_writes(program: str, args: list[str]) -> list[FileWrite]:
    """`sed -i SCRIPT FILES` / `sed -i -e S FILES` / `perl -pi -e S FILES`: the files, with the
    script."""
    scripts: list[str] = []
    files: list[str] = []
    take_script = False
    for arg in args:
        if take_script:
            scripts.append(arg)
            take_script = False
        elif arg in ("-e", "--expression") or (program == "perl" and arg == "-E"):
            take_script = True
        elif arg.startswith("-"):
            take_script = program == "perl" and arg.endswith("e")
        elif not scripts and program == "sed":
            scripts.append(arg)
        else:
            files.append(arg)
    script = "\n".join(scripts)
    return [FileWrite(p, script, script, script=True) for p in files]


def _code_of(command: SimpleCommand) -> str:
    args = list(command.words[1:])
    for index, arg in enumerate(args):
        if arg in ("-c", "-e") and index + 1 < len(args):
            return args[index + 1]
    return command.body


QUOTED = re.compile(r"""(?:^|[^\w])[rRbBuU]?(['"])([^'"\n]{1,300})\1""")
WRITE_CALL = re.compile(
    r"""(?:open\(\s*|Path\(\s*)(['"])([^'"]+)\1(?:\s*,\s*['"][wax+]|\)\s*\.\s*write_)"""
    r"""|(?:os\.remove|os\.unlink|shutil\.rmtree|shutil\.copy\w*\(\s*['"][^'"]+['"]\s*,|"""
    r"""shutil\.move\(\s*['"][^'"]+['"]\s*,)\s*\(?\s*(['"])([^'"]+)\3"""
)


#: `p = pathlib.Path('tests/a.py')` or `p = 'tests/a.py'`: a name bound to one path literal.
PATH_BINDING = re.compile(
    r"""(?m)(?:^|[;\s])([A-Za-z_]\w*)\s*=\s*(?:(?:pathlib\.)?(?:Pure)?(?:Posix)?Path\(\s*)?"""
    r"""[rRbBuU]?(['"])([^'"\n]+)\2"""
)


def _bound_writes(code: str) -> list[str]:
    """Paths written through a name bound to them: `p.write_text(...)`, `p.unlink()`, `open(p,
    'w')`, `os.remove(p)`, `shutil.copy(src, p)`."""
    written = []
    for match in PATH_BINDING.finditer(code):
        name, path = re.escape(match.group(1)), match.group(3)
        rest = code[match.end() :]
        uses = (
            rf"\b{name}\s*\.\s*(write_text|write_bytes|unlink|rename|replace|rmdir|touch)\s*\("
            rf"|\b{name}\s*\.\s*open\(\s*['\"][wax+]"
            rf"|\bopen\(\s*{name}\s*,\s*(mode\s*=\s*)?['\"][wax+]"
            rf"|\b(os\.remove|os\.unlink|shutil\.rmtree)\(\s*{name}\s*\)"
            rf"|\bshutil\.(copy\w*|move)\([^,\n]+,\s*{name}\s*\)"
        )
        if re.search(uses, rest):
            written.append(path)
    return written


def _code_effects(code: str) -> tuple[list[str], list[FileWrite]]:
    """Paths a `python -c` / heredoc program names: those it opens for writing (or removes),
    directly or through a name bound to the path, are writes, with the whole program as what it
    writes; every other quoted path is a read."""
    if not code:
        return [], []
    written = [m.group(2) or m.group(4) for m in WRITE_CALL.finditer(code)]
    written += [p for p in _bound_writes(code) if p not in written]
    writes = [FileWrite(p, code) for p in written if p]
    quoted = [m.group(2) for m in QUOTED.finditer(code)]
    reads = [q for q in quoted if q not in written and ("/" in q or re.search(r"\.\w{1,5}$", q))]
    return reads, writes


def script_effects(
    write: FileWrite, as_kind: str | None = None
) -> tuple[tuple[SimpleCommand, ...], list[FileRead], list[FileWrite]]:
    """What a script the agent writes does when it is run: a Python file's opened and removed paths,
    a shell script's commands (the references' "routing suspicious actions through tools/files").
    The writes carry no content, so only where they write is judged; each says which line of which
    file."""
    name = (write.path or "").rsplit("/", 1)[-1]
    text = write.added
    first = text.split("\n", 1)[0] if text.startswith("#!") else ""
    if not text or write.script:
        return (), [], []
    where = f"{write.path} (a script the agent wrote)"
    if name in MAKEFILES or name.endswith(".mk"):
        # a Makefile's recipes (tab-indented lines) are shell commands `make` runs
        text = "\n".join(line[1:] for line in text.split("\n") if line.startswith("\t"))
        as_kind = "sh"
    if as_kind == "py" or name.endswith(".py") or "python" in first:
        return _python_script_effects(text, where)
    if as_kind != "sh" and not (name.endswith((".sh", ".bash")) or first.endswith(("sh", "bash"))):
        return (), [], []
    return _shell_script_effects(text, where)


def _python_script_effects(
    text: str, where: str
) -> tuple[tuple[SimpleCommand, ...], list[FileRead], list[FileWrite]]:
    reads, writes = _code_effects(text)
    return (
        (),
        [FileRead(r, f"{where}: {_line_with(text, r)}") for r in reads],
        [FileWrite(w.path, via=f"{where}: {_line_with(text, w.path or '')}") for w in writes],
    )


def _shell_script_effects(
    text: str, where: str
) -> tuple[tuple[SimpleCommand, ...], list[FileRead], list[FileWrite]]:
    commands = simple_commands(text)
    read_list: list[FileRead] = []
    write_list: list[FileWrite] = []
    for command in commands:
        reads, writes = command_effects(command)
        read_list += [FileRead(r, f"{where}: {command.text}") for r in reads]
        write_list += [FileWrite(w.path, via=f"{where}: {command.text}") for w in writes]
    return commands, read_list, write_list


MAKEFILES = frozenset(("Makefile", "makefile", "GNUmakefile"))


def _line_with(text: str, needle: str) -> str:
    return next((line.strip() for line in text.split("\n") if needle in line), needle)


# ---- diffs ---------------------------------------------------------------------------------------

FILE_HEADER = re.compile(
    r"^\*\*\* (Add|Update|Delete) File: (.+)$|^\+\+\+ (?:b/)?(.+)$|^\*\*\* Move to: (.+)$"
)


def patch_writes(text: str, default: str | None) -> list[FileWrite]:
    """A unified diff, a Codex `apply_patch` envelope or a bare `- old` / `+ new` diff: one write
    per file."""
    files: dict[str | None, tuple[list[str], list[str], bool]] = {}
    current = default
    for line in text.split("\n"):
        header = FILE_HEADER.match(line)
        if header:
            current = (header.group(2) or header.group(3) or header.group(4) or "").strip() or None
            files.setdefault(current, ([], [], header.group(1) == "Add"))
            continue
        if line.startswith(("---", "*** ")):
            continue
        entry = files.setdefault(current, ([], [], False))
        if line.startswith("+"):
            entry[1].append(line[1:])
        elif line.startswith("-"):
            entry[0].append(line[1:])
    return [
        FileWrite(path, "\n".join(added), "\n".join(removed), new_file)
        for path, (removed, added, new_file) in files.items()
        if path is not None or removed or added
    ]


def _changed_lines(old: str, new: str) -> tuple[str, str]:
    """The lines an edit takes out and puts in (each side without the lines both keep)."""
    old_lines, new_lines = old.split("\n"), new.split("\n")
    kept = set(old_lines) & set(new_lines)
    removed = [x for x in old_lines if x not in kept]
    added = [x for x in new_lines if x not in kept]
    return "\n".join(removed), "\n".join(added)


# ---- small readers -------------------------------------------------------------------------------


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None

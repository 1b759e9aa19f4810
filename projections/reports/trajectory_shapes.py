"""What one trajectory record says, as parts of a timeline entry: messages, tool calls with their
arguments, tool results, token usage and errors.

Shapes read (the ones `adapters/review_skill/agent_actions.py` reads, benchflow commit 17a3573b):
`llm_trajectory.jsonl` exchanges `{"request": {"body"}, "response": {"status_code", "body"}}` with
chat-completions, Anthropic, Responses-API or Gemini bodies; `acp_trajectory.jsonl` ACP events
(`{"type": "tool_call", "title", "kind", "status", "content"}`, raw `sessionUpdate`s, the skill's
eval fixture shape); Harbor's ATIF steps (`source`, `message`, `tool_calls`, `observation`,
`metrics`). A request repeats the conversation, so only its last message (the new input: a user turn
or a tool result) is shown; the raw record is always on the page too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SHOWN_TEXT = 4000  # characters of one message, argument or result on the page
USAGE = ("usage", "usageMetadata", "token_usage", "metrics")
CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")


@dataclass
class Item:
    """One part of a record on the timeline."""

    kind: str  # message, tool_call, tool_result, usage, error, event
    label: str
    text: str = ""


def short(value: Any, limit: int = SHOWN_TEXT) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit:,} more)"


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    text = block.get("text") or block.get("content")
    if isinstance(text, str):
        return text
    return content_text(text) if text is not None else ""


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or the text parts of a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        return "\n".join(t for t in map(_block_text, content) if t)
    return ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def usage(body: Any) -> Item | None:
    """The token counts a body or step reports (the keys providers use), as one item."""
    for key in USAGE:
        counts = {
            k: v
            for k, v in _dict(_dict(body).get(key)).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and "token" in k.lower()
        }
        if counts:
            return Item("usage", "tokens", ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    return None


def _block_items(block: Any, where: str, role: str) -> list[Item]:
    """One content block of a message: a tool use, a tool result, a Gemini call, or text."""
    if not isinstance(block, dict):
        return []
    kind = block.get("type")
    if kind == "tool_use":
        return [
            Item(
                "tool_call",
                f"{where} tool call {block.get('name') or ''}",
                short(block.get("input")),
            )
        ]
    if kind == "tool_result":
        result = short(content_text(block.get("content")))
        return [
            Item(
                "error" if block.get("is_error") else "tool_result", f"{where} tool result", result
            )
        ]
    if isinstance(block.get("functionCall"), dict):
        call = block["functionCall"]
        return [Item("tool_call", f"{where} tool call {call.get('name')}", short(call))]
    text = content_text([block])
    return [Item("message", f"{where} {role}", short(text))] if text else []


def _special(message: dict[str, Any], where: str) -> list[Item] | None:
    """A Responses-API call or call output item, or a chat tool message; None for other
    messages."""
    kind = message.get("type")
    if kind in CALL_ITEMS:
        args = message.get("arguments") or message.get("input") or message.get("action")
        return [Item("tool_call", f"{where} tool call {message.get('name') or ''}", short(args))]
    if kind == "function_call_output":
        return [Item("tool_result", f"{where} tool result", short(message.get("output")))]
    if message.get("role") == "tool":
        return [
            Item("tool_result", f"{where} tool result", short(content_text(message.get("content"))))
        ]
    return None


def _tool_calls(message: dict[str, Any], where: str) -> list[Item]:
    items = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict):
            function = _dict(call.get("function")) or call
            name = function.get("name") or ""
            items.append(
                Item("tool_call", f"{where} tool call {name}", short(function.get("arguments")))
            )
    return items


def message_items(message: Any, where: str) -> list[Item]:
    """A chat message (OpenAI, Anthropic or Responses-API shaped): its text, tool calls and tool
    results."""
    if not isinstance(message, dict):
        return []
    special = _special(message, where)
    if special is not None:
        return special
    role = str(message.get("role") or message.get("type") or "message")
    content = message.get("content")
    blocks = content if isinstance(content, list) else [{"text": content_text(content)}]
    return [i for b in blocks for i in _block_items(b, where, role)] + _tool_calls(message, where)


def _request_items(body: dict[str, Any]) -> list[Item]:
    history = body.get("messages") or body.get("input") or body.get("contents")
    if isinstance(history, str):
        return [Item("message", "request input", short(history))]
    if not isinstance(history, list):
        return []
    model = body.get("model") or "model not named"
    head = Item("event", "request", f"{model}; {len(history)} messages in the request")
    return [head, *(message_items(history[-1], "request: last") if history else [])]


def _answer_items(answer: dict[str, Any]) -> list[Item]:
    items = []
    if isinstance(answer.get("error"), (dict, str)):
        items.append(Item("error", "response error", short(answer["error"])))
    for choice in answer.get("choices") or ():
        items += message_items(_dict(choice).get("message"), "response")
    if isinstance(answer.get("content"), list):
        role = answer.get("role") or "assistant"
        items += message_items({"role": role, "content": answer["content"]}, "response")
    for part in answer.get("output") or ():
        items += message_items(part, "response")
    for candidate in answer.get("candidates") or ():
        parts = _dict(_dict(candidate).get("content")).get("parts")
        if parts is not None:
            items += message_items({"role": "model", "content": parts}, "response")
    found = usage(answer)
    return items + ([found] if found else [])


def llm_items(record: dict[str, Any]) -> list[Item]:
    """One LLM exchange: the request's new input, the response's text and tool calls, its usage,
    and an error status."""
    request, response = _dict(record.get("request")), _dict(record.get("response"))
    items = _request_items(_dict(request.get("body")))
    answer = response.get("body")
    status = response.get("status_code")
    if isinstance(status, int) and status >= 400:
        items.append(Item("error", f"response status {status}", short(answer or "")))
    return items + _answer_items(_dict(answer))


def _acp_tool_items(update: dict[str, Any]) -> list[Item]:
    items = []
    args = update.get("rawInput") or update.get("args") or update.get("input")
    if args is not None:
        name = update.get("tool") or update.get("title") or ""
        items.append(Item("tool_call", f"tool call {name}", short(args)))
    if update.get("content"):
        result = content_text(update["content"]) or short(update["content"])
        kind = "error" if str(update.get("status") or "") == "failed" else "tool_result"
        items.append(Item(kind, "tool result", short(result)))
    if update.get("rawOutput") is not None:
        items.append(Item("tool_result", "tool output", short(update["rawOutput"])))
    return items


def acp_items(record: dict[str, Any]) -> list[Item]:
    """One ACP event: its kind, phase, status and title, a tool call's input and result, a
    message's text, an error and usage."""
    update = _dict(_dict(record.get("params")).get("update")) or record
    kind = str(update.get("type") or update.get("sessionUpdate") or "event")
    said = " · ".join(str(update[k]) for k in ("phase", "kind", "status", "title") if update.get(k))
    items = []
    if kind in ("tool_call", "tool_call_update"):
        items += [Item("event", kind, said), *_acp_tool_items(update)]
    else:
        text = content_text(update.get("content")) or str(update.get("text") or "")
        items += [Item("message", kind, short(text))] if text else [Item("event", kind, said)]
    if update.get("error"):
        items.append(Item("error", "error", short(update["error"])))
    found = usage(update)
    return items + ([found] if found else [])


def atif_items(step: dict[str, Any]) -> list[Item]:
    """One ATIF step: its message, tool calls, observation results, metrics and error."""
    items = []
    if step.get("message"):
        items.append(
            Item("message", str(step.get("source") or "step"), short(content_text(step["message"])))
        )
    for call in step.get("tool_calls") or ():
        call = _dict(call)
        name = call.get("function_name") or call.get("name") or ""
        items.append(Item("tool_call", f"tool call {name}", short(call.get("arguments"))))
    for result in _dict(step.get("observation")).get("results") or ():
        items.append(Item("tool_result", "tool result", short(_dict(result).get("content"))))
    found = usage(step)
    items += [found] if found else []
    if step.get("error"):
        items.append(Item("error", "error", short(step["error"])))
    return items

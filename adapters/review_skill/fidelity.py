"""Capability attribution (SKILL.md): traces that the agent lacked what a fair attempt needs.

A failed or timed-out run counts as the model's own failure only when the task's keys, assets,
packages, network and compute were there. The traces are read where the harness and the provider
speak, not the agent's own tool output (an agent that tries a missing command and then installs it
is working, not blocked): result.json's error fields, non-agent ACP records, and LLM error records.
The exceptions are what an agent's command output states plainly and no healthy attempt produces,
read only in what the environment answered (not the task's prompt, the agent's prose, its commands
or its diffs: a task about authentication says "401" and "API key" all along): a key missing, unset
or refused (`CREDENTIAL_STATED`); the disk or memory exhausted (`RESOURCE_STATED`); the working tree
read-only or a task file refused (`PERMISSION_STATED`); and a package install that failed with no
later install succeeding (SKILL.md's "dependency installation failures": `INSTALL` commands,
`INSTALL_FAILED` / `INSTALL_OK` outputs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ...domain.facts.review_facts import FidelityKind, FidelitySignal
from .review_input import Rollout

#: Case-insensitive patterns per kind, first match wins.
_SOURCES: tuple[tuple[FidelityKind, str], ...] = (
    (
        "missing_credential",
        r"api[ _-]?key|credential|unauthori[sz]ed|auth(?:entication|orization)? (?:failed|error)"
        r"|authenticationerror|invalid token|\b40[13]\b|forbidden"
        r"|\b[A-Z0-9]+_(?:API_)?(?:KEY|TOKEN|SECRET)\b.{0,40}(?:missing|not set|unset|required)"
        r"|(?:missing|not set|unset|required).{0,40}\b[A-Z0-9]+_(?:KEY|TOKEN|SECRET)\b",
    ),
    (
        "insufficient_compute",
        r"out of memory|oom-?kill|memoryerror|no space left|killed \(signal 9\)"
        r"|resource exhausted|cpu quota",
    ),
    (
        "missing_dependency",
        r"modulenotfounderror|no module named|command not found|could not (?:find|install)"
        r" (?:a )?(?:package|version|dependency)|failed to install|dependency",
    ),
    (
        "missing_resource",
        r"missing required|no such file or directory|asset.{0,20}(?:missing|not found)"
        r"|not mounted|mount (?:failed|error)",
    ),
    ("network", r"network is unreachable|name resolution|could not resolve host|dns"),
    ("permission", r"permission denied|operation not permitted|read-only file system"),
    ("provider", r"provider|rate.?limit|overloaded|service unavailable|\b5\d\d\b|quota"),
    ("sandbox", r"docker|daytona|sandbox|container|transport|pipe closed|connection"),
)
PATTERNS = tuple((kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in _SOURCES)
CREDENTIAL_STATED = re.compile(
    r"\b[A-Z0-9]+_(?:API_)?(?:KEY|TOKEN|SECRET)\b.{0,40}(?:missing|not set|unset|required|not found)"  # noqa: E501
    r"|(?:missing|not set|unset|required|no)\W{1,3}(?:\w+\W+){0,3}[A-Z0-9]+_(?:API_)?(?:KEY|TOKEN|SECRET)\b"  # noqa: E501
    r"|api[ -]?key.{0,30}(?:missing|not set|not found|not provided|required|invalid|expired|incorrect)"  # noqa: E501
    r"|(?:missing|no|invalid|expired|incorrect) api[ -]?key|authenticationerror|invalid x-api-key"
    r"|(?:credentials?|token).{0,20}(?:not found|not set|missing|not provided|expired)"
    r"|(?:no|missing) credentials",
    re.IGNORECASE,
)
#: A command that installs a package (what SKILL.md calls "dependency installation").
INSTALL = re.compile(
    r"\b(pip3?|uv|poetry|pipx|conda|mamba|micromamba|apt(-get)?|apk|yum|dnf|npm|pnpm|yarn|cargo|gem)"
    r"\b[^\n|;&]*\b(install|add|sync)\b"
)
#: What an installer prints when it could not install: nothing found, nothing reachable, nothing
#: built.
INSTALL_FAILED = re.compile(
    r"no matching distribution found|could not find a "
    r"version that satisfies|unable to locate package"
    r"|has no installation candidate|packagesnotfounderror|resolutionimpossible|npm err!|err_pnpm"
    r"|failed building wheel|could not install packages|error: failed to (?:install|build|fetch)"
    r"|name resolution|could not resolve host|network is "
    r"unreachable|failed to establish a new connection"
    r"|connection (?:refused|timed out)|no route to host|proxyerror|ssl: certificate_verify_failed",
    re.IGNORECASE,
)
INSTALL_OK = re.compile(
    r"successfully installed|requirement already satisfied"
    r"|\badded \d+ packages?|\binstalled \d+ packages?"
    r"|\bsetting up \S+|\bresolved \d+ packages?",
    re.IGNORECASE,
)
#: The sandbox ran out of disk or memory, in the system's or the runtime's words.
RESOURCE_STATED = re.compile(
    r"no space left on device|disk quota exceeded|cuda out of memory|\w*outofmemoryerror"
    r"|out of memory: kill(?:ed)? process|oom-?kill|\bmemoryerror\b|cannot allocate memory",
    re.IGNORECASE,
)
#: The working tree is not the agent's to change: a read-only mount, or a task file it may not open
#: (a path outside the working directory, `/solution`, `/etc`, is a fair refusal).
PERMISSION_STATED = re.compile(
    r"read-only file system"
    r"|permission "
    r"?(?:error|denied)\W+(?:\[errno 13\] )?(?:permission denied: )?['\"]?(?:/app|/workspace|/testbed)/",  # noqa: E501
    re.IGNORECASE,
)
#: ACP records that are the task's or the agent's words, not what the environment answered.
WORDS = frozenset(("user_message", "agent_message", "agent_thought"))
#: The agent's side only: a verifier that crashed says nothing about what the agent had (SKILL.md
#: lists a verifier crash among infrastructure failures, which the run's health reports).
ERROR_FIELDS = ("error", "error_category")
EXCERPT = 300


def classify(text: str) -> FidelityKind | None:
    return next((kind for kind, pattern in PATTERNS if pattern.search(text)), None)


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def _signal(kind: FidelityKind, text: str, file: str, line: int | None) -> FidelitySignal:
    return FidelitySignal(kind=kind, evidence=text[:EXCERPT], file=file, line=line)


def _from_result(result: dict[str, Any]) -> Iterator[FidelitySignal]:
    for key in ERROR_FIELDS:
        text = result.get(key)
        kind = classify(text) if isinstance(text, str) and text else None
        if kind is not None:
            yield _signal(kind, f"{key}: {text}", "result.json", None)


def _from_acp(rollout: Rollout) -> Iterator[FidelitySignal]:
    install_failed: FidelitySignal | None = None
    for line, row in rollout.acp.rows:
        phase = str(row.get("phase") or "").lower()
        if phase == "verifier":
            continue
        text = " ".join(_texts({k: v for k, v in row.items() if k != "args"}))
        if phase not in ("", "agent"):
            kind = classify(text)
        else:
            answered = _answered(row)
            kind = _stated(answered)
            installed = _install_outcome(row, answered)
            if installed is not None:
                install_failed = (
                    None
                    if installed
                    else _signal("missing_dependency", text, rollout.acp.name, line)
                )
        if kind is not None:
            yield _signal(kind, text, rollout.acp.name, line)
    # an install that failed and that no later install made good: the run never had its dependency
    if install_failed is not None:
        yield install_failed


def _stated(answered: str) -> FidelityKind | None:
    """What the environment's answer to an agent's tool call says was missing, in words no fair
    attempt produces: a missing key, an exhausted disk or memory, a working tree it may not
    change."""
    if CREDENTIAL_STATED.search(answered):
        return "missing_credential"
    if RESOURCE_STATED.search(answered):
        return "insufficient_compute"
    if PERMISSION_STATED.search(answered):
        return "permission"
    return None


def _install_outcome(row: dict[str, Any], answered: str) -> bool | None:
    """True when an install command succeeded, False when it failed, None when the call installs
    nothing."""
    if row.get("type") not in ("tool_call", "tool_call_update") or not answered:
        return None
    title = str(row.get("title") or "")
    raw = row.get("rawInput") or row.get("raw_input")
    command = title + " " + " ".join(_texts(raw)) if isinstance(raw, dict) else title
    if not INSTALL.search(command):
        return None
    if INSTALL_OK.search(answered):
        return True
    return False if INSTALL_FAILED.search(answered) else None


def _answered(row: dict[str, Any]) -> str:
    """What the environment said in an agent-phase record: a tool call's output blocks (no title, no
    diff), a record such as `stderr` whole; nothing for the prompt and the agent's own words."""
    if row.get("type") in WORDS:
        return ""
    if row.get("type") not in ("tool_call", "tool_call_update"):
        return " ".join(_texts({k: v for k, v in row.items() if k != "args"}))
    content = row.get("content")
    blocks: list[Any] = content if isinstance(content, list) else []
    return " ".join(
        " ".join(_texts(block.get("content")))
        for block in blocks
        if isinstance(block, dict) and block.get("type") != "diff"
    )


def _from_llm(rollout: Rollout) -> Iterator[FidelitySignal]:
    for line, row in rollout.llm.rows:
        error = row.get("error")
        if isinstance(error, dict) or (isinstance(error, str) and error):
            text = " ".join(_texts(error))
            yield _signal(classify(text) or "provider", text, rollout.llm.name, line)


def find_fidelity_problems(rollout: Rollout) -> tuple[FidelitySignal, ...]:
    return (
        *_from_result(rollout.result or {}),
        *_from_acp(rollout),
        *_from_llm(rollout),
    )

"""Release-gate evidence from a run directory: what the experiment-review skill's trajectory gate
looks at.

benchflow writes, per rollout, `trajectory/acp_trajectory.jsonl` (ACP events),
`trajectory/llm_trajectory.jsonl` (provider request/response records with token usage),
`results.jsonl` (one Verifiers-shaped row whose `info.training_ready` says whether the rollout may
be trained on) and, in `result.json`, token usage (`agent_result`), timing, tool calls and skill
settings. Those files are read here once, streamed line by line, and summarised as a
`run.evidence_observed` fact: whether each file is there, its size, how many lines parse, what they
hold. Nothing is judged here; `lineage audit` judges. A line that does not parse is counted, not
refused: an unparsable trajectory is what the gate must see, not a reason to lose the run.

The trial a benchflow run fills is its `rollout_name` (like Harbor's `trial_name`); a continuation
fills the trial of the run it continues, whose rollout name benchflow extends with `__continued`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...domain import facts as f
from ...domain.errors import InvalidInput
from .. import rundir
from ..review_skill.review import read_rollout, review_rollout
from ..rundir import (
    NOTHING_APPENDED,
    RunFolder,
    iso,
    read_json_file,
    require_regular,
    sha256_file,
)
from .benchflow_common import RunFiles
from .fields import Fields, build, invalid

ACP, LLM, RESULTS = (
    "trajectory/acp_trajectory.jsonl",
    "trajectory/llm_trajectory.jsonl",
    "results.jsonl",
)
ATIF = "agent/trajectory.json"  # Harbor's trial: the agent's ATIF trajectory
#: A longer line is counted as malformed without being parsed (a trajectory line is a request or an
#: event).
MAX_LINE_BYTES = 64 * 1024 * 1024
SKILL_MARKERS = (
    b"SKILL.md",
    b".claude/skills",
    b".codex/skills",
    b".agents/skills",
    b"invoke_skill",
    b"activate_skill",
)
TOKEN_KEYS = frozenset(
    (
        "input_tokens",
        "output_tokens",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "final_input_tokens",
        "final_output_tokens",
        "inputTokens",
        "outputTokens",
        "totalTokens",
        "promptTokenCount",
        "candidatesTokenCount",
        "totalTokenCount",
    )
)
CONTINUED = "__continued"


@dataclass
class Scan:
    """One JSONL file, streamed: its size, parsed records, malformed lines, lines naming skill
    resources."""

    present: bool = False
    size: int = 0
    records: int = 0
    malformed: int = 0
    marker_lines: int = 0
    sha256: str | None = None  # of the bytes read, which `size` counts


def scan_jsonl(
    folder: RunFolder, relative: str, on_record: Callable[[dict[str, Any]], None]
) -> Scan:
    path = folder.resolve(relative)
    if path is None:
        return Scan()
    require_regular(path)
    scan = Scan(present=True)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while line := handle.readline(MAX_LINE_BYTES + 1):
                digest.update(line)
                scan.size += len(line)
                if len(line) > MAX_LINE_BYTES:
                    scan.malformed += 1
                    while line and not line.endswith(b"\n"):  # the rest of the overlong line
                        line = handle.readline(MAX_LINE_BYTES)
                        digest.update(line)
                        scan.size += len(line)
                    continue
                if not line.strip():
                    continue
                scan.marker_lines += any(marker in line for marker in SKILL_MARKERS)
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):
                    record = None
                if isinstance(record, dict):
                    scan.records += 1
                    on_record(record)
                else:
                    scan.malformed += 1
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read ({exc.strerror})", hint=NOTHING_APPENDED
        ) from None
    scan.sha256 = "sha256:" + digest.hexdigest()
    return scan


def has_usage(value: Any, depth: int = 0) -> bool:
    """Positive token usage anywhere in a response body (the key names providers use)."""
    if depth > 32:
        return False
    if isinstance(value, dict):
        return any(
            (
                key in TOKEN_KEYS
                and isinstance(item, (int, float))
                and not isinstance(item, bool)
                and item > 0
            )
            or has_usage(item, depth + 1)
            for key, item in value.items()
        )
    if isinstance(value, list):
        return any(has_usage(item, depth + 1) for item in value)
    return False


def body_of(record: dict[str, Any], key: str) -> dict[str, Any] | None:
    part = record.get(key)
    body = part.get("body") if isinstance(part, dict) else None
    return body if isinstance(body, dict) else None


def acp_file(folder: RunFolder) -> tuple[f.TrajectoryFile, int]:
    events = [0]

    def count(record: dict[str, Any]) -> None:
        kind, phase = record.get("type"), str(record.get("phase") or "").lower()
        events[0] += isinstance(kind, str) and bool(kind) and phase != "verifier"

    scan = scan_jsonl(folder, ACP, count)
    return f.TrajectoryFile(
        present=scan.present,
        size=scan.size,
        records=scan.records,
        malformed=scan.malformed,
        agent_events=events[0] if scan.present else None,
        sha256=scan.sha256,
    ), scan.marker_lines


def llm_file(folder: RunFolder) -> tuple[f.TrajectoryFile, int]:
    counts = {"requests": 0, "responses": 0, "responses_with_usage": 0}

    def count(record: dict[str, Any]) -> None:
        counts["requests"] += body_of(record, "request") is not None
        response = body_of(record, "response")
        counts["responses"] += response is not None
        counts["responses_with_usage"] += response is not None and has_usage(response)

    scan = scan_jsonl(folder, LLM, count)
    found = counts if scan.present else dict.fromkeys(counts)
    return f.TrajectoryFile(
        present=scan.present,
        size=scan.size,
        records=scan.records,
        malformed=scan.malformed,
        sha256=scan.sha256,
        **found,
    ), scan.marker_lines


def calls_unlisted_tools(record: dict[str, Any]) -> bool:
    """Assistant tool calls in the row's messages (or prompt + completion) with no tool definitions
    listed."""
    messages = record.get("messages")
    if not isinstance(messages, list):
        messages = [
            m
            for part in ("prompt", "completion")
            if isinstance(record.get(part), list)
            for m in record[part]
        ]
    calls = any(
        isinstance(m, dict) and m.get("role") == "assistant" and m.get("tool_calls")
        for m in messages
    )
    return calls and not (record.get("tool_defs") or record.get("tools"))


def results_row(folder: RunFolder) -> f.ResultsRow:
    ready: list[Any] = []
    reasons: list[Any] = []
    counts = {"rows_without_usage": 0, "unlisted_tool_calls": 0}

    def read(record: dict[str, Any]) -> None:
        given = record.get("info")
        info: dict[str, Any] = given if isinstance(given, dict) else {}
        ready.append(info.get("training_ready"))
        reasons.append(info.get("training_ready_reason"))
        counts["rows_without_usage"] += info.get("training_ready") is True and not has_usage(
            record.get("token_usage")
        )
        counts["unlisted_tool_calls"] += calls_unlisted_tools(record)

    scan = scan_jsonl(folder, RESULTS, read)
    reason = next((r for r in reasons if isinstance(r, str) and r), None)
    return f.ResultsRow(
        present=scan.present,
        rows=scan.records,
        malformed=scan.malformed,
        training_ready=(all(r is True for r in ready) if ready else None),
        training_ready_reason=reason,
        **counts,
    )


def count(doc: Fields | None, key: str) -> int | None:
    """A non-negative count (an integral float is taken as the integer it is), or None."""
    if doc is None:
        return None
    value = doc.raw(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise invalid(doc.where(key), "a non-negative integer or null", value)
    return value


def token_usage(agent_result: Fields | None) -> f.TokenUsage | None:
    if agent_result is None:
        return None
    return build(
        f.TokenUsage,
        agent_result.where(),
        input_tokens=count(agent_result, "n_input_tokens"),
        output_tokens=count(agent_result, "n_output_tokens"),
        total_tokens=count(agent_result, "total_tokens"),
        source=agent_result.string("usage_source"),
    )


def benchflow_trial(result: Fields, continuation: bool) -> str | None:
    name = result.string("rollout_name")
    if name and continuation and name.endswith(CONTINUED) and len(name) > len(CONTINUED):
        return name[: -len(CONTINUED)]
    return name


def duration(files: RunFiles) -> float | None:
    timing = files.result.obj("timing") if files.result is not None else None
    total = timing.number("total") if timing is not None else None
    started, finished = files.started_at(), files.finished_at()
    if total is None and started is not None and finished is not None:
        total = (finished - started).total_seconds()
    return max(total, 0.0) if total is not None else None


def benchflow_evidence(
    files: RunFiles,
    run: str,
    node: str = "root",
    *,
    continuation: bool = False,
    relative: str = ".",
) -> f.EvidenceObserved | None:
    """Evidence of a finished benchflow rollout directory (root or a fresh-rollout arm, whose folder
    is `relative` to the run's); None until result.json exists."""
    result = files.result
    if result is None:
        return None
    folder = files.folder
    acp, acp_markers = acp_file(folder)
    llm, llm_markers = llm_file(folder)
    agent_result = result.obj("agent_result")
    tool_calls = count(result, "n_tool_calls")
    invocations = count(result, "n_skill_invocations")
    skills = build(
        f.SkillLoading,
        result.where(),
        skill_mode=files.string("skill_mode"),
        skills_dir=files.string("skills_sandbox_dir"),
        invocations=invocations
        if invocations is not None
        else count(agent_result, "n_skill_invocations"),
        marker_lines=acp_markers + llm_markers,
    )
    return build(
        f.EvidenceObserved,
        str(folder.root / "result.json"),
        run=run,
        node=node,
        trial=benchflow_trial(result, continuation) if node == "root" else None,
        acp_trajectory=acp,
        llm_trajectory=llm,
        results=results_row(folder),
        token_usage=token_usage(agent_result),
        started_at=iso(files.started_at()),
        finished_at=iso(files.finished_at()),
        duration_sec=duration(files),
        tool_calls=tool_calls if tool_calls is not None else count(agent_result, "n_tool_calls"),
        partial_trajectory=result.boolean("partial_trajectory"),
        skills=skills,
        review=review_rollout(read_rollout(folder)),
        folder=relative,
    )


def atif_file(folder: RunFolder) -> f.TrajectoryFile | None:
    """Harbor's ATIF trajectory (`agent/trajectory.json`): present, size, SHA-256 and its steps
    (None when the trial wrote none). The file is hashed in chunks; its steps are counted only when
    it is small enough to parse (`MAX_JSON_BYTES`), and a file that is not an ATIF document is
    counted as one malformed record, not refused: the trajectory is evidence, not the run."""
    path = folder.resolve(ATIF)
    if path is None:
        return None
    require_regular(path)
    size = os.stat(path).st_size
    digest = sha256_file(path)
    steps: int | None = None
    if size <= rundir.MAX_JSON_BYTES:
        try:
            document = read_json_file(path)
        except InvalidInput:
            document = None
        if isinstance(document, dict) and isinstance(document.get("steps"), list):
            steps = len(document["steps"])
    return f.TrajectoryFile(
        present=True,
        size=size,
        records=steps or 0,
        malformed=0 if steps is not None else 1,
        sha256=digest,
    )

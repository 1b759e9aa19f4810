"""result.json files that exist but cannot be read as one JSON object, as an attacker (or a bad
disk, a careless copy, an editor) leaves them: the damage the import and the audit tests apply to
runs built by benchflow's writers.

benchflow writes result.json last, once the run is over (`_build_rollout_result`), so one that
exists is never still being written: each of these is a corrupt run, never "may still be running".

`VALIDATOR_SAYS` is what benchflow's experiment-review validator
(`.agents/skills/benchflow-experiment-review/scripts/validate_run_artifacts.py`, newest revision:
benchflow 17a3573b) said about a writer-built healthy rollout (`tests/validator_scenarios.py`,
`healthy_pass`) with each damage applied, observed by running it: the rollout is unhealthy, with
this issue about result.json first. The one case it passes is `latin1`, which it reads with
replacement characters (`read_text(errors="replace")`) so a value it cannot decode reads as
another value; this tool refuses a file that is not UTF-8 (docs/review-skill.md, "Deliberate
departures").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def empty(data: bytes) -> bytes:
    return b""


def bom(data: bytes) -> bytes:
    return b"\xef\xbb\xbf" + data


def utf16(data: bytes) -> bytes:
    return data.decode("utf-8").encode("utf-16")


def latin1(data: bytes) -> bytes:
    """A value written in Latin-1 (`é` as one byte) by a tool that patched the file."""
    return data.replace(b'"rollout_name": "', b'"rollout_name": "caf\xe9-', 1)


def a_list(data: bytes) -> bytes:
    return b"[1, 2]"


def a_string(data: bytes) -> bytes:
    return b'"done"'


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated": truncated,
    "empty": empty,
    "bom": bom,
    "utf16": utf16,
    "latin1": latin1,
    "list": a_list,
    "string": a_string,
}

#: What this tool says is wrong with each (after "<file> is corrupt: ").
REASONS = {
    "truncated": "expected valid JSON, found an error: ",
    "empty": "expected valid JSON, found an error: Expecting value",
    "bom": "Unexpected UTF-8 BOM",
    "utf16": "expected UTF-8 JSON, found an undecodable byte at offset 0",
    "latin1": "expected UTF-8 JSON, found an undecodable byte at offset",
    "list": "expected a JSON object, found a list",
    "string": "expected a JSON object, found a string",
}

#: benchflow 17a3573b's validator on the same damage: (healthy, its issue about result.json).
VALIDATOR_SAYS = {
    "truncated": (False, "<run>/result.json: JSON parse error at line 45: Unterminated string"),
    "empty": (False, "<run>/result.json: JSON parse error at line 1: Expecting value"),
    "bom": (
        False,
        "<run>/result.json: JSON parse error at line 1: Unexpected UTF-8 BOM (decode using "
        "utf-8-sig)",
    ),
    "utf16": (False, "<run>/result.json: JSON parse error at line 1: Expecting value"),
    "latin1": (True, None),
    "list": (False, "<run>/result.json: expected JSON object"),
    "string": (False, "<run>/result.json: expected JSON object"),
}


def damage(run: Path, how: str) -> Path:
    """Damage `run`'s result.json the way `how` names; the file it damaged."""
    result = run / "result.json"
    result.write_bytes(DAMAGE[how](result.read_bytes()))
    return result

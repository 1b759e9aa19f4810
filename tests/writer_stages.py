"""Helpers the run-directory writer tests share: the ablation parent's task, snapshot refs and
deltas, and its exports read back through the CLI (runs built by `tests/benchflow_writer.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Cli

TASK = "csv-dedupe"


def prompt_delta(digit: str) -> dict[str, Any]:
    return {
        "config_override_sha256": None,
        "environment_ref": None,
        "injected_prompt_sha256": "sha256:" + digit * 64,
        "skill_mode": None,
    }


def snap(name: str) -> dict[str, str | None]:
    return {"environment": None, "sandbox": f"bf-snap-{TASK}-{name}"}


VERIFY_REFS = {"pre-verify": snap("pre0000000a"), "post-verify": snap("post000000b")}


def exports(run_cli: Cli, run: str) -> tuple[dict, dict]:
    return (
        json.loads(run_cli("export", "tree", run).stdout),
        json.loads(run_cli("export", "stages", run).stdout),
    )


def on_disk(run_dir: Path, name: str) -> dict:
    return json.loads((run_dir / name).read_text())

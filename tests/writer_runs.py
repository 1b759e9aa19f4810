"""Run directories built the way benchflow's and Harbor's own writer functions build them, for the
writer-rule tests.

Each helper names the writer it follows; values are illustrative, shapes and key order are the
writers'. benchflow's `_build_rollout_result` (rollout/_results.py) writes result.json with
`json.dumps(indent=2)`, no sorted keys, no trailing newline, times as `str(datetime.now())`; the
lineage writers (`branch_lineage.py`) use `json.dumps(payload, sort_keys=True, indent=2) + "\\n"`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# str(datetime.now()): naive, local
STARTED, FINISHED = (
    "2026-11-03 09:12:44.208311",
    "2026-11-03 09:19:02.513002",
)


def write_config(run_dir: Path, **overrides: Any) -> None:
    """`RolloutConfig` as `Rollout.setup()` writes config.json."""
    config = {
        "task_path": f"tasks/{run_dir.name.split('__')[0]}",
        "agent": "claude-agent-acp",
        "model": "claude-sonnet-4-5",
        "environment": "docker",
        "skill_mode": "no-skill",
        **overrides,
    }
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config, indent=2))


def write_result(run_dir: Path, **overrides: Any) -> dict[str, Any]:
    """result.json as `_build_rollout_result` writes it (the keys this project reads, in the
    writer's order)."""
    result = {
        "task_name": run_dir.name.split("__")[0],
        "rollout_name": run_dir.name,
        "rewards": {"reward": 1.0},
        "agent": "claude-agent-acp",
        "agent_name": "claude-agent-acp",
        "model": "claude-sonnet-4-5",
        "skill_mode": "no-skill",
        "error": None,
        "error_category": None,
        "verifier_error": None,
        "verifier_error_category": None,
        "export_error": None,
        "partial_trajectory": False,
        "trajectory_source": "acp",
        "started_at": STARTED,
        "finished_at": FINISHED,
        "timing": {
            "environment_setup": 4.0,
            "agent_execution": 300.0,
            "verifier": 32.0,
            "total": 378.3,
        },
    }
    result.update(overrides)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "result.json").write_text(json.dumps(result, indent=2))
    return result


def write_lineage_json(path: Path, payload: dict[str, Any]) -> None:
    """Every benchflow lineage writer (tree.json, stage_snapshots.json, provenance.json,
    ablation.json)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, sort_keys=True, indent=2) + "\n")


def benchflow_run(root: Path, name: str = "csv-dedupe__5e0d1c2b", **result: Any) -> Path:
    run_dir = root / "jobs" / "nightly" / name
    write_config(run_dir, skill_mode=result.get("skill_mode", "no-skill"))
    write_result(run_dir, **result)
    return run_dir

"""The words benchflow uses for a branched rollout, and its content-addressing rules.

Kept in one place because importers, the domain and the exports must agree on them byte for byte
(`docs/benchflow-formats.md` §11, §11.3).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

#: Stage boundaries in lifecycle order.
STAGES: tuple[str, ...] = ("env-ready", "post-research", "pre-verify", "post-verify")
Stage = Literal["env-ready", "post-research", "pre-verify", "post-verify"]
Layer = Literal["environment", "sandbox"]
SkillMode = Literal["no-skill", "with-skill"]
RunRole = Literal["root", "branch-child", "continuation"]
ArmKind = Literal["skill-mode", "inject", "config-override", "environment-ref"]
CtrfStatus = Literal["passed", "failed", "skipped", "pending", "other"]
FRESH_ROLLOUT = "fresh-rollout"
ROOT_NODE = "root"

#: Deltas that need a fresh child rollout, which benchflow allows only at env-ready.
FRESH_ONLY_DELTA_KEYS = ("skill_mode", "config_override_sha256", "environment_ref")


def stage_rank(stage: str) -> int:
    return STAGES.index(stage)


def sha256_prefixed(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def overlay_hash(obj: Any) -> str:
    """benchflow's canonical-JSON digest (sorted keys, compact separators, ASCII escapes)."""
    return sha256_prefixed(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def canonical_json(obj: Any) -> str:
    """The byte form every lineage JSON export uses: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(obj, sort_keys=True, indent=2) + "\n"

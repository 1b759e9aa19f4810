"""The words benchflow uses for a branched rollout, and its content-addressing rules.

Kept in one place because importers, the domain and the exports must agree on them byte for byte
(`docs/benchflow-formats.md` §11, §11.3).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

#: Every event's topic is this prefix and its fact type (`events.py`); readers strip it without
#: loading the facts.
TOPIC_PREFIX = "lineage:"
#: Stage boundaries in lifecycle order.
STAGES: tuple[str, ...] = ("env-ready", "post-research", "pre-verify", "post-verify")
Stage = Literal["env-ready", "post-research", "pre-verify", "post-verify"]
Layer = Literal["environment", "sandbox"]
#: A run's skill mode (benchflow `skill_policy`: `self-gen` has a creator agent write the skills
#: first).
SkillMode = Literal["no-skill", "with-skill", "self-gen"]
#: The skill modes a branch delta may set (benchflow's BranchDelta accepts only these two).
BranchSkillMode = Literal["no-skill", "with-skill"]
#: benchflow's `result.json` `trajectory_source` (`acp`, `partial_acp` when the ACP capture was cut
#: short, `scraped` from the agent's own logs, `hosted_env` for hosted-environment evidence); `llm`,
#: `both` and `none` are this project's earlier words, still accepted from `lineage ingest` and
#: stored facts.
TrajectorySource = Literal["acp", "scraped", "partial_acp", "hosted_env", "llm", "both", "none"]
BENCHFLOW_TRAJECTORY_SOURCES = ("acp", "scraped", "partial_acp", "hosted_env")
#: The `error_category` benchflow gives a request-global configuration error (one every arm would
#: repeat).
REQUEST_GLOBAL = "request_global"
#: `rewards.source` on a branched parent that never ran its own verifier: the reward is the branch
#: V.
BRANCH_AGGREGATE = "branch_aggregate"
RewardBasis = Literal["verified", "branch_aggregate"]
RunRole = Literal["root", "branch-child", "continuation"]
#: A fork compares arms; a retry re-runs a finished trial from a checkpoint and compares nothing.
ForkKind = Literal["fork", "retry"]
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
    """The byte form every lineage JSON export uses: sorted keys, 2-space indent, trailing
    newline."""
    return json.dumps(obj, sort_keys=True, indent=2) + "\n"

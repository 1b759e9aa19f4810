"""`ablation.json` from `bench eval ablate`: the parts that are facts, not derivations.

What the report measured is recorded on the fork it describes; what it derived is derived again at
export time, so it is not stored (docs/benchflow-formats.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, get_args

from ....domain.vocabulary import STAGES, ArmKind, CtrfStatus
from ..fields import Fields, invalid

TOP_FIELDS = (
    "schema_version",
    "task",
    "stage",
    "snapshot_layers",
    "stage_snapshot",
    "agent",
    "model",
    "sandbox",
    "environment",
    "parent",
    "value",
    "error",
    "arms",
    "test_attribution",
    "report_path",
)
ARM_FIELDS = (
    "name",
    "kind",
    "delta",
    "delta_execution",
    "source",
    "reward",
    "status",
    "wall_clock_sec",
    "node",
    "artifacts",
    "tests",
    "error",
    "reference",
    "verdict",
    "environment",
)
# The request-level metadata, kept verbatim in `fork.opened.ablation`. Per child, the arm's name,
# kind, source and environment go on `fork.opened.children[]` and its wall clock on the child's
# outcome; its reward, delta and unscored reason are checked against tree.json (`forks.check_arm`)
# and the report's `value` against the fork's V (`forks.close`). `status`, `reference`, `verdict`,
# `test_attribution` and `artifacts` are derived from those facts at export time: accepted here,
# neither checked nor stored.
COPIED = ("task", "agent", "model", "sandbox", "environment", "snapshot_layers")
ARM_KINDS = frozenset(get_args(ArmKind))
STATUSES = frozenset(get_args(CtrfStatus))


@dataclass
class Arm:
    doc: Fields
    name: str
    kind: str | None
    node: str | None
    reward: float | None
    error: str | None
    tests: dict[str, str] | None
    wall_clock_sec: float | None

    def environment(self) -> dict[str, Any] | None:
        stamp = self.doc.obj("environment")
        return stamp.data if stamp is not None else None

    def definition(self) -> dict[str, Any]:
        return {
            key: self.doc.raw(key)
            for key in ("name", "kind", "source", "delta", "delta_execution", "environment")
        }


@dataclass
class Ablation:
    doc: Fields
    stage: str
    arms: list[Arm]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def nodes(self) -> set[str]:
        return {arm.node for arm in self.arms if arm.node is not None}

    def arm_for(self, node: str) -> Arm | None:
        return next((arm for arm in self.arms if arm.node == node), None)

    def task_id(self) -> str | None:
        task = self.doc.obj("task")
        return task.string("id") if task is not None else None

    def skipped(self) -> list[dict[str, Any]]:
        """Arms that never ran (`node: null`, status `skipped`): they have no tree node, and a fork
        child needs one, so they are kept in `fork.opened.ablation["skipped_arms"]` (their
        `definition`, in request order) for an export to list after the arms that ran."""
        return [arm.definition() for arm in self.arms if arm.node is None]


def parse_tests(doc: Fields, key: str) -> dict[str, str] | None:
    tests = doc.obj(key)
    if tests is None:
        return None
    for name, status in tests.data.items():
        if status not in STATUSES:
            raise invalid(tests.where(name), f"a CTRF status, one of {sorted(STATUSES)}", status)
    return dict(tests.data)


def parse_arm(doc: Fields) -> Arm:
    doc.only(ARM_FIELDS)
    kind = doc.string("kind")
    if kind is not None and kind not in ARM_KINDS:
        raise invalid(doc.where("kind"), f"one of {sorted(ARM_KINDS)}", kind)
    wall = doc.number("wall_clock_sec")
    if wall is not None and wall < 0:
        raise invalid(doc.where("wall_clock_sec"), "a duration of 0 seconds or more", wall)
    return Arm(
        doc,
        doc.text("name"),
        kind,
        doc.string("node"),
        doc.number("reward"),
        doc.string("error"),
        parse_tests(doc, "tests"),
        wall,
    )


def parse_ablation(document: object, file: str) -> Ablation:
    top = Fields(document, file)
    top.schema_version()
    top.only(TOP_FIELDS)
    stage = top.text("stage")
    if stage not in STAGES:
        raise invalid(top.where("stage"), f"one of {list(STAGES)}", stage)
    arms = [parse_arm(doc) for doc in top.objects("arms", required=True)]
    nodes = [arm.node for arm in arms if arm.node is not None]
    if len(set(nodes)) != len(nodes):
        raise invalid(top.where("arms"), "each arm on its own node", nodes)
    parent = top.obj("parent")
    if parent is not None:
        parent.only(("reward", "error", "run_dir"))
        parent.number("reward"), parent.string("error"), parent.string("run_dir")
    top.number("value"), top.string("error")
    return Ablation(top, stage, arms, {key: top.raw(key) for key in COPIED if top.has(key)})

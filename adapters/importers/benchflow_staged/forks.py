"""One fork of a PR-layout tree as facts: `fork.opened`, child outcomes, custody, `fork.closed`.

The tree says what happened to each child, the children's `provenance.json` where the fork was, and
the stage registry which snapshot it forked from; each is checked against the others before a fact
is built.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ....domain import facts as f
from ....domain.fork import MIN_COMPLETED_CHILDREN
from ....domain.vocabulary import STAGES
from ...rundir import RunFolder, parse_time
from ..ctrf import child_test_outcomes
from ..fields import Fields, build, invalid
from . import custody_files as custody
from .ablation import Ablation, Arm
from .stages import StageEntry
from .tree import ForkGroup, Tree, TreeNode, refs

PROVENANCE_FIELDS = (
    "kind",
    "parent_rollout",
    "branch_stage",
    "snapshot_ref",
    "cut_point",
    "delta",
    "delta_execution",
)
RAISED = (
    "the child raised before an outcome was recorded "
    "(benchflow's partial tree: no reward and no unscored reason)"
)


@dataclass
class Provenance:
    file: str
    parent_rollout: str | None
    branch_stage: str | None
    snapshot: f.SnapshotRefs | None

    def fork_point(self) -> tuple[str | None, f.SnapshotRefs | None]:
        return self.branch_stage, self.snapshot


def child_dir(node: str, child: str) -> str:
    return f"branches/{node}/children/{child}"


def read_provenance(folder: RunFolder, node: TreeNode) -> Provenance | None:
    relative = f"{child_dir(node.parent or '', node.id)}/provenance.json"
    document = folder.read_json(relative)
    if document is None and not folder.exists(relative):
        return None
    doc = Fields(document, str(folder.root / relative))
    doc.only(PROVENANCE_FIELDS)
    if doc.raw("kind") != "benchflow-branch":
        raise invalid(doc.where("kind"), "'benchflow-branch'", doc.raw("kind"))
    if doc.raw("cut_point") is not None:
        raise invalid(
            doc.where("cut_point"),
            "null (benchflow's branch writer reserves it)",
            doc.raw("cut_point"),
        )
    delta = doc.obj("delta", required=True)
    assert delta is not None
    if build(f.Delta, delta.where(), **delta.data) != node.delta:
        recorded = node.delta.provenance() if node.delta else None
        raise invalid(
            delta.where(), f"the same delta as tree.json node {node.id!r} ({recorded})", delta.data
        )
    if doc.string("delta_execution") != node.delta_execution:
        raise invalid(
            doc.where("delta_execution"),
            f"{node.delta_execution!r} as in tree.json node {node.id!r}",
            doc.raw("delta_execution"),
        )
    return Provenance(
        doc.file,
        doc.string("parent_rollout"),
        doc.text("branch_stage"),
        refs(doc.obj("snapshot_ref")),
    )


@dataclass
class ForkContext:
    run: str
    folder: RunFolder
    tree: Tree
    stages: dict[str, StageEntry]
    provenance: dict[str, Provenance | None]
    ablation: Ablation | None
    hold: str | None  # relative path of a left-over custody hold for this fork
    fallback_time: datetime | None
    warnings: list[str] = field(default_factory=list)  # what was seen but cannot be recorded


def fork_stage(ctx: ForkContext, group: ForkGroup) -> str | None:
    """The fork point from the children's `provenance.json` `branch_stage`: a stage name, or None
    for `cursor:<node>` (a cursor fork, which must name this node). Without provenance: the stage
    ablation.json branched at, else `env-ready` when a child ran as a fresh rollout, else a cursor
    fork."""
    found = [p for c in group.children if (p := ctx.provenance.get(c.id)) is not None]
    if not found:
        if ctx.ablation is not None:
            return ctx.ablation.stage
        return "env-ready" if any(c.delta_execution for c in group.children) else None
    branch_stage = found[0].branch_stage or ""
    if branch_stage.startswith("cursor:"):
        if branch_stage != f"cursor:{group.node}":
            raise invalid(
                f"{found[0].file}: field branch_stage",
                f"'cursor:{group.node}' (the node it forked at)",
                branch_stage,
            )
        return None
    if branch_stage not in STAGES:
        raise invalid(
            f"{found[0].file}: field branch_stage",
            f"a stage ({list(STAGES)}) or 'cursor:<node>'",
            branch_stage,
        )
    return branch_stage


def fork_snapshot(ctx: ForkContext, group: ForkGroup, stage: str | None) -> f.SnapshotRefs | None:
    """The refs the fork started from: the stage registry's for a stage fork (a provenance
    `snapshot_ref` must equal them), the provenance `snapshot_ref` (else the node's own) for a
    cursor fork."""
    source = next((p for c in group.children if (p := ctx.provenance.get(c.id)) is not None), None)
    given = source.snapshot if source is not None else None
    if stage is None:
        return given or ctx.tree.by_id[group.node].snapshot
    entry = ctx.stages.get(stage)
    if entry is None:
        raise invalid(
            f"{ctx.tree.file}: node {group.node}",
            f"stage {stage!r} recorded in stage_snapshots.json before a "
            f"fork at it (the registry records {list(ctx.stages)})",
            stage,
        )
    recorded = f.SnapshotRefs(
        sandbox=entry.mark.sandbox_ref, environment=entry.mark.environment_ref
    )
    if source is not None and given is not None and given != recorded:
        raise invalid(
            f"{source.file}: field snapshot_ref",
            f"the refs stage {stage!r} recorded ({recorded.model_dump()})",
            given.model_dump(),
        )
    return recorded


def check_arm(arm: Arm, node: TreeNode) -> None:
    delta = arm.doc.obj("delta")
    if delta is not None and build(f.Delta, delta.where(), **delta.data) != node.delta:
        raise invalid(delta.where(), f"the delta of tree.json node {node.id!r}", delta.data)
    if arm.doc.string("delta_execution") != node.delta_execution:
        raise invalid(
            arm.doc.where("delta_execution"),
            f"{node.delta_execution!r} as in tree.json node {node.id!r}",
            arm.doc.raw("delta_execution"),
        )
    if (arm.reward is None) != (node.reward is None) or (
        arm.reward is not None and arm.reward != node.reward
    ):
        raise invalid(
            arm.doc.where("reward"),
            f"{node.reward!r}, the reward tree.json records for node {node.id!r}",
            arm.reward,
        )
    if node.unscored is not None and arm.error != node.unscored:
        raise invalid(
            arm.doc.where("error"),
            f"the unscored reason tree.json records for node {node.id!r}: {node.unscored!r}",
            arm.error,
        )


def check_reward_file(ctx: ForkContext, group: ForkGroup, node: TreeNode) -> None:
    relative = f"{child_dir(group.node, node.id)}/reward.json"
    document = ctx.folder.read_json(relative)
    if document is None and not ctx.folder.exists(relative):
        return
    doc = Fields(document, str(ctx.folder.root / relative))
    reward = doc.number("reward", required=True)
    if node.reward is None or reward != node.reward:
        raise invalid(
            doc.where("reward"),
            f"the reward {ctx.tree.file} records for node {node.id!r} "
            f"({node.reward if node.reward is not None else 'none: ' + (node.unscored or 'the child raised')})",  # noqa: E501
            reward,
        )


def child_times(
    ctx: ForkContext, group: ForkGroup, node: TreeNode
) -> tuple[datetime | None, datetime | None]:
    relative = f"{child_dir(group.node, node.id)}/result.json"
    document = ctx.folder.read_json(relative)
    if not isinstance(document, dict):
        return None, None
    doc = Fields(document, str(ctx.folder.root / relative))
    started, finished = doc.raw("started_at"), doc.raw("finished_at")
    return (
        parse_time(started, doc.where("started_at")) if started is not None else None,
        parse_time(finished, doc.where("finished_at")) if finished is not None else None,
    )


Timed = tuple[int, f.Fact, datetime | None]  # (order inside the fork, fact, when it happened)


def fork_facts(ctx: ForkContext, group: ForkGroup) -> list[Timed]:
    """The fork's facts with their order inside the fork (opened, held, outcomes, failed custody,
    closed).

    `ctx.hold` is a `branches/<node>/parent/` still on disk, a hold benchflow never released, given
    to the last fork at its node: `custody.held` (every regular file with its digest and size) now,
    and a `custody.failed` in phase "release", preserved where it lies, before the closing. Each
    child's `mounted/` archive is a `custody.handed_off`."""
    where = f"{ctx.tree.file}: node {group.node}"
    stage = fork_stage(ctx, group)
    snapshot = fork_snapshot(ctx, group, stage)
    arms: list[Arm | None] = [
        ctx.ablation.arm_for(c.id) if ctx.ablation else None for c in group.children
    ]
    children = fork_children(ctx, group, arms)
    ablation = ablation_metadata(ctx)
    times = [child_times(ctx, group, node) for node in group.children]
    opened_at = min((t[0] for t in times if t[0] is not None), default=ctx.fallback_time)
    opened = build(
        f.ForkOpened,
        where,
        run=ctx.run,
        fork=group.fork_id,
        node=group.node,
        stage=stage,
        layers=snapshot_layers(snapshot),
        snapshot=snapshot,
        children=tuple(children),
        ablation=ablation,
    )
    out: list[Timed] = [(0, opened, opened_at)]
    held = custody.entries(ctx.folder, ctx.hold, ctx.warnings) if ctx.hold else ()
    if ctx.hold:
        out.append(
            (
                1,
                build(
                    f.CustodyHeld,
                    where,
                    run=ctx.run,
                    fork=group.fork_id,
                    location=ctx.hold,
                    entries=held,
                ),
                opened_at,
            )
        )
    for index, (node, arm, (_, finished)) in enumerate(
        zip(group.children, arms, times, strict=True)
    ):
        # benchflow hands the mounts off in the child's `finally`, then records its outcome
        if (
            handed := custody.hand_off(ctx.folder, ctx.run, group, index, ctx.warnings)
        ) is not None:
            out.append((2 + 2 * index, handed, finished or opened_at))
        out.append(
            (3 + 2 * index, child_outcome(ctx, group, index, node, arm), finished or opened_at)
        )
    closed_at = max((t[1] for t in times if t[1] is not None), default=opened_at)
    failures = custody_failures(ctx, group, arms, where, held)
    out += [(10_000 + i, failure, closed_at) for i, failure in enumerate(failures)]
    out.append((20_000, close(ctx, group, failures[0].error if failures else None), closed_at))
    return out


def fork_children(ctx: ForkContext, group: ForkGroup, arms: list[Arm | None]) -> list[f.ForkChild]:
    children = []
    for index, (node, arm) in enumerate(zip(group.children, arms, strict=True)):
        if arm is not None:
            check_arm(arm, node)
        check_reward_file(ctx, group, node)
        children.append(
            build(
                f.ForkChild,
                node.where,
                index=index,
                node=node.id,
                arm=arm.name if arm else None,
                kind=arm.kind if arm else None,
                source=arm.doc.string("source") if arm else None,
                delta=node.delta,
                delta_execution=node.delta_execution,
                environment=arm.environment() if arm else None,
            )
        )
    return children


def ablation_metadata(ctx: ForkContext) -> dict[str, Any] | None:
    """What ablation.json says about the fork it describes (and the arms it skipped); None for other
    forks."""
    if ctx.ablation is None:
        return None
    ablation = dict(ctx.ablation.metadata)
    if ctx.ablation.skipped():
        ablation["skipped_arms"] = ctx.ablation.skipped()
    return ablation


def snapshot_layers(snapshot: f.SnapshotRefs | None) -> tuple[str, ...]:
    if not snapshot:
        return ()
    return tuple(
        sorted(
            layer
            for layer, ref in (("environment", snapshot.environment), ("sandbox", snapshot.sandbox))
            if ref
        )
    )


def custody_failures(
    ctx: ForkContext,
    group: ForkGroup,
    arms: list[Arm | None],
    where: str,
    held: Sequence[f.CustodyEntry],
) -> list[f.CustodyFailed]:
    """Hand-offs that failed, and the release of a hold left behind, with the errors benchflow
    reported."""
    messages = custody.reported_messages(*reported_errors(ctx, arms))
    failures: list[f.CustodyFailed] = custody.hand_off_failures(
        ctx.folder, ctx.run, group, messages
    )
    if ctx.hold:
        failures.append(
            build(
                f.CustodyFailed,
                where,
                run=ctx.run,
                fork=group.fork_id,
                phase="release",
                preserved_location=ctx.hold,
                error=custody.release_error(messages, ctx.hold, len(held)),
                entries=held,
            )
        )
    return failures


def reported_errors(ctx: ForkContext, arms: list[Arm | None]) -> list[str | None]:
    """Where `bench eval ablate` puts a branch error: the report's own `error`, or the arm that
    raised."""
    if ctx.ablation is None:
        return []
    return [ctx.ablation.doc.string("error"), *(arm.error for arm in arms if arm is not None)]


def child_outcome(
    ctx: ForkContext, group: ForkGroup, index: int, node: TreeNode, arm: Arm | None
) -> f.Fact:
    """The tree's outcome of the child: `reward` (checked against its `reward.json` by
    `check_reward_file`) gives `fork.child_scored`, `unscored` gives `fork.child_unscored`, neither
    gives `fork.child_failed` (benchflow's partial tree: that child raised)."""
    wall = arm.wall_clock_sec if arm else None
    base = {"run": ctx.run, "fork": group.fork_id, "index": index, "wall_clock_sec": wall}
    # Mined for every child with a node, the one that raised too (its mounted/ hand-off runs in a
    # finally).
    tests = child_test_outcomes(ctx.folder, child_dir(group.node, node.id))
    if tests is None and arm is not None:
        tests = arm.tests
    if node.reward is None and node.unscored is None:
        return build(
            f.ChildFailed,
            node.where,
            **base,
            error=(arm.error if arm and arm.error else RAISED),
            tests=tests,
        )
    if node.reward is not None:
        return build(f.ChildScored, node.where, **base, reward=node.reward, tests=tests)
    return build(f.ChildUnscored, node.where, **base, reason=node.unscored, tests=tests)


Closing = tuple[str, float | None, str | None]  # (outcome, value, error) of fork.closed


def closing(
    group: ForkGroup,
    node: TreeNode,
    where: str,
    custody_error: str | None,
    report_error: str | None,
) -> Closing:
    rewards = [c.reward for c in group.children if c.reward is not None]
    failed = any(c.reward is None and c.unscored is None for c in group.children)
    if failed or custody_error or report_error:
        # A child raised, or the release failed: benchflow raised before aggregating V (a V on the
        # node is an earlier fork's). A report error says the same: _finalize_report sets it only
        # when branch_at_stage raised.
        return "partial", None, report_error or custody_error
    if len(group.children) < MIN_COMPLETED_CHILDREN:
        # benchflow asks for at least two children; a fork that attached fewer stopped before the
        # others started (before V was aggregated, so a V on the node is an earlier fork's).
        return (
            "partial",
            None,
            report_error
            or (
                f"only {len(group.children)} of the fork's children started "
                f"(benchflow asks for at least {MIN_COMPLETED_CHILDREN})"
            ),
        )
    if len(rewards) == len(group.children):
        return scored_closing(group, node, where, rewards, report_error)
    if group.last_at_node and node.has_value:
        raise invalid(
            where,
            "no value, because a child of the fork is unscored (benchflow removes V then)",
            node.value,
        )
    return "completed", None, None


def scored_closing(
    group: ForkGroup, node: TreeNode, where: str, rewards: list[float], report_error: str | None
) -> Closing:
    """Every child scored: V is their mean, which the node's `value` must hold if this fork was the
    last one there (the domain checks the mean again when `fork.closed` is decided)."""
    mean = sum(rewards) / len(rewards)  # benchflow's aggregate: plain sum, so the last digit agrees
    if not group.last_at_node:
        return "completed", mean, None
    if node.has_value and node.value is not None:  # has_value: tree.json holds a number there
        if not math.isclose(node.value, mean, abs_tol=1e-9):
            raise invalid(
                where,
                f"{mean!r}, the mean of the rewards of its children "
                f"{[c.id for c in group.children]} (V)",
                node.value,
            )
        return "completed", node.value, None
    # Every child was scored but V was never written: the fork failed after its children.
    return (
        "partial",
        None,
        report_error
        or "every child was scored but tree.json records no value: the fork did not complete",
    )


def same_value(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (
        a is not None and b is not None and math.isclose(a, b, abs_tol=1e-9)
    )


def close(ctx: ForkContext, group: ForkGroup, custody_error: str | None) -> f.ForkClosed:
    node = ctx.tree.by_id[group.node]
    where = f"{node.where}.value"
    report_error = ctx.ablation.doc.string("error") if ctx.ablation else None
    outcome, value, error = closing(group, node, where, custody_error, report_error)
    if ctx.ablation is not None:
        reported = ctx.ablation.doc.number("value")
        if not same_value(reported, value):
            raise invalid(
                ctx.ablation.doc.where("value"),
                f"{value!r}, the value of the fork it describes",
                reported,
            )
    return build(
        f.ForkClosed,
        where,
        run=ctx.run,
        fork=group.fork_id,
        outcome=outcome,
        value=value,
        error=error,
    )

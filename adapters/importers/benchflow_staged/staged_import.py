"""benchflow PR-#1046 run directories -> one batch of facts per run (the parent with all its forks).

Every file of the run is read and cross-checked before a fact is built (`read_staged_run`); facts
are ordered the way benchflow created what they describe, so the domain accepts them. Where each
field is kept, so an export gives the file back: docs/benchflow-formats.md §14.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ....domain import facts as f
from ....domain.application import Entry
from ....domain.errors import InvalidInput
from ....domain.vocabulary import stage_rank
from ...rundir import NOTHING_APPENDED, RunFolder
from ..benchflow_common import RunFiles, outcome, registration, result_missing
from ..benchflow_trial import trial_description
from ..continuation import Continuation, continuation, cut_point
from ..fields import Fields, build, invalid
from ..keys import ABLATE_JOB_NAME, is_ablate_run, run_key
from ..plan import RunPlan, Timeline
from ..run_evidence import benchflow_evidence
from .ablation import Ablation, parse_ablation
from .forks import ForkContext, Provenance, fork_facts, read_provenance
from .stages import StageEntry, parse_registry, stage_entries
from .tree import ForkGroup, Tree, parse_tree, root_only

LAST = 1 << 40


def containment_for(path: Path) -> Path:
    """The folder a run may read from: its own, or the ablate output directory that holds
    ablation.json."""
    return path.parent.parent if path.parent.name == ABLATE_JOB_NAME else path


def read_ablation(folder: RunFolder, path: Path) -> Ablation | None:
    """The report of a `bench eval ablate` run: written to `<out-dir>/ablation.json` beside the job
    folder `ablation/`, so it belongs to the run `<out-dir>/ablation/<task>/`
    (docs/benchflow-formats.md §5)."""
    if path.parent.name != ABLATE_JOB_NAME:
        return None
    relative = "../../ablation.json"
    document = folder.read_json(relative)
    if document is None and not folder.exists(relative):
        return None
    ablation = parse_ablation(document, str(path.parent.parent / "ablation.json"))
    task = ablation.doc.obj("task")
    if task is not None and task.raw("id") not in (None, path.name):
        raise invalid(
            task.where("id"),
            f"{path.name!r}, the task directory of the run it sits beside",
            task.raw("id"),
        )
    return ablation


def check_branch_dirs(folder: RunFolder, tree: Tree) -> list[str]:
    """Refuse a reward.json for a node the tree does not have; return nodes with a left-over custody
    hold."""
    holds = []
    for node in folder.subdirs("branches"):
        for child in folder.subdirs(f"branches/{node}/children"):
            relative = f"branches/{node}/children/{child}/reward.json"
            known = tree.by_id.get(child)
            if folder.exists(relative) and (
                known is None or known.parent != node or known.delta is None
            ):
                raise InvalidInput(
                    f"{folder.root / relative}: expected a reward for a branch "
                    f"child of node {node!r} in {tree.file}, found one for "
                    f"node {child!r}, which that tree does not have as such",
                    hint=NOTHING_APPENDED,
                )
        if folder.is_dir(f"branches/{node}/parent"):
            holds.append(node)
    return holds


def recorded_run_dir(
    ablation: Ablation | None, provenance: dict[str, Provenance | None]
) -> str | None:
    """The run's directory as benchflow recorded it: ablation.json `parent.run_dir`, else the
    children's `parent_rollout` (which must agree). `RunPlan` records it as a `run.located` of kind
    `recorded`, beside the one of kind `read` for where it was read."""
    parent = ablation.doc.obj("parent") if ablation is not None else None
    if parent is not None and (run_dir := parent.string("run_dir")):
        return run_dir
    recorded = {
        (p.parent_rollout, p.file)
        for p in provenance.values()
        if p is not None and p.parent_rollout
    }
    if len({r for r, _ in recorded}) > 1:
        files = sorted(recorded)
        raise invalid(
            f"{files[1][1]}: field parent_rollout",
            f"{files[0][0]!r} as in {files[0][1]}",
            files[1][0],
        )
    return recorded.pop()[0] if recorded else None


@dataclass
class StagedRun:
    """What the run directory says, read and cross-checked, before any fact is built from it."""

    path: Path
    folder: RunFolder
    key: str
    files: RunFiles
    tree: Tree
    ablation: Ablation | None
    provenance: dict[str, Provenance | None]
    holds: list[str]
    stages: dict[str, StageEntry]
    groups: list[ForkGroup]


def import_staged_run(path: Path) -> RunPlan:
    """The run's facts, ordered so the domain accepts them: registration, the continuation's cut
    point, then everything in node-creation order (a node before the stages marked on it and the
    captures on it, a stage before forks at it, a fork before its children's outcomes and its
    closing), and last the snapshot lifetimes, the run's own outcome, its gate evidence and the
    ablation report."""
    run = read_staged_run(Path(os.path.abspath(path)))
    plan = RunPlan(
        run.key, run.path, [], recorded_dir=recorded_run_dir(run.ablation, run.provenance)
    )
    found = continuation(run.files)
    t0 = run.files.started_at()
    timeline = Timeline()
    add_registration(timeline, run, found, t0)
    if found:
        plan.parent_run = found.parent_run
        for entry in cut_point(run.files, run.key, found):
            timeline.add((-1,), entry.fact, entry.occurred_at)
    # imported anyway (--unfinished): a hold may be in use, so none is recorded
    running = still_running(run.path)
    add_nodes_and_stages(timeline, run.tree, run.stages, run.key, t0)
    described = ablated_group(run.ablation, run.groups, run.tree, plan)
    add_forks(timeline, run, plan, described, running, t0)
    add_closing(timeline, run, described, found is not None, running, t0)
    plan.entries = timeline.entries()
    return plan


def read_staged_run(path: Path) -> StagedRun:
    """Read `config.json`/`result.json` (registration and outcome), `tree.json` (nodes, forks, child
    outcomes; absent when the run never branched), `stage_snapshots.json` (stages and snapshot
    lifetimes), `branches/<node>/children/<child>/` (provenance, reward, CTRF), a left-over
    `branches/<node>/parent/` (unreleased custody), `<out-dir>/ablation.json` for `bench eval
    ablate` runs and a continue-run's `source` block, and check them against each other."""
    folder = RunFolder(path, containment_for(path))
    key = run_key(path)
    files = RunFiles.read(folder)
    check_is_parent_run(path, files)
    tree = (
        parse_tree(folder.read_json("tree.json"), str(path / "tree.json"))
        if folder.exists("tree.json")
        else root_only()
    )
    registry = (
        parse_registry(folder.read_json("stage_snapshots.json"), str(path / "stage_snapshots.json"))
        if folder.exists("stage_snapshots.json")
        else None
    )
    ablation = read_ablation(folder, path)
    provenance = {
        node.id: read_provenance(folder, node) for node in tree.nodes if node.delta is not None
    }
    holds = check_branch_dirs(folder, tree)
    stages = {
        entry.stage: entry
        for entry in stage_entries(key, tree, registry, ablation_stage(ablation, registry))
    }
    groups = tree.group_forks(
        lambda node: p.fork_point() if (p := provenance.get(node.id)) else None,
        known=frozenset(ablation.nodes) if ablation is not None else frozenset(),
        unreleased=frozenset(holds) | reported_failure(ablation, tree),
    )
    return StagedRun(path, folder, key, files, tree, ablation, provenance, holds, stages, groups)


def check_is_parent_run(path: Path, files: RunFiles) -> None:
    """A run's own record is there, and it is not a branch child's directory imported on its own."""
    if files.config is None and files.result is None:
        raise invalid(
            str(path / "config.json"),
            "the run's own record (config.json or result.json) beside its lineage files",
        )
    source = files.source()
    if source is not None and source.raw("kind") == "benchflow-branch":
        raise invalid(
            source.where("kind"),
            "a run directory, found a branch child's; import the parent run "
            f"({source.raw('parent_rollout')}) instead",
            "benchflow-branch",
        )


def add_registration(
    timeline: Timeline, run: StagedRun, found: Continuation | None, t0: datetime | None
) -> None:
    ablation = run.ablation
    timeline.add(
        (-2,),
        registration(
            run.files,
            run.key,
            task_fallback=ablation.task_id() if ablation else None,
            sandbox_fallback=ablation.doc.string("sandbox") if ablation else None,
            role="continuation" if found else "root",
            parent_run=found.parent_run if found else None,
            source=found.registered_source() if found else None,
        ).fact,
        t0,
    )


def add_forks(
    timeline: Timeline,
    run: StagedRun,
    plan: RunPlan,
    described: ForkGroup | None,
    running: str | None,  # why the run may still be written to, if it may
    t0: datetime | None,
) -> None:
    holders = {} if running else hold_owners(run.holds, run.groups, run.tree, run.path, plan)
    if running:
        plan.warnings.extend(
            f"{run.path}/branches/{node}/parent: a custody "
            f"hold, perhaps in use by a fork still running, "
            "is not recorded; importing the run after it has finished records one left behind"
            for node in run.holds
        )
    for group in run.groups:
        hold = f"branches/{group.node}/parent" if holders.get(group.node) is group else None
        ctx = ForkContext(
            run.key,
            run.folder,
            run.tree,
            run.stages,
            run.provenance,
            run.ablation if group is described else None,
            hold,
            t0,
        )
        order = min(c.order for c in group.children)
        for sub, fact, when in fork_facts(ctx, group):
            timeline.add((order, 0, sub), fact, when)
        plan.warnings.extend(ctx.warnings)


def add_closing(
    timeline: Timeline,
    run: StagedRun,
    described: ForkGroup | None,
    continues: bool,
    running: str | None,  # why the run may still be written to, if it may
    t0: datetime | None,
) -> None:
    """Snapshot lifetimes, the run's outcome, its gate evidence and the ablation report: after every
    fork."""
    files = run.files
    # Cleanup (export or discard of every stage image) runs after the branch leg, so after every
    # child finished.
    cleanup = max(
        (moment for moment in (files.finished_at(), timeline.latest(), t0) if moment is not None),
        default=None,
    )
    for stage_entry in run.stages.values():
        for fact in stage_entry.lifetime:
            timeline.add((LAST, 0), fact, cleanup)
    entries = parent_outcome(files, run.key, run.ablation)
    for entry in entries:
        timeline.add((LAST, 1), entry.fact, entry.occurred_at)
    for entry in gate_evidence(
        run.folder, files, run.key, [] if running else run.groups, continuation=continues
    ):
        timeline.add((LAST, 2), entry.fact, entry.occurred_at)
    # A trial that never branched may still have been retried or checkpointed (main-line writers).
    trial = trial_description(files, run.key, always=False)
    if trial is not None:
        timeline.add((LAST, 3), trial.fact, trial.occurred_at)
    if run.ablation is not None:
        fork = described.fork_id if described is not None else None
        when = entries[-1].occurred_at if entries else files.finished_at() or t0
        for fact in report_fact(
            run.ablation, run.key, fork, [e.fact for e in entries], timeline.closing(fork)
        ):
            timeline.add((LAST, 2), fact, when)


def reported_failure(ablation: Ablation | None, tree: Tree) -> frozenset[str]:
    """The fork node whose branch the report says raised (`_finalize_report` sets `error` only
    then)."""
    if ablation is None or ablation.doc.string("error") is None:
        return frozenset()
    return frozenset(
        node.parent for node in tree.nodes if node.id in ablation.nodes and node.parent is not None
    )


def gate_evidence(
    folder: RunFolder, files: RunFiles, key: str, groups: list[ForkGroup], *, continuation: bool
) -> list[Entry]:
    """Release-gate evidence of the run and of each fresh-rollout arm that has a run directory of
    its own (an arm still running is never read: the run's groups are passed only once it has
    finished)."""
    root = benchflow_evidence(files, key, continuation=continuation)
    out = [Entry(root, files.finished_at())] if root is not None else []
    for group in groups:
        for child in group.children:
            relative = f"branches/{group.node}/children/{child.id}"
            if folder.exists(f"{relative}/result.json"):
                arm_files = RunFiles.read(RunFolder(folder.root / relative, folder.containment))
                arm = benchflow_evidence(arm_files, key, child.id, relative=relative)
                out += [Entry(arm, arm_files.finished_at())] if arm is not None else []
    return out


def ablation_stage(
    ablation: Ablation | None, registry: dict[str, Fields] | None
) -> dict[str, Fields]:
    """The branched stage's entry as ablation.json copied it: checked against the registry, or used
    without one."""
    snapshot = ablation.doc.obj("stage_snapshot") if ablation is not None else None
    if ablation is None or snapshot is None:
        return {}
    if registry is not None and ablation.stage in registry:
        if registry[ablation.stage].data != snapshot.data:
            raise invalid(
                snapshot.where(),
                f"an exact copy of {registry[ablation.stage].where()}",
                snapshot.data,
            )
        return {}
    return {ablation.stage: snapshot}


def still_running(path: Path) -> str | None:
    """Why the harness may still be writing the run, from which files exist (nothing is parsed), or
    None once it is over: benchflow writes result.json last; the arms of `bench eval ablate` run
    after the parent's own leg and are over when the report beside the job folder is written. Such a
    run is imported only when asked (`--unfinished`), since benchflow rewrites its files as the run
    goes on."""
    if why := result_missing(path):
        return why
    if is_ablate_run(path) and not (path.parent.parent / "ablation.json").exists():
        return "bench eval ablate has not written ablation.json yet"
    return None


def hold_owners(
    holds: list[str], groups: list[ForkGroup], tree: Tree, path: Path, plan: RunPlan
) -> dict[str, ForkGroup]:
    """The fork each left-over custody hold belongs to: the last fork at its node, unless that fork
    settled with a V of its own (its release then succeeded, so the hold is a later fork's that
    failed before any child ran)."""
    owners = {}
    for node in holds:
        last = next((g for g in reversed(groups) if g.node == node), None)
        if last is not None and not settled_with_own_value(last, tree):
            owners[node] = last
            continue
        why = (
            "where no fork is recorded"
            if last is None
            else f"whose last fork {last.fork_id!r} settled with its own V"
        )
        plan.warnings.append(
            f"{path}/branches/{node}/parent: a custody "
            f"hold at node {node!r}, {why}: it is a fork's "
            "that failed before any child ran, which tree.json does not show, so it is not "
            "recorded; its files are the parent's, preserved there for recovery by hand"
        )
    return owners


def settled_with_own_value(group: ForkGroup, tree: Tree) -> bool:
    """The node's V is the mean of exactly this fork's rewards (benchflow aggregates V only after a
    release that succeeded; a V left from an earlier fork stays when a later one raised)."""
    node = tree.by_id[group.node]
    rewards = [c.reward for c in group.children if c.reward is not None]
    return (
        node.has_value
        and node.value is not None  # has_value: tree.json holds a number there
        and bool(rewards)
        and len(rewards) == len(group.children)
        and math.isclose(node.value, math.fsum(rewards) / len(rewards), abs_tol=1e-9)
    )


def add_nodes_and_stages(
    timeline: Timeline, tree: Tree, stages: dict[str, StageEntry], key: str, t0: datetime | None
) -> None:
    """`run.node_opened` for each linear node (branch children are `fork.opened.children[]`), the
    `stage.marked` facts on their nodes, and a `snapshot.captured` for each ref no mark holds: with
    the node's `stage` when no mark there explains the tag (a child's own verify() at the end of its
    chain, an earlier mark of a stage marked twice), with `stage` null for a bare checkpoint."""
    marks = [entry.mark for entry in stages.values()]
    for node in tree.nodes:
        if node.parent is not None and node.delta is None:
            timeline.add(
                (node.order, 0),
                build(f.NodeOpened, node.where, run=key, node=node.id, parent=node.parent),
                t0,
            )
    for mark in marks:
        timeline.add((tree.by_id[mark.node].order, 1, stage_rank(mark.stage)), mark, t0)
    captured = {ref for mark in marks for ref in (mark.sandbox_ref, mark.environment_ref) if ref}
    for node in tree.nodes:
        if node.snapshot is None:
            continue
        explained = any(mark.node == node.id and mark.stage == node.stage for mark in marks)
        for layer, ref in (
            ("environment", node.snapshot.environment),
            ("sandbox", node.snapshot.sandbox),
        ):
            if ref and ref not in captured:
                captured.add(ref)
                capture = build(
                    f.SnapshotCaptured,
                    f"{node.where}.snapshot",
                    ref=ref,
                    layer=layer,
                    run=key,
                    node=node.id,
                    stage=None if explained else node.stage,
                )
                timeline.add((node.order, 2), capture, t0)


def ablated_group(
    ablation: Ablation | None, groups: list[ForkGroup], tree: Tree, plan: RunPlan
) -> ForkGroup | None:
    if ablation is None:
        return None
    # no arm ran (a request-global parent failure skips the fork): an ablation.reported
    if not ablation.nodes:
        return None
    for group in groups:
        if {c.id for c in group.children} == ablation.nodes:
            return group
    raise invalid(
        ablation.doc.where("arms"),
        f"arms on the children of one fork in {tree.file} "
        f"(its forks have children {[[c.id for c in g.children] for g in groups]})",
        sorted(ablation.nodes),
    )


def parent_outcome(files: RunFiles, key: str, ablation: Ablation | None) -> list[Entry]:
    """The run's own outcome from result.json; a parent error only the report names is the run's
    failure."""
    entries = outcome(files, key)
    parent = ablation.doc.obj("parent") if ablation is not None else None
    failed = next((e.fact for e in entries if isinstance(e.fact, f.RunFailed)), None)
    error = parent.string("error") if parent is not None else None
    if parent is not None and failed is None and error is not None:
        entries.append(
            Entry(
                build(f.RunFailed, parent.where("error"), run=key, error=error),
                files.finished_at() or files.started_at(),
            )
        )
    return entries


def report_fact(
    ablation: Ablation,
    key: str,
    fork: str | None,
    outcome_facts: list[f.Fact],
    closed: f.ForkClosed | None,
) -> list[f.Fact]:
    """`ablation.reported` for what the report wrote that the fork and outcome facts do not give
    back: a parent block from `verify()` that result.json contradicts (`_maybe_classify_api_error`
    ran later), an error the fork's closing does not carry, or a whole report without a fork
    (docs/benchflow-formats.md §13.3)."""
    doc, parent = ablation.doc, ablation.doc.obj("parent")
    reward = parent.number("reward") if parent is not None else None
    error = parent.string("error") if parent is not None else None
    scored = next((x.reward for x in outcome_facts if isinstance(x, f.RunScored)), None)
    failed = next((x.error for x in outcome_facts if isinstance(x, f.RunFailed)), None)
    report_error = doc.string("error")
    arm_errors = any(arm.error is not None for arm in ablation.arms)
    derived_error = closed.error if closed is not None and not arm_errors else None
    if fork is not None and (reward, error) == (scored, failed) and report_error == derived_error:
        return []
    report = None if fork is not None else {**ablation.metadata, "arms": ablation.skipped()}
    return [
        build(
            f.AblationReported,
            doc.where(),
            run=key,
            stage=ablation.stage,
            fork=fork,
            parent_reward=reward,
            parent_error=error,
            error=report_error,
            report=report,
        )
    ]

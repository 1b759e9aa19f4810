"""benchflow's stage registry (`stage_snapshots.json`) as `stage.marked` facts plus snapshot lifetimes.

Which node a stage was captured on is not in the registry, so it is read from the tree, in this order:
1. the linear node (not a branch child or below one) whose `stage` tag is that stage;
2. else the linear node whose snapshot refs equal the entry's refs;
3. else `root` (a run that never branched has only the root node, and benchflow captures there).
A tree node tagged with a stage the registry lacks is an inconsistency and is refused, unless the run has no
registry at all, in which case the tree alone describes the stage (refs from the node; exchanges unknown).

Lifetime annotations are about the whole stage entry, not one of its refs: benchflow's cleanup finalizes each
recorded stage as a unit (`stop(delete=True)` destroys the sandbox and its environment plane together), so
`ephemeral: true` gives `snapshot.discarded` for the sandbox and the environment snapshot alike, and
`export_error` (the entry stays ephemeral) gives `snapshot.export_failed` for both: neither can be restored.
`exported` is the `docker save` tar of the sandbox image, so it gives `snapshot.exported` for the sandbox ref
(for the environment ref only when the entry has no sandbox layer); the environment snapshot of an exported
entry keeps only its capture, since nothing records whether the tar holds it. An entry with no lifetime keys
(externally owned sandbox) gives none. `ephemeral: false` with `exported: null` says nothing the facts can
hold, so it is not recorded (an export of the registry then omits those two keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...domain import facts as f
from ...domain.vocabulary import ROOT_NODE, STAGES
from .fields import Fields, build, invalid
from .pr_tree import Tree

ENTRY_FIELDS = ("environment_ref", "sandbox_ref", "layers", "exchanges_completed", "ephemeral", "exported", "export_error")
EXPORT_FIELDS = ("path", "sha256", "image_id")


@dataclass
class StageEntry:
    stage: str
    mark: f.StageMarked
    lifetime: list[f.Fact]
    raw: dict[str, Any] | None  # the entry as written, to compare with ablation.json's copy


def parse_registry(document: object, file: str) -> dict[str, Fields]:
    top = Fields(document, file)
    top.schema_version()
    top.only(("schema_version", "stages"))
    stages = top.obj("stages", required=True)
    assert stages is not None
    for name in stages.data:
        if name not in STAGES:
            raise invalid(stages.where(name), f"a stage name, one of {list(STAGES)}", name)
    return {name: stages.obj(name, required=True) for name in STAGES if name in stages.data}  # type: ignore[misc]


def choose_node(tree: Tree, stage: str, sandbox_ref: str | None, environment_ref: str | None) -> str:
    linear = [node for node in tree.nodes if not tree.under_fork(node.id)]
    for node in linear:
        if node.stage == stage:
            return node.id
    for node in linear:
        if node.snapshot is not None and (sandbox_ref or environment_ref) and \
                (node.snapshot.sandbox, node.snapshot.environment) == (sandbox_ref, environment_ref):
            return node.id
    return ROOT_NODE


def stage_entry(run: str, stage: str, doc: Fields, tree: Tree) -> StageEntry:
    doc.only(ENTRY_FIELDS)
    sandbox_ref, environment_ref = doc.string("sandbox_ref"), doc.string("environment_ref")
    layers = doc.items("layers")
    mark = build(f.StageMarked, doc.where(), run=run, stage=stage,
                 node=choose_node(tree, stage, sandbox_ref, environment_ref),
                 exchanges_completed=doc.integer("exchanges_completed"), layers=layers,
                 sandbox_ref=sandbox_ref, environment_ref=environment_ref)
    return StageEntry(stage, mark, lifetime(doc, sandbox_ref, environment_ref), doc.data)


def lifetime(doc: Fields, sandbox_ref: str | None, environment_ref: str | None) -> list[f.Fact]:
    ephemeral, exported, export_error = doc.boolean("ephemeral"), doc.obj("exported"), doc.string("export_error")
    primary = sandbox_ref or environment_ref
    whole_entry = [ref for ref in (sandbox_ref, environment_ref) if ref]
    if (ephemeral is not None or exported is not None or export_error is not None) and primary is None:
        raise invalid(doc.where("ephemeral"), "lifetime annotations only on an entry that captured a snapshot", doc.data)
    facts: list[f.Fact] = []
    if exported is not None:
        if ephemeral:
            raise invalid(doc.where("exported"), "no export record on an entry marked ephemeral: true", exported.data)
        exported.only(EXPORT_FIELDS)
        facts.append(build(f.SnapshotExported, exported.where(), ref=primary, path=exported.text("path"),
                           sha256=exported.text("sha256"), image_id=exported.string("image_id")))
    if ephemeral:
        facts += [build(f.SnapshotDiscarded, doc.where("ephemeral"), ref=ref) for ref in whole_entry]
    if export_error is not None:
        facts += [build(f.SnapshotExportFailed, doc.where("export_error"), ref=ref, error=export_error) for ref in whole_entry]
    return facts


def tree_stage(run: str, tree: Tree, stage: str) -> StageEntry:
    """A stage described only by the tree (no registry): the tagged node's refs, exchanges unknown."""
    node = next(n for n in tree.nodes if n.stage == stage and not tree.under_fork(n.id))
    refs = node.snapshot or f.SnapshotRefs()
    mark = build(f.StageMarked, node.where, run=run, stage=stage, node=node.id,
                 sandbox_ref=refs.sandbox, environment_ref=refs.environment)
    return StageEntry(stage, mark, [], None)


def stage_entries(run: str, tree: Tree, registry: dict[str, Fields] | None, extra: dict[str, Fields]) -> list[StageEntry]:
    """Every stage of the run in lifecycle order; `extra` are entries known only from ablation.json."""
    docs = dict(extra)
    docs.update(registry or {})
    entries = {stage: stage_entry(run, stage, doc, tree) for stage, doc in docs.items()}
    for node in tree.nodes:
        if node.stage is None or node.stage in entries or tree.under_fork(node.id):
            continue
        if registry is not None:
            raise invalid(f"{node.where}.stage", f"a stage recorded in stage_snapshots.json (it records {list(registry)})",
                          node.stage)
        entries[node.stage] = tree_stage(run, tree, node.stage)
    return [entries[stage] for stage in STAGES if stage in entries]

"""benchflow's stage registry (`stage_snapshots.json`): `stage.marked` facts and snapshot lifetimes.

The registry does not say which node a stage was captured on, and tags move
(docs/benchflow-formats.md §13.1-13.2), so `place_stages` reads the node from the tree; `lifetime`
turns the cleanup keys into facts about the whole entry (§15, "stage_snapshots.json lifetime keys").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ....domain import facts as f
from ....domain.vocabulary import ROOT_NODE, STAGES
from ..fields import Fields, build, invalid
from .tree import Tree, TreeNode

ENTRY_FIELDS = (
    "environment_ref",
    "sandbox_ref",
    "layers",
    "exchanges_completed",
    "ephemeral",
    "exported",
    "export_error",
)
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
    return {name: stages.obj(name, required=True) for name in STAGES if name in stages.data}


VERIFY_STAGES = ("pre-verify", "post-verify")


def matching_node(tree: Tree, stage: str, doc: Fields) -> str | None:
    """The node the registry entry names by its tag and refs; the latest such node, in this order:
    1. a linear node (not a branch child or below one) tagged with the stage and holding the entry's
       refs (`mark_stage` twice replaces the entry and moves `_stage_nodes` to the later cursor; the
       earlier node's tag, with the earlier refs, stays a bare `snapshot.captured`);
    2. a linear node with the tag, when the entry records no refs at all;
    3. a linear node holding the entry's refs, whatever its tag;
    4. a node under a fork tagged with the stage and holding its refs (a cursor `branch()` before
       the parent's own `verify()`: each in-place child's `verify()` rewrote the registry, and
       `_write_lineage` writes the parent's back only when it has one).
    None when no node matches; `place_stages` then falls back to the writer's order."""
    entry_refs = (doc.string("sandbox_ref"), doc.string("environment_ref"))

    def holds(node: TreeNode) -> bool:
        return (
            node.snapshot is not None
            and any(entry_refs)
            and (node.snapshot.sandbox, node.snapshot.environment) == entry_refs
        )

    linear = [node for node in tree.nodes if not tree.under_fork(node.id)]
    by_order = sorted(tree.nodes, key=lambda node: node.order, reverse=True)
    tagged = [node for node in linear if node.stage == stage]
    candidates = (
        # a stage marked twice: capture_stage moved it to the later cursor, the older tag is an
        # earlier capture
        [node for node in tagged if holds(node)],
        # a tag without the refs of a registry that records none
        [node for node in tagged if not any(entry_refs)],
        [node for node in linear if holds(node)],
        # a child's own verify() rewrote the registry and the parent's never did (a cursor branch()
        # before the parent verified; _write_lineage writes the registry back only when the parent
        # has one): the entry is that child's, on the node its verify() tagged
        [node for node in by_order if holds(node) and node.stage == stage],
    )
    for found in candidates:
        if found:
            return max(found, key=lambda node: node.order).id
    return None


def place_stages(tree: Tree, docs: dict[str, Fields]) -> dict[str, str]:
    """The node each registry stage was captured on: `matching_node`, else the writer's order.

    A run without `tree.json` never branched and the files know only `root`, so its stages are all
    there. Otherwise, for a stage no node matches: `env-ready` is captured in `start()`, before any
    step, so on `root`; `pre-verify` and `post-verify` share the verify node (where the other one
    is, else the run's last linear node); `post-research` is wherever the cursor was, and only a
    later capture on the same node (the verify stages, when the research-end mark came at
    quiescence) erases its tag, so it goes to the verify node, or is refused with what to check when
    the run has none."""
    if tree.absent:
        return dict.fromkeys(docs, ROOT_NODE)
    placed = {
        stage: node
        for stage in docs
        if (node := matching_node(tree, stage, docs[stage])) is not None
    }
    linear = [node for node in tree.nodes if not tree.under_fork(node.id)]
    for stage in sorted(docs, key=lambda s: s == "post-research"):  # the verify node first
        if stage in placed:
            continue
        verify_node = next((placed[s] for s in VERIFY_STAGES if s in placed), None)
        if stage == "env-ready":
            placed[stage] = ROOT_NODE
        elif stage in VERIFY_STAGES:
            placed[stage] = verify_node or max(linear, key=lambda node: node.order).id
        elif verify_node is not None:
            placed[stage] = verify_node
        else:
            raise invalid(
                docs[stage].where(),
                f"a node of {tree.file} tagged {stage!r} or holding its snapshot refs "
                "(benchflow captures it wherever the cursor was, so nothing else places it)",
                "no such node; check that tree.json and "
                "stage_snapshots.json come from the same run",
            )
    return placed


def stage_entry(run: str, stage: str, doc: Fields, node: str) -> StageEntry:
    doc.only(ENTRY_FIELDS)
    sandbox_ref, environment_ref = doc.string("sandbox_ref"), doc.string("environment_ref")
    layers = doc.items("layers")
    mark = build(
        f.StageMarked,
        doc.where(),
        run=run,
        stage=stage,
        node=node,
        exchanges_completed=doc.integer("exchanges_completed"),
        layers=layers,
        sandbox_ref=sandbox_ref,
        environment_ref=environment_ref,
    )
    return StageEntry(stage, mark, lifetime(doc, sandbox_ref, environment_ref), doc.data)


def lifetime(doc: Fields, sandbox_ref: str | None, environment_ref: str | None) -> list[f.Fact]:
    """The entry's lifetime keys as facts about the whole entry, not one of its refs.

    benchflow's cleanup finalizes each stage as a unit (`stop(delete=True)` destroys the sandbox and
    its environment plane together), so `ephemeral: true` gives `snapshot.discarded` for both refs,
    and `export_error` (the entry stays ephemeral) gives `snapshot.export_failed` for both.
    `exported` is the `docker save` tar of the sandbox image: `snapshot.exported` for the sandbox
    ref (the environment ref only when the entry has no sandbox layer); an exported entry's
    environment snapshot keeps only its capture, since nothing records whether the tar holds it. No
    lifetime keys (an externally owned sandbox) give no facts, and so does `ephemeral: false` with
    `exported: null`, which says nothing the facts can hold (an export of the registry then omits
    those two keys)."""
    ephemeral, exported, export_error = (
        doc.boolean("ephemeral"),
        doc.obj("exported"),
        doc.string("export_error"),
    )
    primary = sandbox_ref or environment_ref
    whole_entry = [ref for ref in (sandbox_ref, environment_ref) if ref]
    if (
        ephemeral is not None or exported is not None or export_error is not None
    ) and primary is None:
        raise invalid(
            doc.where("ephemeral"),
            "lifetime annotations only on an entry that captured a snapshot",
            doc.data,
        )
    facts: list[f.Fact] = []
    if exported is not None:
        if ephemeral:
            raise invalid(
                doc.where("exported"),
                "no export record on an entry marked ephemeral: true",
                exported.data,
            )
        exported.only(EXPORT_FIELDS)
        facts.append(
            build(
                f.SnapshotExported,
                exported.where(),
                ref=primary,
                path=exported.text("path"),
                sha256=exported.text("sha256"),
                image_id=exported.string("image_id"),
            )
        )
    if ephemeral:
        facts += [
            build(f.SnapshotDiscarded, doc.where("ephemeral"), ref=ref) for ref in whole_entry
        ]
    if export_error is not None:
        facts += [
            build(f.SnapshotExportFailed, doc.where("export_error"), ref=ref, error=export_error)
            for ref in whole_entry
        ]
    return facts


def tree_stage(run: str, tree: Tree, stage: str) -> StageEntry:
    """A stage described only by the tree (no registry): the tagged node's refs, exchanges
    unknown."""
    node = next(n for n in tree.nodes if n.stage == stage and not tree.under_fork(n.id))
    refs = node.snapshot or f.SnapshotRefs()
    mark = build(
        f.StageMarked,
        node.where,
        run=run,
        stage=stage,
        node=node.id,
        sandbox_ref=refs.sandbox,
        environment_ref=refs.environment,
    )
    return StageEntry(stage, mark, [], None)


def stage_entries(
    run: str, tree: Tree, registry: dict[str, Fields] | None, extra: dict[str, Fields]
) -> list[StageEntry]:
    """Every stage of the run in lifecycle order; `extra` are entries known only from ablation.json.

    A linear tree node tagged with a stage the registry lacks is an inconsistency and is refused,
    unless the run has no registry at all: then the tree alone describes the stage
    (`tree_stage`)."""
    docs = dict(extra)
    docs.update(registry or {})
    for doc in docs.values():
        doc.only(ENTRY_FIELDS)
    nodes = place_stages(tree, docs)
    entries = {stage: stage_entry(run, stage, doc, nodes[stage]) for stage, doc in docs.items()}
    for node in tree.nodes:
        if node.stage is None or node.stage in entries or tree.under_fork(node.id):
            continue
        if registry is not None:
            raise invalid(
                f"{node.where}.stage",
                f"a stage recorded in stage_snapshots.json (it records {list(registry)})",
                node.stage,
            )
        entries[node.stage] = tree_stage(run, tree, node.stage)
    return [entries[stage] for stage in STAGES if stage in entries]

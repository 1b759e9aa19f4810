"""Snapshot facts: one captured layer's lifetime (captured, exported, discarded, imported, rejected,
adopted). Part of the vocabulary in `facts.py`, which re-exports them."""

from __future__ import annotations

from typing import ClassVar, Literal

from ..vocabulary import (
    Layer,
    Stage,
)
from .fact_base import (
    Digest,
    Fact,
    Key,
    Text,
)

# --- snapshots ------------------------------------------------------------------------------------


class SnapshotFact(Fact):
    subject_kind: ClassVar[str] = "snapshot"

    def subject_key(self) -> str:
        # Each snapshot fact declares `ref`; this base class declares no fields.
        return str(self.ref)  # type: ignore[attr-defined]


class SnapshotCaptured(SnapshotFact):
    type: Literal["snapshot.captured"] = "snapshot.captured"
    ref: Key
    layer: Layer
    run: Key
    stage: Stage | None = None
    node: Key = "root"


class SnapshotExported(SnapshotFact):
    type: Literal["snapshot.exported"] = "snapshot.exported"
    ref: Key
    path: Key
    sha256: Digest
    image_id: Digest | None = None


class SnapshotExportFailed(SnapshotFact):
    type: Literal["snapshot.export_failed"] = "snapshot.export_failed"
    ref: Key
    error: Key


class SnapshotDiscarded(SnapshotFact):
    type: Literal["snapshot.discarded"] = "snapshot.discarded"
    ref: Key


class SnapshotImported(SnapshotFact):
    verified_here: ClassVar[str | None] = (
        "`lineage snapshots import` (it verifies the tar, loads it and checks the image id)"
    )
    type: Literal["snapshot.imported"] = "snapshot.imported"
    ref: Key
    engine: Key
    image_id: Digest
    tar_sha256: Digest
    tar_path: Text | None = None


class SnapshotImportRejected(SnapshotFact):
    verified_here: ClassVar[str | None] = (
        "`lineage snapshots import` (a rejection is the result of its verification)"
    )
    type: Literal["snapshot.import_rejected"] = "snapshot.import_rejected"
    ref: Key
    tar_sha256: Digest | None = None
    tar_path: Text | None = None
    reason: Key


class SnapshotAdopted(SnapshotFact):
    """A tar that matches no recorded export, taken in on purpose: its provenance is unknown."""

    verified_here: ClassVar[str | None] = (
        "`lineage snapshots import --adopt` (it verifies the tar before adopting it)"
    )
    type: Literal["snapshot.adopted"] = "snapshot.adopted"
    ref: Key
    tar_sha256: Digest
    image_id: Digest | None = None
    tar_path: Text | None = None

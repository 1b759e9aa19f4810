"""The Snapshot aggregate: one captured layer (a container image ref or an environment state id) and
its lifetime.

A snapshot is restorable while its image lives (captured, not yet discarded) or once a verified copy
exists (exported to a tar, or imported back into an engine). A snapshot discarded without either is
gone, and the domain refuses to let a fork pretend to restore it. Adopted snapshots came in as tars
nobody recorded: they are usable but their provenance is unknown, which audits flag.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import BaseAggregate

from . import facts as f
from .decisions import Handlers, is_new_or_same
from .errors import InvariantViolated, UnknownSubject
from .vocabulary import ROOT_NODE

SNAPSHOT_HANDLERS: Handlers[Snapshot] = Handlers("Snapshot")
LIFETIME_FACTS = (
    f.SnapshotExported,
    f.SnapshotExportFailed,
    f.SnapshotDiscarded,
    f.SnapshotImported,
)


class Snapshot(BaseAggregate[Any]):
    def __init__(self) -> None:
        self.captured: f.SnapshotCaptured | None = None
        self.adopted: f.SnapshotAdopted | None = None
        self.exports: list[f.SnapshotExported] = []
        self.export_failures: list[f.SnapshotExportFailed] = []
        self.discarded = False
        self.imports: list[f.SnapshotImported] = []
        self.rejections: list[f.SnapshotImportRejected] = []

    @classmethod
    def blank(cls) -> Snapshot:
        snapshot = cls.__new__(cls)
        cls.__init__(snapshot)
        return snapshot

    @property
    def known(self) -> bool:
        return self.captured is not None or self.adopted is not None

    def restorable(self) -> tuple[bool, str]:
        """Whether a world can be restored from this snapshot now, and why (not)."""
        if self.imports:
            return True, "imported into an engine with a verified image id"
        if self.exports:
            return True, "exported to a tar whose digest is recorded"
        if self.adopted is not None:
            return True, "adopted from a tar of unknown provenance"
        if self.discarded:
            return False, "discarded at cleanup and never exported or imported"
        if self.captured is not None:
            return True, "captured; the image has not been discarded"
        return False, "never captured; only rejected import attempts are recorded"

    def decide(self, fact: f.Fact) -> bool:
        decider = SNAPSHOT_HANDLERS.deciders.get(type(fact))
        if decider is None:
            raise TypeError(f"not a snapshot fact: {fact!r}")
        return decider(self, fact)

    @SNAPSHOT_HANDLERS.decides(f.SnapshotCaptured)
    def _decide_capture(self, fact: f.SnapshotCaptured) -> bool:
        ref = fact.subject_key()
        if self.adopted is not None:
            raise InvariantViolated(
                f"snapshot {ref!r} was adopted from a tar of "
                f"unknown provenance; found a capture for it"
            )
        recorded = self.captured
        if (
            recorded is not None
            and recorded.node == ROOT_NODE != fact.node
            and fact.stage not in (None, "env-ready")
            and recorded.model_copy(update={"node": fact.node}) == fact
        ):
            # a stage earlier importers put on root, placed on its node (see
            # Run._replaces_root_fallback)
            return True
        return is_new_or_same(recorded, fact, f"capture of snapshot {ref!r}")

    @SNAPSHOT_HANDLERS.decides(f.SnapshotAdopted)
    def _decide_adoption(self, fact: f.SnapshotAdopted) -> bool:
        ref = fact.subject_key()
        if self.captured is not None:
            raise InvariantViolated(
                f"snapshot {ref!r} is a recorded capture of run {self.captured.run!r}; "
                "expected an unknown ref to adopt",
                hint="import it against its recorded export instead",
            )
        return is_new_or_same(self.adopted, fact, f"adoption of snapshot {ref!r}")

    @SNAPSHOT_HANDLERS.decides(f.SnapshotImportRejected)
    def _decide_rejection(self, fact: f.SnapshotImportRejected) -> bool:
        return fact not in self.rejections

    def _require_known(self, fact: f.Fact) -> None:
        if not self.known:
            raise UnknownSubject(
                f"expected snapshot {fact.subject_key()!r} captured "
                f"or adopted before {fact.type}, found nothing "
                "recorded for it",
                hint="record stage.marked (or snapshot.captured) first",
            )

    @SNAPSHOT_HANDLERS.decides(f.SnapshotDiscarded)
    def _decide_discard(self, fact: f.SnapshotDiscarded) -> bool:
        self._require_known(fact)
        return not self.discarded

    @SNAPSHOT_HANDLERS.decides(f.SnapshotExported)
    def _decide_export(self, fact: f.SnapshotExported) -> bool:
        self._require_known(fact)
        return fact not in self.exports

    @SNAPSHOT_HANDLERS.decides(f.SnapshotExportFailed)
    def _decide_export_failure(self, fact: f.SnapshotExportFailed) -> bool:
        self._require_known(fact)
        return fact not in self.export_failures

    @SNAPSHOT_HANDLERS.decides(f.SnapshotImported)
    def _decide_import(self, fact: f.SnapshotImported) -> bool:
        self._require_known(fact)
        return fact not in self.imports

    # --- evolving (replayed: deterministic, never raises) -----------------------------------------

    def when(self, fact: f.Fact) -> None:
        SNAPSHOT_HANDLERS.evolvers[type(fact)](self, fact)

    @SNAPSHOT_HANDLERS.evolves(f.SnapshotCaptured)
    def _captured(self, fact: f.SnapshotCaptured) -> None:
        self.captured = fact

    @SNAPSHOT_HANDLERS.evolves(f.SnapshotAdopted)
    def _adopted(self, fact: f.SnapshotAdopted) -> None:
        self.adopted = fact

    @SNAPSHOT_HANDLERS.evolves(f.SnapshotExported)
    def _exported(self, fact: f.SnapshotExported) -> None:
        self.exports.append(fact)

    @SNAPSHOT_HANDLERS.evolves(f.SnapshotExportFailed)
    def _export_failed(self, fact: f.SnapshotExportFailed) -> None:
        self.export_failures.append(fact)

    @SNAPSHOT_HANDLERS.evolves(f.SnapshotDiscarded)
    def _discarded(self, fact: f.SnapshotDiscarded) -> None:
        self.discarded = True

    @SNAPSHOT_HANDLERS.evolves(f.SnapshotImported)
    def _imported(self, fact: f.SnapshotImported) -> None:
        self.imports.append(fact)

    @SNAPSHOT_HANDLERS.evolves(f.SnapshotImportRejected)
    def _rejected(self, fact: f.SnapshotImportRejected) -> None:
        self.rejections.append(fact)

"""Moving snapshot tars between disk, a Docker engine and the log, with every move recorded.

A tar is evidence: nothing reaches the engine until it is verified and matched to what the log
recorded for its ref, every outcome (a rejection too) is a fact, and an export's final name only
ever holds a verified tar.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ...domain import facts as f
from ...domain.application import Entry, LineageApp, Recorded
from ...domain.errors import (
    IntegrityFailure,
    InvalidInput,
    LineageError,
    SnapshotDigestMismatch,
    StoreUnavailable,
    UnknownSubject,
)
from ...domain.snapshot import Snapshot
from .docker_engine import DockerEngine, DockerEngineError, fsync_directory
from .snapshot_files import (
    adopted_ref,
    canonical_tag,
    export_file_name,
    resolve_tar,
    tar_names,
)
from .snapshot_tar import TarReport, verify_tar

_KEY_CHARS = 512  # the longest string a fact's key field takes (`domain/facts/__init__.py`, Key)


def _clip(text: str) -> str:
    return text if len(text) <= _KEY_CHARS else text[: _KEY_CHARS - 1] + "…"


@dataclass(frozen=True)
class Outcome:
    """What happened to one tar (or one ref): a row for the CLI, and the error when it failed."""

    ref: str | None
    status: str  # imported | adopted | rejected | refused | exported
    tar_path: str | None = None
    tar_sha256: str | None = None
    image_id: str | None = None
    engine: str | None = None
    reason: str | None = None
    error: LineageError | None = field(default=None, compare=False, repr=False)

    COLUMNS = ("ref", "status", "image_id", "tar_path", "tar_sha256", "engine", "reason")

    def row(self) -> dict[str, Any]:
        return {column: getattr(self, column) for column in self.COLUMNS}


def worst_error(errors: Sequence[LineageError], what: str) -> LineageError:
    """One error for many failures: evidence mismatches first (exit 3), then an unreachable engine
    (4), else 1."""
    if len(errors) == 1:
        return errors[0]
    worst = (
        next((e for e in errors if isinstance(e, IntegrityFailure)), None)
        or next((e for e in errors if isinstance(e, StoreUnavailable)), None)
        or errors[0]
    )
    return type(worst)(
        f"{len(errors)} {what} failed: " + " | ".join(e.message for e in errors), hint=worst.hint
    )


@dataclass(frozen=True)
class RunExports:
    # where the run's files are now (last located) first, then where it was registered
    run_dirs: tuple[str, ...]
    refs: tuple[str, ...]


class Catalog(Protocol):
    """The read-model questions imports ask (`projections/reports/snapshot_queries.py` answers
    them).

    What was exported, with which digests, is read from the domain's Snapshot aggregates (the log
    itself); the read models answer only what an aggregate cannot (which refs belong to a run,
    which refs recorded this tar's digest). The implementation opens them for one query at a time,
    so a long `docker load` never holds the DuckDB lock."""

    def run_exports(self, run: str, stages: Sequence[str] = ()) -> RunExports:
        """The exported snapshots of `run` (of `stages`, or of every stage), refusing what cannot be
        imported."""

    def refs_with_tar(self, tar_sha256: str) -> list[str]:
        """Refs whose recorded export (or adopted tar) has exactly this sha256."""

    def refs_claimed(self, report: TarReport) -> list[str]:
        """Recorded snapshots this tar claims to be: a repo tag names one, or a recorded export has
        its image id."""


class Recording(Protocol):
    """The store as the service uses it (`rollout_lineage.bootstrap.Lineage` is one): the
    application, for aggregates and verified facts, and `record` for the rest."""

    @property
    def app(self) -> LineageApp: ...

    def record(self, entries: Iterable[Entry | f.Fact]) -> Recorded: ...


class SnapshotService:
    """Imports and exports of snapshot tars. Every outcome is a fact: `imported` (with `adopted`
    first for a tar nobody recorded, taken in on purpose) or `import_rejected` with the reason, so
    an audit sees failed attempts too; an export is `exported` or `export_failed`. An engine that
    is away says nothing about the tar or the snapshot, so that is raised and not recorded."""

    def __init__(
        self, lineage: Recording, catalog: Catalog, engine: DockerEngine | None = None
    ) -> None:
        self.lineage = lineage
        self.catalog = catalog
        self.engine = engine or DockerEngine()  # connects on first use only
        self._engine_name: str | None = None

    # --- import -----------------------------------------------------------------------------------

    def import_run(
        self, run: str, stages: Sequence[str] = (), search_dirs: Sequence[str] = ()
    ) -> list[Outcome]:
        plan = self.catalog.run_exports(run, stages)
        return [self._import_recorded(ref, plan.run_dirs, search_dirs) for ref in plan.refs]

    def import_tars(self, paths: Iterable[str], *, adopt: bool = False) -> list[Outcome]:
        return [
            outcome for path in paths for outcome in self._import_tar(Path(path).absolute(), adopt)
        ]

    def _import_recorded(
        self, ref: str, run_dirs: Sequence[str], search_dirs: Sequence[str]
    ) -> Outcome:
        # the newest export whose tar is found
        exports = list(reversed(self._recorded(ref).exports))
        if not exports:
            raise UnknownSubject(
                f"Snapshot {ref!r} has no recorded export; expected one to import."
            )
        tried: list[str] = []
        for export in exports:
            path, looked = resolve_tar(export.path, run_dirs, search_dirs)
            tried += looked
            if path is not None:
                break
        else:
            error = InvalidInput(
                f"No tar found for snapshot {ref!r}: looked at "
                f"{', '.join(dict.fromkeys(tried))}; expected "
                "the exported file.",
                hint="pass the folder holding it with --search",
            )
            return self._reject(ref, None, exports[0].path, error)
        try:
            report = verify_tar(path)
        except InvalidInput as exc:
            return self._reject(ref, None, path, exc)
        return self._admit(ref, path, report, export.sha256, export.image_id, "its recorded export")

    def _import_tar(self, path: Path, adopt: bool) -> list[Outcome]:
        try:
            report = verify_tar(path)
        except InvalidInput as exc:
            return [Outcome(None, "refused", str(path), reason=str(exc), error=exc)]
        matched = self.catalog.refs_with_tar(report.tar_sha256)
        if matched:
            return [self._admit_match(ref, path, report) for ref in matched]
        claimed = self.catalog.refs_claimed(report)
        error: LineageError
        if claimed:
            error = SnapshotDigestMismatch(
                f"Tar {str(path)!r} (sha256 {report.tar_sha256}, image {report.image_id}) "
                f"claims to be recorded snapshot {', '.join(map(repr, claimed))} but "
                f"matches none of its recorded exports; expected the exported file.",
                hint="find the exported tar (`lineage snapshots show REF`) or re-export the image",
            )
            return [self._reject(ref, report.tar_sha256, path, error) for ref in claimed]
        if not adopt:
            broken = (
                f" It also does not verify: {' '.join(report.problems)}" if report.problems else ""
            )
            error = InvalidInput(
                f"Tar {str(path)!r} (sha256 {report.tar_sha256}) matches no recorded "
                f"export or adopted tar; expected a tar the log knows.{broken}",
                hint="use --adopt to record it as a snapshot "
                "of unknown provenance, or import --run RUN",
            )
            return [
                Outcome(
                    adopted_ref(report),
                    "refused",
                    str(path),
                    report.tar_sha256,
                    report.image_id,
                    reason=error.message,
                    error=error,
                )
            ]
        return [
            self._admit(
                adopted_ref(report),
                path,
                report,
                report.tar_sha256,
                report.image_id,
                "a sound `docker save` tar",
                adopt=True,
            )
        ]

    def _admit_match(self, ref: str, path: Path, report: TarReport) -> Outcome:
        snapshot = self._recorded(ref)
        export = next(
            (e for e in reversed(snapshot.exports) if e.sha256 == report.tar_sha256), None
        )
        if export is not None:
            return self._admit(
                ref, path, report, export.sha256, export.image_id, "its recorded export"
            )
        adopted = snapshot.adopted
        if adopted is None:
            raise self._not_in_log(ref, f"an export or adopted tar with sha256 {report.tar_sha256}")
        return self._admit(
            ref, path, report, adopted.tar_sha256, adopted.image_id, "its adopted tar"
        )

    def _recorded(self, ref: str) -> Snapshot:
        """The snapshot the read models named, as the log holds it."""
        snapshot = self.lineage.app.snapshot(ref)
        if snapshot is None:
            raise self._not_in_log(ref, "the snapshot")
        return snapshot

    @staticmethod
    def _not_in_log(ref: str, what: str) -> IntegrityFailure:
        # The refs come from the read models; the log disagreeing means the read-model file was not
        # built from it.
        return IntegrityFailure(
            f"the read models name {what} for snapshot {ref!r}, "
            f"but the log does not record it; expected "
            "read models built from this log. Nothing was loaded or recorded.",
            hint="`lineage verify --read-models` compares them "
            "with a rebuild; `lineage rebuild` rebuilds them",
        )

    def _admit(
        self,
        ref: str,
        path: Path,
        report: TarReport,
        tar_sha256: str,
        image_id: str | None,
        against: str,
        *,
        adopt: bool = False,
    ) -> Outcome:
        """Verify against the record, then load, then check the ref; any failure is recorded as a
        rejection.

        The tar was verified offline (`verify_tar`, one pass); its sha256 proves it is the file
        that was exported, its image id (the config digest, which covers every layer's diff_id)
        proves it is the world the stage captured. Only then is it streamed into the engine, and
        afterwards the ref must resolve to that image id."""
        # a null recorded id (benchflow allows it) trusts the verified tar
        expected_id = image_id or report.image_id
        adoption = (
            [
                f.SnapshotAdopted(
                    ref=ref,
                    tar_sha256=report.tar_sha256,
                    image_id=report.image_id,
                    tar_path=str(path),
                )
            ]
            if adopt
            else []
        )
        try:
            self._check_evidence(ref, path, report, tar_sha256, image_id, against)
            if adoption:
                # a conflict is refused before loading
                self.lineage.app.record(adoption, dry_run=True, verified_here=True)
            engine = self._engine_identity()
            loaded_id = self._load(ref, path, expected_id)
        except StoreUnavailable:
            raise  # the engine is away: that says nothing about the tar, so nothing is recorded
        except LineageError as exc:
            return self._reject(ref, report.tar_sha256, path, exc)
        imported = f.SnapshotImported(
            ref=ref,
            engine=engine,
            image_id=loaded_id,
            tar_sha256=report.tar_sha256,
            tar_path=str(path),
        )
        self.lineage.app.record([*adoption, imported], verified_here=True)
        return Outcome(
            ref,
            "adopted" if adopt else "imported",
            str(path),
            report.tar_sha256,
            expected_id,
            engine,
        )

    @staticmethod
    def _check_evidence(
        ref: str, path: Path, report: TarReport, tar_sha256: str, image_id: str | None, against: str
    ) -> None:
        found = []
        if report.tar_sha256 != tar_sha256:
            found.append(
                f"its sha256 is {report.tar_sha256}, but "
                f"{against} has {tar_sha256} (the file is not "
                "the one exported)."
            )
        if image_id is not None and report.image_id != image_id:
            found.append(
                f"it holds image {report.image_id}, but {against} "
                f"has image {image_id} (a different world)."
            )
        if report.image_id is not None and not tar_names(ref, report):
            found.append(
                f"it tags {list(report.repo_tags)}, none of "
                f"which is {ref!r}, so the ref would not resolve."
            )
        others = [tag for tag in report.repo_tags if canonical_tag(tag) != canonical_tag(ref)]
        if others:
            found.append(
                f"it also tags {others}; loading it would re-point those "
                f"names in the engine, and only {ref!r} may be loaded."
            )
        # after the digest findings: a long list of problems is clipped in the log
        found += report.problems
        if found:
            raise SnapshotDigestMismatch(
                f"Tar {str(path)!r} for snapshot {ref!r} does not match {against}: "
                + " ".join(found),
                hint="nothing was loaded; find the exported tar or re-export",
            )

    def _reject(
        self, ref: str, tar_sha256: str | None, tar_path: Path | str | None, error: LineageError
    ) -> Outcome:
        reason = _clip(str(error))
        self.lineage.app.record(
            [
                f.SnapshotImportRejected(
                    ref=ref,
                    tar_sha256=tar_sha256,
                    tar_path=str(tar_path) if tar_path else None,
                    reason=reason,
                )
            ],
            verified_here=True,
        )
        return Outcome(
            ref,
            "rejected",
            str(tar_path) if tar_path else None,
            tar_sha256,
            reason=reason,
            error=error,
        )

    def _engine_identity(self) -> str:
        """Which engine an import went into, for the `imported` fact (asked of the engine once per
        service)."""
        if self._engine_name is None:
            self._engine_name = self.engine.identity()
        return self._engine_name

    def _load(self, ref: str, path: Path, expected_id: str | None) -> str:
        """Load the tar and return the id `ref` now resolves to, which is `expected_id` or an
        error."""
        before = self.engine.list_image_ids()
        try:
            self.engine.load_tar(path)
            resolved = self.engine.image_id(ref)
            if resolved is None or resolved != expected_id:
                # The tar was verified first, so this means the file changed between verification
                # and load.
                raise SnapshotDigestMismatch(
                    f"After loading {str(path)!r}, {ref!r} resolves to {resolved or 'nothing'}; "
                    f"expected image {expected_id}; what the load added was removed again.",
                    hint="the file changed after it was verified; copy it again and retry",
                )
        except LineageError:
            self._unload(before)
            raise
        return resolved

    def _unload(self, before: set[str]) -> None:
        """Best effort: remove the images a failed load added, so a rejected tar leaves the engine
        as it was."""
        try:
            for image_id in self.engine.list_image_ids() - before:
                self.engine.remove_image(image_id, force=True)
        except LineageError:
            pass  # the engine went away; the rejection below says why the load failed

    # --- export -----------------------------------------------------------------------------------

    def export(self, ref: str, dest_dir: str | os.PathLike[str]) -> Outcome:
        snapshot = self.lineage.app.snapshot(ref)
        if snapshot is None or not snapshot.known:
            raise UnknownSubject(
                f"Snapshot {ref!r} is not recorded (never "
                f"captured or adopted); expected the ref of a "
                "recorded snapshot. Nothing was asked of the engine.",
                hint="`lineage snapshots list` shows the recorded refs",
            )
        final = Path(os.path.abspath(Path(dest_dir) / export_file_name(ref)))
        if final.exists() and str(final) not in {export.path for export in snapshot.exports}:
            # benchflow's file names fold characters ('a/b' and 'a-b' are both a-b.tar): never
            # replace another snapshot's evidence, whose recorded digest would then point at this
            # one.
            raise InvalidInput(
                f"Exporting snapshot {ref!r} would replace "
                f"{str(final)!r}, which this snapshot did not "
                "export (another ref maps to the same file name); expected "
                "a free file name. Nothing was asked of the engine.",
                hint="export it into another folder with --to",
            )
        try:
            path, tar_sha256, image_id = self._export(ref, Path(dest_dir))
        except StoreUnavailable:
            raise  # the engine is away: the snapshot may export fine later, so nothing is recorded
        except LineageError as exc:
            self.lineage.record([f.SnapshotExportFailed(ref=ref, error=_clip(str(exc)))])
            raise
        self.lineage.record(
            [f.SnapshotExported(ref=ref, path=str(path), sha256=tar_sha256, image_id=image_id)]
        )
        return Outcome(ref, "exported", str(path), tar_sha256, image_id)

    def _export(self, ref: str, dest_dir: Path) -> tuple[Path, str, str]:
        """Save under a hidden name, verify, and only then rename into place: the final name only
        ever holds a verified tar."""
        engine_id = self.engine.image_id(ref)
        if engine_id is None:
            raise DockerEngineError(
                f"The Docker engine has no image {ref!r}; expected the captured image to still "
                "exist.",
                hint="it may have been discarded; import it from an exported tar first",
            )
        name = export_file_name(ref)
        final = Path(os.path.abspath(dest_dir / name))
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidInput(
                f"Cannot create export folder {str(final.parent)!r}: {exc.strerror or exc}."
            ) from exc
        staged, tar_sha256, _size = self.engine.save_to(ref, final.parent, f".{name}.unverified")
        try:
            report = verify_tar(staged)
            found = list(report.problems)
            if report.tar_sha256 != tar_sha256:
                found.append(
                    f"the file's sha256 is {report.tar_sha256}, but "
                    f"{tar_sha256} was written (it changed on disk)."
                )
            if report.image_id != engine_id:
                found.append(
                    f"it holds image {report.image_id}, but the engine's {ref!r} is {engine_id}."
                )
            if found:
                raise SnapshotDigestMismatch(
                    f"The export of {ref!r} does not verify: " + " ".join(found),
                    hint="nothing was written under the final name; export again",
                )
            os.replace(staged, final)
            fsync_directory(final.parent)
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
        return final, tar_sha256, engine_id

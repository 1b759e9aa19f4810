"""Read-model queries about snapshots: what a run exported, which refs recorded a tar, `lineage
snapshots list|show`.

Design decision: the SQL that snapshot imports and `lineage snapshots` ask lives here, in the
projections layer that owns the `snapshots` view and `snapshot_events` table
(`projections/read_models/stage_registry.py`), as functions of a `ReadModelDB`, so the CLI only
parses and prints. `adapters/snapshots/snapshot_service.py` may not import projections, so it asks
through its
`Catalog` port; `ReadModelCatalog` implements that port by opening the read models for one query at
a time, so a long `docker load` never holds the DuckDB lock. (Exports, history and audit read the
same tables in queries of their own.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ...adapters.duckdb_store import ReadModelDB
from ...adapters.snapshots.snapshot_service import RunExports
from ...adapters.snapshots.snapshot_tar import TarReport
from ...domain.errors import InvalidInput, StageNotRecorded, UnknownSubject
from .run_list import LIST_RUNS_HINT

if TYPE_CHECKING:
    from ..engine.runner import ReadModels


def run_exports(db: ReadModelDB, run: str, stages: Sequence[str] = ()) -> RunExports:
    """The exported snapshots of `run` (of `stages`, or of every stage), refusing what cannot be
    imported."""
    registered = db.rows("SELECT location, run_dir FROM runs WHERE run = ?", [run])
    if not registered:
        raise UnknownSubject(
            f"Run {run!r} is not recorded; expected a run registered in the log.",
            hint=LIST_RUNS_HINT,
        )
    marked = [
        row["stage"]
        for row in db.rows("SELECT DISTINCT stage FROM stages WHERE run = ? ORDER BY stage", [run])
    ]
    snapshots = db.rows(
        "SELECT ref, stage, exports FROM snapshots WHERE run = ? ORDER BY position", [run]
    )
    _check_stages_recorded(run, stages, marked)
    selected = [row for row in snapshots if not stages or row["stage"] in stages]
    _check_stages_exported(run, stages, selected)
    refs = tuple(row["ref"] for row in selected if row["exports"])
    if not refs:
        raise InvalidInput(
            f"Run {run!r} has no exported snapshots; expected at least one recorded export.",
            hint="export with `lineage snapshots export REF "
            "--to DIR` (benchflow: --keep-snapshots)",
        )
    places = (registered[0]["location"], registered[0]["run_dir"])
    return RunExports(tuple(dict.fromkeys(d for d in places if d)), refs)


def _check_stages_recorded(run: str, stages: Sequence[str], marked: list[str]) -> None:
    unknown = [stage for stage in stages if stage not in marked]
    if unknown:
        raise StageNotRecorded(
            f"Run {run!r} has no stage {', '.join(map(repr, unknown))}; it recorded "
            f"{', '.join(marked) or 'no stages'}.",
            hint="pass one of the recorded stages to --stage",
        )


def _check_stages_exported(run: str, stages: Sequence[str], selected: list[dict[str, Any]]) -> None:
    """Each stage asked for has an exported snapshot (an ephemeral one cannot be imported)."""
    for stage in stages:
        if not any(row["exports"] for row in selected if row["stage"] == stage):
            ephemeral = [row["ref"] for row in selected if row["stage"] == stage]
            raise InvalidInput(
                f"Stage {stage!r} of run {run!r} was never "
                f"exported (snapshots {ephemeral or 'none'} are "
                "ephemeral); expected a recorded export to import.",
                hint="export it with `lineage snapshots export REF --to "
                "DIR` while the image exists (benchflow: --keep-snapshots)",
            )


def refs_with_tar(db: ReadModelDB, tar_sha256: str) -> list[str]:
    """Refs whose recorded export (or adopted tar) has exactly this sha256."""
    rows = db.rows(
        "SELECT DISTINCT ref FROM snapshot_events WHERE (kind = 'exported' AND sha256 = ?) "
        "OR (kind = 'adopted' AND tar_sha256 = ?) ORDER BY ref",
        [tar_sha256, tar_sha256],
    )
    return [row["ref"] for row in rows]


def refs_claimed(db: ReadModelDB, report: TarReport) -> list[str]:
    """Recorded snapshots this tar claims to be: a repo tag names one, or a recorded export has its
    image id."""
    names = sorted(
        {form for tag in report.repo_tags for form in (tag, tag.removesuffix(":latest"))}
    )
    rows = db.rows(
        "SELECT ref FROM snapshots WHERE (captured OR adopted) AND "
        "list_contains(?, ref) UNION SELECT ref FROM snapshot_events WHERE "
        "kind IN ('exported', 'adopted') AND image_id = ? ORDER BY ref",
        [names, report.image_id],
    )
    return [row["ref"] for row in rows]


def lifetimes(db: ReadModelDB, run: str | None = None) -> Iterator[dict[str, Any]]:
    """`snapshots` rows (one per ref) in log order, streamed: every ref, or those `run` captured."""
    return db.stream(
        "SELECT * FROM snapshots WHERE ? IS NULL OR run = ? ORDER BY position", [run, run]
    )


def run_directories(db: ReadModelDB) -> dict[str, list[str]]:
    """Where each run's files were last seen, newest first (a moved run keeps its exported tars in
    `snapshots/`)."""
    rows = db.rows(
        "SELECT run, list(path ORDER BY position DESC) AS paths FROM run_locations GROUP BY run"
    )
    return {row["run"]: row["paths"] for row in rows}


def lifetime_with_events(db: ReadModelDB, ref: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One ref's `snapshots` row and its `snapshot_events` in log order; UnknownSubject when nothing
    is recorded."""
    found = db.rows("SELECT * FROM snapshots WHERE ref = ?", [ref])
    if not found:
        raise UnknownSubject(
            f"No snapshot {ref!r} is recorded; expected a captured, adopted or imported ref.",
            hint="`lineage snapshots list` shows the recorded refs",
        )
    return found[0], db.rows("SELECT * FROM snapshot_events WHERE ref = ? ORDER BY position", [ref])


class ReadModelCatalog:
    """`snapshot_service.Catalog` over the read models; `open_models` yields them caught up, for one
    query."""

    def __init__(self, open_models: Callable[[], AbstractContextManager[ReadModels]]) -> None:
        self._open = open_models

    def run_exports(self, run: str, stages: Sequence[str] = ()) -> RunExports:
        with self._open() as models:
            return run_exports(models.db, run, stages)

    def refs_with_tar(self, tar_sha256: str) -> list[str]:
        with self._open() as models:
            return refs_with_tar(models.db, tar_sha256)

    def refs_claimed(self, report: TarReport) -> list[str]:
        with self._open() as models:
            return refs_claimed(models.db, report)

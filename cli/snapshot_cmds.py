"""`lineage snapshots verify|import|export|list|show`: docker-save tars as evidence, and snapshot
lifetimes.

Exit codes: 0 when every tar verified, imported or exported; 3 when evidence does not match (a
digest, an image id, a tar that does not verify); 4 when the Docker engine cannot be reached; 1 for
anything else (an unknown ref, a tar no record vouches for, a missing file). With several tars,
every one is processed and reported on stdout, and the exit code is the gravest failure's (3 before
4 before 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from ..adapters.snapshots.docker_engine import DockerEngine
from ..adapters.snapshots.restorability import ENGINE_CHECK_TIMEOUT_S, check_restorable
from ..adapters.snapshots.snapshot_service import Outcome, SnapshotService, worst_error
from ..adapters.snapshots.snapshot_tar import verify_tar
from ..bootstrap import Lineage
from ..domain.errors import InvalidInput, LineageError, SnapshotDigestMismatch
from ..domain.vocabulary import STAGES
from ..projections.reports import snapshot_queries
from ..projections.reports.exports.exports import require_run
from ..projections.reports.run_list import resolve_run
from .common import as_of_option, read_models, resolved_runs
from .output import note, output_options, write_document, write_line, write_rows

VERIFY_COLUMNS = (
    "path",
    "ok",
    "layout",
    "image_id",
    "repo_tags",
    "tar_sha256",
    "size_bytes",
    "config_member",
    "layers",
    "problems",
)
LIST_COLUMNS = (
    "ref",
    "run",
    "stage",
    "layer",
    "lifetime",
    "restorable",
    "restorable_because",
    "image_check",
    "captured",
    "adopted",
    "exports",
    "export_failures",
    "discarded",
    "imports",
    "rejected_imports",
    "export_path",
    "export_image_id",
    "imported_image_id",
    "last_rejection",
)
LIST_TABLE_COLUMNS = (
    "ref",
    "run",
    "stage",
    "lifetime",
    "restorable",
    "restorable_because",
    "exports",
    "imports",
    "rejected_imports",
)
EVENT_COLUMNS = (
    "position",
    "kind",
    "occurred_at",
    "actor",
    "run",
    "stage",
    "layer",
    "path",
    "sha256",
    "image_id",
    "engine",
    "tar_path",
    "tar_sha256",
    "reason",
)
# these get fewer, wider columns; the machine formats get every column
HUMAN_FORMATS = (
    "table",
    "markdown",
)


def _service(lineage: Lineage) -> SnapshotService:
    service = SnapshotService(
        lineage, snapshot_queries.ReadModelCatalog(lambda: read_models(lineage))
    )
    click.get_current_context().call_on_close(service.engine.close)
    return service


def _engine_for_check(check: bool) -> DockerEngine | None:
    """The engine `--check` asks (the environment's, with a short timeout), closed with the
    command."""
    if not check:
        return None
    engine = DockerEngine(timeout_s=ENGINE_CHECK_TIMEOUT_S)
    click.get_current_context().call_on_close(engine.close)
    return engine


def _finish(outcomes: Sequence[Outcome], what: str) -> None:
    errors = [outcome.error for outcome in outcomes if outcome.error is not None]
    if errors:
        raise worst_error(errors, what)


@click.group()
def snapshots() -> None:
    """Verify, import and export `docker save` snapshot tars; show each snapshot's lifetime."""


@snapshots.command()
@click.argument("tars", nargs=-1, required=True, metavar="TAR...")
@output_options()
@click.pass_obj
def verify(lineage: Lineage, tars: tuple[str, ...], fmt: str) -> None:
    """Check each TAR offline in one pass: sha256, layout, image id, repo tags, every layer against
    the config's diff_ids, and unsafe members. Needs no engine and records nothing; exit 0 only if
    every tar is sound (else 3)."""
    rows: list[dict[str, Any]] = []
    errors: list[LineageError] = []
    for tar in tars:
        try:
            row = verify_tar(tar).as_dict()
        except InvalidInput as exc:
            row = {"path": tar, "ok": False, "problems": [str(exc)]}
            errors.append(exc)
        else:
            if not row["ok"]:
                errors.append(
                    SnapshotDigestMismatch(
                        f"{tar}: {' '.join(row['problems'])}",
                        hint="re-export the image with `lineage snapshots export`",
                    )
                )
        rows.append(row)
    if fmt in ("json", "jsonl"):
        write_rows(rows, VERIFY_COLUMNS, fmt)
    else:
        write_rows(
            [{**row, "layers": _layer_summary(row.get("layers", []))} for row in rows],
            VERIFY_COLUMNS,
            fmt,
        )
    if errors:
        raise worst_error(errors, f"of {len(tars)} tars")


def _layer_summary(layers: list[dict[str, Any]]) -> list[str]:
    return [
        f"{layer['index']}: {'ok' if layer['ok'] else 'MISMATCH'} "
        f"{layer['actual_diff_id'] or '(not hashed)'}"
        for layer in layers
    ]


@snapshots.command("import")
@click.argument("tars", nargs=-1, metavar="[TAR...]")
@click.option(
    "--run",
    "run_key",
    metavar="RUN",
    help="Import the recorded exports of this run instead of named tars.",
)
@click.option(
    "--stage",
    "stages",
    multiple=True,
    type=click.Choice(STAGES),
    help="With --run: only these stages.",
)
@click.option(
    "--search",
    "search_dirs",
    multiple=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="With --run: folders to look in when a recorded "
    "tar is not at its path or in <run dir>/snapshots.",
)
@click.option(
    "--adopt",
    is_flag=True,
    help="Take in a TAR no record vouches for, as a snapshot of unknown "
    "provenance (recorded under its first repo tag without ':latest', else its image id).",
)
@output_options()
@click.pass_obj
def import_command(
    lineage: Lineage,
    tars: tuple[str, ...],
    run_key: str | None,
    stages: tuple[str, ...],
    search_dirs: tuple[str, ...],
    adopt: bool,
    fmt: str,
) -> None:
    """Load snapshot tars into the Docker engine, each verified against its recorded export first.

    A tar is checked (sha256 and image id against the record, every layer against its config) before
    the engine sees it; after loading, the ref must resolve to the recorded image id. Each import or
    rejection is recorded.
    """
    if bool(tars) == bool(run_key):
        raise click.UsageError("give either TAR... or --run RUN")
    if run_key and adopt:
        raise click.UsageError("--adopt applies to named tars, not to --run")
    if not run_key and (stages or search_dirs):
        raise click.UsageError("--stage and --search apply to --run")
    lineage.may_create = True  # it records what it found (imports, adoptions, rejections)
    service = _service(lineage)
    outcomes = (
        service.import_run(resolved_runs(lineage, [run_key])[0], stages, search_dirs)
        if run_key
        else service.import_tars(tars, adopt=adopt)
    )
    write_rows([outcome.row() for outcome in outcomes], Outcome.COLUMNS, fmt)
    _finish(outcomes, "imports")


@snapshots.command()
@click.argument("ref")
@click.option(
    "--to",
    "dest_dir",
    required=True,
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Folder for the tar (created if missing); the "
    "file is named from the ref as benchflow does.",
)
@output_options()
@click.pass_obj
def export(lineage: Lineage, ref: str, dest_dir: str, fmt: str) -> None:
    """`docker save` the recorded snapshot REF to DIR/<safe ref>.tar, verified before it takes its
    name.

    The tar's image id must equal the engine's; `exported` (path, sha256, image id) or `export
    failed` is recorded.
    """
    outcome = _service(lineage).export(ref, dest_dir)
    write_rows([outcome.row()], ("ref", "status", "image_id", "tar_path", "tar_sha256"), fmt)


@snapshots.command("list")
@click.option("--run", "run_key", metavar="RUN", help="Only the snapshots captured by this run.")
@click.option(
    "--check",
    is_flag=True,
    help="Re-hash each tar a snapshot's restorability rests on and ask the Docker engine for "
    "its recorded image id (without it, only that the exported tar is still there is checked).",
)
@as_of_option
@output_options()
@click.pass_obj
def list_command(
    lineage: Lineage,
    run_key: str | None,
    check: bool,
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
) -> None:
    """Every snapshot's lifetime (captured, exported, discarded, imported, rejected imports,
    adopted) and whether a world can be restored from it now, and why. A snapshot restorable only
    through its exported tar is not restorable once that tar is gone. With --check, one resting on
    an import, export or adoption is restorable only while a tar with its recorded sha256 or an
    image with its recorded id (in the engine) backs it; without an engine that answers, the reason
    says the image was not checked. table and markdown show the main columns; csv, json and jsonl
    every column (export path and image id, imported image id, last rejection)."""
    with read_models(lineage, as_of, occurred_before) as models:
        run_dirs = snapshot_queries.run_directories(models.db)
        if run_key is not None:  # named as everywhere; a name of nothing is refused, not []
            run_key = resolve_run(models.db, run_key)
            if not models.db.scalar("SELECT count(*) FROM snapshots WHERE run = ?", [run_key]):
                require_run(models.db, run_key)
        rows = snapshot_queries.lifetimes(models.db, run_key)
        write_rows(
            check_restorable(rows, run_dirs, check=check, engine=_engine_for_check(check)),
            LIST_TABLE_COLUMNS if fmt in HUMAN_FORMATS else LIST_COLUMNS,
            fmt,
        )


@snapshots.command()
@click.argument("ref")
@click.option(
    "--check",
    is_flag=True,
    help="Re-hash the tars its restorability rests on and "
    "ask the Docker engine for its recorded image id.",
)
@as_of_option
@output_options()
@click.pass_obj
def show(
    lineage: Lineage,
    ref: str,
    check: bool,
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
) -> None:
    """One snapshot's lifetime and restorability (as `list` judges it), then its events in log order
    (csv: the events only)."""
    with read_models(lineage, as_of, occurred_before) as models:
        lifetime, events = snapshot_queries.lifetime_with_events(models.db, ref)
        run_dirs = snapshot_queries.run_directories(models.db)
    lifetime = next(
        check_restorable([lifetime], run_dirs, check=check, engine=_engine_for_check(check))
    )
    summary = {column: lifetime.get(column) for column in LIST_COLUMNS}
    if fmt in ("json", "jsonl"):
        write_document(
            {"snapshot": summary, "events": [{c: e.get(c) for c in EVENT_COLUMNS} for e in events]},
            fmt,
        )
        return
    if fmt != "csv":
        write_rows(
            [{"field": key, "value": value} for key, value in summary.items()],
            ("field", "value"),
            fmt,
            title=f"snapshot {ref}",
        )
        write_line("")
    if fmt in HUMAN_FORMATS:
        events = [{**event, "detail": _detail(event)} for event in events]
    write_rows(
        events,
        ("position", "kind", "occurred_at", "actor", "detail")
        if fmt in HUMAN_FORMATS
        else EVENT_COLUMNS,
        fmt,
        title="events",
    )
    if fmt == "table":
        note(
            f"{ref}: {'restorable' if summary['restorable'] else 'NOT restorable'} "
            f"({summary['restorable_because']})"
        )


def _detail(event: dict[str, Any]) -> str:
    return "; ".join(
        f"{column}={event[column]}" for column in EVENT_COLUMNS[4:] if event.get(column) is not None
    )


COMMANDS = (snapshots,)

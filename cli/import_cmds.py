"""`lineage import`: turn run directories that harnesses already wrote into lineage."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from ..adapters.importers import ImportSummary, import_runs
from ..bootstrap import Lineage
from .output import note, write_document


@contextmanager
def progress_bar() -> Iterator[Callable[[int, int, str], None] | None]:
    """A progress bar on stderr when stderr is a terminal (a log file gets only the summary)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("importing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        transient=True,
        console=_stderr_console(),
    ) as bar:
        task = bar.add_task("", total=None)

        def advance(done: int, total: int, current: str) -> None:
            bar.update(task, completed=done, total=total, description=current)

        yield advance


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(file=sys.stderr)


def report(summary: ImportSummary, dry_run: bool, keep_going: bool) -> None:
    for skipped in summary.skipped:
        note(f"skipped {skipped.path}: {skipped.reason}")
    for warning in summary.warnings:
        note(f"warning: {warning}")
    # without --keep-going the error itself ends the command
    for rejection in summary.errors if keep_going else ():
        note(f"rejected: {rejection.error}")
    note(summary_line(summary, dry_run))


def summary_line(summary: ImportSummary, dry_run: bool) -> str:
    """The import in one line, counted by what the store holds: runs (each new, known with new
    facts, or already known), then the folders they were read from when copies of a run merged."""
    would = "would be " if dry_run else ""
    merged = (
        f"; {summary.folders} run folders read, {summary.folders_merged} of them merged into a "
        "run another folder holds"
        if summary.folders_merged
        else ""
    )
    return (
        f"{'dry run: ' if dry_run else ''}{summary.runs} runs, {summary.forks} forks, "
        f"{summary.children} children, {summary.events_appended} events {would}appended "
        f"({summary.runs_new} runs new, {summary.runs_updated} with new facts, "
        f"{summary.runs_skipped_known} already known{merged}), "
        f"{summary.runs_rejected} runs rejected"
        + (
            f", {summary.runs_unfinished} runs left out as still running"
            if summary.runs_unfinished
            else ""
        )
        + (f", {len(summary.skipped)} folders skipped" if summary.skipped else "")
    )


def summary_document(summary: ImportSummary) -> dict[str, Any]:
    """`--format json`: the counts, and by name what was left out or refused, for a script to
    check."""
    return {
        **summary.as_dict(),
        "skipped": [{"path": str(s.path), "reason": s.reason} for s in summary.skipped],
        "rejected": [{"path": r.path, "error": str(r.error)} for r in summary.errors],
        # among them, the runs whose result.json exists but cannot be read
        "corrupt": [
            {"path": path, "file": error.file, "reason": error.reason}
            for path, error in summary.corrupt
        ],
        "warnings": list(summary.warnings),
    }


@click.command("import")
@click.argument("paths", nargs=-1, type=click.Path())  # discovery refuses a missing one: exit 1
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the facts that would be appended (JSON lines on stdout); append nothing.",
)
@click.option(
    "--keep-going",
    is_flag=True,
    help="Import the other runs when one is rejected; exit 1 at the end if any was.",
)
@click.option(
    "--unfinished",
    is_flag=True,
    help="Also import runs the harness may still be writing (no result.json yet; for "
    "bench eval ablate, no ablation.json), as they are now. Importing them again "
    "once finished may then be refused as a conflict where their files changed.",
)
@click.option(
    "--bundle",
    "bundle_file",
    type=click.Path(dir_okay=False),
    help="Instead of run directories: a file from `lineage "
    "bundle`, verified first (see `bundle verify`).",
)
@click.option(
    "--key",
    "key_values",
    multiple=True,
    metavar="VKEY",
    help="With --bundle: the key its checkpoint must be signed by.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: print the summary as one JSON document "
    "on stdout, with every folder skipped and why.",
)
@click.pass_obj
def import_command(
    lineage: Lineage,
    paths: tuple[str, ...],
    dry_run: bool,
    keep_going: bool,
    unfinished: bool,
    bundle_file: str | None,
    key_values: tuple[str, ...],
    fmt: str,
) -> None:
    """Import benchflow and Harbor run directories found under PATHS.

    Recognises benchflow PR-#1046 run directories (tree.json, stage_snapshots.json, branches/,
    ablation.json, continue-runs), benchflow main-line branched trials (tree.json kind
    benchflow-branch-tree) and Harbor trial directories. Each run is appended whole or not at all;
    importing again appends nothing. A run still being written is left out (with a warning) until it
    has finished; one whose result.json exists but cannot be read is refused as corrupt. A run that
    cannot be read stops the import before anything is appended (--keep-going imports the others).
    With --dry-run the facts are printed as `lineage ingest` lines. Progress and the summary go to
    stderr. Exit status: 0 when every run was imported (or already known), 1 when a run was rejected
    (the error names the file, field and reason), 4 when the store is unreachable.
    With --bundle FILE: the bundle's facts, after verifying it (exit 3 if it does not), each
    appended fact keeping its origin, position and checkpoint (`lineage bundle sources`).
    """
    if fmt == "json" and (dry_run or bundle_file is not None):
        raise click.UsageError(
            "--format json prints the import's summary on stdout, where --dry-run prints "
            "its facts and --bundle has no folders to list; found them together: drop one"
        )
    if bundle_file is not None or not paths:
        from .bundle_cmds import import_bundle_file

        if dry_run or keep_going or unfinished:
            raise click.UsageError(
                "--dry-run, --keep-going and --unfinished are for run directories; found them with "
                "--bundle (use `lineage bundle verify FILE` to check a bundle without importing it)"
            )

        import_bundle_file(lineage, bundle_file, paths, key_values)
        return
    with progress_bar() as advance:
        summary = import_runs(
            lineage,
            list(paths),
            dry_run=dry_run,
            keep_going=keep_going,
            unfinished=unfinished,
            progress=advance,
        )
    if dry_run:
        out = sys.stdout
        for fact, occurred_at in summary.facts:
            line = fact.model_dump(mode="json")
            if occurred_at is not None:
                line["occurred_at"] = occurred_at.isoformat()
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    report(summary, dry_run, keep_going)
    if fmt == "json":
        write_document(summary_document(summary), "json")
    if summary.errors:
        if keep_going:
            ctx = click.get_current_context()
            ctx.exit(1)
        raise summary.errors[0].error


COMMANDS = (import_command,)

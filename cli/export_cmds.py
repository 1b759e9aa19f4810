"""`lineage export tree|stages|ablation|branch-view|openlineage|parquet`: benchflow's own files,
and formats other tools read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..adapters.duckdb_store import ReadModelDB
from ..bootstrap import Lineage
from ..domain.errors import InvalidInput
from ..domain.vocabulary import canonical_json
from ..projections.engine.runner import resolve_as_of
from ..projections.reports.exports import exports
from ..projections.reports.run_list import resolve_run
from .common import (
    as_of_option,
    complete_runs,
    occurred_moment,
    read_models,
    run_argument,
    split_address,
)
from .output import note, output_options, write_rows, write_text


def _write(document: dict[str, Any], output: str | None) -> None:
    write_out(canonical_json(document), output)


def write_out(text: str, output: str | Path | None) -> None:
    """To stdout (None or -), or to a file replaced whole: never a half-written export under the
    final name.

    The text goes to a new temp file of its own in the target's folder (never a fixed name someone
    could have put a link at), then replaces the target, which must be a regular file or a new name:
    a link, a device (`/dev/null`) or a FIFO would be replaced by a file, not written through.
    """
    if output is None or str(output) == "-":  # `report --to -` hands a Path
        write_text(text, escape=False)
        return
    target = Path(output)
    if not target.name or target.name in (".", ".."):
        raise InvalidInput(
            f"expected a file name to write to, found {str(output)!r}",
            hint="name a file, or - for standard output",
        )
    if target.is_symlink() or (target.exists() and not target.is_file()):
        kind = "a symbolic link" if target.is_symlink() else "something other than a regular file"
        raise InvalidInput(
            f"expected a regular file or a new name to write to, found {kind} at {target}",
            hint="name a regular file, or - for standard output (pipe it where you like)",
        )
    _replace_whole(target, text)
    note(f"wrote {target}")


def _replace_whole(target: Path, text: str) -> None:
    import os
    import tempfile

    tmp: str | None = None
    try:
        descriptor, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
        )
        # mkstemp makes it private (0600); an export is an ordinary file, with the mode any new file
        # gets here.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(descriptor, 0o666 & ~umask)
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise InvalidInput(
            f"expected to write {target}, found: {exc.strerror or exc}",
            hint="name a file in an existing folder you may write to",
        ) from None


output_option = click.option(
    "-o", "--output", metavar="FILE", help="Write to FILE instead of stdout."
)


@click.group()
def export() -> None:
    """Write benchflow artifacts (tree.json, stage_snapshots.json, ablation.json, the branch
    view), OpenLineage events or Parquet files from the log."""


def _run_document_command(
    name: str, document: Callable[[ReadModelDB, str], dict[str, Any]], help_text: str
) -> click.Command:
    """`lineage export NAME RUN`: the file `document` builds for RUN from the read models."""

    @export.command(name, help=help_text)
    @run_argument()
    @as_of_option
    @output_option
    @click.pass_obj
    def command(
        lineage: Lineage,
        run: str,
        as_of: str | None,
        occurred_before: str | None,
        output: str | None,
    ) -> None:
        with read_models(lineage, as_of, occurred_before) as models:
            _write(document(models.db, resolve_run(models.db, run)), output)

    return command


tree = _run_document_command(
    "tree", exports.tree_document, "RUN's tree.json (benchflow PR layout, schema_version 1)."
)
stages = _run_document_command(
    "stages",
    exports.stages_document,
    "RUN's stage_snapshots.json, with each stage's snapshot lifetime.",
)


#: A prices file is a small JSON object.
MAX_PRICES_BYTES = 1_000_000


@export.command("branch-view")
@run_argument()
@click.option(
    "--prices",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A JSON file holding the document's own pricing object ({model, source, usd_per_token: "
    "{input, output, cache_read, cache_creation}}): each child's usd_estimate is priced with it. "
    "Without it usd_estimate is null (0 for a child that used no tokens).",
)
@as_of_option
@output_option
@click.pass_obj
def branch_view(
    lineage: Lineage,
    run: str,
    prices: Path | None,
    as_of: str | None,
    occurred_before: str | None,
    output: str | None,
) -> None:
    """RUN's benchflow.branch-view/1 document (version 1.1): every fork, retry and nested fork
    with its children, rewards, advantages, tokens, USD and sandbox-seconds.

    What benchflow's build_branch_view gives for the same trial's files (prices=None unless
    --prices); snapshot refs, prompts and error messages never appear.
    """
    from ..adapters.strict_json import loads
    from ..adapters.user_files import read_capped
    from ..projections.reports.branch_view import branch_view as build
    from ..projections.reports.branch_view import check_prices

    pricing = None
    if prices is not None:
        data = read_capped(prices, MAX_PRICES_BYTES, "prices")
        try:
            document = loads(data)
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(f"{prices}: expected JSON prices, found: {exc}") from None
        pricing = check_prices(document, str(prices))
    with read_models(lineage, as_of, occurred_before) as models:
        _write(build(models.db, resolve_run(models.db, run), pricing), output)


@export.command()
@run_argument("fork", metavar="RUN:FORK")
@as_of_option
@output_option
@click.pass_obj
def ablation(
    lineage: Lineage, fork: str, as_of: str | None, occurred_before: str | None, output: str | None
) -> None:
    """The ablation.json of fork RUN:FORK (arms, verdicts, test attribution).

    A report whose arms never ran has no fork: name the node its stage was captured on (root for
    env-ready).
    """
    run, fork_id = split_address(fork, "RUN:FORK")
    with read_models(lineage, as_of, occurred_before) as models:
        _write(exports.ablation_document(models.db, resolve_run(models.db, run), fork_id), output)


@export.command()
@click.argument("runs", metavar="[RUN...]", nargs=-1, shell_complete=complete_runs)
@click.option(
    "--namespace",
    default="rollout-lineage",
    show_default=True,
    help="The OpenLineage namespace of the jobs (one job per task).",
)
@as_of_option
@output_option
@click.pass_obj
def openlineage(
    lineage: Lineage,
    runs: tuple[str, ...],
    namespace: str,
    as_of: str | None,
    occurred_before: str | None,
    output: str | None,
) -> None:
    """OpenLineage RunEvents as JSON lines for RUN... (default: every run).

    A job per task, a run per tree node (START, then COMPLETE / FAIL / ABORT once it has an outcome,
    RUNNING while pending), the standard parent facet for fork children, linear steps and
    continuations, and custom facets rolloutLineage_delta, rolloutLineage_outcome and
    rolloutLineage_snapshots.
    """
    import json

    from ..projections.reports.exports import openlineage as ol
    from ..settings import tool_version

    emit = ol.Emitter(namespace, "urn:" + tool_version().replace(" ", ":"))
    with read_models(lineage, as_of, occurred_before) as models:
        given = [resolve_run(models.db, run) for run in runs]
        keys = list(dict.fromkeys(given)) or ol.all_runs(models.db)
        lines = [
            json.dumps(event, sort_keys=True, ensure_ascii=False) + "\n"
            for run in keys
            for event in ol.run_events(models.db, run, emit)
        ]
    write_out("".join(lines), output)


@export.command()
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@as_of_option
@output_options()
@click.pass_obj
def parquet(
    lineage: Lineage, directory: Path, as_of: str | None, occurred_before: str | None, fmt: str
) -> None:
    """Every read model (views and the tables under them) as DIR/NAME.parquet, written by DuckDB.

    Files of the same names are replaced, and only once all of them were written. Lists what it
    wrote.
    """
    from ..projections.reports.exports.parquet import export_parquet

    written = export_parquet(
        lineage, directory, resolve_as_of(lineage, as_of), occurred_moment(occurred_before)
    )
    write_rows(written, ("relation", "rows", "file"), fmt)
    note(f"wrote {len(written)} Parquet files to {directory}")


COMMANDS = (export,)

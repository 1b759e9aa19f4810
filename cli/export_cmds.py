"""`lineage export tree|stages|ablation`: benchflow's own files, rebuilt from the log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..adapters.duckdb_store import ReadModelDB
from ..bootstrap import Lineage
from ..domain.vocabulary import canonical_json
from ..projections import exports
from ..projections.run_list import resolve_run
from .common import as_of_option, read_models, run_argument, split_address
from .output import note


def _write(document: dict[str, Any], output: str | None) -> None:
    text = canonical_json(document)
    if output is None or output == "-":
        click.echo(text, nl=False)
        return
    target = Path(output)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)  # never a half-written export under the final name
    note(f"wrote {target}")


output_option = click.option(
    "-o", "--output", metavar="FILE", help="Write to FILE instead of stdout."
)


@click.group()
def export() -> None:
    """Write benchflow artifacts (tree.json, stage_snapshots.json, ablation.json) from the log."""


def _run_document_command(
    name: str, document: Callable[[ReadModelDB, str], dict[str, Any]], help_text: str
) -> click.Command:
    """`lineage export NAME RUN`: the file `document` builds for RUN from the read models."""

    @export.command(name, help=help_text)
    @run_argument()
    @as_of_option
    @output_option
    @click.pass_obj
    def command(lineage: Lineage, run: str, as_of: str | None, output: str | None) -> None:
        with read_models(lineage, as_of) as models:
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


@export.command()
@run_argument("fork", metavar="RUN:FORK")
@as_of_option
@output_option
@click.pass_obj
def ablation(lineage: Lineage, fork: str, as_of: str | None, output: str | None) -> None:
    """The ablation.json of fork RUN:FORK (arms, verdicts, test attribution).

    A report whose arms never ran has no fork: name the node its stage was captured on (root for env-ready).
    """
    run, fork_id = split_address(fork, "RUN:FORK")
    with read_models(lineage, as_of) as models:
        _write(exports.ablation_document(models.db, resolve_run(models.db, run), fork_id), output)


COMMANDS = (export,)

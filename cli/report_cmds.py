"""Pictures and tables for people: `lineage arms` (the arms x tests flip table) and `lineage report` (one HTML)."""

from __future__ import annotations

import click

from ..bootstrap import Lineage
from .common import as_of_option, read_models
from .output import format_option, write_rows


@click.command()
@click.argument("address", metavar="RUN[:FORK]")
@click.option(
    "--baseline",
    default="parent",
    show_default=True,
    help="What a flip is measured against: the parent run, or the name of an arm in each fork.",
)
@as_of_option
@format_option()
@click.pass_obj
def arms(
    lineage: Lineage,
    address: str,
    baseline: str,
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
) -> None:
    """RUN's arms x tests: one row per arm (every fork, or FORK's), one column per test, flips marked.

    The first row is the baseline (the parent run itself unless --baseline names an arm). In table and markdown
    a flipped cell ends in `(flip)` and the title lists, per fork, the tests that differ between arms; the other
    formats keep the bare outcomes and list each row's flipped tests in `flips`. An empty cell: not reported.

    Example: lineage arms ablate-2026-11-02__10-15-00/ablation/csv-dedupe:root
    """
    from ..projections import arms as arm_tables

    with read_models(lineage, as_of, occurred_before) as models:
        run, fork = arm_tables.split_run_fork(models.db, address)
        table = arm_tables.arms_table(models.db, run, fork, baseline)
    if fmt in ("table", "markdown"):
        write_rows(
            arm_tables.marked_rows(table), table.columns, fmt, title=arm_tables.legend(table)
        )
    else:
        write_rows(table.rows, table.columns, fmt)


COMMANDS = (arms,)

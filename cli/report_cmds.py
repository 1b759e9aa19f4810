"""Pictures and tables for people: `lineage arms` (the arms x tests flip table) and `lineage report`
(one HTML)."""

from __future__ import annotations

from pathlib import Path

import click

from ..adapters.duckdb_store import ReadModelDB
from ..bootstrap import Lineage
from .common import as_of_option, complete_runs, read_models, run_argument
from .export_cmds import write_out
from .output import output_options, write_rows


@click.command()
@run_argument("address", metavar="RUN[:FORK]")
@click.option(
    "--baseline",
    default=None,
    help="What a flip is measured against: the parent run (default), or the name of an arm in "
    "each fork, whose rows it then starts; with --stats, the arm the others are compared with "
    "(default: RUN's first arm).",
)
@click.option(
    "--stats",
    is_flag=True,
    help="RUN's arms pooled over every run of its task: per arm n, pass "
    "rate and mean reward with 95% intervals, and each arm paired with "
    "the baseline (exact McNemar, paired bootstrap) with a verdict.",
)
@click.option(
    "--all-tasks",
    is_flag=True,
    help="With --stats: pool the arms of every task's "
    "runs (pairs stay within one fork, so one task).",
)
@as_of_option
@output_options()
@click.pass_obj
def arms(
    lineage: Lineage,
    address: str,
    baseline: str | None,
    stats: bool,
    all_tasks: bool,
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
) -> None:
    """RUN's arms x tests: one row per arm (every fork, or FORK's), one column per test, flips
    marked.

    The first row is the baseline: the parent run itself, or with --baseline ARM that arm (each
    fork's rows then start with its ARM, and the parent's row comes last, measured against the
    first fork's). In table and markdown a flipped cell ends in `(flip)` and the title lists, per
    fork, the tests that differ between arms; the other formats keep the bare outcomes and list
    each row's flipped tests in `flips`. An empty cell: not reported.

    With --stats: one row per arm of RUN, pooled over the forks of every run of its task
    (--all-tasks: of every task), its pass rate and mean reward with 95% intervals, and against the
    baseline arm, paired child by child within each fork, the exact McNemar p, the paired bootstrap
    interval of the reward difference and a verdict ("within noise" when it is). The bootstrap's
    seed is fixed, so a store prints the same numbers.

    Example: lineage arms ablate-2026-11-02__10-15-00/ablation/csv-dedupe:root
    """
    from ..projections.reports.arms import arms as arm_tables
    from ..projections.reports.run_list import resolve_address

    if all_tasks and not stats:
        raise click.UsageError("--all-tasks pools arms for --stats; add --stats, or leave it out")
    with read_models(lineage, as_of, occurred_before) as models:
        run, fork = arm_tables.split_run_fork(models.db, resolve_address(models.db, address))
        if stats:
            _arm_stats(models.db, run, fork, baseline, all_tasks, fmt)
            return
        table = arm_tables.arms_table(models.db, run, fork, baseline or arm_tables.PARENT)
    if fmt in ("table", "markdown"):
        write_rows(
            arm_tables.marked_rows(table), table.columns, fmt, title=arm_tables.legend(table)
        )
    else:
        write_rows(table.rows, table.columns, fmt)


def _arm_stats(
    db: ReadModelDB, run: str, fork: str | None, baseline: str | None, every_task: bool, fmt: str
) -> None:
    from ..projections.reports.arms import arm_stats

    if fork is not None:
        raise click.UsageError(
            f"--stats pools every fork of every run of the task, so it takes a run, "
            f"found {run}:{fork}; name the run alone: lineage arms {run} --stats"
        )
    table = arm_stats.arm_stats(db, run, baseline, every_task)
    if fmt == "table":
        write_rows(arm_stats.rounded_rows(table), arm_stats.COLUMNS, fmt, title=table.title)
    elif fmt == "markdown":  # no title line there: each row names its method
        write_rows(arm_stats.rounded_rows(table), arm_stats.MACHINE_COLUMNS, fmt)
    else:
        write_rows(table.rows, arm_stats.MACHINE_COLUMNS, fmt)


@click.command()
@click.argument("runs", metavar="RUN...", nargs=-1, required=True, shell_complete=complete_runs)
@click.option(
    "--to",
    "target",
    required=True,
    type=click.Path(dir_okay=False, writable=True, allow_dash=True, path_type=Path),
    help="The HTML file to write (replaced whole, never left half-written); - for stdout.",
)
@as_of_option
@click.pass_obj
def report(
    lineage: Lineage,
    runs: tuple[str, ...],
    target: Path,
    as_of: str | None,
    occurred_before: str | None,
) -> None:
    """One self-contained HTML page (no script, no network) for RUN...: an auditor's view of each
    run.

    Each run's fork tree drawn in SVG and coloured by outcome (pass, fail, unscored, error, pending,
    skipped), the arms x tests table with flips highlighted, stage snapshots with their lifetimes,
    forks and custody, its cut point and divergences (and its continuations'), and the run's audit
    verdict with each finding linked to its node; at the top, the log head the page was built from
    and whether the hash chain is intact.

    Example: lineage report ablate-2026-11-02__10-15-00/ablation/csv-dedupe --to report.html
    """
    from ..projections.reports import report as reports
    from ..projections.reports.report_html import render
    from ..projections.reports.run_list import resolve_run

    integrity = lineage.verify().summary()
    with read_models(lineage, as_of, occurred_before) as models:
        built = [
            reports.run_report(models.db, run, integrity, models.position)
            for run in dict.fromkeys(resolve_run(models.db, given) for given in runs)
        ]
        page = render(built, reports.built_from(models.db), integrity)
    write_out(page, target)


COMMANDS = (arms, report)

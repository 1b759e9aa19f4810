"""Asking questions: sql, tables; and keeping read models current: project, rebuild."""

from __future__ import annotations

import math
import sys
import time

import click

from ..bootstrap import Lineage
from ..projections.engine.read_only import read_only_models
from ..projections.engine.runner import rebuild, resolve_as_of
from ..projections.engine.user_sql import run_reads
from ..projections.read_models.registry import PROJECTIONS
from .common import as_of_option, occurred_moment, read_models
from .output import POSITION, note, output_options, write_rows


def _finite(value: float) -> float:
    if not math.isfinite(value):  # FloatRange lets NaN through: every comparison with it is false
        raise click.BadParameter(f"expected a number of seconds, found {value}")
    return value


@click.command()
@click.argument("query")
@click.option(
    "-p",
    "--param",
    "params",
    nargs=2,
    multiple=True,
    metavar="NAME VALUE",
    help="Bind $NAME in the query to VALUE (text; cast it in SQL, e.g. $min::DOUBLE). Repeatable.",
)
@as_of_option
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, max=86_400, min_open=True),
    callback=lambda _ctx, _param, value: _finite(value),
    default=30.0,
    show_default=True,
    help="Seconds the query may run (and stream) before it is stopped (exit 4).",
)
@output_options()
@click.pass_obj
def sql(
    lineage: Lineage,
    query: str,
    params: tuple[tuple[str, str], ...],
    as_of: str | None,
    occurred_before: str | None,
    timeout: float,
    fmt: str,
) -> None:
    """Run a read-only SQL QUERY over the read models (`lineage tables` lists them); QUERY `-` reads
    it from stdin.

    The query runs on a read-only connection with file access, extensions and configuration changes
    off, under the read models' memory cap (LINEAGE_DUCKDB_MEMORY) and --timeout. Values come in as
    parameters, never pasted into the SQL: `-p run nightly/x "SELECT * FROM children WHERE run =
    $run"`.

    Example: lineage sql "SELECT arm, status, reward FROM children ORDER BY reward DESC"
    """
    from ..adapters.statement_limits import owning_the_process

    if query == "-":
        query = sys.stdin.read()  # click.get_text_stream is deprecated in click 8.5
    bound = dict(params)
    if len(bound) < len(params):
        raise click.UsageError("each -p NAME may be given once")
    with (
        read_only_models(
            lineage, resolve_as_of(lineage, as_of), occurred_moment(occurred_before)
        ) as db,
        owning_the_process(),  # a statement DuckDB cannot interrupt ends it at --timeout (exit 4)
    ):
        columns, rows = run_reads(db, query, bound, timeout=timeout)
        write_rows((dict(zip(columns, row, strict=True)) for row in rows), columns, fmt)


@click.command()
@output_options()
@click.pass_obj
def tables(lineage: Lineage, fmt: str) -> None:
    """List the read models (tables, views, SQL macros) with their columns and what a row is."""
    with read_models(lineage) as models:
        columns = {}
        # The temp catalog holds this code's own views (`projections.shadows`); tables live in the
        # file.
        for row in models.db.rows(
            "SELECT table_name, string_agg(column_name || ' ' || data_type, ', ' ORDER "
            "BY ordinal_position) AS cols FROM information_schema.columns WHERE "
            "table_catalog = 'temp' OR table_name NOT IN (SELECT table_name FROM "
            "information_schema.tables WHERE table_catalog = 'temp') GROUP BY table_name"
        ):
            columns[row["table_name"]] = row["cols"]
        rows = []
        for projection in PROJECTIONS:
            for name, doc in projection.docs.items():
                kind = "view" if name in projection.views else "macro" if "(" in name else "table"
                rows.append(
                    {
                        "name": name,
                        "kind": kind,
                        "projection": projection.name,
                        "description": doc,
                        "columns": columns.get(name, ""),
                    }
                )
    rows.sort(key=lambda r: (r["kind"] != "view", r["kind"] != "macro", r["name"]))
    write_rows(rows, ("name", "kind", "description", "columns"), fmt)


@click.command()
@click.option(
    "--follow",
    is_flag=True,
    help="Keep following the log (e.g. a PostgreSQL store other machines write to).",
)
@click.option(
    "--interval",
    type=float,
    default=0.5,
    show_default=True,
    help="Seconds between polls when following.",
)
@click.option(
    "--until",
    "until",
    type=POSITION,
    help="With --follow: stop once the read models reach this log position.",
)
@click.pass_obj
def project(lineage: Lineage, follow: bool, interval: float, until: int | None) -> None:
    """Catch the read models up with the log now (every read command also does this first).

    With --follow, keep catching up as other writers append. The read-model file is opened only
    while there is something new to apply, so other commands can still read in between.
    """
    with read_models(lineage) as models:
        position = models.position
    note(f"read models at log position {position}")
    while follow and (until is None or position < until):
        time.sleep(interval)
        if lineage.position() > position:
            with read_models(lineage) as models:
                position = models.position
            note(f"read models at log position {position}")


@click.command("rebuild")
@click.pass_obj
def rebuild_command(lineage: Lineage) -> None:
    """Drop every read model and rebuild it from the whole log."""
    with read_models(lineage) as models:
        position = rebuild(models.db, lineage.log, lineage.store_url.redacted())
    note(f"rebuilt the read models from the log up to position {position}")


@click.command("runs")
@click.option("--task", help="Only runs of this task.")
@click.option("--agent", help="Only runs by this agent.")
@click.option(
    "--status",
    help="Only runs with this status: pass, fail, error, skipped or pending (the glossary's).",
)
@click.option(
    "--outcome",
    help="Only runs whose outcome was recorded so: scored, branch_aggregate, unscored, failed "
    "or pending.",
)
@click.option(
    "--since", metavar="TIME", help="Only runs registered at or after this ISO-8601 time."
)
@as_of_option
@output_options()
@click.pass_obj
def runs_command(
    lineage: Lineage,
    task: str | None,
    agent: str | None,
    status: str | None,
    outcome: str | None,
    since: str | None,
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
) -> None:
    """List the runs: task, agent, model, status, outcome, reward, how many forks, when registered.

    status is the glossary's word (pass, fail, error, skipped, pending); outcome says how it was
    recorded (scored, branch_aggregate, unscored, failed, pending). A filter value outside its
    words is refused with them (exit 1).
    """
    from ..projections.engine.timeparse import parse_moment
    from ..projections.reports.run_list import COLUMNS, list_runs

    moment = parse_moment(since, "--since") if since else None
    with read_models(lineage, as_of, occurred_before) as models:
        rows = list_runs(
            models.db, task=task, agent=agent, status=status, outcome=outcome, since=moment
        )
        write_rows(rows, COLUMNS, fmt)


COMMANDS = (sql, tables, project, rebuild_command, runs_command)

"""Auditing from the log: history, tree, diff, cut-point, audit.

Every command reads the read models (caught up, or rebuilt `--as-of` a position or time), calls one
query in `projections/` and writes the answer. Readable text is the default; `--format json` gives
the full document and the row formats (`table`, `jsonl`, `csv`, `markdown`) give its main rows.
`lineage audit` exits with its verdict: 0 publishable, 10 publishable with quarantines, 11 not
publishable (see `projections/reports/audit/checks.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..bootstrap import Lineage
from ..projections.engine.timeparse import parse_moment
from ..projections.reports import cut_point as cuts
from ..projections.reports import diff as diffs
from ..projections.reports import history as histories
from ..projections.reports import history_text, tree_view
from ..projections.reports.audit.audit_matrix import read_matrix
from ..projections.reports.audit.audit_report import audit_report
from ..projections.reports.audit.audit_text import render_audit
from ..projections.reports.audit.audit_view import (
    CLASSES,
    FIELDS,
    PAGE_SIZE,
    SLOT_STATES,
    AuditView,
    view_of,
)
from ..projections.reports.run_list import resolve_address, resolve_run
from .audit_dirs import audit_directories, parity_report, render_parity
from .common import as_of_option, read_models, run_argument
from .output import (
    FORMATS,
    MAX_POSITION,
    note,
    output_options,
    terminal_width,
    write_document,
    write_rows,
    write_text,
)

text_format_option = output_options(
    "text",
    *FORMATS,
    default="text",
    help="text for people; json for the full document; "
    "table, tsv, csv, jsonl or markdown for its rows.",
)


def _emit(
    fmt: str,
    document: dict[str, Any],
    text: str,
    rows: list[dict[str, Any]],
    columns: tuple[str, ...],
) -> None:
    if fmt == "text":
        write_text(text)
    elif fmt == "json":
        write_document(document, fmt)
    else:
        write_rows(rows, columns, fmt)


@click.command()
@run_argument("node")
@as_of_option
@text_format_option
@click.pass_obj
def history(
    lineage: Lineage, node: str, as_of: str | None, occurred_before: str | None, fmt: str
) -> None:
    """The ancestry of NODE from the root run down, with the events that shaped each step (when and
    by whom).

    NODE is RUN, RUN:NODE or a fork child RUN:FORK/ARM (or RUN:FORK/#INDEX). A continuation's
    history starts in the run it continues.
    """
    with read_models(lineage, as_of, occurred_before) as models:
        node = resolve_address(models.db, node)
        document = histories.history_document(models.db, node, models.position)
    _emit(
        fmt,
        document,
        history_text.render_history(document),
        history_text.history_rows(document),
        (
            "step",
            "run",
            "node",
            "position",
            "occurred_at",
            "recorded_at",
            "actor",
            "type",
            "summary",
        ),
    )


@click.command()
@run_argument()
@as_of_option
@output_options(
    *tree_view.RENDERERS,
    "json",
    default="text",
    help="text: an indented tree; mermaid: a flowchart TD; dot: a Graphviz "
    "digraph; json: the run, its forks and every node's status, reward and text.",
)
@click.pass_obj
def tree(
    lineage: Lineage, run: str, as_of: str | None, occurred_before: str | None, fmt: str
) -> None:
    """RUN's fork tree: stages and snapshots per node, each arm's delta and reward (or why none), V
    per fork.

    Status words (benchflow's): pass and fail (scored, reward at least 1.0 or below), error (no
    reward, with a reason), skipped (no reward, no reason), pending (no outcome yet). V: a fork's
    value, the mean reward of its children, undefined unless every child was scored.
    """
    with read_models(lineage, as_of, occurred_before) as models:
        model = tree_view.tree_model(models.db, resolve_run(models.db, run))
    if fmt == "json":
        write_document(model.document(), fmt)
    elif fmt == "text":  # on a terminal, folded to its width under the tree's guides
        write_text(tree_view.render_text(model, terminal_width()))
    else:
        write_text(tree_view.RENDERERS[fmt](model))


@click.command()
@run_argument("a")
@run_argument("b")
@as_of_option
@text_format_option
@click.option(
    "--exit-code",
    is_flag=True,
    help="Exit 1 when A and B differ (reward, outcome or "
    "any test), 0 when they agree, as git diff does.",
)
@click.pass_obj
def diff(
    lineage: Lineage,
    a: str,
    b: str,
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
    exit_code: bool,
) -> None:
    """Compare two nodes or arms: delta chains from their common ancestor, rewards, per-test
    outcomes.

    A and B are RUN, RUN:NODE or RUN:FORK/ARM (e.g. jobs/x:root/with-skill jobs/x:root/no-skill).
    Flipped tests come first; a test one side did not report is "not reported", never a failure. Row
    formats list the tests.
    """
    with read_models(lineage, as_of, occurred_before) as models:
        a, b = resolve_address(models.db, a), resolve_address(models.db, b)
        document = diffs.diff_document(models.db, a, b, models.position)
    _emit(
        fmt,
        document,
        diffs.render_diff(document),
        document["tests"],
        ("test", "a", "b", "change", "kind"),
    )
    if exit_code and diffs.differs(document):
        raise click.exceptions.Exit(1)


@click.command("cut-point")
@run_argument()
@click.option(
    "--stage",
    help="Cut where this stage was captured (K = its exchanges_completed), like --cut-stage.",
)
@click.option(
    "--exchanges",
    type=click.IntRange(max=MAX_POSITION),
    metavar="K",
    help="Cut after K exchanges (K >= 1).",
)
@as_of_option
@text_format_option
@click.pass_obj
def cut_point(
    lineage: Lineage,
    run: str,
    stage: str | None,
    exchanges: int | None,
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
) -> None:
    """Resolve RUN's replay cut point from its stage registry and list the cut points its
    continuations served.

    RUN may be either end of a continuation: a continuation shows first the cut point it was
    served (source run, stage, K, divergences), as its source lists it. Fails closed (exit 1) when
    RUN recorded no stages, the stage was not recorded, its exchange count is unknown, or zero.
    Without --stage or --exchanges, lists the stages a replay can cut at. Row formats list the
    served cut points.
    """
    if stage is not None and exchanges is not None:
        raise click.UsageError("--stage and --exchanges are mutually exclusive")
    with read_models(lineage, as_of, occurred_before) as models:
        run = resolve_run(models.db, run)
        document = cuts.cut_point_document(models.db, run, stage, exchanges, models.position)
    _emit(
        fmt,
        document,
        cuts.render_cut_point(document),
        cuts.cut_point_rows(document),
        (
            "run",
            "accounting",
            "stage",
            "configured_k",
            "served_k",
            "registry_k",
            "divergences",
            "problems",
        ),
    )


def _view_options(function: Any) -> Any:
    """What of the verdict's report is listed: never what is judged."""
    for decorator in reversed(
        (
            click.option(
                "--class",
                "classes",
                multiple=True,
                type=click.Choice(CLASSES),
                help="List only runs of this class (repeatable).",
            ),
            click.option("--agent", "agents", multiple=True, help="List only this agent's runs."),
            click.option("--model", "models", multiple=True, help="List only this model's runs."),
            click.option(
                "--skill-mode", "skill_modes", multiple=True, help="List only runs in this mode."
            ),
            click.option(
                "--slot",
                "slot_states",
                multiple=True,
                type=click.Choice(SLOT_STATES),
                help="With --matrix: list only slots in this state and their runs (outside: runs "
                "in no slot).",
            ),
            click.option(
                "--group-by",
                type=click.Choice(FIELDS),
                help="List one row per value of this field (runs, withheld, per class) instead "
                "of the runs.",
            ),
            click.option(
                "--page",
                type=click.IntRange(min=1),
                metavar="N",
                help="Which page of runs (or groups) to list, from 1.",
            ),
            click.option(
                "--page-size",
                type=click.IntRange(min=1),
                metavar="N",
                help=f"Runs (or groups) a page lists: text {PAGE_SIZE} unless given; json and "
                "row formats list all unless --page or --page-size is given.",
            ),
        )
    ):
        function = decorator(function)
    return function


def _view(fmt: str, options: dict[str, Any]) -> AuditView:
    filters = {
        "class": options["classes"],
        "agent": options["agents"],
        "model": options["models"],
        "skill_mode": options["skill_modes"],
        "slot": options["slot_states"],
    }
    size, page = options["page_size"], options["page"]
    if size is None and (fmt == "text" or page is not None):
        size = PAGE_SIZE
    return AuditView(
        filters={name: tuple(values) for name, values in filters.items() if values},
        group_by=options["group_by"],
        page=page or 1,
        size=size,
    )


def _audit_rows(document: dict[str, Any]) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """Row formats: the findings listed, or one row per group with a column per class."""
    if "groups" not in document:
        return document["findings"], ("level", "check", "subject", "run", "address", "message")
    name = document["view"]["group_by"]
    rows = [
        {name: g[name], "runs": g["runs"], "withheld": g["withheld"], **g["classes"]}
        for g in document["groups"]
    ]
    return rows, (name, "runs", "withheld", *CLASSES)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@click.option("--run", "run_key", help="Only this run (an id or a unique prefix, as everywhere).")
@click.option("--task", help="Only runs of this task (and matrix slots of it).")
@click.option(
    "--since",
    metavar="TIME",
    help="Only runs registered at or after this ISO-8601 time (with a UTC offset).",
)
@click.option(
    "--parity",
    nargs=2,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    metavar="A B",
    help="Compare two batches of the same matrix (e.g. Daytona "
    "and Docker) slot by slot; exit 11 on a blocker.",
)
@click.option(
    "--matrix",
    "matrix_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Expected task x agent x model x skill_mode x trial slots: CSV with a header, or JSON.",
)
@_view_options
@as_of_option
@text_format_option
@click.pass_context
def audit(
    ctx: click.Context,
    paths: tuple[Path, ...],
    parity: tuple[Path, Path] | None,
    run_key: str | None,
    task: str | None,
    since: str | None,
    matrix_file: Path | None,
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
    **listing: Any,
) -> None:
    """Review the store (or the run directories PATHS) like a release gate and end with a verdict.

    With PATHS, the run directories under them are audited directly, as the experiment-review
    skill's validator does: read into a log held in memory, nothing written to any store. Every
    layout `lineage import` reads is accepted, and rollout folders with run_config.json +
    result.json + trajectory/.

    Checks run health, the experiment-review skill's trajectory gate (ACP and LLM trajectories, a
    training-ready results.jsonl row), token usage and timing, skill loading, matrix slots (oracle
    lanes apart), preservation receipts, custody conservation, snapshot truthfulness, fork and
    cut-point consistency and the log's hash chain. Exit codes: 0 publishable; 10 publishable with
    quarantines (named); 11 not publishable; 1 bad input. --format json gives the full report; row
    formats list the findings.

    \b
    --matrix FILE lists the slots you expect, each a task, agent, model, skill_mode and trial:
      CSV:   task,agent,model,skill_mode,trial      (a header with task and any of the others)
             csv-dedupe,claude-agent-acp,claude-sonnet-4-5,with-skill,1
      JSON:  [{"task": "csv-dedupe", "skill_mode": "no-skill", "trial": 1}]   or {"slots": [...]}
      JSON:  {"task": ["csv-dedupe"], "skill_mode": ["with-skill", "no-skill"], "trial": [1, 2, 3]}
             (an object of lists: their cross product, here 6 slots)
    A field left out or empty matches runs that did not record it. Each slot ends healthy, missing,
    duplicate, stale (superseded by runs outside it) or unhealthy; runs matching no slot are warned about.

    \b
    What is judged is the selection (PATHS or the store, --run, --task, --since, --matrix); what is
    listed of it can be narrowed without changing the verdict: --class, --agent, --model,
    --skill-mode, --slot (each repeatable), --group-by FIELD for one row per value, --page and
    --page-size. Text lists 50 runs a page, counts per class first, and a verdict line naming
    counts and at most three runs; --format json keeps every run and finding unless paged.
    """  # noqa: E501
    lineage: Lineage = ctx.obj
    if parity:
        listed = any(listing[name] for name in listing)
        if paths or matrix_file or run_key or task or since or as_of or occurred_before or listed:
            raise click.UsageError(
                "--parity A B compares two batches as they are; found other selections with it"
            )
        report = parity_report(*parity)
        _emit(
            fmt,
            report,
            render_parity(report),
            report["findings"],
            ("level", "check", "subject", "run", "message"),
        )
        ctx.exit(report["exit_code"])
    moment = parse_moment(since, "--since") if since is not None else None
    slots = read_matrix(matrix_file) if matrix_file is not None else None
    selection: dict[str, Any] = {"run": run_key, "task": task, "since": moment, "slots": slots}
    if paths:
        if as_of is not None or occurred_before is not None:
            raise click.UsageError(
                "--as-of and --occurred-before read a store's history; found them with PATHS, "
                "which are audited as they are now (import them to audit their history)"
            )
        report = audit_directories(list(paths), selection)
    else:
        integrity = lineage.verify().summary()
        with read_models(lineage, as_of, occurred_before) as models:
            report = audit_report(models.db, integrity, position=models.position, **selection)
    document = view_of(report, _view(fmt, listing))
    rows, columns = _audit_rows(document)
    _emit(fmt, document, render_audit(document) if fmt == "text" else "", rows, columns)
    if fmt != "text":
        note(f"verdict: {report['verdict']}")
    ctx.exit(report["exit_code"])


COMMANDS = (history, tree, diff, cut_point, audit)

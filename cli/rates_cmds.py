"""`lineage rates`: pass@k, pass^k and the solve rate over repeated trials, as benchflow counts them
(the work is in `projections/reports/solve_rates.py`)."""

from __future__ import annotations

import json
import math
from typing import Any, get_args

import click

from ..bootstrap import Lineage
from ..domain.vocabulary import SkillMode
from .common import as_of_option, read_models
from .output import note, output_options, write_rows, write_text

ROUNDED = ("pass_at_k", "pass_hat_k", "solve_rate", "solve_rate_low", "solve_rate_high")


def _by(ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    from ..projections.reports.solve_rates import GROUP_KEYS

    keys = tuple(dict.fromkeys(k.strip() for value in values for k in value.split(",") if k))
    unknown = [k for k in keys if k not in GROUP_KEYS]
    if unknown:
        raise click.BadParameter(
            f"expected keys from {', '.join(GROUP_KEYS)}, found {', '.join(unknown)}"
        )
    return keys


def _threshold(ctx: click.Context, _param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"expected a finite number, found {value}")
    return value


@click.command("rates")
@click.option(
    "--k",
    "ks",
    type=click.IntRange(min=1),
    multiple=True,
    help="A k to compute pass@k and pass^k at (repeatable; default 1, the powers of two and the "
    "multiples of five up to the fewest scored trials of a task).",
)
@click.option(
    "--solve-threshold",
    type=float,
    callback=_threshold,
    help="Count a scored trial as solved when its reward is at least this (partial credit); "
    "default: when it passed (reward = 1, or the review gate's verdict).",
)
@click.option(
    "--include-controls",
    is_flag=True,
    help="Count control runs (oracle, empty/nop) as samples too; by default they are left out "
    "and counted in controls_excluded.",
)
@click.option(
    "--job",
    metavar="NAME",
    help="Only the trials under a folder of this name in the imported jobs tree, as `bench eval "
    "metrics <jobs-dir>/NAME` reads them: a job folder, a --matrix alias (pooling its "
    "trial-NN/<job>/ folders), ALIAS/trial-NN, or one trial folder.",
)
@click.option("--task", help="Only trials of this task (result.json task_name).")
@click.option("--agent", help="Only trials by this agent.")
@click.option("--model", help="Only trials with this model.")
@click.option(
    "--skill-mode", type=click.Choice(get_args(SkillMode)), help="Only trials in this skill mode."
)
@click.option(
    "--by",
    multiple=True,
    callback=_by,
    metavar="KEYS",
    help="One block per group of these comma-separated keys: agent, model, skill_mode.",
)
@as_of_option
@output_options(help="Output format (json and jsonl: benchflow's solve_rates block).")
@click.pass_obj
def rates(
    lineage: Lineage,
    ks: tuple[int, ...],
    solve_threshold: float | None,
    include_controls: bool,
    job: str | None,
    task: str | None,
    agent: str | None,
    model: str | None,
    skill_mode: str | None,
    by: tuple[str, ...],
    as_of: str | None,
    occurred_before: str | None,
    fmt: str,
) -> None:
    """pass@k, pass^k and the solve rate over repeated trials of the imported benchflow jobs,
    counted as benchflow counts them.

    A task's samples are its scored trials: unscored trials (no reward, a withheld one) are counted
    apart, never as failures; a task's trials in different job folders are separate samples (the
    trial-NN folders of `bench eval run --matrix --trials N`), while retries of a task inside one
    Evaluation job folder are one (its best attempt); control runs are left out unless
    --include-controls. pass@k = 1 - C(n-c,k)/C(n,k) and pass^k = C(c,k)/C(n,k) per task with at
    least k scored trials, averaged over those tasks: tasks short at k are left out and counted, and
    a k no task reaches is null, never 0.

    --format json prints benchflow's `solve_rates` block (the fields of summary.json's, in its
    order) under the key `solve_rates`; with --by, one block per group under `groups`. The other
    formats print a row per k; the caveats go to stderr.

    Example: lineage rates --job claude-opus --k 1 --k 5
    """
    from ..projections.reports import solve_rates as sr

    selection = sr.Selection(job, task, agent, model, skill_mode)
    with read_models(lineage, as_of, occurred_before) as models:
        every = sr.trials(models.db)
    if not every:
        note(
            "no benchflow trial folder is recorded: `lineage import` the jobs tree (runs imported "
            "by a version before `lineage rates` need importing again)"
        )
    chosen = sr.selected(every, selection)
    options: dict[str, Any] = {
        "ks": ks,
        "solve_threshold": solve_threshold,
        "include_controls": include_controls,
    }
    if every and not chosen:
        note("no benchflow trial matches; every value below is over no trial")
    blocks = (
        [(key, sr.block(members, **options)) for key, members in sr.groups(chosen, by)]
        if by
        else [({}, sr.block(chosen, **options))]
    )
    if fmt in ("json", "jsonl"):
        _write_blocks(blocks, by, fmt)
        return
    rows = [row for key, found in blocks for row in sr.rows(found, key)]
    if fmt in ("table", "markdown"):
        rows = [{k: _rounded(k, v) for k, v in row.items()} for row in rows]
    write_rows(rows, (*by, *sr.COLUMNS), fmt)
    for key, found in blocks:
        where = ", ".join(f"{k}={v}" for k, v in key.items())
        for caveat in found["caveats"]:  # benchflow's words, with this command's option names
            said = caveat.replace("include_controls=True", "--include-controls")
            note(f"{where}: {said}" if where else said)


def _rounded(column: str, value: Any) -> Any:
    return round(value, 4) if column in ROUNDED and isinstance(value, float) else value


def _write_blocks(
    blocks: list[tuple[dict[str, Any], dict[str, Any]]], by: tuple[str, ...], fmt: str
) -> None:
    """The blocks as JSON in benchflow's key order (never sorted)."""
    documents = [{**key, "solve_rates": found} for key, found in blocks]
    if fmt == "jsonl":
        write_text("".join(json.dumps(d) + "\n" for d in documents), escape=False)
    elif by:
        write_text(json.dumps({"by": list(by), "groups": documents}, indent=2) + "\n", escape=False)
    else:
        write_text(json.dumps(documents[0], indent=2) + "\n", escape=False)


COMMANDS = (rates,)

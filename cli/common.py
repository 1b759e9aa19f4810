"""Small pieces every read command shares: the two times (`--as-of`, `--occurred-before`), opening
caught-up read models, RUN:NAME addresses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from ..bootstrap import Lineage
from ..domain.errors import InvalidInput

if TYPE_CHECKING:
    from ..projections.engine.runner import ReadModels

AS_OF_HELP = (
    "What the log held at this log position or recording time (when the facts were recorded here, "
    "e.g. 2026-11-02T10:00:00Z), not when they happened: see --occurred-before."
)
OCCURRED_BEFORE_HELP = (
    "What had happened before this ISO-8601 time by the harness's own "
    "clocks (each fact's occurred_at, e.g. a run's own date), however "
    "late it was recorded. An arm without an outcome then is pending."
)


def as_of_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """`--as-of` and `--occurred-before`: the two times a read can be asked at, each named for what
    it means."""
    func = click.option(
        "--occurred-before", "occurred_before", metavar="TIME", help=OCCURRED_BEFORE_HELP
    )(func)
    return click.option("--as-of", "as_of", metavar="POSITION|TIME", help=AS_OF_HELP)(func)


def occurred_moment(text: str | None) -> datetime | None:
    from ..projections.engine.timeparse import parse_moment

    return parse_moment(text, "--occurred-before") if text is not None else None


@contextmanager
def read_models(
    lineage: Lineage, as_of: str | None = None, occurred_before: str | None = None
) -> Iterator[ReadModels]:
    # Here, not at the top: write commands share this module (`split_address`) and need no DuckDB.
    from ..projections.engine.runner import open_read_models, resolve_as_of

    moment = occurred_moment(occurred_before)
    position = resolve_as_of(lineage, as_of)
    if moment is not None and position is None:
        position = lineage.position()  # a selection of the log is built apart, like a prefix
    models = open_read_models(lineage, as_of=position)
    try:
        if moment is not None:
            from ..projections.engine.occurred import keep_only_occurred_before

            keep_only_occurred_before(models.db, moment, models.position)
        yield models
    finally:
        models.close()


def split_address(address: str, what: str = "RUN:NAME") -> tuple[str, str]:
    run, sep, rest = address.rpartition(":")
    if not sep or not run or not rest:
        raise InvalidInput(
            f"expected {what} (e.g. "
            f"ablate-2026-11-02__10-15-00/ablation/csv-dedupe:root), found {address!r}"
        )
    return run, rest


def complete_runs(ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of run ids (and RUN: addresses) from the store the command line names, if
    there is one. Completion must never fail loudly in a shell, so any problem completes nothing."""
    from click.shell_completion import CompletionItem

    from ..settings import Settings

    params = ctx.find_root().params
    try:
        settings = Settings.from_env(store=params.get("store"), home=params.get("home"))
        lineage = Lineage(settings, may_create=False)
        try:
            with read_models(lineage) as models:
                runs = [
                    r["run"]
                    for r in models.db.rows(
                        "SELECT run FROM runs WHERE starts_with(run, ?) ORDER BY run LIMIT 200",
                        [incomplete.split(":", 1)[0]],
                    )
                ]
        finally:
            lineage.close()
    except Exception:  # no store, a locked file, a bad URL: nothing to offer
        return []
    return [CompletionItem(run) for run in runs]


def run_argument(name: str = "run", metavar: str | None = None) -> Callable[..., Any]:
    """A RUN (or RUN:... address) argument: completed from the store, resolved by unique prefix by
    the command."""
    return click.argument(name, metavar=metavar, shell_complete=complete_runs)


def resolved_runs(lineage: Lineage, names: tuple[str, ...] | list[str]) -> list[str]:
    """Each RUN as every command names one (`resolve_run`: an id, an exact trial or last path part,
    or a unique prefix), for commands that otherwise read the log, not the read models (`bundle
    write`, `snapshots import --run`). An unknown name is kept, for the command's own error."""
    from ..projections.reports.run_list import resolve_run

    with read_models(lineage) as models:
        return [resolve_run(models.db, name) for name in names]

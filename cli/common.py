"""Small pieces every read command shares: `--as-of`, opening caught-up read models, RUN:NAME addresses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from ..bootstrap import Lineage
from ..domain.errors import InvalidInput

if TYPE_CHECKING:
    from ..projections.runner import ReadModels


def as_of_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--as-of",
        "as_of",
        metavar="POSITION|TIME",
        help="Answer as the log stood at this position, or at this ISO-8601 time (e.g. 2026-11-02T10:00:00Z).",
    )(func)


@contextmanager
def read_models(lineage: Lineage, as_of: str | None = None) -> Iterator[ReadModels]:
    # Here, not at the top: write commands share this module (`split_address`) and need no DuckDB.
    from ..projections.runner import open_read_models, resolve_as_of

    models = open_read_models(lineage, as_of=resolve_as_of(lineage, as_of))
    try:
        yield models
    finally:
        models.close()


def split_address(address: str, what: str = "RUN:NAME") -> tuple[str, str]:
    run, sep, rest = address.rpartition(":")
    if not sep or not run or not rest:
        raise InvalidInput(
            f"expected {what} (e.g. ablate-2026-11-02__10-15-00/ablation/csv-dedupe:root), found {address!r}"
        )
    return run, rest

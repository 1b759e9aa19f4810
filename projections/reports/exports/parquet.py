"""`lineage export parquet DIR`: every read model (the views people query and the tables under them)
as Parquet.

DuckDB writes the files itself (`COPY ... TO ... (FORMAT parquet)`), so no new dependency. The
connection is our own, read-only, and may write into one directory only: a staging folder inside DIR
that nothing else uses (users' SQL never gets file access). The files are moved into DIR only once
every one was written, so a failure leaves DIR as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from ....domain.errors import InvalidInput
from ...engine.read_only import read_only_models
from ...engine.runner import OpenedStore
from ...read_models.registry import PROJECTIONS


def relations() -> list[str]:
    """Every table and view the projections own (macros take arguments, so they are not data)."""
    return [
        name
        for projection in PROJECTIONS
        for name in (*projection.views, *projection.tables)
        if not name.startswith("lineage_")
    ]


def _target(directory: Path) -> Path:
    if directory.exists() and not directory.is_dir():
        raise InvalidInput(
            f"expected a directory to write Parquet files into, found a file at {directory}",
            hint="name a new or existing directory",
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInput(
            f"expected to create the directory {directory}, found: {exc.strerror or exc}",
            hint="name a directory you may write to",
        ) from None
    return directory.resolve()


def _refuse_what_a_file_cannot_replace(target: Path) -> None:
    """Every name a file will take is free or a file (a link is replaced, never followed), before
    anything is written: a folder in the way found only while moving would leave DIR half
    replaced."""
    for name in relations():
        path = target / f"{name}.parquet"
        if path.is_dir() and not path.is_symlink():
            raise InvalidInput(
                f"expected to write {path.name} into {target}, "
                f"found a directory of that name there",
                hint="move it away, or name another directory",
            )


def export_parquet(
    lineage: OpenedStore, directory: Path, as_of: int | None, occurred_before: Any = None
) -> list[dict[str, Any]]:
    """Write `<relation>.parquet` for every relation into `directory`; returns (relation, rows,
    file) rows."""
    target = _target(directory)
    _refuse_what_a_file_cannot_replace(target)
    try:
        staging = Path(tempfile.mkdtemp(prefix=".lineage-parquet-", dir=target))
    except OSError as exc:
        raise InvalidInput(
            f"expected to write Parquet files into {target}, found: {exc.strerror or exc}",
            hint="name a directory you may write to",
        ) from None
    try:
        written = []
        with read_only_models(lineage, as_of, occurred_before, writable_directory=staging) as db:
            for name in relations():
                db.copy_to_parquet(name, staging / f"{name}.parquet")
                rows = db.scalar(f"SELECT count(*) FROM {name}")
                written.append(
                    {"relation": name, "rows": rows, "file": str(target / f"{name}.parquet")}
                )
        for row in written:
            (staging / f"{row['relation']}.parquet").replace(row["file"])
        return written
    finally:
        shutil.rmtree(staging, ignore_errors=True)

"""Read models for statements we did not write (users' SQL), on a read-only connection.

DuckDB then refuses every change however it is phrased, and the sealed, locked configuration keeps files,
extensions and the memory cap out of reach. When the store's file already holds the whole log as this code
builds it (the usual case), it is opened once, read-only; otherwise it is caught up first and reopened.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..adapters.duckdb_store import ReadModelDB
from .runner import Lineage, is_current, open_read_models, shadow_definitions


@contextmanager
def read_only_models(lineage: Lineage, as_of: int | None = None) -> Iterator[ReadModelDB]:
    """Caught-up read models reopened read-only, for statements we did not write (users' SQL).

    DuckDB then refuses every change however it is phrased, and the sealed, locked configuration keeps files,
    extensions and the memory cap out of reach. `--as-of` answers are built in a scratch file first, because an
    in-memory database cannot be opened read-only.
    """
    with tempfile.TemporaryDirectory(prefix="lineage-as-of-") as scratch:
        path: Path | str = lineage.read_models_path
        db = _current_read_only(lineage) if as_of is None else None
        if db is None:
            if as_of is not None:
                path = Path(scratch) / "as-of.duckdb"
            with open_read_models(lineage, as_of=as_of, path=path, queries=False):
                pass
            db = _open_read_only(lineage, path)
        try:
            shadow_definitions(db)
            yield db
        finally:
            db.close()


def _open_read_only(lineage: Lineage, path: Path | str) -> ReadModelDB:
    settings = lineage.settings
    return ReadModelDB.open(
        path,
        timeout=settings.lock_timeout_s,
        memory_limit=settings.duckdb_memory,
        read_only=True,
    )


def _current_read_only(lineage: Lineage) -> ReadModelDB | None:
    """The store's read models opened read-only, when they already hold the whole log as this code builds it
    (the usual case for a query): one open instead of a catch-up open, its close, and a read-only one."""
    if not Path(lineage.read_models_path).exists():
        return None
    db = _open_read_only(lineage, lineage.read_models_path)
    try:
        if is_current(db, lineage.store_url.redacted(), lineage.log):
            return db
    except BaseException:
        db.close()
        raise
    db.close()
    return None

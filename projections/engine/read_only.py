"""Read models for statements we did not write (users' SQL), on a read-only connection.

DuckDB then refuses every change however it is phrased, and the sealed, locked configuration keeps
files, extensions and the memory cap out of reach. When the store's file already holds the whole log
as this code builds it (the usual case), it is opened once, read-only; otherwise it is caught up
first and reopened.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from ...adapters.duckdb_store import ReadModelDB
from .runner import OpenedStore, is_current, open_read_models
from .shadows import shadow_on_demand


@contextmanager
def read_only_models(
    lineage: OpenedStore,
    as_of: int | None = None,
    occurred_before: datetime | None = None,
    writable_directory: Path | None = None,
) -> Iterator[ReadModelDB]:
    """Caught-up read models reopened read-only, for statements we did not write (users' SQL).

    DuckDB then refuses every change however it is phrased, and the sealed, locked configuration
    keeps files, extensions and the memory cap out of reach. `--as-of` and `--occurred-before`
    answers are built in a scratch file first, because an in-memory database cannot be opened
    read-only. `writable_directory` is for our own exports only (Parquet), never users' SQL.
    """
    if occurred_before is not None and as_of is None:
        as_of = lineage.position()  # a selection of the log is built apart, like a prefix
    with tempfile.TemporaryDirectory(prefix="lineage-as-of-") as scratch:
        path: Path | str = lineage.read_models_path
        db = _current_read_only(lineage, writable_directory) if as_of is None else None
        if db is None:
            if as_of is not None:
                path = Path(scratch) / "as-of.duckdb"
            with open_read_models(lineage, as_of=as_of, path=path) as models:
                if occurred_before is not None:
                    from .occurred import keep_only_occurred_before  # it builds on the runner

                    keep_only_occurred_before(models.db, occurred_before, models.position)
            if as_of is None:
                _mark_caught_up(lineage)
            db = _open_read_only(lineage, path, writable_directory)
        try:
            shadow_on_demand(db)
            yield db
        finally:
            db.close()


def held_read_only_models(lineage: OpenedStore) -> ReadModelDB:
    """The store's read models caught up and opened read-only, left open for a long-lived reader
    (`lineage serve`): the caller closes it, and reopens it this way when the log has moved."""
    db = _current_read_only(lineage)
    if db is None:
        open_read_models(lineage).close()
        _mark_caught_up(lineage)
        db = _open_read_only(lineage, lineage.read_models_path)
    try:
        shadow_on_demand(db)
    except BaseException:
        db.close()
        raise
    return db


def _open_read_only(
    lineage: OpenedStore, path: Path | str, writable_directory: Path | None = None
) -> ReadModelDB:
    settings = lineage.settings
    return ReadModelDB.open(
        path,
        timeout=settings.lock_timeout_s,
        memory_limit=settings.duckdb_memory,
        read_only=True,
        writable_directory=writable_directory,
    )


def _current_read_only(
    lineage: OpenedStore, writable_directory: Path | None = None
) -> ReadModelDB | None:
    """The store's read models opened read-only, when they already hold the whole log as this code
    builds it (the usual case for a query): one open instead of a catch-up open, its close, and a
    read-only one."""
    if not Path(lineage.read_models_path).exists() or _log_written_since(lineage):
        return None
    db = _open_read_only(lineage, lineage.read_models_path, writable_directory)
    try:
        if is_current(db, lineage.store_url.redacted(), lineage.log):
            return db
    except BaseException:
        db.close()
        raise
    db.close()
    return None


def _log_written_since(lineage: OpenedStore) -> bool:
    """The SQLite log was written after the read-model file was last caught up, so opening the file
    to ask would only find it behind (a DuckDB open, ~15 ms, saved). Only a guess at which way to
    open: whichever way, what is read is checked against the log first. Readers do not change a
    SQLite file's times, writers do; `_mark_caught_up` keeps the guess from sticking after a write
    that held no event (the Merkle tree's)."""
    log = lineage.store_url.sqlite_path
    if log is None:
        return False
    try:
        written = max(
            p.stat().st_mtime_ns for p in (log, log.with_name(log.name + "-wal")) if p.exists()
        )
        return written > Path(lineage.read_models_path).stat().st_mtime_ns
    except (OSError, ValueError):  # gone in between, or no log file yet
        return False


def _mark_caught_up(lineage: OpenedStore) -> None:
    """The read-model file now holds the whole log: its time says so even if nothing was written to
    it."""
    # a read-only copy: the guess stays wrong, and costs only the probe
    with contextlib.suppress(OSError):
        os.utime(lineage.read_models_path)

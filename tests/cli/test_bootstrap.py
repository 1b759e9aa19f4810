"""The composition root on a real SQLite file: opening a new store tries again only after a lost
race."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_lineage.adapters.store.event_store import StoreURL
from rollout_lineage.domain.application import LineageApp


@pytest.mark.parametrize(
    ("refusal", "opens"),
    [
        # What SQLite said in CI when two processes created one store file at once: `PRAGMA
        # journal_mode=WAL` does not wait on the busy timeout while another connection switches the
        # file to WAL.
        ("database is locked", True),
        ("unable to open database file", False),  # not a race: said at once
    ],
)
def test_opening_a_new_sqlite_store_tries_again_only_after_a_race(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, refusal: str, opens: bool
) -> None:
    import sqlite3

    from rollout_lineage.adapters.store import event_store
    from rollout_lineage.domain import application
    from rollout_lineage.domain.errors import StoreUnavailable

    attempts: list[int] = []

    class RacingApp(LineageApp):
        def __init__(self, *args: object, **kwargs: object) -> None:
            attempts.append(1)
            if len(attempts) == 1:  # the first open loses, the way the other process made it lose
                raise sqlite3.OperationalError(refusal)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(application, "LineageApp", RacingApp)
    url = StoreURL.parse(f"sqlite:///{tmp_path / 'events.sqlite'}")
    if opens:
        app = event_store.open_application(url, actor="tester@lab", tool_version="test")
        assert isinstance(app, RacingApp) and len(attempts) == 2
    else:
        with pytest.raises(StoreUnavailable, match=refusal):
            event_store.open_application(url, actor="tester@lab", tool_version="test")
        assert len(attempts) == 1


def test_a_sqlite_writer_keeps_every_statement_of_a_record_prepared(tmp_path: Path) -> None:
    """eventsourcing opens connections with a one-statement cache (`cached_statements=True`), so a
    live record's five statements were each parsed and planned again every time. The store's pool
    keeps them: after two records, SQLite's own list of prepared statements (`sqlite_stmt`) on the
    writer's connection still holds each of them, and the file is in WAL mode."""
    from rollout_lineage import open_store
    from rollout_lineage.domain import facts as f

    path = tmp_path / "events.sqlite"
    with open_store(f"sqlite:///{path}", actor="tester@lab") as lineage:
        for run in ("r/1", "r/2"):
            lineage.record([f.RunRegistered(run=run, task="t")])
        with lineage.app.recorder.datastore.get_connection(commit=True) as connection:
            raw = connection._sqlite_conn  # the library wraps sqlite3's connection
            try:
                prepared = [sql for (sql,) in raw.execute("SELECT sql FROM sqlite_stmt")]
            except Exception as exc:  # a libsqlite3 built without SQLITE_ENABLE_STMTVTAB
                pytest.skip(f"this SQLite cannot list prepared statements: {exc}")
            (mode,) = raw.execute("PRAGMA journal_mode").fetchone()
    assert mode == "wal"
    for statement in ("BEGIN IMMEDIATE", "INSERT INTO stored_events", "INSERT INTO lineage_chain"):
        assert any(sql.startswith(statement) for sql in prepared), (statement, prepared)
    assert any("FROM lineage_chain ORDER BY position DESC" in sql for sql in prepared), prepared

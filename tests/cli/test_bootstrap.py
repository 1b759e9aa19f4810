"""The composition root on a real SQLite file: opening a new store tries again only after a lost
race."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_lineage.adapters.event_store import StoreURL
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

    from rollout_lineage.adapters import event_store
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

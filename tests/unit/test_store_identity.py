"""Read models of a server store: one cache per store, whatever the URL's spelling or the folder you
stand in."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_lineage.settings import Settings, store_identity


def test_spellings_of_one_database_are_one_store() -> None:
    same = {
        store_identity(url)
        for url in (
            "postgresql://lineage@db.example:5432/runs",
            "postgres://lineage@db.example/runs",
            "postgresql://lineage:secret@DB.Example:5432/runs?connect_timeout=3",
            "postgresql+psycopg://lineage@db.example/runs",
        )
    }
    assert len(same) == 1
    assert "secret" not in same.pop()
    others = {
        store_identity("postgresql://lineage@db.example/other"),
        store_identity("postgresql://lineage@db.example:5433/runs"),
        store_identity("postgresql://lineage@db.example/runs?schema=b"),
        store_identity("postgresql://someone@db.example/runs"),
    }
    assert len(others) == 4 and store_identity("postgres://lineage@db.example/runs") not in others


def test_a_server_stores_read_models_live_in_the_cache_not_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"LINEAGE_CACHE": str(tmp_path / "cache")}
    paths = set()
    for folder, url in (("a", "postgres://u@h/db"), ("b/c", "postgresql://u:pw@H:5432/db")):
        (tmp_path / folder).mkdir(parents=True)
        monkeypatch.chdir(tmp_path / folder)
        paths.add(Settings.from_env(env, store=url).projections_path)
    assert len(paths) == 1 and paths.pop().parent == tmp_path / "cache"
    # A named home keeps them, as before; the embedded store keeps its file beside itself.
    named = Settings.from_env(env, store="postgres://u@h/db", home=tmp_path / "h")
    assert named.projections_path.parent == tmp_path / "h"
    assert Settings.from_env(env, home=tmp_path / "h").projections_path == (
        tmp_path / "h" / "projections.duckdb"
    )

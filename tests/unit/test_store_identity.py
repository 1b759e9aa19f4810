"""Read models of a server store: one cache per store, whatever the URL's spelling or the folder you stand in."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rollout_lineage.cli.main import cli
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


def test_two_folders_two_spellings_one_read_model_file(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the CLI against a real server: asked from two folders with two spellings of the URL, one file."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("LINEAGE_CACHE", str(cache))
    monkeypatch.delenv("LINEAGE_HOME", raising=False)
    runner = CliRunner()
    for folder, url in (
        ("x", postgres_url),
        ("y/z", postgres_url.replace("postgresql:", "postgres:")),
    ):
        (tmp_path / folder).mkdir(parents=True)
        monkeypatch.chdir(tmp_path / folder)
        result = runner.invoke(cli, ["sql", "SELECT count(*) AS n FROM runs", "--store", url])
        assert result.exit_code == 0, result.output
        assert result.stdout == "n\n0\n"
    assert len(list(cache.glob("projections-*.duckdb"))) == 1
    assert not list(tmp_path.rglob(".lineage"))


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://lineage:SECRET#pw@127.0.0.1:5432/lineage_test",  # '#' ends the host for the parser
        "postgresql://lineage:SECRET/pw@127.0.0.1:5432/lineage_test",  # '/' ended the old mask
        "postgresql://lineage@127.0.0.1:1/lineage_test?password=SECRETpw",
        "postgresql://lineage:SECRETpw@[::1:5432/lineage_test",  # an unclosed IPv6 bracket: a traceback
    ],
)
def test_no_error_prints_a_password_however_the_url_is_malformed(tmp_path: Path, url: str) -> None:
    """An attack review's finds: the parser's own words, a mask that stopped at '/', a query option."""
    result = CliRunner().invoke(
        cli, ["--home", str(tmp_path), "--store", url, "runs"], catch_exceptions=True
    )
    shown = result.output + (result.stderr or "")
    assert result.exit_code in (1, 4), shown
    assert "SECRET" not in shown
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )


def test_init_that_could_not_create_the_store_does_not_say_it_did(tmp_path: Path) -> None:
    (tmp_path / ".lineage").write_text("a file where the store's folder would go")
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / ".lineage"), "init"])
    assert result.exit_code != 0
    assert "created a new lineage store" not in result.output + (result.stderr or "")

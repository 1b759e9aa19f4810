"""Store identity through the CLI: one read-model file per server store, and no error prints a
password."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rollout_lineage.cli.main import cli


def test_two_folders_two_spellings_one_read_model_file(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the CLI against a real server: asked from two folders with two spellings of the URL,
    one file."""
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
        # '#' ends the host for the parser
        "postgresql://lineage:SECRET#pw@127.0.0.1:5432/lineage_test",
        "postgresql://lineage:SECRET/pw@127.0.0.1:5432/lineage_test",  # '/' ended the old mask
        "postgresql://lineage@127.0.0.1:1/lineage_test?password=SECRETpw",
        # an unclosed IPv6 bracket: a traceback
        "postgresql://lineage:SECRETpw@[::1:5432/lineage_test",
    ],
)
def test_no_error_prints_a_password_however_the_url_is_malformed(tmp_path: Path, url: str) -> None:
    """An attack review's finds: the parser's own words, a mask that stopped at '/', a query
    option."""
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

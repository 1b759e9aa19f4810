"""`lineage serve`'s token visit and bind (issue #33, items 9 and 10): the redirect after `?token=`
goes only to this server's own paths, and loopback is where a host name resolves to, every address
of it."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rollout_lineage.adapters.web_app import is_loopback
from rollout_lineage.cli.main import cli
from tests.serve_attack import (
    pr_layout_store,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return pr_layout_store(tmp_path)


# --- 10. loopback is where a name resolves to -----------------------------------------------------


def _resolving(table: dict[str, list[str]]) -> Callable[..., list[tuple[Any, ...]]]:
    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[tuple[Any, ...]]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (
                socket.AF_INET6 if ":" in a else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (a, port or 0, 0, 0) if ":" in a else (a, port or 0),
            )
            for a in table[host]
        ]

    return getaddrinfo


@pytest.mark.parametrize(
    ("host", "addresses", "loopback"),
    [
        ("127.lab.example", ["203.0.113.7"], False),
        ("127.0.0.1.evil.example", ["127.0.0.1", "203.0.113.7"], False),
        ("127.nowhere.example", None, False),
        ("localhost", ["127.0.0.1", "::1"], True),
        ("127.0.0.1", ["127.0.0.1"], True),
        ("127.9.9.9", ["127.9.9.9"], True),
        ("::1", ["::1"], True),
        ("[::1]", ["::1"], True),
        ("::ffff:127.0.0.1", ["::ffff:127.0.0.1"], True),
        ("0.0.0.0", ["0.0.0.0"], False),
        ("::", ["::"], False),
    ],
)
def test_loopback_is_every_address_the_host_resolves_to(
    monkeypatch: pytest.MonkeyPatch, host: str, addresses: list[str] | None, loopback: bool
) -> None:
    table = {} if addresses is None else {host.strip("[]"): addresses, host: addresses}
    monkeypatch.setattr(socket, "getaddrinfo", _resolving(table))
    assert is_loopback(host) is loopback


def test_a_host_named_like_loopback_needs_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", _resolving({"127.lab.example": ["203.0.113.7"]}))
    result = CliRunner().invoke(
        cli, ["--home", str(tmp_path), "serve", "--host", "127.lab.example"]
    )
    assert result.exit_code == 2, result.output
    assert "expected --token" in result.output and "127.lab.example" in result.output

"""`lineage serve`'s token visit and bind (issue #33, items 9 and 10): the redirect after `?token=`
goes only to this server's own paths, and loopback is where a host name resolves to, every address
of it."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from click.testing import CliRunner

from rollout_lineage.adapters.web.app import is_loopback
from rollout_lineage.cli.main import cli
from tests.serve_attack import (
    RUN,
    TOKEN,
    pr_layout_store,
)
from tests.serve_process import serving

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return pr_layout_store(tmp_path)


# --- 9. the token visit's redirect ----------------------------------------------------------------


def browser_resolves(base: str, location: str) -> str:
    """The host a browser goes to for `location` on `base` (WHATWG URL, which `urljoin` is not): it
    drops tabs and newlines, reads `\\` as `/`, and after two leading slashes skips any more and
    takes what follows as the host."""
    cleaned = location.replace("\\", "/").replace("\t", "").replace("\n", "").replace("\r", "")
    if cleaned.startswith("//"):
        return cleaned.lstrip("/").split("/")[0].split("?")[0]
    return urlsplit(urljoin(base + "/", cleaned)).netloc


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example/x",
        "///evil.example/x",
        "/\\evil.example/x",
        "/\\/evil.example/x",
        "/%2F%2Fevil.example/x",
        "/%2f/evil.example",
        "/%5C%5Cevil.example/x",
        "//evil.example",
    ],
)
def test_a_token_visit_redirects_only_to_this_servers_own_paths(
    home: Path, tmp_path: Path, target: str
) -> None:
    env = {"TMPDIR": str(tmp_path), "LINEAGE_SERVE_TOKEN": TOKEN}
    with serving(home, env, headers={"Authorization": f"Bearer {TOKEN}"}) as (_process, base):
        here = urlsplit(base)
        connection = http.client.HTTPConnection(here.hostname or "", here.port, timeout=30)
        connection.request("GET", f"{target}?token={TOKEN}&q=1")
        answer = connection.getresponse()
        answer.read()
        location = answer.getheader("location") or ""
        connection.close()
        assert answer.status in (303, 400, 404), answer.status
        if answer.status == 303:
            assert browser_resolves(base, location) == here.netloc, (target, location)
            assert location.startswith("/") and location[1:2] not in ("/", "\\"), location
            assert location.endswith("?q=1")


def test_a_token_visit_keeps_the_path_it_was_given(home: Path, tmp_path: Path) -> None:
    env = {"TMPDIR": str(tmp_path), "LINEAGE_SERVE_TOKEN": TOKEN}
    with serving(home, env, headers={"Authorization": f"Bearer {TOKEN}"}) as (_process, base):
        here = urlsplit(base)
        for path in ("/runs", f"/runs/{RUN}", "/runs/dots%2F..%2Fx", "/runs/a%20b"):
            connection = http.client.HTTPConnection(here.hostname or "", here.port, timeout=30)
            connection.request("GET", f"{path}?token={TOKEN}&q=csv")
            answer = connection.getresponse()
            answer.read()
            connection.close()
            assert answer.status == 303
            assert answer.getheader("location") == f"{path}?q=csv"


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

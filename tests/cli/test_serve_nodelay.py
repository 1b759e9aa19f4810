"""Nagle's algorithm is off on every connection `lineage serve` accepts (issue #36 item 5): asyncio
sets TCP_NODELAY only on connections accepted from a socket whose protocol says TCP, and the socket
`serve` made said 0, so each answer on a kept-alive connection (a browser's) waited ~40 ms for the
peer's delayed ACK. Checked by structure, never by time: the option on the server's own accepted
socket, taken from the running process (pidfd_getfd), and on the sockets `listen` makes."""

from __future__ import annotations

import asyncio
import ctypes
import http.client
import os
import socket
from pathlib import Path

import click
import pytest

from rollout_lineage.adapters.web.app import addresses_of
from rollout_lineage.cli.serve_cmds import listen
from tests.conftest import EXAMPLES, Cli
from tests.serve_process import free_port, serving

SYS_PIDFD_GETFD = 438  # the same number on x86-64 and arm64


def _peer_socket(pid: int, client: socket.socket) -> socket.socket:
    """The server process's end of `client`'s connection, as a socket of this process."""
    local_port = client.getsockname()[1]
    inode = None
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for row in path.read_text().splitlines()[1:]:
            parts = row.split()
            remote_port = int(parts[2].rsplit(":", 1)[1], 16)
            if remote_port == local_port:
                inode = parts[9]
    assert inode is not None, "expected the server's end of the connection in /proc/PID/net/tcp"
    number = None
    for entry in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{entry}") == f"socket:[{inode}]":
                number = int(entry)
        except OSError:
            continue
    assert number is not None, "expected the server to hold the accepted socket"
    pidfd = os.pidfd_open(pid)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, number, 0)
        if fd < 0:
            pytest.skip(f"pidfd_getfd refused: {os.strerror(ctypes.get_errno())}")
        return socket.socket(fileno=fd)
    finally:
        os.close(pidfd)


@pytest.mark.slow
def test_a_kept_alive_connection_to_lineage_serve_has_nagle_off(tmp_path: Path) -> None:
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with serving(home) as (process, base):
        port = int(base.rsplit(":", 1)[1])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for path in ("/api/runs", "/runs", "/api/runs"):  # one connection, kept alive
                connection.request("GET", path)
                answer = connection.getresponse()
                answer.read()
                assert answer.status == 200
                assert answer.getheader("connection", "").lower() != "close"
            assert connection.sock is not None
            server_end = _peer_socket(process.pid, connection.sock)
            try:
                nodelay = server_end.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            finally:
                server_end.close()  # this process's duplicate only: the connection stays open
            assert nodelay != 0, "expected TCP_NODELAY on the connection lineage serve accepted"
        finally:
            connection.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_the_listening_socket_is_tcp_so_asyncio_turns_nagle_off(host: str) -> None:
    port = free_port()
    try:
        listening = listen(host, port, addresses_of(host, port))
    except (OSError, click.UsageError) as exc:  # no IPv6 on this machine
        pytest.skip(str(exc))
    assert listening.proto == socket.IPPROTO_TCP

    async def accept_one() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=listening)
        async with server:
            port = listening.getsockname()[1]
            _, writer = await asyncio.open_connection(host, port)
            value = await asyncio.wait_for(accepted, 10)
            writer.close()
            return value

    try:
        assert asyncio.run(accept_one()) != 0
    finally:
        listening.close()

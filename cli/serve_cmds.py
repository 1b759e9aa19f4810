"""`lineage serve`: the read models as a local web application (pages and a JSON API), read-only."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import click

from ..bootstrap import Lineage

if TYPE_CHECKING:
    from ..domain.integrity import ChainReport

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8321


class ChainChecks:
    """The hash chain as the pages show it: walked in full when the server starts (as `lineage
    report` walks it, with the stored Merkle tree checked but not extended: the server writes
    nothing, so a read-only store is served), then, at each later log head, the head that walk
    ended at must still be in the log with the same hash (a rewritten or truncated log is caught,
    and so is a store replaced under the server, which the log reader reads at once: `SQLiteLog`)
    while the events after it were checked against the chain as the read models caught up on them
    (`projections/engine/paging.py`). A full walk per write took 5.5 s at 120,000 events
    (`bench/serve.py`); restart the server, or run `lineage verify`, for a new one.

    The first walk runs in the background from the start (`start`), not on the first run page, so
    the runs list answers at once while a page that shows the chain waits only for what is left of
    it (at 1,200,000 events the walk and the Merkle tree take minutes on a busy machine)."""

    def __init__(self, lineage: Lineage) -> None:
        self._lineage = lineage
        self._walked: ChainReport | None = None
        self._lock = threading.Lock()

    def start(self) -> threading.Thread:
        walking = threading.Thread(target=self, name="lineage-serve-chain-walk", daemon=True)
        walking.start()
        return walking

    def __call__(self) -> dict[str, Any]:
        with self._lock:  # one walk at a time: a page asking during the first one waits for it
            return self._check()

    def _check(self) -> dict[str, Any]:
        from ..domain.integrity import ChainReport, ChainWalker, Head

        walked = self._walked
        if walked is None or walked.head is None or not walked.intact:
            # the first, an empty log's, or a broken one's
            # Nothing written (the Merkle tree is checked as stored): a read-only store is served.
            self._walked = walked = self._lineage.verify(extend_tree=False)
            return walked.summary()
        log = self._lineage.log
        position = log.max_notification_id() or 0
        walker = ChainWalker()
        walker.report = ChainReport(
            events=position, head=Head(position, log.chain_hash_at(position) or "")
        )
        walker.check_head(walked.head, log.chain_hash_at(walked.head.position))
        if walker.report.problem is not None:
            walker.report.problem += (
                f"; this server walked the log up to {walked.head} when it started, so the store "
                "was rewritten or replaced since (a backup restored?): restart `lineage serve` to "
                f"walk the log now at {self._lineage.location}"
            )
        return walker.report.summary()


def allowed_hosts(host: str, loopback: bool | None = None) -> list[str]:
    """The names a request's Host header may give: loopback's on a loopback bind (so a page
    elsewhere cannot rebind its own name to 127.0.0.1), any on a wider bind, where the token
    guards. `loopback`: what `is_loopback(host)` said where the bind was decided."""
    from ..adapters.web.app import LOOPBACK, is_loopback

    if not (is_loopback(host) if loopback is None else loopback):
        return ["*"]
    return sorted({host, *LOOPBACK, "[::1]"})


@click.command()
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    help="Address to listen on; any but loopback needs --token.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65_535),
    default=DEFAULT_PORT,
    show_default=True,
    help="TCP port to listen on.",
)
@click.option(
    "--token",
    envvar="LINEAGE_SERVE_TOKEN",
    help="Secret every request must carry (Authorization: Bearer TOKEN, or ?token= "
    "once in a browser); required off loopback. Also read from LINEAGE_SERVE_TOKEN.",
)
@click.pass_obj
def serve(lineage: Lineage, host: str, port: int, token: str | None) -> None:
    """Serve the read models as a local, read-only web application and JSON API.

    Pages for runs (search, filters, sorting, paging), a run (its tree, arms x tests, arm
    statistics, audit findings), arms, compare (with the arms' statistics), charts (per-arm pass
    rate and reward with 95% intervals, a task x arm grid, runs and rewards over time, grouped by
    any column of `runs`), SQL (CSV/JSON download) and the audit. Only GET exists (any other method
    is 405); users' SQL gets `lineage sql`'s read-only connection, limits and timeout; every page
    forbids scripts and fetching from anywhere else; every recorded value is shown as text. New
    events appear without a restart: each request first catches the read models up when the log
    moved. The server reads its own copy of the read models (in a scratch folder, removed when it
    stops, or by the next server if it was killed), so no other command ever waits for it. Ctrl-C
    stops it with exit 130, SIGTERM with 143.

    Example: lineage serve --port 8321   (then open http://127.0.0.1:8321/)
    """
    from ..adapters.web.app import addresses_of, all_loopback

    # Resolved once: the addresses judged here are the ones bound (a name resolved again could
    # answer otherwise the second time).
    addresses = addresses_of(host, port)
    loopback = all_loopback(addresses)
    if not loopback and not token:
        raise click.UsageError(
            f"expected --token TOKEN (or LINEAGE_SERVE_TOKEN) to listen on {host!r}, found none: "
            "anyone who can reach that address could read the log; bind 127.0.0.1 or give a token",
            ctx=click.get_current_context(),
        )
    if token is not None and len(token) < 16:
        raise click.UsageError(
            f"expected a --token of at least 16 characters, found {len(token)}",
            ctx=click.get_current_context(),
        )
    import uvicorn

    from ..adapters.web.app import build_app
    from ..projections.reports.served_reads import ServedReads

    listening = listen(host, port, addresses)
    # Until the server takes the signals over: a SIGTERM while the read models are built ends it as
    # one.
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _terminated) if main else None
    checks = ChainChecks(lineage)
    reads = ServedReads(lineage, checks)
    walking: threading.Thread | None = None
    try:
        reads.head()  # build or catch up the read models before the first visitor waits for it
        walking = checks.start()
        app = build_app(reads, token=token, allowed_hosts=allowed_hosts(host, loopback))
        config = uvicorn.Config(app, log_level="warning", server_header=False)
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"lineage serve: http://{shown}:{port}/ (Ctrl-C stops)", err=True)
        server = _stopping_server(config)
        server.run(sockets=[listening])
    finally:
        reads.close()
        listening.close()
        if main:
            signal.signal(signal.SIGTERM, before)
    if walking is not None and walking.is_alive() and server.stopped_by in _SIGNALLED:
        _end_beside_a_walk(*_SIGNALLED[server.stopped_by])
    if server.stopped_by == signal.SIGINT:
        raise KeyboardInterrupt  # the CLI's one line and exit 130, as every command's Ctrl-C
    if server.stopped_by == signal.SIGTERM:
        _terminated()


#: How a signal that stopped the server ends the process: the shell's code and the one line.
_SIGNALLED = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}


def _end_beside_a_walk(code: int, line: str) -> NoReturn:
    """End at once while the first chain walk still runs in its thread: finalising the interpreter
    under a thread inside SQLite or DuckDB printed that thread's traceback, or aborted in DuckDB's
    bindings (exit 134), instead of the one line. The walk only extends the Merkle tree, each page
    one transaction, so ending here is what a kill would leave: whole pages or none."""
    from .output import note

    note(line)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _terminated(*_: Any) -> None:
    """SIGTERM: one line and the shell's convention, 128 + 15."""
    from .output import note

    note("terminated")
    sys.exit(143)


def _stopping_server(config: Any) -> Any:
    """uvicorn's server, except that it remembers which signal stopped it (`stopped_by`) instead of
    raising it again after the shutdown (uvicorn's way), which left the exit code to whatever the
    signal's disposition was: 0 for a Ctrl-C where SIGINT was inherited ignored, death by signal for
    SIGTERM. A second Ctrl-C forces the exit. Made here so that uvicorn is imported only by a server
    that starts."""
    import uvicorn

    class StoppedBy(uvicorn.Server):
        stopped_by: int | None = None

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return

            def stop(number: int, _frame: Any) -> None:
                if self.should_exit and number == signal.SIGINT:
                    self.force_exit = True
                self.should_exit = True
                self.stopped_by = self.stopped_by or number

            before = {n: signal.signal(n, stop) for n in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for number, handler in before.items():
                    signal.signal(number, handler)

    return StoppedBy(config)


def listen(host: str, port: int, addresses: list[tuple[Any, ...]]) -> socket.socket:
    """The listening socket on the first of `addresses` (what `host` resolved to when the bind was
    judged loopback or not), bound here so a taken port or a bad address is a usage error naming it
    (uvicorn would exit 3, which is this tool's code for evidence that does not match)."""
    try:
        if not addresses:
            socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)  # says why
            raise OSError("it resolves to no address")
        family, kind, proto, _name, address = addresses[0]
        # The protocol named (IPPROTO_TCP, not 0): asyncio sets TCP_NODELAY only on connections
        # accepted from a socket whose `proto` says TCP, and without it every answer on a kept-alive
        # connection waited for Nagle's algorithm and the peer's delayed ACK (~40 ms).
        listening = socket.socket(family, kind, proto or socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        raise click.UsageError(
            f"expected an address to listen on, found --host {host!r}: {exc}"
        ) from None
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
        listening.listen(128)
    except OSError as exc:
        listening.close()
        raise click.UsageError(
            f"expected to listen on {host} port {port}, found {exc.strerror or exc}; "
            "stop what holds it or pick another --port"
        ) from None
    listening.set_inheritable(True)
    return listening


COMMANDS = (serve,)

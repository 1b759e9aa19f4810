"""What the attack tests of `lineage serve` share (issue #33, items 4-10): a store, plain HTTP
that returns errors as answers, a process's memory and CPU time from /proc, bounded waits, and the
app as `lineage serve` builds it with the reads behind it."""

from __future__ import annotations

import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from rollout_lineage.adapters.web.app import build_app
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.serve_cmds import ChainChecks, allowed_hosts
from rollout_lineage.projections.reports.served_reads import ServedReads
from tests.conftest import EXAMPLES, Cli

TOKEN = "s3cret-token-0123456789"
RUN = "nightly/csv-dedupe__d4e5f6a7"


def pr_layout_store(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    return home


def fetch(url: str, timeout: float = 120) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read(), dict(answer.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (peak resident) ... of a process, in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            found[name] = int(value.split()[0]) * 1024
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for(condition: Callable[[], bool], what: str, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {what} within {deadline_s:g} s")
        time.sleep(0.05)


def in_background(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """`call` in a thread of its own; its result (or the exception it raised) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except Exception as exc:  # the server stopped under it at the end of a test
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


@contextmanager
def served(lineage: Lineage) -> Iterator[tuple[TestClient, ServedReads]]:
    """A client of the app `lineage serve` builds on loopback, and the reads behind it."""
    reads = ServedReads(lineage, ChainChecks(lineage))
    app = build_app(reads, token=None, allowed_hosts=allowed_hosts("127.0.0.1"))
    try:
        with TestClient(app, base_url="http://127.0.0.1:8321") as client:
            yield client, reads
    finally:
        reads.close()

"""`lineage serve` started as a user starts it: a subprocess on a free loopback port, ready once it
answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import REPO

DEADLINE_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers or {}), timeout=30
        ) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@contextmanager
def serving(
    home: Path,
    env: dict[str, str] | None = None,
    *,
    wrap: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> Iterator[tuple[subprocess.Popen, str]]:
    """(the process, its base URL), once `/api/runs` answers; stopped (SIGTERM, then SIGKILL) at the
    end unless the test stopped it. `wrap` runs it inside another command (`unshare -m sh -c ...`,
    which must exec it); `headers` are what the readiness probe sends (a token)."""
    port = free_port()
    process = subprocess.Popen(
        [
            *(wrap or []),
            sys.executable,
            "-m",
            "rollout_lineage.cli",
            "--home",
            str(home),
            "serve",
            "--port",
            str(port),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                if get(f"{base}/api/runs", headers)[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                _, err = process.communicate(timeout=10)
                raise AssertionError(
                    f"expected lineage serve to answer on {base}; it exited {process.returncode}: "
                    f"{err.decode()}"
                )
            time.sleep(0.1)
        yield process, base
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

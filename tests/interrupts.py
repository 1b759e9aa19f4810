"""Ctrl-C at a known point, not after a guessed delay: the Ctrl-C tests wait until the process (or
thread) is where the test says it interrupts it, read from outside it, so a slow or busy machine
changes nothing.

Linux only (`/proc`), like the rest of the suite. Each wait ends at a deadline with what it last
saw.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import CodeType

import pytest

#: The `read` system call's number, by machine (what /proc/PID/syscall starts with while a read
#: blocks).
READ_SYSCALL = {"x86_64": 0, "aarch64": 63, "arm64": 63}
DEADLINE_S = 60.0


def _read(path: str) -> str:
    with open(path) as file:
        return file.read()


def _poll(process: subprocess.Popen, ready: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        if process.poll() is not None:
            raise AssertionError(
                f"expected the process to be {what}; found it exited {process.returncode}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"expected the process to be {what} within {DEADLINE_S:g} s; it was not"
            )
        time.sleep(0.002)


def wait_until_reading_stdin(process: subprocess.Popen) -> None:
    """Until the process's main thread is blocked in `read(0, ...)`: waiting on its stdin."""
    number = READ_SYSCALL.get(platform.machine())
    if number is None:
        pytest.skip(f"the read system call's number on {platform.machine()} is not known here")

    def reading() -> bool:
        try:
            fields = _read(f"/proc/{process.pid}/syscall").split()
        except OSError:
            return False
        return len(fields) > 1 and fields[0] == str(number) and int(fields[1], 16) == 0

    _poll(process, reading, "blocked reading its stdin")


def _main_thread_cpu_ticks(pid: int) -> int:
    """utime + stime of the process's main thread, in clock ticks (/proc/PID/task/PID/stat fields
    14-15)."""
    fields = _read(f"/proc/{pid}/task/{pid}/stat").rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _data_limit(pid: int) -> str:
    line = next(
        line for line in _read(f"/proc/{pid}/limits").splitlines() if "Max data size" in line
    )
    return line.split()[3]


def wait_until_inside_a_users_statement(process: subprocess.Popen, cpu_ticks: int = 20) -> None:
    """Until DuckDB runs a user's statement: the process holds its memory bound (RLIMIT_DATA) only
    around the call into DuckDB for a user's statement (adapters/statement_limits.py), and its main
    thread (the read models' one DuckDB thread) has spent `cpu_ticks` of CPU since the bound was
    seen, far more than the few lines of Python between setting the bound and calling DuckDB
    could."""
    import resource

    if resource.getrlimit(resource.RLIMIT_DATA)[0] != resource.RLIM_INFINITY:
        pytest.skip(
            "RLIMIT_DATA is already set here: the bound a statement sets cannot be told apart"
        )

    def bounded() -> bool:
        try:
            return _data_limit(process.pid) != "unlimited"
        except (OSError, StopIteration):
            return False

    _poll(process, bounded, "holding its memory bound for a user's statement")
    start = _main_thread_cpu_ticks(process.pid)
    _poll(
        process,
        lambda: bounded() and _main_thread_cpu_ticks(process.pid) >= start + cpu_ticks,
        f"running the statement ({cpu_ticks} ticks of CPU under the bound)",
    )


def when_main_thread_inside(code: CodeType, then: Callable[[], None]) -> threading.Thread:
    """A thread that calls `then` once this process's main thread runs `code` (a frame of it on its
    stack, as while a generator made by a function with that code waits inside `next`)."""
    main = threading.main_thread().ident
    assert main is not None

    def inside() -> bool:
        frame = sys._current_frames().get(main)
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        return frame is not None

    def watch() -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not inside():
            if time.monotonic() > deadline:
                return  # the test's own wait fails, naming what it waited for
            time.sleep(0.001)
        then()

    watcher = threading.Thread(target=watch, name="ctrl-c-at-a-known-point", daemon=True)
    watcher.start()
    return watcher


#: A console script as pip writes one for `lineage` (its file named `lineage`), that sends itself a
#: Ctrl-C at the Nth Python call (CTRL_C_AT) counted from our package's first statement on: the
#: moments of start-up and of the command, each reached exactly, however slow the machine. It
#: writes where the signal was sent to CTRL_C_MARK, and how many calls it counted to CTRL_C_MARK
#: .calls when it never sent it (CTRL_C_AT past the last call).
CTRL_C_AT_A_CALL = """\
import os, signal, sys

TARGET = int(os.environ["CTRL_C_AT"])
MARK = os.environ["CTRL_C_MARK"]
PACKAGE = os.path.join("rollout_lineage", "__init__.py")
seen = 0
ours = False


def trace(frame, event, arg):
    global seen, ours
    if event != "call":
        return None
    if not ours:  # the package's own frame starts the count; its first statement is the first call
        ours = frame.f_code.co_filename.endswith(PACKAGE)
        return None
    seen += 1
    if seen == TARGET:
        sys.settrace(None)
        with open(MARK, "w") as out:
            out.write(f"{frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}")
        os.kill(os.getpid(), signal.SIGINT)
    return None


def counted():
    if seen < TARGET:
        with open(MARK + ".calls", "w") as out:
            out.write(str(seen))


import atexit

atexit.register(counted)
sys.settrace(trace)
from rollout_lineage.cli.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
"""

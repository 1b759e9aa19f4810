"""Limits for a statement we did not write: a deadline it cannot outlast, memory it cannot outgrow.

DuckDB's `memory_limit` bounds its buffer manager only, and its interrupt is looked at only between
vectors, so one huge function call escapes both; `memory_bounded` and `Watchdog` close that.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

try:
    import resource
except ImportError:  # pragma: no cover - not on Windows; the watchdog still holds there
    resource = None  # type: ignore[assignment]

#: How long past its deadline a statement may take to notice the interrupt before it counts as one
#: DuckDB cannot interrupt.
GRACE_S = 1.0
#: What a statement may map beyond the memory cap: DuckDB's own vectors and result chunks, and
#: Python's.
MARGIN_BYTES = 64 * 2**20
#: Exit code of a process that ends a statement DuckDB would not stop
#: (`ReadLimitExceeded.exit_code`).
EXIT_LIMIT = 4
_hard_stop = False


@contextmanager
def owning_the_process() -> Iterator[None]:
    """While it lasts, the process is ours (the CLI's `sql`): a statement that outlasts its deadline
    and the grace ends it, exit 4. Scoped, so a CLI command run inside another program (a test's
    CliRunner) leaves that program's later read API calls to the watchdog alone."""
    global _hard_stop
    was, _hard_stop = _hard_stop, True
    try:
        yield
    finally:
        _hard_stop = was


def headroom(memory_cap_bytes: int) -> int:
    """What the process may map beyond what it maps when a statement starts: the cap and a
    margin."""
    return memory_cap_bytes + MARGIN_BYTES


def mapped_bytes() -> int | None:
    """Private writable memory the process maps now (Linux's VmData, what RLIMIT_DATA counts), if
    known."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


#: Statements under the bound now, in every thread, and the limit found before the first: the last
#: one out puts that back, so two read API calls in two threads never leave the process with one's
#: bound.
_bound_lock = threading.Lock()
_bound_holders = 0
_limit_before: tuple[int, int] | None = None


@contextmanager
def memory_bounded(budget: int) -> Iterator[None]:
    """Hold the process's soft RLIMIT_DATA at what it maps now plus `budget` for the duration (with
    calls running at once in other threads, the highest of their bounds), then put back the limit
    found before the first of them (a lower one already set is kept).

    Why: a list, a string or a hash set built inside one DuckDB function call
    (`list_distinct(range(20000000))`, `repeat('a', 1500000000)`, `list_sort`) is allocated beside
    the buffer manager, so such a call ran 20-45 s to a 4 GB peak under a 256 MB `memory_limit` and
    a 2 s timeout (DuckDB 2.0.1). RLIMIT_DATA counts every private writable mapping (malloc,
    jemalloc's arenas, mmap): an allocation past it fails inside DuckDB as `OutOfMemoryException`
    ("bad allocation"), so the statement ends at the bound (peak RSS ~350 MB at a 256 MB cap). Only
    the soft limit moves, so putting it back needs no privilege. It bounds the whole process
    meanwhile: the read API's caller shares it."""
    mapped = mapped_bytes() if resource is not None else None
    if mapped is None:
        yield  # no /proc (not Linux): only DuckDB's own cap and the watchdog hold
        return
    _enter_bound(mapped + budget)
    try:
        yield
    finally:
        _leave_bound()


def _enter_bound(wanted: int) -> None:
    global _bound_holders, _limit_before
    with _bound_lock:
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if _bound_holders == 0:
            _limit_before = (soft, hard)
        _bound_holders += 1
        assert _limit_before is not None
        before = _limit_before[0]
        bound = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        if before != resource.RLIM_INFINITY:
            bound = min(bound, before)  # a limit the caller set stays the ceiling
        if _bound_holders == 1 or bound > soft:
            resource.setrlimit(resource.RLIMIT_DATA, (bound, hard))


def _leave_bound() -> None:
    global _bound_holders, _limit_before
    with _bound_lock:
        _bound_holders -= 1
        if _bound_holders == 0 and _limit_before is not None:
            resource.setrlimit(resource.RLIMIT_DATA, _limit_before)
            _limit_before = None


@dataclass
class Watchdog:
    """Interrupts a connection `timeout` seconds after it starts, unless `finish` came first.

    A call still running `GRACE_S` later is one DuckDB does not interrupt: a process of our own
    (`lineage sql`, `owning_the_process`) then ends with exit 4 naming the timeout; a caller's
    process is never ended, and there the memory bound is what holds.

    `fired` says the deadline was reached, so whatever DuckDB raised after it (an interrupt, or an
    allocation that failed while it unwound) is told as the timeout."""

    timeout: float
    interrupt: Callable[[], None]
    #: What to say, on stderr, when a call outlasts the grace and the process is ended.
    stuck_message: str
    fired: bool = False
    _done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Watchdog:
        hard_stop = _hard_stop  # read here: the CLI sets it before the statement
        self._thread = threading.Thread(
            target=self._watch, args=(hard_stop,), name="lineage-statement-watchdog", daemon=True
        )
        self._thread.start()
        return self

    def finish(self) -> None:
        self._done.set()

    def _watch(self, hard_stop: bool) -> None:
        if self._done.wait(self.timeout):
            return
        self.fired = True
        self.interrupt()
        if self._done.wait(GRACE_S) or not hard_stop:
            return
        # DuckDB did not stop at the interrupt (one function call over one huge value): nothing in
        # this process can end that call, and the read-only connection has nothing to lose, so the
        # process ends.
        os.write(2, f"Error: {self.stuck_message}\n".encode())
        os._exit(EXIT_LIMIT)

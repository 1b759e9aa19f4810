"""Ctrl-C held while a native module loads, raised after: a KeyboardInterrupt inside a native
module's initialisation is not ours to catch. DuckDB's engine builds its enums through Python while
it loads, and nanobind turns an exception there into "Critical nanobind error", a traceback and an
abort. The CLI holds it around a command's import (`cli/main.py`), `duckdb_store` around the
engine's, which a command may load later, while it runs."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold a Ctrl-C that lands in the block and raise it after. Only where SIGINT has Python's
    default handler, in the main thread (elsewhere it is not ours to change)."""
    held = threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if not held:
        yield
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda number, _frame: caught.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if caught:
        raise KeyboardInterrupt

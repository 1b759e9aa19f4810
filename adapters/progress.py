"""How far a long operation has got (catch-up and rebuild, verify, chunked ingest, tar verify), for
whoever listens.

The code doing the work calls `advance(task, done, total)` as it goes; nothing listens unless a
caller said `listening(...)` (the CLI does, drawing a bar on stderr when stderr is a terminal), so a
harness pays one context-variable lookup per page and prints nothing. A context variable, not a
parameter threaded through every layer, because progress is a concern of whoever started the
operation, not of the functions in between.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

#: (task, done, total or None when unknown) -> None
Listener = Callable[[str, int, "int | None"], None]
_listener: ContextVar[Listener | None] = ContextVar("rollout_lineage_progress", default=None)


def advance(task: str, done: int, total: int | None = None) -> None:
    listener = _listener.get()
    if listener is not None:
        listener(task, done, total)


def listened() -> bool:
    """Whether anyone listens: work that costs something only to know the total asks first."""
    return _listener.get() is not None


def counted(items: Iterable[T], task: str, total: int | None, every: int = 10_000) -> Iterator[T]:
    """`items`, reporting every `every` of them (and the last) as done."""
    if not listened():
        yield from items
        return
    done = 0
    for done, item in enumerate(items, 1):
        if done % every == 0:
            advance(task, done, total)
        yield item
    advance(task, done, total)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)

"""rollout-lineage: an event-sourced lineage store for branching agent-benchmark rollouts.

Harness API::

    from rollout_lineage import open_store, facts
    with open_store() as lineage:
        position = lineage.record([facts.RunRegistered(run="job/task__1", task="task")]).position
"""

from __future__ import annotations

# Both built in, so importing them runs no Python a Ctrl-C could land in (`signal` imports `enum`).
import _signal  # type: ignore[import-not-found]
import sys as _sys


def interrupted_at_start_up(_number: int, _frame: object) -> None:
    """SIGINT while this package loads. For the `lineage` command, before its own handling is in
    place (`cli/main.py`'s `main` puts Python's back first thing): one line and exit 130 at once.
    Nothing is open yet, so there is nothing to close; a KeyboardInterrupt raised instead, inside
    an import (`typing`, click), would print a traceback from code of no interest to whoever
    pressed Ctrl-C. For a harness importing the package, what Python's own handler does."""
    if not _lineage_is_starting():
        raise KeyboardInterrupt
    import os

    _sys.stderr.write("interrupted\n")
    _sys.stderr.flush()
    os._exit(130)


def _lineage_is_starting() -> bool:
    """This import is the `lineage` command's (its console script, or `python -m
    rollout_lineage.cli`), not a harness's."""
    from os.path import basename

    script = getattr(_sys.modules.get("__main__"), "__file__", None) or ""
    args = list(getattr(_sys, "orig_argv", []))
    module = args[args.index("-m") + 1 :][:1] if "-m" in args else []
    named = (basename(script), basename(_sys.argv[0]) if _sys.argv else "")
    return module == ["rollout_lineage.cli"] or "lineage" in named


# First of all, before any import a Ctrl-C could interrupt (no call: the handler is in place before
# any other Python runs). Only where SIGINT has Python's own handler (a harness's, or an ignored
# SIGINT, is left alone), in the main thread.
if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    try:  # noqa: SIM105 (contextlib is one more import to wait for)
        _signal.signal(_signal.SIGINT, interrupted_at_start_up)
    except ValueError:  # not the main thread: not ours to change
        pass

from importlib import import_module  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

# not at run time: `typing`'s first import is the slowest part of `lineage` start-up
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Entry", "Lineage", "bootstrap", "facts", "in_memory", "open_store"]
#: Loaded on first use, so `lineage --help` and other light imports of the package stay light.
_LAZY: dict[str, tuple[str, str | None]] = {
    "Entry": (".domain.application", "Entry"),
    "Lineage": (".bootstrap", "Lineage"),
    "bootstrap": (".bootstrap", "bootstrap"),
    "facts": (".domain.facts", None),  # the module itself
    "in_memory": (".bootstrap", "in_memory"),
    "open_store": (".bootstrap", "open_store"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    loaded = import_module(module, __name__)
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value
    return value


# A harness's import: SIGINT is Python's again. `lineage` keeps this handler until its `main`.
if _signal.getsignal(_signal.SIGINT) is interrupted_at_start_up and not _lineage_is_starting():
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)

"""rollout-lineage: an event-sourced lineage store for branching agent-benchmark rollouts.

Harness API::

    from rollout_lineage import open_store, facts
    with open_store() as lineage:
        position = lineage.record([facts.RunRegistered(run="job/task__1", task="task")]).position
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

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

"""rollout-lineage: an event-sourced lineage store for branching agent-benchmark rollouts.

Harness API::

    from rollout_lineage import open_store, facts
    with open_store() as lineage:
        position = lineage.record([facts.RunRegistered(run="job/task__1", task="task")]).position
"""

from importlib import import_module
from typing import Any

__all__ = ["Entry", "Lineage", "bootstrap", "facts", "in_memory", "open_store"]
#: Loaded on first use, so `lineage --help` and other light imports of the package stay light.
_LAZY = {
    "Entry": (".domain.application", "Entry"),
    "Lineage": (".bootstrap", "Lineage"),
    "bootstrap": (".bootstrap", "bootstrap"),
    "facts": (".domain", "facts"),
    "in_memory": (".bootstrap", "in_memory"),
    "open_store": (".bootstrap", "open_store"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(import_module(module, __name__), attribute)
    globals()[name] = value
    return value

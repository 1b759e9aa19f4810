"""rollout-lineage: an event-sourced lineage store for branching agent-benchmark rollouts.

Harness API::

    from rollout_lineage import open_store, facts
    with open_store() as lineage:
        position = lineage.record([facts.RunRegistered(run="job/task__1", task="task")]).position
"""

from .bootstrap import Lineage, bootstrap, open_store
from .domain import facts
from .domain.application import Entry

__all__ = ["Entry", "Lineage", "bootstrap", "facts", "open_store"]

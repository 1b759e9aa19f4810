"""rollout-lineage: an event-sourced lineage store for branching agent-benchmark rollouts."""

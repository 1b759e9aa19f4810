"""How every aggregate decides on a fact: new (append), already known (append nothing), or contradictory.

Re-sending a fact must be harmless (importers re-read the same artifacts; harnesses retry), while a
different value for the same key is a real disagreement that an auditor must see, so it is refused with both
values side by side.
"""

from __future__ import annotations

from typing import Any

from .errors import ConflictingFact
from .facts import Fact


def differing_fields(existing: Fact, incoming: Fact) -> dict[str, tuple[Any, Any]]:
    old, new = existing.model_dump(mode="json"), incoming.model_dump(mode="json")
    return {
        key: (old.get(key), new.get(key))
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    }


def is_new_or_same(existing: Fact | None, incoming: Fact, what: str) -> bool:
    """True when nothing is recorded yet; False when the same fact is; raise when a different one is."""
    if existing is None:
        return True
    if existing == incoming:
        return False
    diffs = "; ".join(
        f"{key}: recorded {old!r}, now {new!r}"
        for key, (old, new) in differing_fields(existing, incoming).items()
    )
    raise ConflictingFact(
        f"{what} is already recorded with different values ({diffs})",
        hint="facts are immutable: if the recorded value is wrong, record a correcting fact under a new key",
    )

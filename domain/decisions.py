"""How every aggregate decides on a fact: new (append), already known (append nothing), or
contradictory.

Re-sending a fact must be harmless (importers re-read the same artifacts; harnesses retry), while a
different value for the same key is a real disagreement that an auditor must see, so it is refused
with both values side by side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from .errors import ConflictingFact
from .facts import Fact

A = TypeVar("A")
D = TypeVar("D", bound=Callable[..., bool])
E = TypeVar("E", bound=Callable[..., None])


class Handlers(Generic[A]):
    """One aggregate's deciders and evolvers, each registered by a decorator on the method that
    handles a fact, so a new fact is its two methods and nothing else. Dispatch is by the fact's
    exact type (facts are final classes): recording decides and evolves tens of thousands of facts a
    second, and a chain of isinstance checks was a tenth of that cost."""

    def __init__(self, aggregate: str) -> None:
        self.aggregate = aggregate
        self.deciders: dict[type[Fact], Callable[[A, Any], bool]] = {}
        self.evolvers: dict[type[Fact], Callable[[A, Any], None]] = {}

    def decides(self, *facts: type[Fact]) -> Callable[[D], D]:
        def register(method: D) -> D:
            self._add(self.deciders, facts, method, "decider")
            return method

        return register

    def evolves(self, *facts: type[Fact]) -> Callable[[E], E]:
        def register(method: E) -> E:
            self._add(self.evolvers, facts, method, "evolver")
            return method

        return register

    def _add(
        self, table: dict[type[Fact], Any], facts: tuple[type[Fact], ...], method: Any, role: str
    ) -> None:
        for fact in facts:  # all checked first, so a refused registration adds nothing
            if fact in table:
                raise TypeError(
                    f"{self.aggregate}: expected one {role} for {fact.__name__}, found "
                    f"{table[fact].__qualname__} and {method.__qualname__}"
                )
        table.update(dict.fromkeys(facts, method))


def differing_fields(existing: Fact, incoming: Fact) -> dict[str, tuple[Any, Any]]:
    old, new = existing.model_dump(mode="json"), incoming.model_dump(mode="json")
    return {
        key: (old.get(key), new.get(key))
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    }


def is_new_or_same(existing: Fact | None, incoming: Fact, what: str) -> bool:
    """True when nothing is recorded yet; False when the same fact is; raise when a different one
    is."""
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
        hint="facts are immutable: if the recorded value is "
        "wrong, record a correcting fact under a new key",
    )

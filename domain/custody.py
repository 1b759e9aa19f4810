"""Custody of a fork's mounted artifacts: held before the children run, handed to each child,
released after.

Conservation is the invariant: every entry that was held comes back with the same digest, or a
failure that preserved it (and where) is on record. A release that would silently lose or change an
entry is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import facts as f
from .decisions import is_new_or_same
from .errors import CustodyBroken, InvariantViolated


@dataclass
class Custody:
    held: f.CustodyHeld | None = None
    handed_off: dict[int, f.CustodyHandedOff] = field(default_factory=dict)
    released: f.CustodyReleased | None = None
    failures: list[f.CustodyFailed] = field(default_factory=list)

    def decide(self, fact: f.Fact, n_children: int) -> bool:
        # Only custody facts come here (Run routes them), and each declares `run` and `fork`; `Fact`
        # does not.
        where = f"custody of fork {fact.fork!r} of run {fact.run!r}"  # type: ignore[attr-defined]
        if isinstance(fact, f.CustodyHeld):
            return is_new_or_same(self.held, fact, where)
        if isinstance(fact, f.CustodyFailed):
            return fact not in self.failures
        if isinstance(fact, f.CustodyHandedOff):
            # benchflow hands each child's mounts off whether or not the hold is still on record: a
            # released hold leaves no directory behind to say what it held.
            if fact.index >= n_children:
                raise InvariantViolated(
                    f"{where}: expected a child index below {n_children}, found {fact.index}"
                )
            return is_new_or_same(
                self.handed_off.get(fact.index), fact, f"{where}, hand-off to child {fact.index}"
            )
        if self.held is None:
            raise InvariantViolated(
                f"{where}: expected custody.held before {fact.type}, found no hold on record",
                hint="record custody.held first",
            )
        if isinstance(fact, f.CustodyReleased):
            self._check_conservation(fact, where)
            return is_new_or_same(self.released, fact, where)
        raise TypeError(fact)

    def _check_conservation(self, fact: f.CustodyReleased, where: str) -> None:
        assert self.held is not None
        held = {entry.path: entry for entry in self.held.entries}
        back = {entry.path: entry for entry in fact.entries}
        missing = sorted(set(held) - set(back))
        changed = sorted(
            path for path in set(held) & set(back) if held[path].sha256 != back[path].sha256
        )
        extra = sorted(set(back) - set(held))
        if missing or changed or extra:
            raise CustodyBroken(
                f"{where}: expected every held entry released with the same digest; "
                f"missing {missing}, digest changed {changed}, never held {extra}",
                hint="record custody.failed with the preserved location instead of a release",
            )

    def when(self, fact: f.Fact) -> None:
        if isinstance(fact, f.CustodyHeld):
            self.held = fact
        elif isinstance(fact, f.CustodyHandedOff):
            self.handed_off[fact.index] = fact
        elif isinstance(fact, f.CustodyReleased):
            self.released = fact
        elif isinstance(fact, f.CustodyFailed):
            self.failures.append(fact)

    @property
    def conserved(self) -> bool:
        return self.held is None or self.released is not None or bool(self.failures)

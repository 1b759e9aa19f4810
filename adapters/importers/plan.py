"""What an importer hands back for one run: its key, and the facts to record in one batch, in a valid order.

Every importer turns one run directory into a `RunPlan`; `import_runs` records each plan as one `record()`
batch, so a run is imported whole or not at all. Warnings are things the importer saw but the fact vocabulary
cannot hold (they are printed, never silently dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ...domain import facts as f
from ...domain.application import Entry


@dataclass
class RunPlan:
    key: str
    path: Path
    entries: list[Entry]
    parent_run: str | None = None
    warnings: list[str] = field(default_factory=list)

    def batch(self) -> list[Entry]:
        """What to record: the entries, with where the run was read (`run.located`) right after its registration."""
        located = Entry(f.RunLocated(run=self.key, path=str(self.path)))
        at = next((i + 1 for i, entry in enumerate(self.entries) if isinstance(entry.fact, f.RunRegistered)), 0)
        return [*self.entries[:at], located, *self.entries[at:]]

    @property
    def forks(self) -> int:
        return sum(isinstance(e.fact, f.ForkOpened) for e in self.entries)

    @property
    def children(self) -> int:
        return sum(len(e.fact.children) for e in self.entries if isinstance(e.fact, f.ForkOpened))


@dataclass
class Timeline:
    """Entries sorted by a key that encodes causal order (node creation, then lifecycle rank), stable on ties."""

    items: list[tuple[tuple[object, ...], int, Entry]] = field(default_factory=list)

    def add(self, key: tuple[object, ...], fact: f.Fact, occurred_at: datetime | None) -> None:
        self.items.append((key, len(self.items), Entry(fact, occurred_at)))

    def latest(self) -> datetime | None:
        """The latest time any fact so far happened at (cleanup comes after all of them)."""
        return max((entry.occurred_at for _, _, entry in self.items if entry.occurred_at is not None), default=None)

    def entries(self) -> list[Entry]:
        return [entry for _, _, entry in sorted(self.items, key=lambda item: (item[0], item[1]))]

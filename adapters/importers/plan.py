"""What an importer hands back for one run: its key, and the facts to record in one batch, in a
valid order.

Every importer turns one run directory into a `RunPlan`; `import_runs` records each plan as one
`record()` batch, so a run is imported whole or not at all. Warnings are things the importer saw but
the fact vocabulary cannot hold (they are printed, never silently dropped).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ...domain import facts as f
from ...domain.application import Entry
from .fields import build


@dataclass
class RunPlan:
    key: str
    path: Path
    entries: list[Entry]
    parent_run: str | None = None
    warnings: list[str] = field(default_factory=list)
    recorded_dir: str | None = (
        None  # the run's directory as the harness wrote it in its artifacts, if it did
    )

    def batch(self) -> list[Entry]:
        """What to record: the entries, with where the run is (`run.located`) right after its
        registration: the directory as the harness recorded it, and where it was read (links
        resolved, so one place has one name)."""
        where = str(self.path)
        located = (
            [
                Entry(
                    build(
                        f.RunLocated, where, run=self.key, path=self.recorded_dir, kind="recorded"
                    )
                )
            ]
            if self.recorded_dir
            else []
        )
        located.append(
            Entry(
                build(
                    f.RunLocated, where, run=self.key, path=os.path.realpath(self.path), kind="read"
                )
            )
        )
        at = next(
            (
                i + 1
                for i, entry in enumerate(self.entries)
                if isinstance(entry.fact, f.RunRegistered)
            ),
            0,
        )
        return [*self.entries[:at], *located, *self.entries[at:]]

    @property
    def forks(self) -> int:
        return sum(isinstance(e.fact, f.ForkOpened) for e in self.entries)

    @property
    def children(self) -> int:
        return sum(len(e.fact.children) for e in self.entries if isinstance(e.fact, f.ForkOpened))


@dataclass
class Timeline:
    """Entries sorted by a key that encodes causal order (node creation, then lifecycle rank),
    stable on ties."""

    items: list[tuple[tuple[object, ...], int, Entry]] = field(default_factory=list)

    def add(self, key: tuple[object, ...], fact: f.Fact, occurred_at: datetime | None) -> None:
        self.items.append((key, len(self.items), Entry(fact, occurred_at)))

    def latest(self) -> datetime | None:
        """The latest time any fact so far happened at (cleanup comes after all of them)."""
        return max(
            (entry.occurred_at for _, _, entry in self.items if entry.occurred_at is not None),
            default=None,
        )

    def closing(self, fork: str | None) -> f.ForkClosed | None:
        """The fork.closed recorded so far for `fork`."""
        return next(
            (
                entry.fact
                for _, _, entry in self.items
                if isinstance(entry.fact, f.ForkClosed) and entry.fact.fork == fork
            ),
            None,
        )

    def entries(self) -> list[Entry]:
        return [entry for _, _, entry in sorted(self.items, key=lambda item: (item[0], item[1]))]

"""Which aggregate owns which subject kind (a fact's `subject_kind`)."""

from __future__ import annotations

from .run import Run
from .snapshot import Snapshot

AGGREGATE_FOR_SUBJECT: dict[str, type[Run] | type[Snapshot]] = {"run": Run, "snapshot": Snapshot}

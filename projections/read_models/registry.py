"""Every read model, in the order catch-up applies them: `events` first, since the others read its
page.

Catch-up, rebuild, `verify --read-models`, `lineage tables` and `export parquet` all read this
tuple.
"""

from __future__ import annotations

from . import (
    branch_records,
    custody_and_cut_points,
    event_rows,
    fork_points,
    gate_evidence,
    nodes,
    preservation_receipts,
    runs,
    solve_samples,
    stage_registry,
)
from .base import Projection

PROJECTIONS: tuple[Projection, ...] = (
    event_rows.PROJECTION,
    branch_records.PROJECTION,
    runs.PROJECTION,
    nodes.PROJECTION,
    stage_registry.PROJECTION,
    fork_points.PROJECTION,
    custody_and_cut_points.PROJECTION,
    gate_evidence.PROJECTION,
    preservation_receipts.PROJECTION,
    solve_samples.PROJECTION,
)

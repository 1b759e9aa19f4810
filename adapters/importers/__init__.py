"""Importers of run directories that harnesses already wrote: benchflow (PR-#1046 and main-line
layouts) and Harbor.

Each importer reads one run directory as untrusted input (`rundir.py`) and returns the facts live
recording would have produced, in an order the domain accepts (`plan.py`); `import_runs` records
each run as one batch.
"""

from __future__ import annotations

from .discovery import RunDir, Skipped, discover, survey
from .service import ImportSummary, Rejection, import_runs

__all__ = ["ImportSummary", "Rejection", "RunDir", "Skipped", "discover", "import_runs", "survey"]

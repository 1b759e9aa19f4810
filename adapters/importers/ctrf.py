"""Per-test outcomes from a verifier's `ctrf.json` (pytest-json-ctrf), read the way benchflow reads them.

Only `results.tests[]` entries that are objects with a non-empty string `name` and `status` count; the first
entry wins when a name repeats; names are kept raw (benchflow's pytest node-id shortening happens at export,
where it must be injective across a whole report). A status outside CTRF's vocabulary is refused rather than
guessed at, because the fact type only admits the five CTRF statuses.
"""

from __future__ import annotations

from typing import get_args

from ...domain.vocabulary import CtrfStatus
from .fields import invalid
from .rundir import CTRF_CAP_FACTOR, RunFolder

STATUSES = frozenset(get_args(CtrfStatus))


def parse_ctrf(document: object, where: str) -> dict[str, str]:
    results = document.get("results") if isinstance(document, dict) else None
    tests = results.get("tests") if isinstance(results, dict) else None
    if not isinstance(tests, list):
        raise invalid(f"{where}: field results.tests", "a JSON array of test entries (CTRF)",
                      tests if isinstance(results, dict) else document)
    outcomes: dict[str, str] = {}
    for i, entry in enumerate(tests):
        if not isinstance(entry, dict):
            continue
        name, status = entry.get("name"), entry.get("status")
        if not (isinstance(name, str) and name and isinstance(status, str) and status):
            continue
        if status not in STATUSES:
            raise invalid(f"{where}: field results.tests[{i}].status", f"one of {sorted(STATUSES)}", status)
        outcomes.setdefault(name, status)
    return outcomes


def read_ctrf(folder: RunFolder, *candidates: str) -> dict[str, str] | None:
    """Outcomes from the first candidate file that exists, or None (not observed, which differs from {})."""
    for relative in candidates:
        document = folder.read_json(relative, cap_factor=CTRF_CAP_FACTOR)
        if document is not None or folder.exists(relative):
            return parse_ctrf(document, str(folder.root / relative))
    return None

"""Per-test outcomes from a verifier's `ctrf.json` (pytest-json-ctrf), read as benchflow reads them.

Names are kept raw: benchflow's pytest node-id shortening is decided per CTRF report, one arm at a
time, and is applied at export (docs/benchflow-formats.md §8).
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard, get_args

from ...domain.vocabulary import CtrfStatus
from ..rundir import CTRF_CAP_FACTOR, RunFolder, require_regular
from .fields import invalid

# A status outside these is refused rather than guessed at: the fact type admits only CTRF's five.
STATUSES = frozenset(get_args(CtrfStatus))
# benchflow's _ARTIFACT_READ_BYTES: a larger report is not read at all
ARTIFACT_READ_BYTES = 64 * 1024


def parse_ctrf(document: object, where: str) -> dict[str, str]:
    results = document.get("results") if isinstance(document, dict) else None
    tests = results.get("tests") if isinstance(results, dict) else None
    if not isinstance(tests, list):
        raise invalid(
            f"{where}: field results.tests",
            "a JSON array of test entries (CTRF)",
            tests if isinstance(results, dict) else document,
        )
    return _outcomes(tests, where, blank_counts=True)


def _outcomes(tests: list[Any], where: str, *, blank_counts: bool) -> dict[str, str]:
    """Name -> status of the `results.tests[]` entries that are objects with a non-empty string
    `name` and `status` (the first entry wins when a name repeats); `blank_counts=False` also skips
    names and statuses of only white space, as benchflow's `ctrf_test_outcomes` does."""

    def given(text: object) -> TypeGuard[str]:
        return isinstance(text, str) and bool(text if blank_counts else text.strip())

    outcomes: dict[str, str] = {}
    for i, entry in enumerate(tests):
        if not isinstance(entry, dict):
            continue
        name, status = entry.get("name"), entry.get("status")
        if not (given(name) and given(status)):
            continue
        if status not in STATUSES:
            raise invalid(
                f"{where}: field results.tests[{i}].status", f"one of {sorted(STATUSES)}", status
            )
        outcomes.setdefault(name, status)
    return outcomes


def read_ctrf(folder: RunFolder, *candidates: str) -> dict[str, str] | None:
    """Outcomes from the first candidate file that exists, or None (not observed, which differs from
    {})."""
    for relative in candidates:
        document = folder.read_json(relative, cap_factor=CTRF_CAP_FACTOR)
        if document is not None or folder.exists(relative):
            return parse_ctrf(document, str(folder.root / relative))
    return None


def benchflow_outcomes(document: Any, where: str) -> dict[str, str] | None:
    """`ctrf_test_outcomes` on a parsed report: None when it is not a CTRF object or names no
    test."""
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(document, dict) or not isinstance(results or {}, dict):
        return None
    tests = (results or {}).get("tests") or []
    if not isinstance(tests, list):
        return None
    return _outcomes(tests, where, blank_counts=False) or None


def artifact_test_outcomes(folder: RunFolder, root: str) -> dict[str, str] | None:
    """benchflow's `artifact_test_outcomes(root)`: `root/verifier/ctrf.json`, or None when it says
    nothing: a report that is missing, empty, unparsable, larger than 64 KiB, not a CTRF object, or
    lists no test is "not observed", never a refused run. A link out of the run is not followed and
    counts as missing; a special file is refused: it is not a verifier's output."""
    path = folder.root / root / "verifier" / "ctrf.json"
    if not path.exists() or not folder.contains(path):
        # missing, dangling, or a link out of the run (never followed): not observed, as benchflow's
        # is_file()
        return None
    require_regular(path)
    with open(path, "rb") as handle:
        data = handle.read(ARTIFACT_READ_BYTES + 1)
    if len(data) > ARTIFACT_READ_BYTES:
        return None
    try:
        document = json.loads(data.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    return benchflow_outcomes(document, str(path))


def child_test_outcomes(folder: RunFolder, child_dir: str) -> dict[str, str] | None:
    """benchflow's `_child_test_outcomes`: the child's own directory, then its `mounted/` hand-off;
    the first that yields outcomes wins."""
    for root in (child_dir, f"{child_dir}/mounted"):
        outcomes = artifact_test_outcomes(folder, root)
        if outcomes is not None:
            return outcomes
    return None

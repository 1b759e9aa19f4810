"""The `--matrix` file of `lineage audit`: the expected slots, read and checked before any audit
runs.

Design decision: the file's formats are the audit's (`projections/reports/audit/checks.py`
describes them
and owns `Slot`), so reading them lives beside it, not in the CLI, which only passes the path. The
file is read once, capped in size (a FIFO or device is refused, so it cannot block the audit), and
an object of lists may not expand past MAX_SLOTS; every refusal names the file and the line or slot.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from pathlib import Path
from typing import Any

from ....adapters import strict_json
from ....adapters.user_files import read_capped
from ....domain.errors import InvalidInput
from .checks import SLOT_FIELDS, Slot, slot_label

MATRIX_LIMIT = 10 * 1024 * 1024
# a cross product past this is a mistake, and would exhaust memory before it is noticed
MAX_SLOTS = 1_000_000


def read_matrix(path: Path) -> list[Slot]:
    """Expected slots from a CSV or JSON matrix file (formats in
    `projections/reports/audit/checks.py`)."""
    text = _read_capped(path)
    if path.suffix.lower() == ".csv" or text.lstrip()[:1] not in ("[", "{"):
        slots = _csv_slots(text, path)
    else:
        slots = _json_slots(text, path)
    if not slots:
        raise InvalidInput(
            f"--matrix {path}: expected at least one slot, found none",
            hint="`lineage audit --help` shows the formats",
        )
    seen: set[Slot] = set()
    for slot in slots:
        if slot in seen:
            raise InvalidInput(f"--matrix {path}: {slot_label(slot)} is listed twice")
        seen.add(slot)
    return slots


def _read_capped(path: Path) -> str:
    data = read_capped(path, MATRIX_LIMIT, "a --matrix file")
    try:
        return data.decode("utf-8-sig")  # a byte-order mark is allowed; other encodings are refused
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"--matrix {path}: expected UTF-8 text, found a byte that is not ({exc.reason} at byte "
            f"{exc.start})",
            hint="save the matrix as UTF-8",
        ) from None


def _csv_slots(text: str, path: Path) -> list[Slot]:
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    twice = sorted({name for name in header if header.count(name) > 1})
    if twice:
        raise InvalidInput(f"--matrix {path}: expected each column once, found {twice} twice")
    slots = []
    for row in reader:
        where = f"{path}, line {reader.line_num}"
        if None in row:  # more values than the header has columns
            raise InvalidInput(
                f"{where}: expected {len(header)} values, found {len(header) + len(row[None])}"
            )
        slots.append(_slot(row, where))
    return slots


def _json_slots(text: str, path: Path) -> list[Slot]:
    try:
        document = strict_json.loads(text)
    except ValueError as exc:  # invalid JSON, or a key given twice
        raise InvalidInput(f"--matrix {path}: expected JSON, found invalid JSON ({exc})") from None
    except RecursionError:
        raise InvalidInput(
            f"--matrix {path}: expected JSON, found nesting too deep to read"
        ) from None
    if isinstance(document, dict) and "slots" in document:
        document = document["slots"]
    if isinstance(document, dict):
        document = _cross_product(document, path)
    if not isinstance(document, list):
        raise InvalidInput(
            f'--matrix {path}: expected a list of slots, {{"slots": [...]}} or an object of lists'
        )
    return [_slot(entry, f"{path}, slot {i}") for i, entry in enumerate(document)]


def _cross_product(document: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """An object of lists means every combination of their values."""
    axes = {name: value if isinstance(value, list) else [value] for name, value in document.items()}
    size = math.prod(len(values) for values in axes.values())
    if size > MAX_SLOTS:
        raise InvalidInput(
            f"--matrix {path}: expected at most {MAX_SLOTS} "
            f"slots, found axes that expand to {size}",
            hint="list the slots you expect instead of their cross product",
        )
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]


def _slot_value(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInput(f"{where}: expected a string (or an integer trial), found {value!r}")
    return str(value)


def _slot(entry: Any, where: str) -> Slot:
    if not isinstance(entry, dict):
        raise InvalidInput(f"{where}: expected an object with {list(SLOT_FIELDS)}, found {entry!r}")
    unknown = sorted(set(entry) - set(SLOT_FIELDS))
    if unknown or not entry.get("task"):
        raise InvalidInput(
            f"{where}: expected a task and only the fields {list(SLOT_FIELDS)}, found "
            + (f"unknown fields {unknown}" if unknown else "no task")
        )
    return tuple(_slot_value(entry.get(name), f"{where}, field {name}") for name in SLOT_FIELDS)

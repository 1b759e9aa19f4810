"""JSON as this tool reads it from outside: one value per key, no matter which parser a reader uses.

A document with a key twice means one thing to Python (the last value), possibly another to the
harness or to another auditor's tool (the first). Evidence must not depend on that, so a repeated
key is refused, as are the other shapes Python's parser turns into exceptions rather than JSON
errors (integers past 4,300 digits, nesting deeper than the interpreter's stack).
"""

from __future__ import annotations

import json
from typing import Any


class DuplicateKey(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(f"the key {key!r} appears more than once in one object")
            seen.add(key)
    return document


def loads(text: str | bytes) -> Any:
    """Parse JSON; raises ValueError (invalid JSON, a repeated key, an integer too long) or
    RecursionError."""
    return json.loads(text, object_pairs_hook=_unique)

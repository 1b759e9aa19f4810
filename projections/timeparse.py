"""Parsing the ISO-8601 times people type (`--as-of`, `audit --since`), one way for every option.

A time must carry a UTC offset (`Z` or `+hh:mm`); one without is refused rather than read in whatever zone the
machine happens to use.
"""

from __future__ import annotations

from datetime import datetime

from ..domain.errors import InvalidInput


def parse_moment(text: str, option_name: str, expected: str = "an ISO-8601 time") -> datetime:
    """`text` as an aware datetime; InvalidInput naming `option_name` (and what it `expected`) when it is not one."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{option_name}: expected {expected}, found {text!r}") from None
    if moment.tzinfo is None:
        raise InvalidInput(
            f"{option_name}: expected a time with a UTC offset (e.g. 2026-11-02T10:00:00Z), found {text!r}"
        )
    return moment

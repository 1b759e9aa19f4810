"""Parsing the ISO-8601 times people type (`--as-of`, `audit --since`), one way for every option.

A time must carry a UTC offset (`Z` or `+hh:mm`); one without is refused rather than read in
whatever zone the machine happens to use. A date alone (`2026-11-03`) is that day's midnight UTC, as
people mean it for `--since`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from ...domain.errors import InvalidInput

#: YYYY-MM-DD and nothing else: a day, read as its midnight UTC.
DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_moment(text: str, option_name: str, expected: str = "an ISO-8601 time") -> datetime:
    """`text` as an aware datetime; InvalidInput naming `option_name` (and what it `expected`) when
    it is not one."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"{option_name}: expected {expected} or a date (e.g. 2026-11-02T10:00:00Z or "
            f"2026-11-02), found {text!r}"
        ) from None
    if DATE_ONLY.fullmatch(text):
        return moment.replace(tzinfo=UTC)
    if moment.tzinfo is None:
        raise InvalidInput(
            f"{option_name}: expected a time with a UTC offset (e.g. "
            f"2026-11-02T10:00:00Z) or a date (midnight UTC), found {text!r}"
        )
    return moment

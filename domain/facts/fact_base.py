"""What every fact is made of: the base classes and the field types, with the validation they carry.

Split from `facts.py` so the list of facts reads on its own. Strings must survive UTF-8, free-form
JSON must be plain, finite and shallow, counts fit the read models' 32-bit columns; times are
ISO-8601 text, read here only to say whether they carry a UTC offset.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict

MAX_JSON_DEPTH = 32
MAX_COUNT = 2**31 - 1  # counts and indexes are 32-bit in the read models


def _text(value: str) -> str:
    """Every string must survive UTF-8 (a lone surrogate from a JSON escape would not)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            "expected text that can be stored as UTF-8, found a lone surrogate escape"
        ) from None
    return value


def plain_json(value: Any, depth: int = 0) -> Any:
    """Free-form values (provenance, rewards, timing) must be plain, finite, shallow JSON, or the
    log could not store them faithfully (NaN turns into null, deep nesting cannot be serialised)."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"expected JSON nested at most {MAX_JSON_DEPTH} levels deep")
    if isinstance(value, dict):
        return {
            _text(str(k)) if isinstance(k, str) else k: plain_json(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [plain_json(item, depth + 1) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, found {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        raise ValueError(f"expected an integer within 64 bits, found {value}")
    if isinstance(value, str):
        _text(value)
    return value


Text = Annotated[str, AfterValidator(_text)]
Key = Annotated[str, Field(min_length=1, max_length=512), AfterValidator(_text)]
Digest = Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
JsonObject = Annotated[dict[str, Any], AfterValidator(plain_json)]
#: Strict: `true` is not a reward and "1" is not a number (lax pydantic would turn both into 1.0); 1
#: still is.
Number = Annotated[float, Strict()]
Seconds = Annotated[float, Strict(), Field(ge=0)]


class Model(BaseModel):
    # allow_inf_nan=False: a NaN reward or duration is refused, never stored as null.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Fact(Model):
    """Base of every fact. `type` is the stable name used in JSON lines and event topics."""

    subject_kind: ClassVar[str] = "run"
    #: Set on facts that assert a check rollout-lineage performed itself (a tar verified, an image
    #: loaded): only the code that performed it may record them; `ingest` and the Python API refuse
    #: them (see `LineageApp.record`).
    verified_here: ClassVar[str | None] = None
    #: Bumped when what a stored fact means changes; `upcast_v<n>_v<n+1>(fact_json)` reads an older
    #: one forward.
    class_version: ClassVar[int] = 1

    type: str  # each fact narrows it to its own Literal

    def subject_key(self) -> str:
        # Every fact but a snapshot's (SnapshotFact overrides this) declares `run`; the base
        # declares no fields.
        return str(self.run)  # type: ignore[attr-defined]


def time_zone_of(text: str) -> str:
    """`recorded` when an ISO-8601 time carries its own UTC offset, `unknown` when it is a naive
    wall-clock time."""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        raise ValueError(
            f"expected an ISO-8601 time such as '2026-01-01 12:00:25.000000', found {text!r}"
        ) from None
    return "unknown" if moment.tzinfo is None else "recorded"


def as_utc(text: str | None) -> datetime | None:
    if text is None:
        return None
    moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


__all__ = [
    "MAX_COUNT",
    "MAX_JSON_DEPTH",
    "Count",
    "Digest",
    "Fact",
    "JsonObject",
    "Key",
    "Model",
    "Text",
    "as_utc",
    "plain_json",
    "time_zone_of",
]

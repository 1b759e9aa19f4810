"""Typed access to fields of untrusted JSON, with errors that name the file, the field and what was
expected.

Importers never index a parsed document directly: `Fields(doc, file)["nodes"]` style access would
turn a missing key into a `KeyError` with no file name. A `Fields` wraps one JSON object plus where
it came from (`<file>: field nodes[2].reward`), and every accessor says what it expected when the
value is wrong. `build` turns a pydantic validation failure of a fact into the same kind of message.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal, TypeVar, overload

from pydantic import BaseModel, ValidationError

from ...domain.errors import InvalidInput
from ..rundir import NOTHING_APPENDED

_MISSING = object()
M = TypeVar("M", bound=BaseModel)


def invalid(where: str, expected: str, found: Any = _MISSING) -> InvalidInput:
    shown = "nothing" if found is _MISSING else _show(found)
    return InvalidInput(f"{where}: expected {expected}, found {shown}", hint=NOTHING_APPENDED)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


class Fields:
    """One JSON object and where it came from."""

    def __init__(self, data: Any, file: str, path: str = "") -> None:
        if not isinstance(data, dict):
            raise invalid(f"{file}" + (f": field {path}" if path else ""), "a JSON object", data)
        self.data: dict[str, Any] = data
        self.file = file
        self.path = path

    def where(self, key: str | None = None) -> str:
        path = ".".join(p for p in (self.path, key) if p)
        return f"{self.file}: field {path}" if path else self.file

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def require(self, key: str) -> Any:
        if key not in self.data:
            raise invalid(self.where(key), "this field (it is required)")
        return self.data[key]

    def string(self, key: str, *, required: bool = False, nullable: bool = True) -> str | None:
        value = self.require(key) if required else self.data.get(key)
        if value is None and nullable:
            return None
        if not isinstance(value, str) or not value:
            raise invalid(
                self.where(key), "a non-empty string" + (" or null" if nullable else ""), value
            )
        return value

    def text(self, key: str) -> str:
        value = self.string(key, required=True, nullable=False)
        assert value is not None
        return value

    def number(self, key: str, *, required: bool = False) -> float | None:
        value = self.require(key) if required else self.data.get(key)
        if value is None and not required:
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise invalid(
                self.where(key), "a finite number" + ("" if required else " or null"), value
            )
        return float(value)

    def integer(self, key: str) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise invalid(self.where(key), "an integer or null", value)
        return value

    def boolean(self, key: str) -> bool | None:
        value = self.data.get(key)
        if value is not None and not isinstance(value, bool):
            raise invalid(self.where(key), "true, false or null", value)
        return value

    @overload
    def obj(self, key: str, *, required: Literal[True]) -> Fields: ...
    @overload
    def obj(self, key: str, *, required: bool = False) -> Fields | None: ...
    def obj(self, key: str, *, required: bool = False) -> Fields | None:
        value = self.require(key) if required else self.data.get(key)
        if value is None and not required:
            return None
        return Fields(value, self.file, ".".join(p for p in (self.path, key) if p))

    def items(self, key: str, *, required: bool = False) -> list[Any]:
        value = self.require(key) if required else self.data.get(key)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise invalid(self.where(key), "a JSON array", value)
        return value

    def objects(self, key: str, *, required: bool = False) -> list[Fields]:
        base = ".".join(p for p in (self.path, key) if p)
        return [
            Fields(item, self.file, f"{base}[{i}]")
            for i, item in enumerate(self.items(key, required=required))
        ]

    def only(
        self, allowed: Iterable[str], why: str = "any other field would be lost on import"
    ) -> None:
        extra = sorted(set(self.data) - set(allowed))
        if extra:
            raise invalid(
                self.where(extra[0]), f"only the fields {sorted(allowed)} ({why})", extra[0]
            )

    def schema_version(self, supported: int = 1) -> None:
        value = self.require("schema_version")
        if value != supported or isinstance(value, bool):
            raise InvalidInput(
                f"{self.where('schema_version')}: expected {supported}, found {_show(value)}",
                hint="this importer reads schema_version 1 only; " + NOTHING_APPENDED,
            )


def build(cls: type[M], where: str, **fields: Any) -> M:
    """Construct a fact (or part of one), reporting a validation failure against the file it came
    from."""
    try:
        return cls(**fields)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(value)'}: {error['msg']}"
            for error in exc.errors()[:3]
        )
        raise InvalidInput(
            f"{where}: cannot be recorded as {cls.__name__} ({problems})", hint=NOTHING_APPENDED
        ) from None

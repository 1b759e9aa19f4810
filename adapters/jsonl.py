"""JSON lines in, facts out: the `lineage ingest` format and its published JSON Schema.

One line is one fact: `{"type": "stage.marked", "run": ..., ..., "occurred_at":
"2026-11-02T10:15:00Z"}`. `occurred_at` is optional (default: when it is recorded). The whole input
is validated before anything is appended, so one bad line rejects the file with its line number,
field and reason. `iter_entries` validates line by line without keeping anything, so a file of any
size can be checked in constant memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Annotated, Any, BinaryIO, Union

from pydantic import Field, TypeAdapter, ValidationError

from ..domain import facts as f
from ..domain.application import Entry, LineageApp, expand, refuse_implausible_times
from ..domain.errors import InvalidFact, InvalidInput, InvariantViolated
from . import progress, strict_json

MAX_LINE_BYTES = 1 << 20
RUN_AGAIN = "run the same command again: facts already recorded append nothing"
# One fact of any type, told apart by `type`. The union is built from FACT_TYPES at run time, which
# a static checker cannot follow, so it is held as Any.
AnyFact: Any = Annotated[Union[tuple(f.FACT_TYPES)], Field(discriminator="type")]  # noqa: UP007
_FACT_ADAPTER: TypeAdapter[Any] = TypeAdapter(AnyFact)
_TIME_ADAPTER: TypeAdapter[datetime] = TypeAdapter(datetime)


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        location = (
            ".".join(
                str(p)
                for p in error["loc"]
                if not (isinstance(p, str) and "." in p and p in f.FACT_BY_TYPE)
            )
            or "(line)"
        )
        parts.append(f"field {location}: {error['msg']}")
    return "; ".join(parts)


def parse_fact(obj: Any) -> Entry:
    if not isinstance(obj, dict):
        raise InvalidFact(f"expected a JSON object with a 'type', found {type(obj).__name__}")
    # a list or dict is unhashable
    if not isinstance(obj.get("type"), str) or obj["type"] not in f.FACT_BY_TYPE:
        raise InvalidFact(
            f"field type: expected one of {sorted(f.FACT_BY_TYPE)}, found {obj.get('type')!r}",
            hint="`lineage schema` lists every type and its fields",
        )
    body = dict(obj)
    occurred = body.pop("occurred_at", None)
    try:
        fact = _FACT_ADAPTER.validate_python(body)
        occurred_at = _TIME_ADAPTER.validate_python(occurred) if occurred is not None else None
    except ValidationError as exc:
        raise InvalidFact(describe_validation_error(exc)) from None
    if occurred_at is not None and occurred_at.tzinfo is None:
        raise InvalidFact(
            f"field occurred_at: expected a time with a UTC offset, found {occurred!r}"
        )
    entry = Entry(fact, occurred_at)
    # here too, so a chunked ingest refuses it before its first chunk
    refuse_implausible_times([entry])
    return entry


def bounded_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines of a binary stream, never reading more than one byte past the cap into memory for any
    line."""
    return iter(lambda: stream.readline(MAX_LINE_BYTES + 1), b"")


def iter_entries(lines: Iterable[bytes], source: str) -> Iterator[Entry]:
    """The facts of JSON lines, one at a time; raises at the first bad line, naming it."""
    for number, raw in enumerate(lines, start=1):
        if len(raw) > MAX_LINE_BYTES:
            raise InvalidInput(
                f"{source}, line {number}: expected at most "
                f"{MAX_LINE_BYTES} bytes per line, found more",
                hint="nothing was appended; split the fact or drop bulky free-form fields",
            )
        # editors may add a BOM
        text = raw.strip() if number > 1 else raw.removeprefix(b"\xef\xbb\xbf").strip()
        if not text:
            continue
        try:
            obj = strict_json.loads(text)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise InvalidInput(
                f"{source}, line {number}: expected one JSON object, found invalid JSON ({exc})",
                hint="nothing was appended; fix the line and ingest the file again",
            ) from None
        try:
            yield parse_fact(obj)
        except InvalidFact as exc:
            raise InvalidFact(
                f"{source}, line {number}: {exc.message}",
                hint="nothing was appended; fix the line and ingest the file again",
            ) from None


def parse_lines(lines: Iterable[bytes], source: str) -> list[Entry]:
    return list(iter_entries(lines, source))


@dataclass(frozen=True)
class ChunkedIngest:
    facts: int  # the file's lines, each a fact
    appended: int
    chunks: int
    position: int
    implied: int = 0  # with the facts those lines imply (`expand`): what `appended` counts from


def with_implied(entries: Iterable[Entry]) -> int:
    """How many facts `entries` are once expanded (`expand`: a stage mark's snapshot captures, a
    registration's run location), which is what a record decides and counts appended."""
    return sum(len(expand(entry)) for entry in entries)


def ingest_in_chunks(app: LineageApp, path: Path, chunk_size: int) -> ChunkedIngest:
    """Validate the whole file, then record it `chunk_size` facts per transaction, so memory does
    not follow the file's length. Malformed input still appends nothing (the first pass reads every
    line); a fact the log refuses stops the ingest after the chunks before it, and running it again
    appends only what is missing. Only the lines the first pass checked are recorded, so a file that
    grows meanwhile is cut where it was."""
    checked = 0

    def counted(stream: BinaryIO) -> Iterator[bytes]:
        nonlocal checked
        for raw in bounded_lines(stream):
            checked += 1
            yield raw

    with path.open("rb") as stream:
        total = sum(1 for _ in iter_entries(counted(stream), str(path)))
    facts = appended = chunks = implied = 0
    position = app.position()
    with path.open("rb") as stream:
        entries = iter_entries(islice(bounded_lines(stream), checked), str(path))
        while True:
            try:
                chunk = list(islice(entries, chunk_size))
            except (
                InvalidFact,
                InvalidInput,
            ) as exc:  # the file was rewritten between the two passes
                raise type(exc)(
                    f"{path} changed while it was ingested: {exc.message}; the {facts} "
                    f"facts before it are recorded ({appended} events appended)",
                    hint=f"let its writer finish, then {RUN_AGAIN}",
                ) from exc
            if not chunk:
                break
            try:
                recorded = app.record(chunk)
            except InvariantViolated as exc:
                refused = type(exc)(
                    f"{path}: facts {facts + 1} to {facts + len(chunk)} of {total} "
                    f"(chunk {chunks + 1}) were refused: {exc.message}; the "
                    f"{facts} facts before them are recorded ({appended} events "
                    "appended)",
                    hint=f"fix the file and {RUN_AGAIN}",
                )
                raise refused from exc
            facts, appended, chunks = facts + len(chunk), appended + recorded.appended, chunks + 1
            implied += with_implied(chunk)
            position = recorded.position
            progress.advance("ingesting facts", facts, total)
    if facts != total:
        raise InvalidInput(
            f"{path} changed while it was ingested: {total} facts validated, {facts} found "
            f"when recording; those {facts} are recorded ({appended} events appended)",
            hint=f"let its writer finish, then {RUN_AGAIN}",
        )
    return ChunkedIngest(facts, appended, chunks, position, implied)


def ingest_schema() -> dict[str, Any]:
    """JSON Schema of one ingest line: a fact, plus an optional `occurred_at`."""
    schema = _FACT_ADAPTER.json_schema()
    for definition in schema.get("$defs", {}).values():
        if (
            "type" in definition.get("properties", {})
            and definition["properties"]["type"].get("const") in f.FACT_BY_TYPE
        ):
            definition["properties"]["occurred_at"] = {
                "type": "string",
                "format": "date-time",
                "description": "When it happened (default: when recorded).",
            }
    schema["title"] = "rollout-lineage ingest line"
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema

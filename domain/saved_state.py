"""Aggregate snapshots: a run's (or a snapshot's) decided state as JSON, so a new process need not
replay its stream.

Deciding a fact needs the aggregate as the log holds it: without a saved state, recording into a run
of 10,000 events would read 10,000 events. A saved state is a cache, never evidence: used only when
this code would build the same state (`usable`), else the stream is replayed.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from datetime import datetime
from functools import cache
from types import CodeType
from typing import Any, NamedTuple, Protocol
from uuid import UUID

from . import facts as f
from .custody import Custody
from .fork import FORK_HANDLERS, Fork
from .run import RUN_HANDLERS, Node, Run
from .snapshot import SNAPSHOT_HANDLERS, Snapshot

FORMAT = 1
#: Events between saved states: a new process reads at most this many events of a stream. Each save
#: encodes the whole state (20 ms for a 10,000-node run), so saving every 100 events made a
#: long-lived writer a quarter slower in such a run; at 300 that is lost in the noise, and replaying
#: 300 events costs about what decoding does.
SAVE_EVERY = 300
TOPIC_PREFIX = "lineage-state:"
_AGGREGATES: dict[str, type[Run] | type[Snapshot]] = {"Run": Run, "Snapshot": Snapshot}
_PARTS: dict[str, type[Any]] = {"Node": Node, "Fork": Fork, "Custody": Custody}


_FIELDS = {name: tuple(field.name for field in fields(part)) for name, part in _PARTS.items()}
_PLAIN = {str, type(None), int, float, bool}


class Saved(NamedTuple):
    version: int
    topic: str
    state: bytes


class SavedStates(Protocol):
    """Where saved states are kept: one per aggregate, the newest (`adapters/store/saved_states.py`
    for
    SQLite and PostgreSQL). Errors are eventsourcing's `PersistenceError`s.

    Every `SAVE_EVERY` events the application keeps the state here, outside the log (never
    projected, never chained), and a new process reads the newest one and only the events after
    it."""

    def newest(self, originator_id: UUID) -> Saved | None: ...

    def keep(self, originator_id: UUID, saved: Saved) -> None:
        """Replace the aggregate's saved state with this one (unless a newer one of the same topic
        is kept)."""

    def all(self) -> Iterator[tuple[UUID, Saved]]:
        """Every kept state (for `lineage verify --saved-states`:
        `LineageApp.saved_states_differing` replays each one and says where a stored state is not
        what the log gives)."""


class InMemorySavedStates:
    """For the in-memory store (tests), which forgets everything with the process anyway."""

    def __init__(self) -> None:
        self._states: dict[UUID, Saved] = {}

    def newest(self, originator_id: UUID) -> Saved | None:
        return self._states.get(originator_id)

    def keep(self, originator_id: UUID, saved: Saved) -> None:
        kept = self._states.get(originator_id)
        if kept is None or kept.topic != saved.topic or kept.version < saved.version:
            self._states[originator_id] = saved

    def all(self) -> Iterator[tuple[UUID, Saved]]:
        yield from list(self._states.items())


class UnusableState(ValueError):
    """A stored state this code cannot use (another format, or not what it claims to be): replay
    instead."""


def _code_digest(code: CodeType, into: Any) -> None:
    into.update(code.co_code)
    into.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, CodeType):
            _code_digest(const, into)
        # `x in {"a", "b"}`: its order follows the process's hash seed
        elif isinstance(const, frozenset):
            into.update(repr(sorted(map(repr, const))).encode())
        else:
            into.update(repr(const).encode())


@cache
def fingerprint() -> str:
    """Changes whenever the state a stream evolves into could change: the format, the Python version
    (bytecode), each fact's type, version and fields, and the code of every `__init__` and
    evolver."""
    digest = hashlib.sha256(f"{FORMAT}|{sys.version_info[:2]}".encode())
    for cls in f.FACT_TYPES:
        digest.update(f"{f.fact_type(cls)}:{cls.class_version}:{sorted(cls.model_fields)}".encode())
    functions = [
        *RUN_HANDLERS.evolvers.values(),
        *FORK_HANDLERS.evolvers.values(),
        *SNAPSHOT_HANDLERS.evolvers.values(),
        Run.__init__,
        Run.when,
        Fork.when,
        Custody.when,
        Snapshot.__init__,
        Snapshot.when,
    ]
    for function in functions:
        _code_digest(function.__code__, digest)
    for part in _PARTS.values():
        digest.update(repr([(fld.name, str(fld.type)) for fld in fields(part)]).encode())
    return digest.hexdigest()[:32]


def topic() -> str:
    return TOPIC_PREFIX + fingerprint()


# --- encoding -------------------------------------------------------------------------------------


def _encode(value: Any) -> Any:
    """Plain JSON values stay as they are; a JSON array is always a part (`["Node", id, parent,
    ...]`, the most common value, kept compact); anything else is an object tagged with what it
    holds."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, f.Fact):
        return {"fact": value.model_dump(mode="json")}
    if isinstance(value, list):
        return {"list": [_encode(item) for item in value]}
    if isinstance(value, dict):
        if all(type(key) is str for key in value):  # node ids, stages, accounting bases
            return {"map": {key: _encode(item) for key, item in value.items()}}
        return {"dict": [[key, _encode(item)] for key, item in value.items()]}  # child indices
    name = type(value).__name__
    if is_dataclass(value) and _PARTS.get(name) is type(value):
        return [name, *[_encode(getattr(value, field)) for field in _FIELDS[name]]]
    raise TypeError(f"cannot save {type(value).__name__} in an aggregate's state")


def encode(aggregate: Run | Snapshot) -> bytes:
    """The aggregate's state and its place in its stream, as compact JSON."""
    state = {name: _encode(value) for name, value in vars(aggregate).items() if name[0] != "_"}
    document = {
        "aggregate": type(aggregate).__name__,
        "id": aggregate.id.hex,
        "version": aggregate.version,
        "created_on": aggregate.created_on.isoformat(),
        "modified_on": aggregate.modified_on.isoformat(),
        "state": state,
    }
    return json.dumps(document, separators=(",", ":"), allow_nan=False).encode()


# --- decoding -------------------------------------------------------------------------------------


def _decode(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list):
        part = _PARTS.get(value[0]) if value and isinstance(value[0], str) else None
        if part is None:
            raise UnusableState(
                f"expected a saved part {sorted(_PARTS)}, found {str(value)[:80]!r}"
            )
        # A node's fields are plain strings or null: no need to look inside them.
        return part(*[item if type(item) in _PLAIN else _decode(item) for item in value[1:]])
    if not isinstance(value, dict) or len(value) != 1:
        raise UnusableState(f"expected a tagged value, found {str(value)[:80]!r}")
    if "map" in value:
        return {key: _decode(item) for key, item in value["map"].items()}
    if "fact" in value:
        data = value["fact"]
        cls = f.FACT_BY_TYPE.get(str(data.get("type"))) if isinstance(data, dict) else None
        if cls is None:
            raise UnusableState(f"expected a known fact, found {str(data)[:80]!r}")
        return cls.model_validate(data)
    if "list" in value:
        return [_decode(item) for item in value["list"]]
    if "dict" in value:
        return {key: _decode(item) for key, item in value["dict"]}
    raise UnusableState(f"expected a tagged value, found {str(value)[:80]!r}")


def decode(stored: bytes, originator_id: UUID, version: int) -> Run | Snapshot:
    """The aggregate a saved state holds; raises `UnusableState` for anything but what `encode`
    wrote for this stream at this version."""
    try:
        document = json.loads(stored)
        cls = _AGGREGATES[document["aggregate"]]
        if (document["id"], document["version"]) != (originator_id.hex, version):
            raise UnusableState(
                f"expected the state of {originator_id.hex}@{version}, "
                f"found {document['id']}@{document['version']}"
            )
        aggregate = cls.blank()  # every attribute, so a state saved without one is refused below
        aggregate.__base_init__(
            originator_id, version, datetime.fromisoformat(document["created_on"])
        )
        expected = {name for name in vars(aggregate) if name[0] != "_"}
        if set(document["state"]) != expected:
            raise UnusableState(f"expected attributes {sorted(expected)}, found others")
        for name, value in document["state"].items():
            setattr(aggregate, name, _decode(value))
        aggregate.modified_on = datetime.fromisoformat(document["modified_on"])
        return aggregate
    except UnusableState:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UnusableState(f"not a saved aggregate state: {exc}") from None


def usable(found: Saved | None, originator_id: UUID) -> Run | Snapshot | None:
    """The aggregate in a kept state, or None when there is none, it was written by code that
    evolves state differently (its topic holds another `fingerprint`), or it is not what `encode`
    wrote for this stream: anything that does not decode into the whitelisted types (`_PARTS`,
    facts, plain JSON) is ignored, and the stream is replayed."""
    if found is None or found.topic != topic():
        return None
    try:
        return decode(found.state, originator_id, found.version)
    except UnusableState:
        return None

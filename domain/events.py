"""Events: a fact inside an envelope, stored in the eventsourcing log under a stable topic.

The envelope says when the fact happened (`occurred_at`, which an importer takes from the artifacts
and may be long before it was recorded), when it was recorded (`timestamp`, set by the library), who
recorded it (`actor`) and with which tool version. One event class per fact type is generated here
so that every topic is `lineage:<fact type>`, a string that never depends on where a class lives.
Any event may start its aggregate's stream (see `LineageEvent.mutate`); whether it is allowed to is
the aggregate's decision.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Any, ClassVar
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import CanMutateAggregate, OriginatorVersionError
from eventsourcing.persistence import Mapper, StoredEvent
from eventsourcing.utils import register_topic
from pydantic import BaseModel, ConfigDict

from . import facts as f
from .aggregates import AGGREGATE_FOR_SUBJECT
from .vocabulary import TOPIC_PREFIX

#: Never change: aggregate ids are uuid5 of natural keys under this namespace.
LINEAGE_NAMESPACE = uuid5(NAMESPACE_URL, "urn:rollout-lineage")


@lru_cache(maxsize=65536)
def aggregate_id(subject_kind: str, key: str) -> UUID:
    return uuid5(LINEAGE_NAMESPACE, f"{subject_kind}/{key}")


class LineageEvent(BaseModel, CanMutateAggregate[UUID]):
    model_config = ConfigDict(frozen=True, extra="forbid")
    TOPIC: ClassVar[str]
    #: eventsourcing's upcasting convention: a stored event without `class_version` is version 1,
    #: and `upcast_v<n>_v<n+1>(state)` brings a stored state one version forward before it is
    #: validated.
    class_version: ClassVar[int] = 1

    originator_id: UUID
    originator_version: int
    timestamp: datetime
    occurred_at: datetime
    actor: str
    tool_version: str
    fact: f.Fact

    @classmethod
    def envelope(cls, **values: Any) -> LineageEvent:
        """Build an event from already-validated parts (the fact) and our own (the envelope),
        without revalidating.

        Recording is the hot path (tens of thousands of events a second); reading back validates
        fully. This is what pydantic's `model_construct` does, minus its per-call field
        introspection (a third of the cost of recording an event in pydantic 2.13).
        """
        event = cls.__new__(cls)
        object.__setattr__(event, "__dict__", values)
        object.__setattr__(event, "__pydantic_fields_set__", _ALL_FIELDS)
        object.__setattr__(event, "__pydantic_extra__", None)
        object.__setattr__(event, "__pydantic_private__", None)
        return event

    def apply(self, aggregate: Any) -> None:
        aggregate.when(self.fact)

    def mutate(self, aggregate: Any) -> Any:
        """Evolve (or, for a stream's first event, build) the aggregate; the same checks as the
        library's."""
        if aggregate is None:
            cls = AGGREGATE_FOR_SUBJECT[self.fact.subject_kind]
            aggregate = cls.__new__(cls)
            aggregate.__base_init__(self.originator_id, self.originator_version - 1, self.timestamp)
            aggregate.__init__()
        elif self.originator_version != aggregate.version + 1 or (
            self.originator_id is not aggregate.id and self.originator_id != aggregate.id
        ):
            raise OriginatorVersionError(
                f"event {self.originator_id}@{self.originator_version} does not follow "
                f"aggregate {aggregate.id}@{aggregate.version}"
            )
        aggregate.when(self.fact)
        aggregate.version = self.originator_version
        aggregate.modified_on = self.timestamp
        return aggregate


_ALL_FIELDS = set(LineageEvent.model_fields)


def _fact_upcast(upcast: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """A fact's upcaster (over the fact's own JSON object) as the event's (over the whole stored
    state)."""

    def upcast_state(state: dict[str, Any]) -> None:
        upcast(state["fact"])

    return upcast_state


def _event_class(fact_cls: type[f.Fact]) -> type[LineageEvent]:
    name = fact_cls.__name__
    topic = TOPIC_PREFIX + f.fact_type(fact_cls)
    namespace: dict[str, Any] = {
        "__annotations__": {"fact": fact_cls},
        "__module__": __name__,
        "__qualname__": name,
        "TOPIC": topic,
        "class_version": fact_cls.class_version,
    }
    for version in range(1, fact_cls.class_version):
        step = f"upcast_v{version}_v{version + 1}"
        namespace[step] = staticmethod(_fact_upcast(getattr(fact_cls, step)))
    cls = type(name, (LineageEvent,), namespace)
    register_topic(topic, cls)
    return cls


EVENT_FOR_FACT: dict[type[f.Fact], type[LineageEvent]] = {
    cls: _event_class(cls) for cls in f.FACT_TYPES
}
EVENT_BY_TOPIC: dict[str, type[LineageEvent]] = {cls.TOPIC: cls for cls in EVENT_FOR_FACT.values()}


@lru_cache(maxsize=4096)
def _envelope_prefix(
    timestamp: datetime,
    occurred_at: datetime,
    actor: str,
    tool_version: str,
    class_version: int = 1,
) -> bytes:
    def moment(value: datetime) -> str:
        return json.dumps(value.isoformat().replace("+00:00", "Z"))

    # version 1 stays as it always was
    version = f'"class_version":{class_version},' if class_version > 1 else ""
    return (
        f'{{"timestamp":{moment(timestamp)},"occurred_at":{moment(occurred_at)},"actor":{json.dumps(actor)},'
        f'"tool_version":{json.dumps(tool_version)},{version}"fact":'
    ).encode()


def encode_state(event: LineageEvent) -> bytes:
    """Compact JSON in a fixed field order: deterministic for the hash chain, and plain JSON for
    DuckDB.

    The envelope is the same for every event of a batch (one recording time, one actor), so its JSON
    is built once and only the fact is serialised per event.
    """
    fact = event.fact
    return (
        _envelope_prefix(
            event.timestamp,
            event.occurred_at,
            event.actor,
            event.tool_version,
            type(event).class_version,
        )
        + fact.__pydantic_serializer__.to_json(fact)
        + b"}"
    )


class FactMapper(Mapper[UUID]):
    """Stores events as plain canonical JSON (no transcoder type tags) so DuckDB can read them as
    they are."""

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=type(domain_event).TOPIC,
            state=encode_state(domain_event),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> LineageEvent:
        cls = EVENT_BY_TOPIC[stored_event.topic]
        state = json.loads(stored_event.state)
        version = state.pop("class_version", 1)
        # an event stored by an earlier version, read with today's meaning
        while version < cls.class_version:
            getattr(cls, f"upcast_v{version}_v{version + 1}")(state)
            version += 1
        state["originator_id"] = stored_event.originator_id
        state["originator_version"] = stored_event.originator_version
        return cls.model_validate(state)

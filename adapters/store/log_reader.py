"""Reading the raw log in position order, page by page, without building domain objects.

Used by `lineage log`, the projection runner and the benchmarks: the stored state is canonical JSON
(see `domain/events.py`), so a page decodes with `json.loads` alone, several times faster than the
mapper.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import ApplicationRecorder, Notification

from ...domain.errors import IntegrityFailure
from ...domain.vocabulary import TOPIC_PREFIX

PAGE = 5000


@dataclass(frozen=True)
class LoggedEvent:
    position: int
    originator_id: str
    originator_version: int
    type: str
    state: dict[str, Any]

    @property
    def fact(self) -> dict[str, Any]:
        return self.state["fact"]

    @property
    def subject(self) -> str:
        fact = self.fact
        # A stored fact passed validation: a snapshot fact names its ref, every other one its run.
        subject: str = fact["ref"] if self.type.startswith("snapshot.") else fact["run"]
        return subject


def raw_pages(
    recorder: ApplicationRecorder, *, after: int = 0, stop: int | None = None, page: int = PAGE
) -> Iterator[Sequence[Notification]]:
    """Notifications in pages of `page`, from after `after` up to and including `stop`."""
    while True:
        notifications = recorder.select_notifications(
            start=after, limit=page, stop=stop, inclusive_of_start=False
        )
        if not notifications:
            return
        yield notifications
        after = notifications[-1].id
        if len(notifications) < page:
            return


def iter_events(
    recorder: ApplicationRecorder, *, after: int = 0, stop: int | None = None
) -> Iterator[LoggedEvent]:
    """The events as stored (`lineage log` prints them so; `lineage verify` checks them against the
    chain)."""
    for notifications in raw_pages(recorder, after=after, stop=stop):
        for n in notifications:
            try:
                state = json.loads(n.state)
            except (ValueError, RecursionError):  # invalid UTF-8 or JSON: nothing this tool wrote
                raise IntegrityFailure(
                    f"the stored event at position {n.id} is not "
                    f"the JSON rollout-lineage writes; it was edited",
                    hint="run `lineage verify` for the whole "
                    "report, and restore the store from a backup",
                ) from None
            yield LoggedEvent(
                n.id,
                str(n.originator_id),
                n.originator_version,
                n.topic.removeprefix(TOPIC_PREFIX),
                state,
            )

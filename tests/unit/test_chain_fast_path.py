"""The catch-up's fast chain check (`integrity.aligned_head`) accepts exactly the windows the full
walk accepts, with the same head, and hands every other window to the walk, which names the
break."""

from __future__ import annotations

import pytest

from rollout_lineage.adapters.chained_log import merge_chain
from rollout_lineage.domain.errors import IntegrityFailure
from rollout_lineage.domain.integrity import GENESIS, Head, aligned_head, check_window, link


def window(n: int, start: Head | None = None) -> tuple[list[tuple], list[tuple[int, int, str]]]:
    previous_position, previous_hash = (start.position, start.chain_hash) if start else (0, GENESIS)
    events, links = [], []
    for position in range(previous_position + 1, previous_position + n + 1):
        event = (
            position,
            f"{position:032x}",
            1,
            "lineage:run.registered",
            b'{"n":%d}' % position,
            None,
        )
        chain_hash = link(previous_hash, position, event[1], 1, event[3], event[4])
        events.append(event)
        links.append((position, previous_position, chain_hash))
        previous_position, previous_hash = position, chain_hash
    return events, links


def walk(start: Head | None, events: list[tuple], links: list[tuple]) -> Head | None:
    return check_window(start, merge_chain(iter([e[:5] for e in events]), iter(links)))


def test_an_intact_window_gets_the_walks_head_from_the_start_and_from_a_head() -> None:
    events, links = window(50)
    assert aligned_head(None, events, links) == walk(None, events, links) == Head(50, links[-1][2])
    start = Head(50, links[-1][2])
    more, more_links = window(20, start)
    assert aligned_head(start, more, more_links) == walk(start, more, more_links)


@pytest.mark.parametrize(
    "damage",
    [
        lambda e, k: e.__setitem__(3, (*e[3][:4], b'{"n":"edited"}', None)),  # an edited state
        lambda e, k: e.pop(7),  # a deleted event (its link remains)
        lambda e, k: k.pop(7),  # an event without a link
        lambda e, k: e.__setitem__(5, (*e[5][:4], None, None)),  # state not stored as bytes
        lambda e, k: k.__setitem__(9, (k[9][0], 3, k[9][2])),  # a link pointing elsewhere
    ],
    ids=["edited", "event-deleted", "link-missing", "not-bytes", "relinked"],
)
def test_a_broken_window_goes_to_the_walk(damage) -> None:  # type: ignore[no-untyped-def]
    events, links = window(20)
    damage(events, links)
    assert aligned_head(None, events, links) is None
    with pytest.raises(IntegrityFailure, match="hash chain is broken at position"):
        walk(None, events, links)


def test_a_window_continued_from_the_wrong_head_goes_to_the_walk() -> None:
    _, links = window(10)
    more, more_links = window(5, Head(10, links[-1][2]))
    assert aligned_head(Head(10, GENESIS), more, more_links) is None

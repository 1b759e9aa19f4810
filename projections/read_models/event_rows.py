"""The log itself as rows: one per event, with its times, actor, type, subject and the fact as JSON.

Filled from each page of the event store before any other projection runs; the other projections are
derived from this table with SQL, which is also the raw `events` view users query.
"""

from __future__ import annotations

from .base import Projection, parsed

PAGE_TABLE = "lineage_page_in"

ENVELOPE = {
    "timestamp": "VARCHAR",
    "occurred_at": "VARCHAR",
    "actor": "VARCHAR",
    "tool_version": "VARCHAR",
}

# The envelope is parsed from the state's prefix and the fact taken as the text after it: every
# state is written as {"timestamp":..,"occurred_at":..,"actor":..,"tool_version":..,"fact":{..}}
# (`domain/events.encode_state`; the hash chain vouches for it), and parsing a run's 200,000-test
# fact twice in one statement (envelope and extraction) was what exhausted the memory cap. No ORDER
# BY: the page is staged in log order and DuckDB keeps insertion order (`preserve_insertion_order`,
# on by default), so sorting it again only cost time.
STAGE_PAGE = f"""
INSERT INTO events
SELECT position, originator_id, originator_version, replace(topic, 'lineage:', ''),
       CASE WHEN starts_with(topic, 'lineage:snapshot.') THEN json_extract_string(fact, '$.ref')
            ELSE json_extract_string(fact, '$.run') END,
       j.timestamp::TIMESTAMPTZ, j.occurred_at::TIMESTAMPTZ, j.actor, recorded_by, j.tool_version, fact
FROM (SELECT *, {parsed(ENVELOPE, "substr(state, 1, cut - 1) || '}'")},
             substr(state, cut + 8, length(state) - cut - 8)::JSON AS fact
      FROM (SELECT *, strpos(state, ',"fact":') AS cut FROM temp.main.{PAGE_TABLE}))
"""  # noqa: E501

PROJECTION = Projection(
    name="events",
    # 3: recorded_by is the role hashed into each link, so a file that copied the unchained column
    # is rebuilt.
    version=3,
    tables={
        "events": "position BIGINT, originator_id VARCHAR, originator_version INTEGER, "
        "type VARCHAR, subject VARCHAR, recorded_at TIMESTAMPTZ, occurred_at "
        "TIMESTAMPTZ, actor VARCHAR, recorded_by VARCHAR, tool_version VARCHAR, fact JSON",
    },
    docs={
        "events": "one row per event in log order: position, when recorded, when it "
        "happened, type, subject (run key or snapshot ref), the fact as JSON, who the "
        "writer said it was (actor, self-asserted) and who the store authenticated "
        "(recorded_by: the PostgreSQL role, hashed into the event's chain link; NULL "
        "on SQLite and for events recorded before roles were chained)"
    },
)

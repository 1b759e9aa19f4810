"""The log itself as rows: one per event, with its times, actor, type, subject and the fact as JSON.

Filled from each page of the event store before any other projection runs; the other projections are
derived from this table with SQL, which is also the raw `events` view users query.
"""

from __future__ import annotations

from .base import Projection

PAGE_TABLE = "lineage_page_in"

STAGE_PAGE = f"""
INSERT INTO events
SELECT position, originator_id, originator_version, replace(topic, 'lineage:', ''),
       CASE WHEN starts_with(topic, 'lineage:snapshot.') THEN s->'fact'->>'ref' ELSE s->'fact'->>'run' END,
       (s->>'timestamp')::TIMESTAMPTZ, (s->>'occurred_at')::TIMESTAMPTZ, s->>'actor', s->>'tool_version', s->'fact'
FROM (SELECT *, state::JSON AS s FROM {PAGE_TABLE})
ORDER BY position
"""

PROJECTION = Projection(
    name="events",
    version=1,
    tables={
        "events": "position BIGINT PRIMARY KEY, originator_id VARCHAR, originator_version INTEGER, type VARCHAR, "
                  "subject VARCHAR, recorded_at TIMESTAMPTZ, occurred_at TIMESTAMPTZ, actor VARCHAR, "
                  "tool_version VARCHAR, fact JSON",
    },
    docs={"events": "one row per event in log order: position, when recorded, when it happened, who, type, subject "
                    "(run key or snapshot ref) and the fact as JSON"},
)

"""Custody of fork artifacts and replay cut points (with their divergences)."""

from __future__ import annotations

import json

from .base import Projection, facts_of

CUSTODY = {
    "run": "VARCHAR",
    "fork": "VARCHAR",
    "index": "INTEGER",
    "location": "VARCHAR",
    "preserved_location": "VARCHAR",
    "phase": "VARCHAR",
    "error": "VARCHAR",
    "entries": "JSON",
}
CUSTODY_TYPES = "'custody.held', 'custody.handed_off', 'custody.released', 'custody.failed'"
CUT_POINT = dict.fromkeys(
    (
        "run",
        "source_run",
        "accounting",
        "recorded_request_digest",
        "served_request_digest",
        "request_digest_basis",
        "workspace_digest_reason",
        "stage",
        "cut_point_digest",
    ),
    "VARCHAR",
) | {
    "configured_k": "INTEGER",
    "served_k": "INTEGER",
    "divergences": "JSON",
    "workspace_digest": "JSON",
}
DIVERGENCE = {
    "exchange_index": "INTEGER",
    "served_request_digest": "VARCHAR",
    "recorded_request_digest": "VARCHAR",
    "n_messages_served": "INTEGER",
    "n_messages_recorded": "INTEGER",
}

PROJECTION = Projection(
    name="custody_and_cut_points",
    version=3,
    tables={
        "custody_events": "position BIGINT, run VARCHAR, fork VARCHAR, kind VARCHAR, idx INTEGER, location VARCHAR, "
        "phase VARCHAR, error VARCHAR, entries JSON, occurred_at TIMESTAMPTZ, actor VARCHAR",
        "cut_point_facts": "position BIGINT, run VARCHAR, source_run VARCHAR, accounting VARCHAR, configured_k INTEGER, "
        "served_k INTEGER, recorded_request_digest VARCHAR, served_request_digest VARCHAR, "
        "request_digest_basis VARCHAR, n_divergences INTEGER, divergences JSON, workspace_digest JSON, "
        "workspace_digest_reason VARCHAR, stage VARCHAR, occurred_at TIMESTAMPTZ, cut_point_digest VARCHAR",
        "divergences": "position BIGINT, run VARCHAR, exchange_index INTEGER, served_request_digest VARCHAR, "
        "recorded_request_digest VARCHAR, n_messages_served INTEGER, n_messages_recorded INTEGER",
    },
    apply=(
        f"""INSERT INTO custody_events SELECT position, j.run, j.fork, replace(type, 'custody.', ''), j."index",
            coalesce(j.location, j.preserved_location), j.phase, j.error, j.entries, occurred_at, actor
            FROM {facts_of(CUSTODY_TYPES, CUSTODY)}""",
        f"""INSERT INTO cut_point_facts SELECT position, j.run, j.source_run, j.accounting, j.configured_k, j.served_k,
            j.recorded_request_digest, j.served_request_digest, j.request_digest_basis, json_array_length(j.divergences),
            j.divergences, j.workspace_digest, j.workspace_digest_reason, j.stage, occurred_at, j.cut_point_digest
            FROM {facts_of("'cut_point.served'", CUT_POINT)}""",
        f"""INSERT INTO divergences SELECT position, run, d.exchange_index, d.served_request_digest, d.recorded_request_digest,
            d.n_messages_served, d.n_messages_recorded
            FROM (SELECT position, j.run AS run, unnest(from_json(j.divergences, '[{json.dumps(DIVERGENCE)}]')) AS d
                  FROM {facts_of("'cut_point.served'", CUT_POINT)})""",
    ),
    views={
        # One per run: the served-basis block once benchflow reconciled it, else the configured-basis one.
        "cut_points": """
            SELECT * EXCLUDE (pick) FROM (
                SELECT *, row_number() OVER (PARTITION BY run ORDER BY accounting = 'served' DESC, position DESC) AS pick
                FROM cut_point_facts) WHERE pick = 1""",
        # `released`: a release on record, or a closed fork with no hold left and no failed release. benchflow
        # removes `branches/<node>/parent/` only once every held entry is back (`MountedArtifacts.release`), so
        # an importer finds nothing to record a release from: the hold's absence after the fork is the release.
        "custody": """
            SELECT run, fork,
                   arg_min(location, position) FILTER (WHERE kind = 'held') AS hold_location,
                   max(json_array_length(entries)) FILTER (WHERE kind = 'held') AS held_entries,
                   count(*) FILTER (WHERE kind = 'handed_off') AS handed_off,
                   bool_or(kind = 'released') OR (NOT bool_or(kind = 'held')
                       AND NOT coalesce(bool_or(kind = 'failed' AND phase = 'release'), false)
                       AND (run, fork) IN (SELECT run, fork FROM fork_closures)) AS released,
                   count(*) FILTER (WHERE kind = 'failed') AS failures,
                   arg_max(phase, position) FILTER (WHERE kind = 'failed') AS failed_phase,
                   arg_max(location, position) FILTER (WHERE kind = 'failed') AS preserved_location,
                   arg_max(error, position) FILTER (WHERE kind = 'failed') AS failure_error,
                   (NOT bool_or(kind = 'held') OR bool_or(kind = 'released') OR bool_or(kind = 'failed')) AS conserved
            FROM custody_events GROUP BY run, fork""",
    },
    docs={
        "custody": "one row per fork with custody facts: hold location and entry count, hand-offs, released (a "
        "release on record, or a closed fork with no hold left behind and no failed release), failures (phase, "
        "preserved location, error) and whether custody is conserved",
        "custody_events": "every custody fact (kind: held, handed_off, released, failed) with its entries as JSON",
        "cut_points": "one row per continuation run: its replay cut point (the served-basis block once reconciled, else "
        "the configured one): source run, accounting basis, configured and served K, request digests, "
        "divergence count, workspace digest or the reason it is missing; cut_point_digest for a "
        "PR-head block (the whole recorded request body at the cut, not comparable with the others)",
        "cut_point_facts": "every cut_point.served fact: a configured-basis block and, once reconciled, a served-basis one",
        "divergences": "one row per divergence of a served cut point (exchange index, served vs recorded request digests)",
    },
)

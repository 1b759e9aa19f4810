"""Custody of fork artifacts and replay cut points (with their divergences)."""

from __future__ import annotations

import json

from .base import (
    ACTOR,
    OCCURRED_AT,
    POSITION,
    Column,
    Columns,
    Projection,
    derived,
    fact,
    facts,
    through,
)

CUSTODY = Columns.of(
    "custody_events",
    ["custody.held", "custody.handed_off", "custody.released", "custody.failed"],
    POSITION,
    facts("run", "fork"),
    derived("kind", "VARCHAR", "replace(type, 'custody.', '')"),
    fact("index", "INTEGER", name="idx"),
    derived(
        "location",
        "VARCHAR",
        "coalesce(j.location, j.preserved_location)",
        location="VARCHAR",
        preserved_location="VARCHAR",
    ),
    facts("phase", "error"),
    fact("entries", "JSON"),
    OCCURRED_AT,
    ACTOR,
)
CUT_POINTS = Columns.of(
    "cut_point_facts",
    ["cut_point.served"],
    POSITION,
    facts("run", "source_run", "accounting"),
    facts("configured_k", "served_k", type="INTEGER"),
    facts("recorded_request_digest", "served_request_digest", "request_digest_basis"),
    derived("n_divergences", "INTEGER", "json_array_length(j.divergences)", divergences="JSON"),
    fact("divergences", "JSON"),
    fact("workspace_digest", "JSON"),
    facts("workspace_digest_reason", "stage"),
    OCCURRED_AT,
    fact("cut_point_digest"),
)
#: One divergence of a served cut point, as the `divergences` JSON list holds it.
DIVERGENCE = [
    Column(name, type, f"d.{name}", {"divergences": "JSON"})
    for name, type in (
        ("exchange_index", "INTEGER"),
        ("served_request_digest", "VARCHAR"),
        ("recorded_request_digest", "VARCHAR"),
        ("n_messages_served", "INTEGER"),
        ("n_messages_recorded", "INTEGER"),
    )
]
_DIVERGENCE_SPEC = json.dumps([{c.name: c.type for c in DIVERGENCE}])
DIVERGENCES = Columns.of(
    "divergences",
    ["cut_point.served"],
    POSITION,
    through("run"),
    DIVERGENCE,
    source=f"""(SELECT position, j.run AS run, unnest(from_json(j.divergences, '{_DIVERGENCE_SPEC}')) AS d
                FROM {{facts}})""",  # noqa: E501
)

PROJECTION = Projection.of(
    name="custody_and_cut_points",
    version=3,
    columns=(CUSTODY, CUT_POINTS, DIVERGENCES),
    views={
        # One per run: the served-basis block once benchflow reconciled it, else the
        # configured-basis one.
        "cut_points": """
            SELECT * EXCLUDE (pick) FROM (
                SELECT *, row_number() OVER (PARTITION BY run ORDER BY accounting = 'served' DESC, position DESC) AS pick
                FROM cut_point_facts) WHERE pick = 1""",  # noqa: E501
        # `released`: a release on record, or a closed fork with no hold left and no failed release.
        # benchflow removes `branches/<node>/parent/` only once every held entry is back
        # (`MountedArtifacts.release`), so an importer finds nothing to record a release from: the
        # hold's absence after the fork is the release.
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
            FROM custody_events GROUP BY run, fork""",  # noqa: E501
    },
    docs={
        "custody": "one row per fork with custody facts: hold location and entry count, hand-offs, "
        "released (a release on record, or a closed fork with no hold left behind and no failed "
        "release), failures (phase, preserved location, error) and whether custody is conserved",
        "custody_events": "every custody fact (kind: held, "
        "handed_off, released, failed) with its entries as JSON",
        "cut_points": "one row per continuation run: its replay cut point (the "
        "served-basis block once reconciled, else the configured one): source run, "
        "accounting basis, configured and served K, request digests, divergence count, "
        "workspace digest or the reason it is missing; cut_point_digest for a PR-head "
        "block (the whole recorded request body at the cut, not comparable with the others)",
        "cut_point_facts": "every cut_point.served fact: a configured-basis "
        "block and, once reconciled, a served-basis one",
        "divergences": "one row per divergence of a served cut point "
        "(exchange index, served vs recorded request digests)",
    },
)

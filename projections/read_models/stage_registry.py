"""Stage registries and snapshot lifetimes.

`stages` is one row per (run, stage) as marked. `snapshots` folds each ref's lifetime events into
one row: where it came from, whether it was exported, discarded or imported, rejected import
attempts, and whether a world can be restored from it now (the same rule as `domain/snapshot.py`,
kept in step by a test).
"""

from __future__ import annotations

from .base import ACTOR, OCCURRED_AT, POSITION, Columns, Projection, derived, fact, facts

STAGE_MARKS = Columns.of(
    "stage_marks",
    ["stage.marked"],
    POSITION,
    facts("run", "stage", "node"),
    fact("exchanges_completed", "INTEGER"),
    fact("layers", "VARCHAR[]", spec=["VARCHAR"]),
    facts("sandbox_ref", "environment_ref"),
    fact("workspace_digest", "JSON"),
    OCCURRED_AT,
)
SNAPSHOT_EVENTS = Columns.of(
    "snapshot_events",
    [
        f"snapshot.{kind}"
        for kind in (
            "captured",
            "exported",
            "export_failed",
            "discarded",
            "imported",
            "import_rejected",
            "adopted",
        )
    ],
    POSITION,
    fact("ref"),
    derived("kind", "VARCHAR", "replace(type, 'snapshot.', '')"),
    facts("layer", "run", "stage", "node", "path", "sha256", "image_id", "engine"),
    facts("tar_sha256", "tar_path"),
    derived("reason", "VARCHAR", "coalesce(j.reason, j.error)", reason="VARCHAR", error="VARCHAR"),
    OCCURRED_AT,
    ACTOR,
)

PROJECTION = Projection.of(
    name="stages",
    version=1,
    columns=(STAGE_MARKS, SNAPSHOT_EVENTS),
    views={
        # The latest mark per stage: a later import may correct where an earlier one placed it
        # (domain/run.py).
        "stages": """SELECT run, stage, node, exchanges_completed, layers, sandbox_ref, environment_ref, workspace_digest,
                            occurred_at, position FROM stage_marks
                     QUALIFY row_number() OVER (PARTITION BY run, stage ORDER BY position DESC) = 1""",  # noqa: E501
        "snapshots": """
            WITH folded AS (
                SELECT ref,
                       arg_min(layer, position) FILTER (WHERE kind = 'captured') AS layer,
                       arg_min(run, position) FILTER (WHERE kind = 'captured') AS run,
                       arg_min(stage, position) FILTER (WHERE kind = 'captured') AS stage,
                       arg_max(node, position) FILTER (WHERE kind = 'captured') AS node,  -- a corrected placement wins
                       bool_or(kind = 'captured') AS captured,
                       bool_or(kind = 'adopted') AS adopted,
                       count(*) FILTER (WHERE kind = 'exported') AS exports,
                       count(*) FILTER (WHERE kind = 'export_failed') AS export_failures,
                       bool_or(kind = 'discarded') AS discarded,
                       count(*) FILTER (WHERE kind = 'imported') AS imports,
                       count(*) FILTER (WHERE kind = 'import_rejected') AS rejected_imports,
                       arg_max(path, position) FILTER (WHERE kind = 'exported') AS export_path,
                       arg_max(sha256, position) FILTER (WHERE kind = 'exported') AS export_sha256,
                       arg_max(image_id, position) FILTER (WHERE kind = 'exported') AS export_image_id,
                       arg_max(reason, position) FILTER (WHERE kind = 'export_failed') AS export_error,
                       arg_max(image_id, position) FILTER (WHERE kind = 'imported') AS imported_image_id,
                       arg_max(reason, position) FILTER (WHERE kind = 'import_rejected') AS last_rejection,
                       arg_max(tar_path, position) FILTER (WHERE kind = 'imported') AS import_tar_path,
                       arg_max(tar_sha256, position) FILTER (WHERE kind = 'imported') AS import_tar_sha256,
                       arg_max(engine, position) FILTER (WHERE kind = 'imported') AS import_engine,
                       arg_max(tar_path, position) FILTER (WHERE kind = 'adopted') AS adopted_tar_path,
                       arg_max(tar_sha256, position) FILTER (WHERE kind = 'adopted') AS adopted_tar_sha256,
                       arg_max(image_id, position) FILTER (WHERE kind = 'adopted') AS adopted_image_id,
                       min(position) AS position
                FROM snapshot_events GROUP BY ref)
            SELECT *,
                   CASE WHEN imports > 0 THEN 'imported' WHEN exports > 0 THEN 'exported' WHEN discarded THEN 'discarded'
                        WHEN adopted THEN 'adopted' WHEN captured THEN 'captured' ELSE 'rejected' END AS lifetime,
                   (imports > 0 OR exports > 0 OR adopted OR (captured AND NOT discarded)) AS restorable,
                   CASE WHEN imports > 0 THEN 'imported into an engine with a verified image id'
                        WHEN exports > 0 THEN 'exported to a tar whose digest is recorded'
                        WHEN adopted THEN 'adopted from a tar of unknown provenance'
                        WHEN discarded THEN 'discarded at cleanup and never exported or imported'
                        WHEN captured THEN 'captured; the image has not been discarded'
                        ELSE 'never captured; only rejected import attempts are recorded' END AS restorable_because
            FROM folded""",  # noqa: E501
    },
    docs={
        "stages": "one row per (run, stage) marked (its latest mark): node, "
        "exchanges_completed, layers, sandbox and environment refs, workspace digest",
        "snapshots": "one row per snapshot ref: origin (run, stage, layer), exports, discards, "
        "imports, rejected imports, lifetime and whether it is restorable now (and why)",
        "snapshot_events": "every snapshot lifetime fact (kind: captured, exported, export_failed, "
        "discarded, imported, import_rejected, adopted)",
        "stage_marks": "stage.marked facts",
    },
)

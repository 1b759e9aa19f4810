"""What a benchflow trial's own files say about its branches beyond its outcome, as
`run.trial_described`: result.json's `branches.parent` and `branches.cost` and its checkpoint-retry
block (`retry`), `checkpoint_source.json` and `checkpoints.json` (docs/benchflow-formats.md §16.5-
§16.7).

Also the small readers the main-line importer shares with it: benchflow's `{type, code}` error
records, and blocks kept as written.
"""

from __future__ import annotations

from ...domain import facts as f
from ...domain.application import Entry
from .benchflow_common import RunFiles
from .fields import Fields, build, invalid

PARENT_FATES = ("discarded", "kept")
CHECKPOINT_SOURCE = "checkpoint_source.json"
CHECKPOINTS = "checkpoints.json"
CHECKPOINTS_KIND = "benchflow-checkpoints"


def text_of(fields: Fields, key: str) -> str | None:
    """A string as written, empty or not (benchflow's view passes these through), or null."""
    value = fields.raw(key)
    if value is None or isinstance(value, str):
        return value
    raise invalid(fields.where(key), "text or null", value)


def error_record(fields: Fields, key: str) -> tuple[f.ErrorCode | None, str | None]:
    """benchflow's error record `{type, code}` and a text for the outcome facts; an older tree's
    error string is kept as text only (benchflow's branch view reads it as no record)."""
    raw = fields.raw(key)
    if raw is None or raw == {}:
        return None, None
    if isinstance(raw, str):
        return None, fields.string(key)
    record = fields.obj(key)
    assert record is not None
    error = build(
        f.ErrorCode, record.where(), type=text_of(record, "type"), code=text_of(record, "code")
    )
    text = ": ".join(part for part in (error.type, error.code) if part)
    return error, text or None


def block(fields: Fields, key: str) -> dict[str, object] | None:
    """A JSON object kept as written (benchflow's view passes these through whole), or null."""
    raw = fields.raw(key)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise invalid(fields.where(key), "a JSON object or null", raw)
    return raw


def trial_description(files: RunFiles, key: str, *, always: bool) -> Entry | None:
    """The trial's `run.trial_described`; when not `always` (a run without `tree.json`), only if
    one of its files says something the fact holds."""
    result = files.result
    branches = result.obj("branches") if result is not None else None
    retry = block(result, "retry") if result is not None else None
    source = files.folder.read_json(CHECKPOINT_SOURCE)
    checkpoints = files.folder.read_json(CHECKPOINTS)
    if not always and branches is None and retry is None and source is None and checkpoints is None:
        return None
    parent = branches.raw("parent") if branches is not None else None
    if parent is not None and parent not in PARENT_FATES:
        assert branches is not None
        raise invalid(branches.where("parent"), f"one of {list(PARENT_FATES)} or null", parent)
    fact = build(
        f.TrialDescribed,
        str(files.folder.root / "result.json"),
        run=key,
        folder=files.folder.root.name,
        rollout_name=text_of(result, "rollout_name") if result is not None else None,
        task_name=text_of(result, "task_name") if result is not None else None,
        parent=parent,
        cost=block(branches, "cost") if branches is not None else None,
        retry=retry,
        checkpoint_source=_checkpoint_source(files, source),
        checkpoints=_checkpoints(files, checkpoints),
    )
    return Entry(fact, files.finished_at() or files.started_at())


def _checkpoint_source(files: RunFiles, document: object) -> f.CheckpointSource | None:
    """`branch_run.run_branch_trial`'s record of the kept checkpoint the trial started from."""
    if document is None:
        return None
    source = Fields(document, str(files.folder.root / CHECKPOINT_SOURCE))
    return build(
        f.CheckpointSource,
        source.where(),
        trial=text_of(source, "trial"),
        trial_path=text_of(source, "trial_path"),
        checkpoint=text_of(source, "fork_id"),
        provider=text_of(source, "provider"),
        ref=text_of(source, "ref"),
        prefix_events=source.integer("prefix_events"),
        snapshot_start=block(source, "snapshot_start"),
    )


def _checkpoints(files: RunFiles, document: object) -> f.CheckpointList | None:
    """`checkpoints.after_prompt`'s list: the policy and every checkpoint, kept or not."""
    if document is None:
        return None
    listed = Fields(document, str(files.folder.root / CHECKPOINTS))
    listed.schema_version()
    if listed.raw("kind") != CHECKPOINTS_KIND:
        raise invalid(listed.where("kind"), repr(CHECKPOINTS_KIND), listed.raw("kind"))
    rows = []
    for row in listed.objects("checkpoints"):
        error, _ = error_record(row, "error")
        rows.append(
            build(
                f.CheckpointRow,
                row.where(),
                id=row.text("id"),
                after_prompt=row.integer("after_prompt"),
                node=text_of(row, "node_id"),
                trajectory_events=row.integer("trajectory_events"),
                agent_session_id=text_of(row, "agent_session_id"),
                provider=text_of(row, "provider"),
                ref=text_of(row, "ref"),
                created_at=text_of(row, "created_at"),
                seconds=row.number("seconds"),
                status=row.text("status"),
                error=error,
            )
        )
    return build(
        f.CheckpointList,
        listed.where(),
        rollout=text_of(listed, "rollout"),
        policy=block(listed, "policy"),
        checkpoints=tuple(rows),
    )

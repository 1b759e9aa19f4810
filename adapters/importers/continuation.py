"""Continue-run directories (`bench eval continue`): a run that replayed another up to a cut point.

The run it continues and the cut point come from the run's `source` block (docs/benchflow-formats.md
§10 and §15, "Continue-run `source.cut_point`"); each block layout is recorded as what it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...domain import facts as f
from ...domain.application import Entry
from ...domain.vocabulary import STAGES
from .benchflow_common import RunFiles
from .fields import Fields, build, invalid
from .keys import run_key

CONTINUE_KIND = "benchflow-continue"
COMMON_FIELDS = ("n_replayed_exchanges", "accounting", "configured_max_exchanges", "branch_stage")
PR_HEAD_FIELDS = (*COMMON_FIELDS, "cut_point_digest")
CUT_POINT_FIELDS = (
    *COMMON_FIELDS,
    "recorded_request_digest",
    "served_request_digest",
    "request_digest_basis",
    "divergences",
    "workspace_digest",
    "workspace_digest_reason",
)


@dataclass
class Continuation:
    source: Fields
    parent_run: str

    def registered_source(self) -> dict[str, Any]:
        """The provenance block without the cut point (recorded as its own fact, and final only at
        the end)."""
        return {key: value for key, value in self.source.data.items() if key != "cut_point"}


def continuation(files: RunFiles) -> Continuation | None:
    """A continue-run, recognised by `source.kind == "benchflow-continue"` in `config.json` or
    `result.json`. The run it continues is `source.continued_from`, an absolute path of the machine
    that ran it, mapped to a run key by the same rule as directories (`keys.py`)."""
    for doc in (files.config, files.result):
        source = (
            doc.obj("source") if doc is not None and isinstance(doc.raw("source"), dict) else None
        )
        if source is not None and source.raw("kind") == CONTINUE_KIND:
            return Continuation(source, run_key(source.text("continued_from")))
    return None


def cut_point(files: RunFiles, key: str, found: Continuation) -> list[Entry]:
    """The `cut_point.served` fact, from `result.json` only: in host proxy mode the config-time
    block is replaced by the served accounting when the run ends, so a run still in progress has no
    final cut point yet, and recording the provisional one would contradict the final one later.

    `configured_k` is `configured_max_exchanges` when present (benchflow's `resolve_cut_point` turns
    a `--cut-stage` into that K too, so a stage cut writes it as well), else `n_replayed_exchanges`
    for the configured basis (there the two are the same number), else unknown; `served_k` is
    `n_replayed_exchanges`. Two layouts exist: the PR-head one (`cut_point_provenance` /
    `served_cut_point` at benchflow PR #1046's head) has `cut_point_digest`, the digest of the whole
    recorded request body at the last replayed exchange, recorded as `cut_point_digest` and never as
    either later digest; the later one has `recorded_request_digest` / `served_request_digest` over
    `{messages, tools}`, divergences and a workspace digest. A block mixing the two is refused."""
    result_source = (
        files.result.obj("source")
        if files.result is not None and files.result.raw("source") is not None
        else None
    )
    block = result_source.obj("cut_point") if result_source is not None else None
    if block is None:
        return []
    pr_head = block.has("cut_point_digest")
    block.only(
        PR_HEAD_FIELDS if pr_head else CUT_POINT_FIELDS,
        "a PR-head block (cut_point_digest) and a later one (request digests) are different layouts"
        if pr_head
        else "any other field would be lost on import",
    )
    accounting = block.string("accounting", required=True, nullable=False)
    if accounting not in ("configured", "served"):
        raise invalid(block.where("accounting"), "'configured' or 'served'", accounting)
    served = block.integer("n_replayed_exchanges")
    if served is None:
        raise invalid(block.where("n_replayed_exchanges"), "the number of replayed exchanges")
    configured = block.integer("configured_max_exchanges")
    if configured is None and accounting == "configured":
        configured = served
    check_within_recording(block, found, configured, served)
    stage = block.string("branch_stage")
    if stage is not None and stage not in STAGES:
        raise invalid(block.where("branch_stage"), f"one of {list(STAGES)}", stage)
    workspace = block.obj("workspace_digest")
    fact = build(
        f.CutPointServed,
        block.where(),
        run=key,
        source_run=found.parent_run,
        accounting=accounting,
        configured_k=configured,
        served_k=served,
        recorded_request_digest=block.string("recorded_request_digest"),
        served_request_digest=block.string("served_request_digest"),
        request_digest_basis=block.string("request_digest_basis"),
        divergences=block.raw("divergences"),
        workspace_digest=workspace.data if workspace else None,
        workspace_digest_reason=block.string("workspace_digest_reason"),
        stage=stage,
        cut_point_digest=block.string("cut_point_digest"),
    )
    return [Entry(fact, files.finished_at() or files.started_at())]


def check_within_recording(
    block: Fields, found: Continuation, configured: int | None, served: int
) -> None:
    """`0 < K <= n_recorded` (benchflow's `validate_max_exchanges`) for the configured K, and the
    served count at most n_recorded: the source's recording size, which the provenance block carries
    as `source.n_recorded_exchanges` (unknown: only `K > 0` is checked). Outside that range is
    refused."""
    recorded = found.source.integer("n_recorded_exchanges")
    where = block.where(
        "configured_max_exchanges"
        if block.has("configured_max_exchanges")
        else "n_replayed_exchanges"
    )
    if configured is not None and not (
        configured > 0 and (recorded is None or configured <= recorded)
    ):
        bound = f"1..{recorded}" if recorded is not None else "at least 1"
        raise invalid(
            where,
            f"a cut K in {bound} (benchflow validates 0 < K <= n_recorded; "
            f"{found.source.where('n_recorded_exchanges')} gives n_recorded {recorded})",
            configured,
        )
    if recorded is not None and served > recorded:
        raise invalid(
            block.where("n_replayed_exchanges"),
            f"at most the {recorded} recorded exchanges "
            f"({found.source.where('n_recorded_exchanges')})",
            served,
        )

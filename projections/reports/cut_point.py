"""`lineage cut-point RUN`: resolve a replay cut point from the log, and list the cut points served.

Resolution follows benchflow's `bench eval continue --cut-stage` (docs/benchflow-formats.md §10 and
§15), reading the stage registry from the log instead of `stage_snapshots.json`, and fails closed
exactly where benchflow does: a cut point is never guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...domain.errors import LineageError
from ...domain.vocabulary import STAGES
from .exports.exports import require_run
from .history_text import as_json
from .text_lines import one_line

if TYPE_CHECKING:
    from ...adapters.duckdb_store import ReadModelDB


class ReplayCutPointError(LineageError):
    """A replay cut point cannot be resolved from what the run recorded (benchflow's
    ReplayCutPointError)."""


def registry(db: ReadModelDB, run: str) -> list[dict[str, Any]]:
    rows = db.rows(
        "SELECT stage, node, exchanges_completed, sandbox_ref, "
        "environment_ref FROM stages WHERE run = ?",
        [run],
    )
    return sorted(rows, key=lambda row: STAGES.index(row["stage"]))


def _usable(row: dict[str, Any]) -> str | None:
    """Why a registry stage cannot be cut at (its K unknown, or 0: nothing to replay), else None."""
    if row["exchanges_completed"] is None:
        return "its exchanges_completed is unknown (null), and a cut point is never guessed"
    if row["exchanges_completed"] == 0:
        return "it recorded 0 exchanges completed, so there is nothing to replay"
    return None


def recorded_exchanges(db: ReadModelDB, run: str) -> int | None:
    """The run's recorded exchange count, n_recorded: its own (`run.finished.exchanges_recorded`),
    else the `n_recorded_exchanges` its continuations' provenance carries."""
    own = db.scalar("SELECT exchanges_recorded FROM runs WHERE run = ?", [run])
    if own is not None:
        return int(own)
    counted = db.scalar(
        "SELECT max(CAST(json_extract(source, '$.n_recorded_exchanges') AS INTEGER)) FROM runs "
        "WHERE parent_run = ? AND role = 'continuation'",
        [run],
    )
    return None if counted is None else int(counted)


def _within_recording(run: str, k: int, recorded: int | None, what: str) -> None:
    """`K <= n_recorded`, as benchflow's `validate_max_exchanges` requires (`0 < K` is checked by
    the callers); an unknown count passes here."""
    if recorded is not None and k > recorded:
        raise ReplayCutPointError(
            f"run {run!r}: expected a cut K in 1..{recorded} (the "
            f"exchanges its recording holds), found {what} K = {k}",
            hint=f"choose K <= {recorded}; a replay cannot "
            f"serve exchanges that were never recorded",
        )


def resolve_stage(
    run: str, stages: list[dict[str, Any]], stage: str, recorded: int | None = None
) -> dict[str, Any]:
    """`--stage S`: refused when the run recorded no stages, did not record S (the error lists the
    recorded ones), or S's `exchanges_completed` is unknown or 0. The K comes from the run's own
    registry and is refused only when a known count says it lies beyond the recording."""
    if not stages:
        raise ReplayCutPointError(
            f"run {run!r} recorded no stages, so there is no stage registry to cut at",
            hint="use --exchanges K, or record stage.marked facts with exchanges_completed",
        )
    row = next((r for r in stages if r["stage"] == stage), None)
    if row is None:
        raise ReplayCutPointError(
            f"run {run!r} did not record stage {stage!r}; "
            f"recorded stages: {[r['stage'] for r in stages]}"
        )
    problem = _usable(row)
    if problem:
        raise ReplayCutPointError(
            f"run {run!r}: cannot cut at stage {stage!r}: {problem}", hint="use --exchanges K"
        )
    _within_recording(run, row["exchanges_completed"], recorded, f"stage {stage!r} with")
    # benchflow's resolve_cut_point turns a stage cut into max_exchanges = K, written as
    # configured_max_exchanges
    return {
        "run": run,
        "by": "stage",
        "k": row["exchanges_completed"],
        "configured_max_exchanges": row["exchanges_completed"],
        "branch_stage": stage,
        **row,
    }


def resolve_exchanges(
    run: str, stages: list[dict[str, Any]], k: int, recorded: int | None
) -> dict[str, Any]:
    """`--exchanges K`: `0 < K <= n_recorded`, refused beyond the recording and when the count is
    unknown. Names the recorded stage with the most exchanges at or below K, for orientation."""
    if k < 1:
        raise ReplayCutPointError(f"run {run!r}: expected K >= 1 exchanges to replay, found {k}")
    if recorded is None:
        raise ReplayCutPointError(
            f"run {run!r}: expected a known number of recorded "
            f"exchanges to check K = {k} against (0 < K <= "
            "n_recorded), found none: no trajectory/llm_trajectory.jsonl was "
            "imported for it and no continuation recorded n_recorded_exchanges",
            hint="import the finished run with its trajectory/llm_trajectory.jsonl, "
            "or cut at a recorded stage with --stage",
        )
    _within_recording(run, k, recorded, "--exchanges")
    known = [
        r for r in stages if r["exchanges_completed"] is not None and r["exchanges_completed"] <= k
    ]
    before = (
        max(known, key=lambda r: (r["exchanges_completed"], STAGES.index(r["stage"])))
        if known
        else None
    )
    return {
        "run": run,
        "by": "exchanges",
        "k": k,
        "configured_max_exchanges": k,
        "branch_stage": None,
        "stage": before["stage"] if before else None,
        "node": before["node"] if before else None,
        "exchanges_completed": before["exchanges_completed"] if before else None,
        "sandbox_ref": None,
        "environment_ref": None,
    }


def served_cut_points(db: ReadModelDB, run: str) -> list[dict[str, Any]]:
    """One row per continuation of `run` (with or without a served cut point, `cut_point.served`):
    its accounting basis, configured and served K, every divergence, and the registry K of the cut
    stage."""
    rows = db.rows(
        "SELECT r.run, c.accounting, c.stage, c.configured_k, c.served_k, c.divergences, "
        "c.recorded_request_digest, c.served_request_digest, c.source_run, s.exchanges_completed "
        "AS registry_k, s.stage IS NOT NULL AS stage_recorded FROM runs r LEFT JOIN cut_points c "
        "USING (run) LEFT JOIN stages s ON s.run = r.parent_run AND s.stage = c.stage WHERE "
        "r.parent_run = ? AND r.role = 'continuation' ORDER BY r.position",
        [run],
    )
    for row in rows:
        row["divergences"] = as_json(row["divergences"])
        row["problems"] = [message for _, _, message in cut_point_problems([row])]
    return rows


def cut_point_problems(rows: list[dict[str, Any]]) -> list[tuple[bool, str, str]]:
    """(severe, continuation run, message) for each inconsistency of served cut points: the audit's
    cut-point consistency check, as a pure function over `served_cut_points` rows.

    Served K above configured K is impossible for honest facts (the domain refuses it), so it is
    severe. A served block with no divergence list, a divergence, a cut at a stage the source never
    recorded, or a stage cut whose configured K disagrees with the source's registry makes the
    continuation's replay untrustworthy."""
    problems: list[tuple[bool, str, str]] = []
    for row in rows:
        run, served, configured = row["run"], row["served_k"], row["configured_k"]
        if served is None:
            continue
        if configured is not None and served > configured:
            problems.append((True, run, f"served K {served} is above configured K {configured}"))
        divergences = row["divergences"]
        if row["accounting"] == "served" and divergences is None:
            problems.append(
                (
                    False,
                    run,
                    "the served cut point recorded no divergence "
                    "list, so nobody checked the replay",
                )
            )
        if divergences:
            at = [d["exchange_index"] for d in divergences]
            problems.append(
                (
                    False,
                    run,
                    f"the replay diverged from the recording of "
                    f"{row['source_run']} at exchange(s) {at}",
                )
            )
        if row["stage"] is not None:
            if not row["stage_recorded"]:
                problems.append(
                    (
                        False,
                        run,
                        f"cut at stage {row['stage']!r}, which {row['source_run']} never recorded",
                    )
                )
            elif configured is not None and row["registry_k"] != configured:
                problems.append(
                    (
                        False,
                        run,
                        f"cut at stage {row['stage']!r} with configured K {configured}, but "
                        f"the stage registry of {row['source_run']} says {row['registry_k']}",
                    )
                )
    return problems


def served_to(db: ReadModelDB, run_row: dict[str, Any]) -> dict[str, Any] | None:
    """The cut point a continuation was served, as its source's `served_cut_points` lists it (None
    for a run that continues none): the same answer from either end of the continuation."""
    source = run_row.get("parent_run")
    if run_row.get("role") != "continuation" or not source:
        return None
    return next(
        (row for row in served_cut_points(db, source) if row["run"] == run_row["run"]), None
    )


def cut_point_document(
    db: ReadModelDB, run: str, stage: str | None, exchanges: int | None, position: int
) -> dict[str, Any]:
    run_row = require_run(db, run)
    stages = registry(db, run)
    resolved = None
    recorded = recorded_exchanges(db, run)
    if stage is not None:
        resolved = resolve_stage(run, stages, stage, recorded)
    elif exchanges is not None:
        resolved = resolve_exchanges(run, stages, exchanges, recorded)
    candidates = [
        {**row, "usable": _usable(row) is None, "why_not": _usable(row)} for row in stages
    ]
    return {
        "run": run,
        "position": position,
        "exchanges_recorded": recorded,
        "resolved": resolved,
        "stages": candidates,
        "continues": run_row["parent_run"] if run_row["role"] == "continuation" else None,
        "served_to_it": served_to(db, run_row),
        "served": served_cut_points(db, run),
    }


def cut_point_rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The row formats' rows: the cut point RUN was served (a continuation), then those served to
    its own continuations."""
    own = document["served_to_it"]
    return ([own] if own else []) + document["served"]


def render_cut_point(document: dict[str, Any]) -> str:
    run, resolved = document["run"], document["resolved"]
    lines = []
    if document["continues"]:
        own = document["served_to_it"]
        lines.append(f"{run} continues {document['continues']}, cut at:")
        lines += _served_lines(own) if own else ["  (no cut point recorded)"]
    if resolved and resolved["by"] == "stage":
        lines.append(
            f"cut point of {run} at stage {resolved['stage']}: K = "
            f"{resolved['k']} exchanges (node {resolved['node']})"
        )
    elif resolved:
        after = (
            f"; the last recorded stage at or before it is "
            f"{resolved['stage']} (K = {resolved['exchanges_completed']})"
            if resolved["stage"]
            else "; no recorded stage is at or before it"
        )
        lines.append(f"cut point of {run} at K = {resolved['k']} exchanges{after}")
    else:
        lines.append(f"stages of {run} a replay can cut at:")
        lines += [
            f"  {row['stage']}: K = {row['exchanges_completed']}"
            if row["usable"]
            else f"  {row['stage']}: not usable, {row['why_not']}"
            for row in document["stages"]
        ] or ["  (none recorded)"]
    lines.append(
        f"cut points served for continuations of {run}:"
        if document["served"]
        else f"no continuation of {run} is recorded"
    )
    for row in document["served"]:
        lines += _served_lines(row)
    return "\n".join(one_line(line) for line in lines) + "\n"  # a recorded newline draws no line


def _served_lines(row: dict[str, Any]) -> list[str]:
    """One served cut point (a `served_cut_points` row), as both ends of a continuation print it."""
    if row["served_k"] is None:
        return [f"  {row['run']}: no cut point served"]
    stage = f", stage {row['stage']}" if row["stage"] else ""
    divergences = row["divergences"]
    lines = [
        f"  {row['run']}: {row['accounting']} accounting{stage}, configured K "
        f"{_or_unset(row['configured_k'])}, served K {_or_unset(row['served_k'])}, "
        + (
            "divergences not recorded"
            if divergences is None
            else f"{len(divergences)} divergence(s)"
        )
    ]
    lines += [
        f"    exchange {d['exchange_index']}: served {d.get('served_request_digest')} "
        f"vs recorded {d.get('recorded_request_digest')} "
        f"({d.get('n_messages_served')}/{d.get('n_messages_recorded')} messages)"
        for d in divergences or ()
    ]
    return lines + [f"    problem: {problem}" for problem in row["problems"]]


def _or_unset(value: Any) -> Any:
    return "not set" if value is None else value

"""Writing to and inspecting the log itself: ingest, log, verify, head, schema."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import click

from ..adapters.jsonl import (
    bounded_lines,
    ingest_in_chunks,
    ingest_schema,
    parse_lines,
    with_implied,
)
from ..adapters.store.log_reader import iter_events
from ..bootstrap import Lineage
from ..domain.errors import IntegrityFailure, InvalidInput
from ..domain.integrity import ChainReport, Head
from .common import split_address
from .output import POSITION, note, output_options, write_document, write_line, write_rows

LOG_COLUMNS = ("position", "recorded_at", "occurred_at", "type", "subject", "actor", "fact")


@click.command()
@click.argument("source", type=click.Path(allow_dash=True, dir_okay=False))
@click.option(
    "--dry-run", is_flag=True, help="Validate and show what would be appended; append nothing."
)
@click.option(
    "--chunk-size",
    type=click.IntRange(min=1, max=10_000_000),
    metavar="N",
    help="For files too large to hold in memory: validate the whole file, then record N facts per "
    "transaction. A fact the log refuses stops the ingest after the chunks before it.",
)
@click.pass_obj
def ingest(lineage: Lineage, source: str, dry_run: bool, chunk_size: int | None) -> None:
    """Append facts from a JSON-lines FILE (or - for stdin), whole or not at all.

    One fact per line, e.g. {"type": "stage.marked", "run": "job/task__1", "stage": "env-ready",
    ...}. `lineage schema` prints the JSON Schema of a line. Re-ingesting the same file appends
    nothing.
    """
    if chunk_size is not None:
        if source == "-":
            raise click.UsageError(
                "--chunk-size reads the file twice (validate, then record); found stdin: save the "
                "input to a file first"
            )
        if dry_run:
            raise click.UsageError(
                "--dry-run decides the whole input at once, --chunk-size "
                "chunk by chunk; found both: drop one of them"
            )
        try:
            done = ingest_in_chunks(lineage.app, Path(source), chunk_size)
        except OSError as exc:
            raise InvalidInput(f"cannot read {source}: {exc.strerror}") from None
        counted = _ingested(done.facts, done.implied, done.appended, dry_run=False)
        note(f"{counted} in {done.chunks} chunks; log position {done.position}")
        return
    try:
        stream = sys.stdin.buffer if source == "-" else open(source, "rb")  # noqa: SIM115
    except OSError as exc:
        raise InvalidInput(f"cannot read {source}: {exc.strerror}") from None
    with stream:
        entries = parse_lines(bounded_lines(stream), "stdin" if source == "-" else source)
    result = lineage.app.record(entries, dry_run=dry_run)
    implied = with_implied(entries)
    if dry_run:
        for fact in result.new_facts:
            # ASCII: nothing for a terminal to obey
            write_line(json.dumps(fact.model_dump(mode="json")))
        note(_ingested(len(entries), implied, len(result.new_facts), dry_run=True))
    else:
        counted = _ingested(len(entries), implied, result.appended, dry_run=False)
        note(f"{counted}; log position {result.position}")


def _ingested(lines: int, facts: int, appended: int, *, dry_run: bool) -> str:
    """What an ingest appended (or would), counted against what it decided: the lines, the facts
    they are once a line's implied facts are added (a stage mark's snapshot captures), and how many
    of those the log already held. Events and facts are counted alike, so the first is never more
    than the second."""
    implied = (
        f"{facts} facts with the {facts - lines} they imply, such as a stage mark's snapshot "
        "captures; "
        if facts != lines
        else ""
    )
    counts = f"from {lines} lines ({implied}{facts - appended} already known)"
    if dry_run:
        return f"dry run: {appended} events would be appended {counts}"
    return f"appended {appended} events {counts}"


@click.command("log")
@click.option(
    "--run",
    "run_key",
    help="Only events about this run (and its forks and "
    "snapshots); a unique prefix of its id will do.",
)
@click.option("--fork", "fork_address", metavar="RUN:FORK", help="Only events about this fork.")
@click.option(
    "--type",
    "types",
    multiple=True,
    help="Only these fact types; a prefix such as 'fork.' matches a family.",
)
@click.option(
    "--after", type=POSITION, default=0, show_default=True, help="Start after this log position."
)
@click.option("--limit", type=POSITION, help="At most this many events.")
@output_options()
@click.pass_obj
def log_command(
    lineage: Lineage,
    run_key: str | None,
    fork_address: str | None,
    types: tuple[str, ...],
    after: int,
    limit: int | None,
    fmt: str,
) -> None:
    """The events in log order: position, when recorded, when it happened, type, subject and who."""
    fork_run, fork_id = split_address(fork_address, "RUN:FORK") if fork_address else (None, None)
    if run_key or fork_run:
        run_key, fork_run = _recorded_runs(lineage, run_key, fork_run)

    def rows() -> Any:
        count = 0
        for event in iter_events(lineage.app.recorder, after=after):
            fact = event.fact
            if run_key and fact.get("run") != run_key:
                continue
            if fork_id and (fact.get("run"), fact.get("fork")) != (fork_run, fork_id):
                continue
            if types and not any(
                event.type == t or (t.endswith(".") and event.type.startswith(t)) for t in types
            ):
                continue
            # Tables show what the fact says; the JSON formats keep every field, nulls included.
            shown = {
                k: v
                for k, v in fact.items()
                if k != "type" and (v is not None or fmt in ("json", "jsonl"))
            }
            yield {
                "position": event.position,
                "recorded_at": event.state["timestamp"],
                "occurred_at": event.state["occurred_at"],
                "type": event.type,
                "subject": event.subject,
                "actor": event.state["actor"],
                "fact": shown,
            }
            count += 1
            if limit is not None and count >= limit:
                return

    write_rows(rows(), LOG_COLUMNS, fmt)


def _recorded_runs(lineage: Lineage, *given: str | None) -> list[str | None]:
    """Each RUN as other commands take it (an id, or a prefix of exactly one), refused when no run
    has it: an empty log listing for a mistyped run would read as "nothing happened"."""
    from ..domain.errors import UnknownSubject
    from ..projections.reports.run_list import LIST_RUNS_HINT, resolve_run
    from .common import read_models

    resolved: list[str | None] = []
    with read_models(lineage) as models:
        for run in given:
            if run is not None:
                run = resolve_run(models.db, run)
                if not models.db.scalar("SELECT count(*) FROM runs WHERE run = ?", [run]):
                    raise UnknownSubject(
                        f"expected a recorded run {run!r}, found none", hint=LIST_RUNS_HINT
                    )
            resolved.append(run)
    return resolved


@click.command()
@click.option(
    "--head",
    "kept_head",
    metavar="POS:HASH",
    help="A head printed earlier by `lineage head`; fail if it is gone.",
)
@click.option(
    "--read-models",
    "check_read_models",
    is_flag=True,
    help="Also compare every read-model table with a fresh "
    "rebuild from the log (exit 3 if one differs).",
)
@click.option(
    "--saved-states",
    "check_saved_states",
    is_flag=True,
    help="Also replay the log behind every saved aggregate "
    "state writers would use (exit 3 if one differs).",
)
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(dir_okay=False),
    help="A checkpoint from `lineage checkpoint`: prove the log extends it (exit 3 if not).",
)
@click.option(
    "--key",
    "key_values",
    multiple=True,
    metavar="VKEY",
    help="Verifier key (file or text) the checkpoint must be signed by.",
)
@click.option(
    "--trusted-keys",
    "trusted_file",
    type=click.Path(dir_okay=False),
    help="Verifier keys, one per line: report every event "
    "no signature by one of them covers (exit 3).",
)
@output_options()
@click.pass_obj
def verify(
    lineage: Lineage,
    kept_head: str | None,
    check_read_models: bool,
    check_saved_states: bool,
    checkpoint_file: str | None,
    key_values: tuple[str, ...],
    trusted_file: str | None,
    fmt: str,
) -> None:
    """Check the hash chain of the whole log; exit 0 only if it is intact (3 if not).

    With --read-models, also show that the read-model file (a cache others may be able to write)
    holds exactly what a rebuild from the log would.
    """
    head = None
    if kept_head:
        try:
            head = Head.parse(kept_head)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    report = lineage.verify(head)
    checked = None
    if checkpoint_file and report.intact:
        from .evidence_cmds import check_checkpoint

        checked = check_checkpoint(lineage, report, checkpoint_file, key_values)
    signed = None
    if trusted_file and report.intact:
        from .evidence_cmds import check_trusted

        signed = check_trusted(lineage, report, trusted_file)
    document = {
        **report.summary(),
        "checked_head": str(report.checked_head) if report.checked_head else None,
    }
    if checkpoint_file:
        document["checkpoint"] = checked
    if trusted_file:
        document["signatures"] = signed
    differing = _read_models_differing(lineage, report, document) if check_read_models else []
    document.update(report.summary())  # the read models' end may have broken the report
    unlike = _saved_states_unlike(lineage, document) if check_saved_states and report.intact else []
    if fmt in ("json", "jsonl"):
        write_document(document, fmt)
    else:
        write_rows([document], list(document), fmt)
    if not report.intact:
        raise IntegrityFailure(
            f"the log is not intact: {report.problem}",
            hint="restore the store from a backup taken before that position",
        )
    if differing:
        raise IntegrityFailure(
            f"the read models were changed outside rollout-lineage: {', '.join(differing)} differ "
            "from a rebuild from the log",
            hint="run `lineage rebuild`; the log itself is intact",
        )
    if unlike:
        raise IntegrityFailure(
            f"saved aggregate states were changed outside rollout-lineage: {', '.join(unlike)} "
            "(aggregate id@version) differ from a replay of the log",
            hint="they are a cache: drop the table lineage_saved_states from "
            "the store (writers replay and save again); the log itself is intact",
        )


def _read_models_differing(
    lineage: Lineage, report: ChainReport, document: dict[str, Any]
) -> list[str]:
    """`verify --read-models`: the tables that differ from a rebuild, said in the document too; read
    models that end before the walk's last event break the report (they do not describe the same
    log)."""
    if not report.intact:
        return []
    from ..projections.engine.runner import differences_from_rebuild

    position, differing = differences_from_rebuild(lineage)
    chain_end = report.head.position if report.head else 0
    if position < chain_end:  # short of the walk's last event (past it: appended since)
        report.first_bad_position = position + 1
        report.problem = (
            f"the read models end at position {position}, the chain walk at {chain_end}: they "
            "do not describe the same log"
        )
    document["read_models"] = (
        f"differ from a rebuild at position {position}: {', '.join(differing)}"
        if differing
        else f"match a rebuild at position {position}"
    )
    return differing


def _saved_states_unlike(lineage: Lineage, document: dict[str, Any]) -> list[str]:
    """`verify --saved-states`: the states that differ from a replay of the log, said in the
    document too."""
    checked, unlike = lineage.app.saved_states_differing()
    document["saved_states"] = (
        f"{len(unlike)} of {checked} differ from the log: {', '.join(unlike)}"
        if unlike
        else f"{checked} match the log"
    )
    return unlike


@click.command()
@click.option(
    "--json", "as_json", is_flag=True, help="Print head, tree size and root as one JSON object."
)
@click.pass_obj
def head(lineage: Lineage, as_json: bool) -> None:
    """Print POSITION:HASH of the last event; keep it elsewhere and pass it to `verify --head`.

    The size and root of the log's Merkle tree follow on stderr (`lineage checkpoint` prints them
    signed).
    """
    report = lineage.verify()
    if not report.intact:
        raise IntegrityFailure(
            f"the log is not intact, so it has no trustworthy head: {report.problem}"
        )
    chain_head = str(report.head) if report.head else "0:" + "sha256:" + "0" * 64
    tree = lineage.tree()
    size = tree.size()
    root = base64.b64encode(tree.root(size)).decode()
    if as_json:
        write_line(json.dumps({"head": chain_head, "tree_size": size, "root": root}))
        return
    write_line(chain_head)
    if report.head is None:
        note("the log is empty: no event yet, so the head is position 0 (nothing to keep yet)")
    note(f"Merkle tree: {size} events, root {root}")


@click.command()
@click.pass_obj
def init(lineage: Lineage) -> None:
    """Create an empty lineage store here (./.lineage, or where --home or --store say); an existing
    one is kept."""
    existed = lineage.settings.store_exists
    lineage.position()  # opening the store creates it
    lineage.created = False  # said here, not again on the way out
    said = "a lineage store is already at" if existed else "created an empty lineage store at"
    note(f"{said} {lineage.location}")


@click.command()
def schema() -> None:
    """Print the JSON Schema of one `lineage ingest` line."""
    write_line(json.dumps(ingest_schema(), indent=2, sort_keys=True))


COMMANDS = (init, ingest, log_command, verify, head, schema)

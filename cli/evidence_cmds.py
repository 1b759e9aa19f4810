"""Evidence to hand over: signing keys, checkpoints of the log's Merkle tree, inclusion proofs."""

from __future__ import annotations

import re
from pathlib import Path

import click

from ..bootstrap import Lineage
from ..domain.errors import IntegrityFailure, InvalidInput
from ..domain.integrity import ChainReport
from ..domain.signed_note import Checkpoint
from .output import note, write_document, write_line, write_text

KEY_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


@click.group()
def keys() -> None:
    """Ed25519 key pairs in the signed-note format, for signing checkpoints and writes."""


@keys.command("generate")
@click.argument("name")
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Where to write NAME.key and NAME.pub.",
)
def generate(name: str, folder: str) -> None:
    """Write NAME.key (private, mode 0600) and NAME.pub (the verifier key to give to others).

    Refuses to overwrite either file. NAME is also the key's name in signatures.
    """
    from ..adapters.evidence import ed25519
    from ..adapters.evidence.checkpoints import write_new

    if not KEY_FILE_NAME.match(name):
        raise InvalidInput(
            f"expected a key name of letters, digits, '.', "
            f"'_', '@' or '-' (up to 64), found {name!r}",
            hint="e.g. lab-writer or ci.example.org",
        )
    private, public = Path(folder) / f"{name}.key", Path(folder) / f"{name}.pub"
    for path in (private, public):
        if path.exists():
            raise InvalidInput(
                f"{path} already exists; refusing to overwrite a key",
                hint="choose another name, or move the old key away first",
            )
    key = ed25519.generate(name)
    write_new(private, f"{key}\n", 0o600)
    write_new(public, f"{key.verifier}\n", 0o644)
    write_line(str(key.verifier))
    note(f"wrote {private} (keep it private) and {public} (give it to whoever verifies)")


@click.command()
@click.option(
    "--sign",
    "signer_file",
    type=click.Path(dir_okay=False),
    metavar="KEYFILE",
    help="Sign with this private key (a .key file from `lineage keys generate`).",
)
@click.pass_obj
def checkpoint(lineage: Lineage, signer_file: str | None) -> None:
    """Print a checkpoint of the log (origin, tree size, root hash) in the C2SP tlog-checkpoint
    format.

    Keep it somewhere the store's writers cannot reach; `lineage verify --checkpoint` later proves
    the log still extends it, and `lineage prove` proves single events against it.
    """
    from ..adapters.evidence import ed25519
    from ..adapters.evidence.checkpoints import make_checkpoint
    from ..domain.signed_note import Note

    signer = ed25519.load_signer(signer_file) if signer_file else None
    made = make_checkpoint(lineage.tree(), to_sign=signer is not None)
    signed = Note(made.text())
    if signer is not None:
        signed = ed25519.sign_note(signed, signer)
    write_text(str(signed))
    by = f" signed by {signer.verifier.label}" if signer else ""
    note(f"checkpoint of {made.size} events{by}")


def checked_checkpoint(
    checkpoint_file: str, key_values: tuple[str, ...]
) -> tuple[Checkpoint, list[str]]:
    """The checkpoint in the file, its signatures verified when keys are given: (checkpoint,
    signers)."""
    from ..adapters.evidence import ed25519
    from ..adapters.evidence.checkpoints import read_checkpoint

    signed, parsed = read_checkpoint(checkpoint_file)
    signers: list[str] = []
    if key_values:
        verifiers = [ed25519.load_verifier(value) for value in key_values]
        signers = [key.label for key in ed25519.verify_note(signed, verifiers, checkpoint_file)]
    return parsed, signers


def check_checkpoint(
    lineage: Lineage, report: ChainReport, checkpoint_file: str, key_values: tuple[str, ...]
) -> str:
    """What `verify --checkpoint` says about it; a log that does not extend it marks the report
    broken."""
    from ..adapters.evidence.checkpoints import check_extends

    parsed, signers = checked_checkpoint(checkpoint_file, key_values)
    found = check_extends(lineage.tree(), parsed)
    if found is not None:
        report.first_bad_position, report.problem = found
        return f"{parsed.size} events: NOT extended by this log"
    signed = f"signed by {', '.join(signers)}" if signers else "signature not checked (no --key)"
    return f"{parsed.size} events, {signed}: extended by this log"


def check_trusted(lineage: Lineage, report: ChainReport, trusted_file: str) -> str:
    """What `verify --trusted-keys` says; an event no trusted signature covers marks the report
    broken."""
    from ..adapters.evidence import ed25519
    from ..adapters.evidence.batch_evidence import check_coverage

    coverage = check_coverage(lineage.app.recorder, ed25519.load_verifiers(trusted_file))
    signers = ", ".join(sorted(coverage.signers)) or "no trusted key"
    missing = sum(b - a + 1 for a, b, _ in coverage.uncovered)
    if coverage.uncovered:
        report.first_bad_position = coverage.uncovered[0][0]
        report.problem = (
            f"{missing} events are not covered by a trusted signature: {coverage.describe()}"
        )
    # the check read less than the walk (more: appended since)
    elif coverage.signed < report.events:
        report.first_bad_position = report.head.position if report.head else 0
        report.problem = (
            f"the signature check read {coverage.signed} events, the chain walk {report.events}: "
            "they do not describe the same log"
        )
    return f"{coverage.signed} events signed by {signers}"


def _positions(lineage: Lineage, address: str) -> list[int]:
    """POSITION, or every event `lineage history ADDRESS` lists under that node (RUN, RUN:NODE,
    RUN:FORK/ARM or RUN:FORK/#INDEX: the addresses `history` and `diff` take)."""
    if address.isascii() and address.isdigit():
        # Positions are the stores' 64-bit integers: a larger one would reach SQLite as an
        # OverflowError.
        if len(address) > 19 or int(address) >= 2**63:
            raise InvalidInput(
                f"expected a log position (below 2**63), found {address[:40]!r}"
                f"{'...' if len(address) > 40 else ''}",
                hint="`lineage log` lists the positions; `lineage head` shows the last one",
            )
        return [int(address)]
    from ..projections.reports import history as histories
    from ..projections.reports.run_list import resolve_address
    from .common import read_models

    with read_models(lineage) as models:
        target, steps = histories.history(models.db, resolve_address(models.db, address))
    found = sorted(
        {
            event["position"]
            for step in steps
            if (step.ref.run, step.ref.node) == (target.run, target.node)
            for event in step.events
        }
    )
    if not found:
        raise InvalidInput(
            f"expected RUN:NODE naming events of the log, found none for {address!r}",
            hint="`lineage history ADDRESS` lists a node's "
            "events; a position from `lineage log` works too",
        )
    return found


@click.command()
@click.argument("address", required=False, metavar="RUN:NODE|RUN:FORK/ARM|POSITION")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="Prove against this checkpoint (from `lineage checkpoint`).",
)
@click.option("--key", "key_values", multiple=True, metavar="VKEY", help="Check its signature.")
@click.option(
    "--check",
    "proof_file",
    type=click.Path(dir_okay=False),
    help="Instead of proving: verify proofs printed "
    "earlier against the checkpoint (no store needed).",
)
@click.pass_obj
def prove(
    lineage: Lineage,
    address: str | None,
    checkpoint_file: str,
    key_values: tuple[str, ...],
    proof_file: str | None,
) -> None:
    """Print RFC 9162 inclusion proofs that the events at RUN:NODE (or POSITION) are in a
    checkpoint.

    A node's events are those `lineage history` lists under it (its reward and custody included); a
    fork child is RUN:FORK/ARM or RUN:FORK/#INDEX, as `history` and `diff` take it.

    Each proof carries the event's exact stored bytes (`entry`); anyone can check it with any RFC
    9162 verifier (leaf = SHA-256(0x00 || entry)), or with `lineage prove --check FILE --checkpoint
    CP`.
    """
    from ..adapters.evidence.checkpoints import check_inclusion, inclusion, require_extends

    parsed, _ = checked_checkpoint(checkpoint_file, key_values)
    if proof_file is not None:
        _check_proofs(proof_file, parsed)
        return
    if address is None:
        raise click.UsageError("expected RUN:NODE or POSITION to prove (or --check FILE)")
    tree = lineage.tree()
    require_extends(tree, parsed, checkpoint_file)
    proofs = []
    for position in _positions(lineage, address):
        rows = lineage.app.recorder.log_rows(position - 1, position, 1)  # type: ignore[attr-defined]
        if not rows or rows[0][0] != position:
            raise InvalidInput(f"expected an event at position {position}, found none")
        proofs.append(inclusion(tree, parsed, position, rows[0]))
        check_inclusion(proofs[-1], parsed, "the proof just made")
    write_document({"checkpoint": parsed.text(), "proofs": proofs}, "json")
    note(f"{len(proofs)} inclusion proofs against the checkpoint of {parsed.size} events")


def _check_proofs(proof_file: str, parsed: Checkpoint) -> None:
    from ..adapters.evidence.checkpoints import check_inclusion
    from ..adapters.strict_json import loads as loads_strict
    from ..adapters.user_files import read_capped

    data = read_capped(proof_file, 50_000_000, "proofs")
    try:
        document = loads_strict(data)
        if not isinstance(document, dict) or set(document) != {"checkpoint", "proofs"}:
            raise ValueError("expected the fields checkpoint and proofs, and no other")
        proofs = document["proofs"]
        if not isinstance(proofs, list):
            raise TypeError(f"expected a list of proofs, found {type(proofs).__name__}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(
            f"{proof_file}: expected proofs as `lineage prove` prints them ({exc})"
        ) from None
    # what a reader of the file takes the proofs to be against
    if document["checkpoint"] != parsed.text():
        raise IntegrityFailure(
            f"{proof_file}: the checkpoint the file names is not the one given (--checkpoint): "
            f"expected {parsed.text()!r}, found {str(document['checkpoint'])[:200]!r}",
            hint="check the proofs against the checkpoint they were made for",
        )
    for number, proof in enumerate(proofs, 1):
        check_inclusion(proof, parsed, f"{proof_file}, proof {number}")
    if not proofs:
        raise IntegrityFailure(f"{proof_file}: expected at least one proof, found none")
    write_line(
        f"{len(proofs)} inclusion proofs verify against the checkpoint of {parsed.size} events"
    )


COMMANDS = (keys, checkpoint, prove)

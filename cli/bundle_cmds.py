"""Run bundles: write one file an auditor can check without the store, check it, show it, and list
the sources of imported facts. `lineage import --bundle` (in import_cmds) appends one to a store."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import click

from ..bootstrap import Lineage
from ..domain.errors import InvalidInput
from .common import resolved_runs
from .output import note, output_options, write_rows, write_text

MAX_BUNDLE_BYTES = 4 * 2**30


class BundleGroup(click.Group):
    """`lineage bundle RUN... --to FILE` writes; `lineage bundle verify|show|sources ...` read."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["write", *args]
        return super().parse_args(ctx, args)


@click.group(cls=BundleGroup)
def bundle() -> None:
    """One file holding runs' events with their proofs, checkable without the store.

    `lineage bundle RUN... --to FILE [--sign KEYFILE] [--with-tars]` writes one; `bundle verify
    FILE` checks it offline; `bundle show FILE` prints its runs' trees and audit verdict; `import
    --bundle FILE` appends it to another store; `bundle sources` lists imported facts with their
    proofs re-checked.
    """


@bundle.command("write")
@click.argument("runs", nargs=-1, required=True, metavar="RUN...")
@click.option(
    "--to",
    "target",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The file (a new one), or - for stdout.",
)
@click.option(
    "--sign",
    "signer_file",
    type=click.Path(dir_okay=False),
    metavar="KEYFILE",
    help="Sign the bundle's checkpoint with this private key.",
)
@click.option(
    "--with-tars", is_flag=True, help="Also carry the exported snapshot tars (their bytes)."
)
@click.pass_obj
def write(
    lineage: Lineage, runs: tuple[str, ...], target: str, signer_file: str | None, with_tars: bool
) -> None:
    """Write RUN...'s events, proofs, checkpoint, batch signatures and tar digests to one file."""
    from ..adapters.evidence import ed25519
    from ..adapters.evidence.bundles import build, canonical
    from ..adapters.evidence.checkpoints import write_new

    path = Path(target)
    to_stdout = target == "-"
    if path.exists() and not to_stdout:
        raise InvalidInput(
            f"{path} already exists; refusing to overwrite it", hint="choose another name"
        )
    signer = ed25519.load_signer(signer_file) if signer_file else None
    document = build(lineage.tree(), resolved_runs(lineage, runs), signer, with_tars)
    if to_stdout:  # canonical JSON is ASCII: nothing in it a terminal would obey
        write_text(canonical(document).decode("ascii"), escape=False)
    else:
        write_new(path, canonical(document).decode("ascii"), 0o644)
    note(
        f"wrote {'stdout' if to_stdout else path}: {len(document['events'])} events of "
        f"{len(document['runs'])} runs, "
        f"{len(document['batches'])} signed batches, {len(document['tars'])} tars"
    )


def _read(path: str, key_values: tuple[str, ...]) -> Any:
    from ..adapters.evidence import ed25519
    from ..adapters.evidence.bundle_check import verify_bundle
    from ..adapters.user_files import read_capped

    data = read_capped(path, MAX_BUNDLE_BYTES, "a bundle")
    return verify_bundle(data, [ed25519.load_verifier(v) for v in key_values], path)


def summary(report: Any) -> dict[str, Any]:
    """What `bundle verify` prints. Signers are named by key (`NAME+KEYID`), each marked trusted
    only when it is a `--key` key (`TrustedKeys.judge`): two keys of one name never read alike."""
    cp = report.checkpoint
    trusted = (
        f"signed by {', '.join(key.label for key in report.trusted_signers)}"
        if report.trusted_signers
        else "signature not checked (no --key)"
    )
    counts = Counter(report.signed_by.values())
    signers = ", ".join(
        f"{count} by {key.label}{' (trusted)' if key in report.trusted_batches else ''}"
        for key, count in sorted(counts.items(), key=lambda item: item[0].label)
    )
    return {
        "runs": ", ".join(report.runs),
        "events": len(report.events),
        "positions": f"{report.events[0]['position']}-{report.events[-1]['position']}",
        "checkpoint": f"{cp.origin}, {cp.size} events, {trusted}",
        "signed_events": f"{len(report.signed_by)}: {signers}" if signers else "0",
        "tars": f"{len(report.tars)} ({sum('data' in t for t in report.tars)} carried)",
        "replay": "every event accepted by the domain rules",
    }


key_option = click.option(
    "--key",
    "key_values",
    multiple=True,
    metavar="VKEY",
    help="Verifier key (file or text) the checkpoint must "
    "be signed by; also marks trusted batch signers.",
)


@bundle.command("verify")
@click.argument("path", type=click.Path(dir_okay=False))
@key_option
@output_options()
def verify_command(path: str, key_values: tuple[str, ...], fmt: str) -> None:
    """Check a bundle offline: bytes, proofs, signatures, tar digests, and a replay through the
    domain rules."""
    document = summary(_read(path, key_values))
    write_rows([document], list(document), fmt)


@bundle.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
@key_option
def show(path: str, key_values: tuple[str, ...]) -> None:
    """Verify a bundle, then print its runs' trees and the audit verdict, built in a throwaway
    store."""
    from ..adapters.evidence.bundle_check import entries
    from ..projections.engine.runner import open_read_models
    from ..projections.reports import tree_view
    from ..projections.reports.audit.audit_report import audit_report
    from ..projections.reports.audit.audit_text import render_audit
    from ..settings import Settings

    report = _read(path, key_values)
    with tempfile.TemporaryDirectory(prefix="lineage-bundle-") as home:
        settings = Settings.from_env({}, home=home, actor=f"bundle:{report.checkpoint.origin}")
        with Lineage(settings) as scratch:
            scratch.app.record(entries(report, scratch.app), verified_here=True)
            integrity = scratch.verify().summary()
            models = open_read_models(scratch)
            try:
                for run in report.runs:
                    model = tree_view.tree_model(models.db, run)
                    write_text(tree_view.RENDERERS["text"](model))
                audit = audit_report(models.db, integrity, position=models.position)
            finally:
                models.close()
    write_text(render_audit(audit))


@bundle.command("sources")
@click.option(
    "--key",
    "key_values",
    multiple=True,
    metavar="VKEY",
    help="Verifier key the source checkpoints must be signed by (else: not checked).",
)
@output_options()
@click.pass_obj
def sources_command(lineage: Lineage, key_values: tuple[str, ...], fmt: str) -> None:
    """Imported events with the origin, position and checkpoint they came from, each proof
    re-checked."""
    from ..adapters.evidence import ed25519
    from ..adapters.evidence.bundle_import import require_proven, sources

    rows = sources(lineage.app.recorder, [ed25519.load_verifier(value) for value in key_values])
    write_rows(
        rows,
        (
            "position",
            "origin",
            "source_position",
            "checkpoint_size",
            "checkpoint_signature",
            "proven",
        ),
        fmt,
    )
    require_proven(rows)


def import_bundle_file(
    lineage: Lineage, bundle_file: str | None, paths: tuple[str, ...], key_values: tuple[str, ...]
) -> None:
    """`lineage import --bundle FILE`: verify, then append whole or not at all."""
    from ..adapters.evidence.bundle_import import import_bundle

    if bundle_file is None or paths:
        raise click.UsageError(
            "expected run directories (PATHS) or --bundle FILE, found "
            + ("both" if paths else "neither")
        )
    report = _read(bundle_file, key_values)
    recorded = import_bundle(lineage.app, report)
    note(
        f"appended {recorded.appended} events from {len(report.events)} in the bundle "
        f"({report.checkpoint.origin}); log position {recorded.position}"
    )


COMMANDS = (bundle,)

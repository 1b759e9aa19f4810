"""A snapshot tar on disk: what benchflow names it, which refs it makes resolve, and where to look
for it (`restorability` asks whether the tars a snapshot rests on are still there)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from .snapshot_tar import TarReport


def export_file_name(ref: str) -> str:
    """benchflow's `safe(ref)` (reference §4) plus `.tar`: every run of other characters becomes
    '-'."""
    return (re.sub(r"[^A-Za-z0-9._-]+", "-", ref).strip("-") or "snapshot") + ".tar"


def adopted_ref(report: TarReport) -> str:
    """The ref an adopted tar is recorded under: its first usable repo tag without a `:latest`
    suffix (benchflow refs are untagged names that `docker save` writes as `<name>:latest`), else
    its image id, else its digest. A tag is usable when it is a valid snapshot key (non-empty, at
    most 512 characters); the tar is untrusted."""
    for tag in report.repo_tags:
        ref = tag.removesuffix(":latest")
        if 0 < len(ref) <= 512 and ref.isprintable():
            return ref
    return report.image_id or report.tar_sha256


def canonical_tag(ref: str) -> str:
    name = ref.rsplit("/", 1)[-1]
    return ref if "@" in ref or ":" in name else f"{ref}:latest"


def tar_names(ref: str, report: TarReport) -> bool:
    """Whether loading the tar makes `ref` resolve: a repo tag names it, or the ref is the image id
    itself."""
    return ref == report.image_id or canonical_tag(ref) in {
        canonical_tag(tag) for tag in report.repo_tags
    }


def resolve_tar(
    recorded_path: str, run_dirs: Iterable[str], search_dirs: Iterable[str]
) -> tuple[Path | None, list[str]]:
    """benchflow's order: the recorded path, else `<run dir>/snapshots/<file name>` (a relocated run
    folder: where it was last located, then where it was registered), else each search dir. A
    candidate inside a run dir must stay inside it (links out of a run dir are not followed)."""
    name = Path(recorded_path).name
    candidates: list[tuple[Path, Path | None]] = [(Path(recorded_path), None)]
    candidates += [(Path(run_dir) / "snapshots" / name, Path(run_dir)) for run_dir in run_dirs]
    candidates += [(Path(directory) / name, None) for directory in search_dirs]
    tried = []
    for candidate, confine in candidates:
        tried.append(str(candidate))
        if confine is not None and not candidate.resolve().is_relative_to(confine.resolve()):
            continue
        if candidate.is_file():
            return candidate.absolute(), tried
    return None, tried

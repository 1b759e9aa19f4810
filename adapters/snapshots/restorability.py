"""Whether a snapshot can be restored now, checked where it can be: tars on disk, images in an
engine.

The read models say what the log believes (`snapshots.restorable`: an import, an export or an
adoption was recorded, or a capture with no discard); nothing records a `docker rmi` or a deleted
tar, so a check looks (`check_restorable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...domain.errors import LineageError
from ..rundir import sha256_file
from .docker_engine import DockerEngine
from .snapshot_files import resolve_tar

#: How long `--check` waits for an engine that does not answer (its calls are a listing and `docker
#: info`).
ENGINE_CHECK_TIMEOUT_S = 10
NOT_ASKED = "not checked (--check asks the Docker engine)"
NOT_AN_IMAGE = "not checked: an environment layer is not an image"


@dataclass
class EngineView:
    """What one reachable engine holds, asked once per command; or why it could not be asked."""

    name: str | None
    image_ids: frozenset[str]
    unreachable: str | None = None
    engine: DockerEngine | None = None

    @classmethod
    def ask(cls, engine: DockerEngine) -> EngineView:
        # StoreUnavailable or a refusal: the check says so, and the list goes on.
        try:
            return cls(engine.identity(), frozenset(engine.list_image_ids()), engine=engine)
        except LineageError as exc:
            return cls(None, frozenset(), unreachable=exc.message)

    def named(self, ref: str) -> tuple[str | None, str | None]:
        """The id of the image `ref` names in this engine (None: none), or why the engine could not
        say."""
        assert self.engine is not None  # a reachable view
        try:
            return self.engine.image_id(ref), None
        except LineageError as exc:
            return None, exc.message


def check_restorable(
    rows: Iterable[dict[str, Any]],
    run_dirs: dict[str, list[str]],
    *,
    check: bool,
    engine: DockerEngine | None = None,
) -> Iterator[dict[str, Any]]:
    """Each `snapshots` row, its `restorable`, `restorable_because` and `image_check` updated by
    what the disk (and, with `check`, the engine) shows. The engine is asked once, on the first row
    that needs it.

    Without `check`, an exported snapshot's tar must still be where `snapshots import` would look,
    and the engine is not asked (`image_check` says so). With `check`, a snapshot whose
    restorability rests on recorded evidence (an import, an export or an adoption) goes to
    `_check_against`, a bare sandbox capture to `_check_capture`; an environment layer is not an
    image, and stays as the log says."""
    view: EngineView | None = None
    for row in rows:
        run_dirs_of = run_dirs.get(row["run"] or "", [])
        asks = _rests_on_evidence(row) or _bare_sandbox_capture(row)
        if check and asks:
            if view is None:
                view = EngineView.ask(engine or DockerEngine(timeout_s=ENGINE_CHECK_TIMEOUT_S))
            if _rests_on_evidence(row):
                _check_against(row, run_dirs_of, view)
            else:
                _check_capture(row, view)
        else:
            row["image_check"] = NOT_AN_IMAGE if check and row["restorable"] else NOT_ASKED
            _check_export_tar(row, run_dirs_of, rehash=check)
        yield row


def _bare_sandbox_capture(row: dict[str, Any]) -> bool:
    return bool(row["restorable"]) and row.get("layer") == "sandbox"


def _check_capture(row: dict[str, Any], view: EngineView) -> None:
    """A capture records its ref, not an id: the engine is asked which image the ref names (the one
    the harness committed under it); a ref that names no image there is not restorable, the reason
    naming the engine asked."""
    if view.unreachable is not None:
        row["image_check"] = f"not checked: {view.unreachable}"
        row["restorable_because"] += f"; the image was not checked ({view.unreachable})"
        return
    image_id, refused = view.named(row["ref"])
    if refused is not None:
        row["image_check"] = f"not checked: {refused}"
        row["restorable_because"] += f"; the image was not checked ({refused})"
    elif image_id is not None:
        row["image_check"] = f"image {image_id} is in {view.name} as {row['ref']!r}"
        row["restorable_because"] += f" (checked: {row['image_check']})"
    else:
        row["image_check"] = (
            f"{view.name} has no image named {row['ref']!r} (a capture records no image id)"
        )
        row.update(restorable=False, restorable_because=f"captured, but {row['image_check']}")


def _rests_on_evidence(row: dict[str, Any]) -> bool:
    return bool(row["restorable"]) and bool(row["imports"] or row["exports"] or row["adopted"])


def _recorded_tars(row: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, path, sha256) of every tar recorded for the snapshot, newest kind first, each path
    once."""
    tars = [
        ("exported tar", row.get("export_path"), row.get("export_sha256")),
        ("tar it was imported from", row.get("import_tar_path"), row.get("import_tar_sha256")),
        ("adopted tar", row.get("adopted_tar_path"), row.get("adopted_tar_sha256")),
    ]
    seen: set[str] = set()
    found = []
    for what, path, digest in tars:
        if path and digest and path not in seen:
            seen.add(path)
            found.append((what, path, digest))
    return found


def _recorded_image_ids(row: dict[str, Any]) -> list[str]:
    ids = [row.get("imported_image_id"), row.get("export_image_id"), row.get("adopted_image_id")]
    return list(dict.fromkeys(i for i in ids if i))


def _tar_problem(
    what: str, path: str, digest: str, run_dirs: list[str], rehash: bool
) -> str | None:
    """None when the tar is where `snapshots import` would look (and, with `rehash`, has its
    sha256)."""
    found, tried = resolve_tar(path, run_dirs, [])
    if found is None:
        return f"its {what} is gone (looked at {', '.join(tried)})"
    if rehash:
        try:
            now = sha256_file(found)
        except LineageError as exc:
            return f"its {what} {str(found)!r} cannot be read ({exc.message})"
        if now != digest:
            return f"its {what} {str(found)!r} now has {now}, not the recorded {digest}"
    return None


def _check_export_tar(row: dict[str, Any], run_dirs: list[str], *, rehash: bool) -> None:
    """Without --check: a snapshot restorable through its exported tar stays so while the tar is
    there, and is not once it is gone (`_lose_the_tar`)."""
    if not row["restorable"] or row["lifetime"] != "exported" or not row.get("export_path"):
        return
    problem = _tar_problem(
        "exported tar", row["export_path"], row["export_sha256"], run_dirs, rehash
    )
    if problem is not None:
        _lose_the_tar(row, problem)


def _lose_the_tar(row: dict[str, Any], problem: str) -> None:
    """A snapshot whose restorability rested on a recorded tar that is gone (or changed) is not
    restorable: the one rule for `list` and `show`, with or without `--check`. Only an engine
    found holding its recorded image (`--check`, `_check_against`) makes it restorable again; a
    capture never discarded may still be in one, and the reason says so, never as a yes."""
    maybe = (
        "; captured and never recorded as discarded, so an engine may still hold the image "
        "(`--check` asks one)"
        if row["captured"] and not row["discarded"]
        else ""
    )
    row.update(restorable=False, restorable_because=problem + maybe)


def _check_against(row: dict[str, Any], run_dirs: list[str], view: EngineView) -> None:
    """Restorable only while one of its recorded tars (exported, imported from, adopted) still has
    its recorded sha256, or the engine holds one of its recorded image ids: asked by id, never by
    ref (a retagged ref proves nothing, a renamed image still restores). Without an engine that
    answers, the tars decide as without `--check`, and the reason says the image was not checked,
    and why."""
    tars = _recorded_tars(row)
    problems = []
    backing_tar = None
    for what, path, digest in tars:
        problem = _tar_problem(what, path, digest, run_dirs, rehash=True)
        if problem is None:
            backing_tar = f"its {what} {path!r} has its recorded sha256"
            break
        problems.append(problem)
    ids = _recorded_image_ids(row)
    if view.unreachable is not None:
        row["image_check"] = f"not checked: {view.unreachable}"
        if backing_tar is None and row["lifetime"] == "exported" and problems:
            _lose_the_tar(row, problems[0])
        row["restorable_because"] += f"; the image was not checked ({view.unreachable})"
        return
    present = [i for i in ids if i in view.image_ids]
    if present:
        row["image_check"] = f"image {present[0]} is in {view.name}"
    elif ids:
        row["image_check"] = f"{view.name} has no image {' or '.join(ids)}"
    else:
        row["image_check"] = f"not checked: no image id is recorded (engine {view.name})"
    if backing_tar is not None or present:
        row["restorable_because"] += f" (checked: {backing_tar or row['image_check']})"
        return
    tar_part = (
        "no tar with its recorded sha256 (" + "; ".join(problems) + ")"
        if tars
        else "no tar recorded"
    )
    row.update(restorable=False, restorable_because=f"{tar_part}, and {row['image_check']}")

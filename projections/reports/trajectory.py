"""A run node's trajectories as a timeline (`lineage serve`'s `/trajectory/...`): what the log
recorded about each file, and the file itself only while it is the file the log recorded.

At import each trajectory file's SHA-256 and size are recorded on the node's
`run.evidence_observed` (`acp_trajectory`, `llm_trajectory`, Harbor's `atif_trajectory`). A page
reads the file from the run's directory (`runs.location`, the node's `folder` under it) through
`RunFolder`, contained like every run file: a link out of the run's directory is refused, a FIFO
or a device is never opened, and the file is read in bounded pieces, hashed as it is read. It is
shown only when its size and digest are still the recorded ones; otherwise (moved, edited, gone,
never recorded) the page says so and shows what the log recorded about its lines (each
observation's excerpt), never the changed file.

Line numbers are the review skill's: 1-based lines of the JSONL file (for ATIF, 1-based steps).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from ...adapters.duckdb_store import ReadModelDB
from ...adapters.rundir import RunFolder, read_json_file
from ...domain.errors import InvalidInput, LineageError, UnknownSubject
from .run_list import resolve_run
from .trajectory_shapes import Item, acp_items, atif_items, llm_items

#: The files a node's timeline can show: short name -> (path in the node's folder, evidence column
#: prefix).
FILES: dict[str, tuple[str, str]] = {
    "acp": ("trajectory/acp_trajectory.jsonl", "acp"),
    "llm": ("trajectory/llm_trajectory.jsonl", "llm"),
    "atif": ("agent/trajectory.json", "atif"),
}
PAGE_LINES = 50
PIECE = 1 << 20  # a line is read in pieces of at most this many bytes
SHOWN_LINE_BYTES = 256 * 1024  # of a longer line, only this much is kept and parsed for the page
RAW_TEXT = 20000  # characters of a record's raw JSON on the page
VERIFIED_KEPT = 256


class TrajectoryError(LineageError):
    """A trajectory page's parameter that is not what it should be."""


@dataclass(frozen=True)
class Observation:
    """One thing the import's review recorded about a line: which judge, what, and its excerpt."""

    source: str  # hack signal, validator issue, skill invocation, task-skill access, ...
    what: str
    file: str
    line: int | None
    excerpt: str


@dataclass(frozen=True)
class Recorded:
    """What the log recorded about one trajectory file of the node."""

    name: str
    path: str
    present: bool | None
    size: int | None
    sha256: str | None
    records: int | None


@dataclass
class Entry:
    line: int
    items: list[Item] = field(default_factory=list)
    raw: str = ""
    malformed: str | None = None
    cut: bool = False  # the line was longer than SHOWN_LINE_BYTES


@dataclass
class Timeline:
    """The page's document."""

    run: str
    node: str
    nodes: list[str]
    files: list[Recorded]
    file: Recorded | None
    state: str  # shown, changed, gone, unrecorded, absent, no-directory, refused
    reason: str
    observations: list[Observation]
    entries: list[Entry]
    page: int
    pages: int
    line: int | None
    location: str | None


def _observation(source: str, what: str, item: Any, excerpt: str) -> list[Observation]:
    if not isinstance(item, dict) or not item.get("file"):
        return []
    line = item.get("line")
    return [
        Observation(
            source, what, str(item["file"]), line if isinstance(line, int) else None, excerpt
        )
    ]


def _catalog_observations(catalog: Any) -> list[Observation]:
    """The startup skill catalog's line, and every skill invocation and task-skill access."""
    if not isinstance(catalog, dict):
        return []
    shown = ", ".join(str(s) for s in catalog.get("skills") or ())
    out = _observation("skill catalog", str(catalog.get("status")), catalog, shown)
    for source, key in (
        ("skill invocation", "invocations"),
        ("task-skill access", "task_skill_access"),
    ):
        for trace in catalog.get(key) or ():
            skill = str(trace.get("skill") or "") if isinstance(trace, dict) else ""
            marker = str(trace.get("marker")) if isinstance(trace, dict) else ""
            out += _observation(source, skill, trace, marker)
    return out


def _observations(review: Any) -> list[Observation]:
    """Every observation of the import's review that names a file, in the order recorded."""
    if isinstance(review, str):
        review = json.loads(review)
    if not isinstance(review, dict):
        return []
    out: list[Observation] = []
    for hack in review.get("hacks") or ():
        tool = f"[{hack['tool']}] " if hack.get("tool") else ""
        what = f"{hack.get('pattern')} ({hack.get('kind')})"
        out += _observation("hack signal", what, hack, tool + str(hack.get("evidence") or ""))
    for issue in review.get("issues") or ():
        detail = str(issue.get("detail") or "")
        out += _observation("validator issue", str(issue.get("check")), issue, detail)
    for signal in review.get("fidelity") or ():
        evidence = str(signal.get("evidence"))
        out += _observation("capability attribution", str(signal.get("kind")), signal, evidence)
    return out + _catalog_observations(review.get("skills"))


@dataclass(frozen=True)
class Source:
    """What the log says about one node's trajectories: where its files were read, and their
    digests."""

    run: str
    node: str
    nodes: list[str]
    location: str | None
    folder: str | None
    files: list[Recorded]
    observations: list[Observation]


def trajectory_source(db: ReadModelDB, given: str, node: str) -> Source:
    """The recorded side of the page (read models only; no file is opened here)."""
    run = resolve_run(db, given)
    location = db.scalar("SELECT location FROM runs WHERE run = ?", [run])
    rows = db.rows_if_tables_exist("SELECT * FROM evidence WHERE run = ? ORDER BY node", [run])
    nodes = [r["node"] for r in rows]
    if not rows and node == "root":
        return Source(run, node, [], location, None, [], [])
    chosen = next((r for r in rows if r["node"] == node), None)
    if chosen is None:
        raise UnknownSubject(
            f"expected a node of {run} with recorded evidence, found {node!r}",
            hint=f"nodes with evidence: {', '.join(nodes) or 'none'}",
        )
    files = [
        Recorded(
            name,
            path,
            chosen.get(f"{prefix}_present"),
            chosen.get(f"{prefix}_size"),
            chosen.get(f"{prefix}_sha256"),
            chosen.get(f"{prefix}_records"),
        )
        for name, (path, prefix) in FILES.items()
        if chosen.get(f"{prefix}_present") is not None
        or any(o.file == path for o in _observations(chosen.get("review")))
    ]
    return Source(
        run,
        node,
        nodes,
        location,
        chosen.get("folder"),
        files,
        _observations(chosen.get("review")),
    )


_verified: OrderedDict[tuple[Any, ...], tuple[str, int]] = OrderedDict()
_verified_lock = threading.Lock()


def _stat_key(path: Path, stat: os.stat_result) -> tuple[Any, ...]:
    return (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


class Changed(Exception):
    """The file is not the one the log recorded (or cannot be read as it)."""

    def __init__(self, state: str, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


def _open_recorded(source: Source, file: Recorded) -> tuple[Path, os.stat_result]:
    if not source.location:
        raise Changed("no-directory", "the log records no directory for this run")
    if file.sha256 is None or file.size is None:
        raise Changed(
            "unrecorded",
            "no SHA-256 of this file was recorded at import (imported before digests were, or "
            "by a layout that records none), so the file cannot be shown as the evidence",
        )
    base = Path(source.location)
    folder = source.folder or "."
    if Path(folder).is_absolute() or ".." in Path(folder).parts:
        raise Changed("refused", f"the recorded folder {folder!r} is not inside the run's")
    try:
        run_folder = RunFolder(base / folder, containment=base)
        path = run_folder.resolve(file.path)
    except (InvalidInput, OSError) as exc:
        raise Changed("refused", str(exc)) from None
    if path is None:
        raise Changed("gone", f"{base / folder / file.path} is not there any more")
    stat = os.stat(path)
    if not os.path.isfile(path):
        raise Changed("refused", f"{path} is not a regular file")
    if stat.st_size != file.size:
        raise Changed(
            "changed",
            f"{path} is {stat.st_size:,} bytes; the log recorded {file.size:,} at import",
        )
    return path, stat


@dataclass
class _Window:
    """Lines first..last of a file read in pieces: what was kept, and how far the read got."""

    first: int
    last: int
    kept: list[tuple[int, bytes, bool]] = field(default_factory=list)
    number: int = 1
    total: int = 0
    open_line: bool = False

    def read(self, handle: Any, digest: Any) -> None:
        """Read to the end (hashing into `digest`), or, with no digest, to the window's end."""
        current, cut = bytearray(), False
        while piece := handle.readline(PIECE):
            self.total += len(piece)
            if digest is not None:
                digest.update(piece)
            inside = self.first <= self.number <= self.last
            if inside:
                room = SHOWN_LINE_BYTES - len(current)
                current += piece[:room]
                cut = cut or len(piece) > room
            self.open_line = not piece.endswith(b"\n")
            if self.open_line:
                continue
            if inside:
                self.kept.append((self.number, bytes(current), cut))
            self.number, current, cut = self.number + 1, bytearray(), False
            if digest is None and self.number > self.last:
                return
        if self.open_line and self.first <= self.number <= self.last:
            self.kept.append((self.number, bytes(current), cut))

    @property
    def lines(self) -> int:
        return self.number if self.open_line else self.number - 1


def _known(key: tuple[Any, ...], recorded: str) -> int | None:
    """The line count of a file this very stat key already verified against `recorded`."""
    with _verified_lock:
        known = _verified.get(key)
    return known[1] if known is not None and known[0] == recorded else None


def _lines(
    path: Path, stat: os.stat_result, recorded: str, first: int, last: int
) -> tuple[list[tuple[int, bytes, bool]], int]:
    """Lines `first`..`last` (1-based, each cut to SHOWN_LINE_BYTES, with whether it was cut) and
    the number of lines, read in bounded pieces; the whole file is hashed on the way unless a
    check of this very file (same inode, size, times) already matched `recorded`. Raises `Changed`
    when the digest is not the recorded one."""
    key = _stat_key(path, stat)
    known = _known(key, recorded)
    digest = hashlib.sha256() if known is None else None
    window = _Window(first, last)
    # Non-blocking: a FIFO swapped in after the checks must not hang the server; the handle must
    # be the regular file that was checked (its inode), not whatever is at the path now.
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(descriptor, "rb") as handle:
        opened = os.fstat(descriptor)
        if not S_ISREG(opened.st_mode) or opened.st_ino != stat.st_ino:
            raise Changed("changed", f"{path} was replaced while it was read")
        window.read(handle, digest)
        after = os.fstat(handle.fileno())
    if _stat_key(path, after) != key:
        raise Changed("changed", f"{path} changed while it was read")
    if digest is None:
        return window.kept, known or 0
    found = "sha256:" + digest.hexdigest()
    if window.total != stat.st_size or found != recorded:
        raise Changed(
            "changed",
            f"{path} now has SHA-256 {found[7:19]}…; the log recorded {recorded[7:19]}… at import",
        )
    with _verified_lock:
        _verified[key] = (recorded, window.lines)
        if len(_verified) > VERIFIED_KEPT:
            _verified.popitem(last=False)
    return window.kept, window.lines


def _entry(name: str, number: int, raw: bytes, cut: bool) -> Entry:
    entry = Entry(number, cut=cut)
    text = raw.decode("utf-8", errors="replace")
    entry.raw = text[:RAW_TEXT] + (
        f"… ({len(text) - RAW_TEXT:,} more)" if len(text) > RAW_TEXT else ""
    )
    if cut:
        entry.malformed = f"longer than {SHOWN_LINE_BYTES:,} bytes: shown cut, not parsed"
        return entry
    if not text.strip():
        entry.malformed = "blank"
        return entry
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as exc:
        entry.malformed = f"not JSON: {exc}"
        return entry
    if not isinstance(record, dict):
        entry.malformed = "not a JSON object"
        return entry
    entry.items = llm_items(record) if name == "llm" else acp_items(record)
    return entry


def _page_of(number: int) -> int:
    return (number - 1) // PAGE_LINES + 1


def _unshown(chosen: Recorded | None, name: str | None) -> str | None:
    """Why the chosen file has nothing to read, or None when it was there at import."""
    if chosen is None:
        kind = " of this kind" if name else ""
        return f"the log records no trajectory file{kind} for this node"
    if not chosen.present:
        return f"{chosen.path} was not there when the run was imported"
    return None


def _read_page(source: Source, chosen: Recorded, page: int) -> tuple[list[Entry], int]:
    """The page's entries and the file's line (or step) count; `Changed` when not the recorded
    file."""
    path, stat = _open_recorded(source, chosen)
    if chosen.name == "atif":
        return _atif_page(path, stat, chosen.sha256 or "", page)
    first = (page - 1) * PAGE_LINES + 1
    kept, count = _lines(path, stat, chosen.sha256 or "", first, first + PAGE_LINES - 1)
    return [_entry(chosen.name, n, raw, cut) for n, raw, cut in kept], count


def timeline(source: Source, name: str | None, page: int | None, line: int | None) -> Timeline:
    """The page: the recorded files, the observations, and the chosen file's page of entries when
    the file is still the recorded one."""
    if name is not None and name not in FILES:
        raise TrajectoryError(f"expected file to be one of {', '.join(FILES)}, found {name!r}")
    if name is None:
        name = next((f.name for f in source.files if f.present), None)
    chosen = next((f for f in source.files if f.name == name), None)
    page = page or (_page_of(line) if line is not None else 1)
    result = Timeline(
        source.run,
        source.node,
        source.nodes,
        source.files,
        chosen,
        "absent",
        "",
        source.observations,
        [],
        page,
        1,
        line,
        source.location,
    )
    why = _unshown(chosen, name)
    if why is not None or chosen is None:
        result.reason = why or ""
        return result
    try:
        entries, count = _read_page(source, chosen, page)
    except Changed as exc:
        result.state, result.reason = exc.state, exc.reason
        return result
    except OSError as exc:
        result.state, result.reason = "refused", f"cannot be read: {exc.strerror or exc}"
        return result
    result.pages = max(1, _page_of(max(count, 1)))
    if page > result.pages:
        raise UnknownSubject(
            f"expected a page from 1 to {result.pages} of {chosen.path}, found {page}"
        )
    result.state = "shown"
    result.reason = f"{chosen.path}: {chosen.size:,} bytes, SHA-256 as recorded at import"
    result.entries = entries
    return result


def _atif_page(
    path: Path, stat: os.stat_result, recorded: str, page: int
) -> tuple[list[Entry], int]:
    """An ATIF document's steps on the page (the whole file verified first; it is parsed only
    under the importer's JSON cap)."""
    _lines(path, stat, recorded, 0, -1)  # hash only
    document = read_json_file(path)
    if os.stat(path).st_ctime_ns != stat.st_ctime_ns:
        raise Changed("changed", f"{path} changed while it was read")
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list):
        return [Entry(1, malformed="not an ATIF document (no steps list)")], 1
    first = (page - 1) * PAGE_LINES
    entries = []
    for number, step in enumerate(steps[first : first + PAGE_LINES], start=first + 1):
        entry = Entry(number)
        raw = json.dumps(step, ensure_ascii=False)
        entry.raw = raw[:RAW_TEXT] + (
            f"… ({len(raw) - RAW_TEXT:,} more)" if len(raw) > RAW_TEXT else ""
        )
        if isinstance(step, dict):
            entry.items = atif_items(step)
        else:
            entry.malformed = "not a JSON object"
        entries.append(entry)
    return entries, len(steps)

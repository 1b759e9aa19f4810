"""Reading a run directory as untrusted input: bounded, contained, and precise about what is wrong.

Every file an importer reads goes through a `RunFolder`; its errors are `InvalidInput` naming the
file, so the CLI can print them as they are.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..domain.errors import InvalidInput, MalformedJSON
from . import strict_json

#: Largest JSON file an importer reads into memory (read at call time, so tests can lower it): a
#: harness never writes lineage files that big, and reading one would put an attacker in charge of
#: our memory, so a larger file is refused before it is read.
MAX_JSON_BYTES = 16 * 1024 * 1024
#: A CTRF report lists every test with its timings (200,000 tests are about 50 MB), so it may be
#: this much larger.
CTRF_CAP_FACTOR = 16
CHUNK = 1 << 20  # files are hashed in 1 MiB chunks, never loaded whole
NOTHING_APPENDED = "nothing was appended for this run; fix or remove the file and import again"


class RunFolder:
    """A directory whose files are read safely; `relpath` names used in messages are relative to
    `root`.

    A path that resolves outside `containment` (through a symbolic link, or `..`) is refused rather
    than followed. The containment root is normally the run directory itself; for `bench eval
    ablate` runs it is the ablate output directory, because benchflow writes `ablation.json` one
    level above the job folder."""

    def __init__(self, root: Path, containment: Path | None = None) -> None:
        self.root = Path(os.path.abspath(root))
        self.containment = Path(os.path.realpath(containment or root))

    def resolve(self, relative: str | Path) -> Path | None:
        """The path of `relative` under the folder, or None if nothing is there; refuse anything
        that escapes."""
        path = self.root / relative
        if not os.path.lexists(path):
            return None
        self.check_contained(path)
        return path

    def check_contained(self, path: Path) -> None:
        real = Path(os.path.realpath(path))
        if real != self.containment and self.containment not in real.parents:
            raise InvalidInput(
                f"{path}: expected a file inside {self.containment}, "
                f"found a link that resolves to {real} outside it",
                hint="importers never follow links out of a run directory; " + NOTHING_APPENDED,
            )

    def contains(self, path: Path) -> bool:
        """Whether `path`, links resolved, stays inside the containment root (no error either
        way)."""
        real = Path(os.path.realpath(path))
        return real == self.containment or self.containment in real.parents

    def exists(self, relative: str | Path) -> bool:
        return self.resolve(relative) is not None

    def is_dir(self, relative: str | Path) -> bool:
        path = self.resolve(relative)
        return path is not None and path.is_dir()

    def read_json(self, relative: str | Path, *, cap_factor: int = 1) -> Any:
        """The parsed JSON of a file, or None if the file does not exist."""
        path = self.resolve(relative)
        if path is None:
            return None
        return read_json_file(path, cap_factor=cap_factor)

    def sha256(self, relative: str | Path) -> str:
        path = self.resolve(relative)
        if path is None:
            raise InvalidInput(f"{self.root / relative}: expected a file to hash, found nothing")
        return sha256_file(path)

    def subdirs(self, relative: str | Path) -> list[str]:
        """Names of the real subdirectories of `relative` (links are checked for containment, never
        entered)."""
        base = self.resolve(relative)
        if base is None or not base.is_dir():
            return []
        names = []
        for entry in sorted(os.scandir(base), key=lambda e: e.name):
            if entry.is_symlink():
                self.check_contained(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
        return names

    def regular_files(self, relative: str | Path) -> tuple[list[tuple[str, Path]], list[str]]:
        """(path relative to `relative`, absolute path) of every regular file below it, sorted,
        links not followed; and what was left out, each named with why.

        A link is not a regular file: it is left out and named, never followed, wherever it points
        (benchflow's `shutil.move` hands links over as links, and an agent may leave one to a path
        on its own machine; the record keeps no target, so nothing of the host gets in). FIFOs,
        devices and sockets are left out too: reading one would block or never end.
        """
        base = self.resolve(relative)
        if base is None or not base.is_dir():
            return [], []
        found: list[tuple[str, Path]] = []
        left_out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            for name in sorted(dirnames + filenames):
                full = Path(dirpath) / name
                mode = os.lstat(full).st_mode
                if stat.S_ISLNK(mode):
                    left_out.append(f"{full.relative_to(base).as_posix()} (a link, not followed)")
                elif stat.S_ISREG(mode):
                    found.append((full.relative_to(base).as_posix(), full))
                elif not stat.S_ISDIR(mode):
                    left_out.append(
                        f"{full.relative_to(base).as_posix()} (a FIFO, device or socket)"
                    )
        return sorted(found), sorted(left_out)


def require_regular(path: Path) -> None:
    """Refuse FIFOs, devices and sockets, which would block or never end when read."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read ({exc.strerror})", hint=NOTHING_APPENDED
        ) from None
    if stat.S_ISDIR(mode):
        raise InvalidInput(f"{path}: expected a file, found a directory", hint=NOTHING_APPENDED)
    if not stat.S_ISREG(mode):
        raise InvalidInput(
            f"{path}: expected a regular file, found a special file (FIFO, device or socket)",
            hint=NOTHING_APPENDED,
        )


def read_json_file(path: Path, *, cap_factor: int = 1) -> Any:
    """The parsed JSON of a regular file of at most `MAX_JSON_BYTES * cap_factor` bytes; malformed
    JSON is reported with its file, line and column."""
    cap = MAX_JSON_BYTES * cap_factor
    require_regular(path)
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > cap:
                raise InvalidInput(
                    f"{path}: expected a JSON file of at most {cap} bytes, found {size} bytes",
                    hint="run-directory JSON files are small; " + NOTHING_APPENDED,
                )
            data = handle.read(cap + 1)
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read ({exc.strerror})", hint=NOTHING_APPENDED
        ) from None
    if len(data) > cap:  # the file grew while we read it
        raise InvalidInput(
            f"{path}: expected a JSON file of at most {cap} bytes, found more",
            hint=NOTHING_APPENDED,
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _malformed(
            path, f"expected UTF-8 JSON, found an undecodable byte at offset {exc.start}"
        ) from None
    try:
        return strict_json.loads(text)
    except json.JSONDecodeError as exc:
        raise _malformed(
            path,
            f"line {exc.lineno}, column {exc.colno}: "
            f"expected valid JSON, found an error: {exc.msg}",
            after=", ",
        ) from None
    except ValueError as exc:
        # a repeated key, an integer past 4,300 digits: JSON, but not evidence we can read one way
        raise _malformed(
            path, f"expected JSON with one value per key and numbers of sane length, found: {exc}"
        ) from None
    except RecursionError:
        raise _malformed(
            path, "expected JSON of reasonable depth, found nesting too deep to read"
        ) from None


def _malformed(path: Path, reason: str, *, after: str = ": ") -> MalformedJSON:
    return MalformedJSON(f"{path}{after}{reason}", hint=NOTHING_APPENDED, reason=reason)


def sha256_file(path: Path) -> str:
    require_regular(path)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read to hash it ({exc.strerror})", hint=NOTHING_APPENDED
        ) from None
    return "sha256:" + digest.hexdigest()


def file_size(path: Path) -> int:
    return os.lstat(path).st_size


def parse_time(value: Any, where: str) -> datetime:
    """A benchflow `str(datetime)` ("YYYY-MM-DD HH:MM:SS.ffffff") or ISO-8601 time, as a moment to
    order the log by (`occurred_at`): a naive time, whose zone its writer never recorded, is read as
    UTC here only; facts keep the text as written (`run.finished.time_zone`)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(
            f"{where}: expected a time such as '2026-01-01 12:00:25.000000', found {value!r}",
            hint=NOTHING_APPENDED,
        )
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"{where}: expected a time such as '2026-01-01 "
            f"12:00:25.000000' or ISO-8601, found {value!r}",
            hint=NOTHING_APPENDED,
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None

"""Files a person names on the command line (keys, checkpoints, proofs, trusted keys, bundles, audit
matrices): read whole, but only regular files and only up to a cap.

One reader for all of them because each one is untrusted input: a FIFO or device named by mistake
(or on purpose) would block or never end, and a huge file would be read into memory before anything
could refuse it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..domain.errors import InvalidInput


def require_regular(path: str | Path, what: str) -> None:
    """Refuse (InvalidInput, naming `what`) anything but a regular file: opening a FIFO would wait
    forever for a writer, and a directory or device is never what a person meant. OSError when it
    cannot be looked at."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        found = "a directory" if stat.S_ISDIR(mode) else "a special file (FIFO, device or socket)"
        raise InvalidInput(f"{path}: expected {what} in a regular file, found {found}")


def read_capped(path: str | Path, limit: int, what: str) -> bytes:
    """The bytes of the regular file at `path`, refused (InvalidInput, naming `what`) when it cannot
    be read, is not a regular file, or holds more than `limit` bytes."""
    try:
        require_regular(path, what)
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InvalidInput(f"{path}: expected {what} of at most {limit:,} bytes, found more")
    return data

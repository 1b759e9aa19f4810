"""The walk over a `docker save` tar's members, in one pass: each member checked for what loading it
would do (links, absolute or `..` names, repeats) and hashed on the way past (`tar_stream`), small
JSON members kept.

`snapshot_tar` runs the cross-checks on what this walk collected; both record problems with a
severity, so the report can name the most important one first.
"""

from __future__ import annotations

import posixpath
import tarfile
from dataclasses import dataclass

from .tar_stream import HEADER_READ_CAP, REEXPORT, MemberDigest, OversizedRead, TeeReader

_MAX_MEMBERS = (
    100_000  # docker save writes a few per layer; far more means a hostile or foreign archive
)
_TAR_TYPES = {tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE}


#: How much a problem matters, most first: a member that would escape or replace files on load, or a
#: second image; bytes that are not what their digests say; a damaged file; something missing or
#: unreadable.
UNSAFE, ALTERED, DAMAGED, INCOMPLETE = range(4)


class _Abort(Exception):
    """Stops the walk: the rest of the archive cannot be trusted to parse (the problem is already
    recorded)."""


@dataclass
class Seen:
    kind: str  # "file" | "dir" | "other"
    size: int = 0
    sha256: str | None = None
    diff_id: str | None = None
    note: str | None = (
        None  # why the diff_id is unknown; reported only if the member is used as a layer
    )


class MemberWalk:
    """The walk over the members; what it saw (`seen`), kept (`kept`) and found wrong
    (`problems`)."""

    def __init__(self, member_cap: int, json_cap: int) -> None:
        self.member_cap = member_cap
        self.json_cap = json_cap
        self.json_budget = json_cap
        self.seen: dict[str, Seen] = {}
        self.kept: dict[str, bytes] = {}
        self.problems: list[tuple[int, str]] = []  # (severity, sentence)
        self.complete = False  # False when the walk stopped early: missing members are then no news

    def _flag(self, severity: int, sentence: str) -> None:
        self.problems.append((severity, sentence))

    def walk(self, reader: TeeReader) -> None:
        last_name: str | None = None
        try:
            archive = tarfile.open(fileobj=reader, mode="r:")  # noqa: SIM115 (closed in finally)
            for count in range(_MAX_MEMBERS + 1):
                member = archive.next()
                if member is None:
                    return self._check_end(reader, archive.offset, last_name)
                # TarFile keeps every TarInfo in `members`; `self.seen` is our own bounded index.
                # The attribute is CPython's (every version since 2.x) but not in the typing stubs.
                archive.members.clear()  # type: ignore[attr-defined]
                if count == _MAX_MEMBERS:
                    self._flag(
                        INCOMPLETE,
                        f"The tar holds more than {_MAX_MEMBERS} members; expected the few "
                        f"members per layer that `docker save` writes; the rest was not checked.",
                    )
                    return None
                self._visit(member, reader)
                last_name = member.name
        except _Abort:
            pass
        except OSError:
            raise  # the disk failed, not the input: the caller reports the path as unreadable
        except Exception as exc:
            self._flag(DAMAGED, _parse_failure(reader, exc, last_name))
        return None

    def _check_end(self, reader: TeeReader, offset: int, last_name: str | None) -> None:
        header = reader.last_read
        where = f"after member {last_name!r}" if last_name else "at its start"
        if len(header) == tarfile.BLOCKSIZE and header.count(0) == tarfile.BLOCKSIZE:
            self.complete = True
            if not reader.drain():
                self._flag(
                    DAMAGED,
                    "The tar has non-zero bytes after its end-of-archive marker; expected only "
                    f"zero padding; something was appended to the file, so {REEXPORT}.",
                )
        elif len(header) < tarfile.BLOCKSIZE:
            self._flag(
                DAMAGED,
                f"The tar ends {where} without an end-of-archive marker; expected a complete "
                "`docker save` archive; the file is truncated, so copy or export it again.",
            )
        else:
            self._flag(
                DAMAGED,
                f"The tar has an unreadable header at byte {offset} ({where}); expected a tar "
                "header or the end-of-archive marker; the "
                "file is corrupt, so copy or export it again.",
            )

    def _visit(self, member: tarfile.TarInfo, reader: TeeReader) -> None:
        name = member.name
        key = posixpath.normpath(name)
        kind = _unsafe_kind(member)
        if name.startswith("/"):
            self._flag(
                UNSAFE,
                f"Member {name!r} has an absolute path; expected relative names only; {REEXPORT}.",
            )
        elif ".." in name.split("/") or key in ("", "."):
            self._flag(
                UNSAFE,
                f"Member {name!r} has an empty name or a '..' component; expected plain relative "
                f"names that stay inside the archive; {REEXPORT}.",
            )
        elif key in self.seen:
            self._flag(
                UNSAFE,
                f"Member {name!r} appears more than once; expected each name once, since a later "
                f"copy silently replaces the earlier one on load; {REEXPORT}.",
            )
        elif kind:
            self.seen[key] = Seen("other")
            self._flag(
                UNSAFE,
                f"Member {name!r} is a {kind}; expected only regular files and directories in a "
                f"snapshot tar; {REEXPORT}.",
            )
        elif member.isdir():
            self.seen[key] = Seen("dir")
        elif member.size > self.member_cap:
            self.seen[key] = Seen(
                "file",
                member.size,
                note=(
                    f"Member {name!r} is {member.size} bytes, over "
                    f"the member cap of {self.member_cap}; expected "
                    "smaller members; raise the cap to verify it."
                ),
            )
        else:
            self.seen[key] = self._hash_member(key, member, reader)

    def _hash_member(self, key: str, member: tarfile.TarInfo, reader: TeeReader) -> Seen:
        reader.seek(member.offset_data)
        keep = member.size <= self.json_budget and (
            key in ("manifest.json", "index.json")
            or key.startswith("blobs/")
            or ("/" not in key and key.endswith(".json"))
        )
        digest = MemberDigest(key, b"", self.member_cap)
        parts: list[bytes] = []
        got = 0
        for view in reader.views(member.size):
            if not got:
                digest = MemberDigest(key, bytes(view[:16]), self.member_cap)
                # only JSON is ever parsed
                keep = keep and bytes(view[:64]).lstrip()[:1] in (
                    b"{",
                    b"[",
                )
            digest.update(view)
            got += len(view)
            if keep:
                parts.append(bytes(view))
        if got < member.size:
            self._flag(
                DAMAGED,
                f"The tar ends inside member {member.name!r} "
                f"({got} of {member.size} bytes present); "
                "expected a complete archive; the file is truncated, so copy or export it again.",
            )
            raise _Abort
        if keep:
            self.kept[key] = b"".join(parts)
            self.json_budget -= member.size
        diff_id = digest.diff_id()
        note = digest.problem
        if digest.compression not in (None, "gzip"):
            note = (
                f"Member {member.name!r} is {digest.compression}-compressed; "
                f"expected an uncompressed or gzip layer, the only kinds "
                f"whose diff_id can be checked offline; {REEXPORT}."
            )
        return Seen("file", member.size, digest.raw.hexdigest(), diff_id, note)

    # -- cross-checks on what the walk collected ---------------------------------------------------


def _unsafe_kind(member: tarfile.TarInfo) -> str | None:
    if member.issym():
        return f"symbolic link (to {member.linkname!r})"
    if member.islnk():
        return f"hard link (to {member.linkname!r})"
    if member.ischr() or member.isblk() or member.isfifo():
        return "device or FIFO node"
    if not member.isdir() and member.type not in _TAR_TYPES:
        return f"member of unsupported tar type {member.type!r} (e.g. sparse)"
    return None


def _parse_failure(reader: TeeReader, exc: Exception, last_name: str | None) -> str:
    if last_name is None and reader.head.startswith(b"\x1f\x8b"):
        return (
            "The file is gzip-compressed; expected the uncompressed tar `docker "
            "save` writes; decompress it (gunzip) and verify the result."
        )
    if isinstance(exc, OversizedRead):
        return (
            f"The tar has a header at or after byte {reader.tell()} that asks for "
            f"{exc} bytes of extended (pax or GNU long-name) data; expected at most "
            f"{HEADER_READ_CAP}; the file is corrupt or hostile, so {REEXPORT}."
        )
    if last_name is None:
        return (
            f"The file is not a tar archive ({exc or type(exc).__name__}); "
            f"expected the output of `docker save`; "
            "check that the path names the snapshot tar, and export it again if it does."
        )
    return (
        f"The tar is {'truncated' if reader.exhausted else 'corrupt'} after "
        f"member {last_name!r} ({type(exc).__name__}: {exc}); expected a "
        f"complete, well-formed archive; copy or export the file again."
    )

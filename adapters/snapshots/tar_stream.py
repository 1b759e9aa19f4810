"""The single pass under `snapshot_tar.verify_tar`: a tar read once, in large chunks, each member
hashed on the way past, so verification costs about one plain `sha256sum` of the file. This part is
bytes, threads and compression; what the digests must match is decided in `snapshot_tar`.
"""

from __future__ import annotations

import hashlib
import queue
import tarfile
import threading
import zlib
from collections.abc import Iterator
from typing import Any

from .. import progress

CHUNK_BYTES = 4 << 20  # a multiple of the 512-byte tar block, so headers never straddle two chunks
HEADER_READ_CAP = 1 << 20  # pax and GNU long-name headers are read whole; real ones are far smaller
# small input slices bound the copying zlib does for a highly compressed layer
_INFLATE_IN_BYTES = 256 << 10
_INFLATE_OUT_BYTES = 8 << 20
REEXPORT = "re-export the image with `docker save` and verify the new file"


class OversizedRead(Exception):
    """tarfile asked for more header bytes (pax or GNU long name) than a real header could need."""


class TeeReader:
    """Forward-only file object: each chunk read from disk goes to the whole-file hasher thread and
    to the walk.

    The second thread hashes the whole file (the `sha256` benchflow records for an export); the
    main thread walks the tar headers with `tarfile` over this reader, and `MemberDigest` hashes
    each member's bytes as zero-copy views of the same chunk. hashlib releases the GIL for large
    updates, so the two digests run on two cores."""

    def __init__(self, raw: Any, size: int | None = None) -> None:
        self._raw = raw
        self.size = size  # for progress only
        # bounds memory if the walk runs ahead
        self._chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
        self._whole = hashlib.sha256()
        self._thread = threading.Thread(target=self._hash_chunks, name="tar-sha256", daemon=True)
        self._thread.start()
        self._chunk = b""
        self._view = memoryview(b"")
        self._chunk_start = 0
        self._chunk_end = 0
        self._pos = 0
        self.exhausted = False
        self.head = b""
        self.last_read = b""

    def _hash_chunks(self) -> None:
        while (chunk := self._chunks.get()) is not None:
            self._whole.update(chunk)

    def _fill(self) -> bool:
        chunk = self._raw.read(CHUNK_BYTES)
        if not chunk:
            self.exhausted = True
            return False
        self._chunks.put(chunk)
        if not self._chunk_end:
            self.head = chunk[:8]
        self._chunk, self._view = chunk, memoryview(chunk)
        self._chunk_start, self._chunk_end = self._chunk_end, self._chunk_end + len(chunk)
        progress.advance("verifying the tar", self._chunk_end, self.size)
        return True

    def views(self, count: int) -> Iterator[memoryview]:
        """Yield up to `count` bytes as views of the chunks (fewer only at end of file)."""
        while count > 0:
            if self._pos >= self._chunk_end and (self._pos > self._chunk_end or not self._fill()):
                return
            start = self._pos - self._chunk_start
            step = min(count, self._chunk_end - self._pos)
            yield self._view[start : start + step]
            self._pos += step
            count -= step

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0 or size > HEADER_READ_CAP:
            raise OversizedRead(size)
        self.last_read = b"".join(bytes(view) for view in self.views(size))
        return self.last_read

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0 or offset < self._pos:
            raise tarfile.ReadError(f"backward seek to {offset} (a negative member size)")
        for _ in self.views(offset - self._pos):
            pass
        self._pos = offset  # past end of file, like a real file: later reads return b""
        return self._pos

    def write(self, data: bytes) -> int:
        # Part of the file-object shape tarfile.open expects; a verifier only reads.
        raise OSError(f"TeeReader is read-only; refused a write of {len(data)} bytes")

    def close(self) -> None:
        # tarfile leaves a file object it was given open; `finish` or `stop` ends the hasher thread.
        return None

    def drain(self) -> bool:
        """Read to end of file (so the whole-file digest is complete); True if every byte read was
        zero."""
        all_zero = True
        while True:
            if self._pos < self._chunk_end:
                rest = self._chunk[self._pos - self._chunk_start :]
                all_zero = all_zero and rest.count(0) == len(rest)
                self._pos = self._chunk_end
            if self._pos > self._chunk_end or not self._fill():
                return all_zero

    def finish(self) -> tuple[str, int]:
        """Hash whatever the walk left unread (it may have stopped early) and return the whole-file
        digest."""
        while self._fill():
            pass
        self.stop()
        return "sha256:" + self._whole.hexdigest(), self._chunk_end

    def stop(self) -> None:
        if self._thread.is_alive():
            self._chunks.put(None)
            self._thread.join()


class MemberDigest:
    """sha256 of a member's bytes and, when it is a gzip stream, of its decompressed bytes (the
    diff_id, which names the uncompressed layer), fed in small slices."""

    def __init__(self, name: str, head: bytes, decompressed_cap: int) -> None:
        self.name = name
        self.raw = hashlib.sha256()
        self.compression = sniff_compression(head)
        self.plain = hashlib.sha256() if self.compression == "gzip" else None
        self.problem: str | None = None
        self._inflater = zlib.decompressobj(wbits=31)
        self._fed = False
        self._plain_bytes = 0
        self._cap = decompressed_cap

    def update(self, view: memoryview) -> None:
        self.raw.update(view)
        for start in range(0, len(view), _INFLATE_IN_BYTES) if self.plain else ():
            self._inflate(view[start : start + _INFLATE_IN_BYTES])

    def _inflate(self, data: bytes | memoryview) -> None:
        try:
            while self.plain is not None:
                self._fed = self._fed or bool(data)
                out = self._inflater.decompress(data, _INFLATE_OUT_BYTES)
                self.plain.update(out)
                self._plain_bytes += len(out)
                if self._plain_bytes > self._cap:
                    self._fail(
                        f"decompresses to more than {self._cap} bytes (the member cap)",
                        "raise the cap",
                    )
                elif self._inflater.eof:  # gzip allows several members back to back
                    data, self._inflater, self._fed = (
                        self._inflater.unused_data,
                        zlib.decompressobj(wbits=31),
                        False,
                    )
                    if not data:
                        return
                else:
                    data = self._inflater.unconsumed_tail
                    # a full output may leave more pending
                    if not data and len(out) < _INFLATE_OUT_BYTES:
                        return
        except zlib.error as exc:
            self._fail(f"is not a valid gzip stream ({exc})", REEXPORT)

    def _fail(self, found: str, action: str) -> None:
        self.plain = None
        self.problem = (
            f"Member {self.name!r} starts like a gzip-compressed layer but {found}; "
            f"expected a layer whose uncompressed digest can be computed; {action}."
        )

    def diff_id(self) -> str | None:
        if self.compression is None:
            return self.raw.hexdigest()
        if self.plain is None:
            return None
        if self._fed:
            self._fail("ends in the middle of the stream", REEXPORT)
            return None
        return self.plain.hexdigest()


def sniff_compression(head: bytes) -> str | None:
    """Name the compression by its magic bytes (bzip2's block magic too: "BZh" alone could begin a
    file name)."""
    if head[:3] == b"BZh" and head[4:10] == b"1AY&SY":
        return "bzip2"
    for magic, name in (
        (b"\x1f\x8b", "gzip"),
        (b"\xfd7zXZ\x00", "xz"),
        (b"\x28\xb5\x2f\xfd", "zstd"),
    ):
        if head.startswith(magic):
            return name
    return None

"""Throughput of `verify_tar` against a plain hashlib.sha256 pass over the same `docker save`-shaped tar.

The ratio is the figure that matters: verification does two digests over the layer bytes (whole file
and per member), so it is only as cheap as `sha256sum` if the second digest really runs on the other
core. Both timings are the median of three runs after one warm-up read, so the page cache serves
every run alike. The tar is built once under bench/out/ (gitignored) and reused.

Usage: python bench/tar_verify.py [--quick | --size-mib N]    (prints one JSON object)
"""  # noqa: E501

from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import statistics
import tarfile
import time
from pathlib import Path

from rollout_lineage.adapters.snapshots.snapshot_tar import verify_tar

OUT_DIR = Path(__file__).resolve().parent / "out"
LAYER_MIB = 128
READ_BYTES = 4 << 20


class _RandomBytes(io.RawIOBase):
    """`size` pseudo-random bytes, generated as read, so building a 1 GiB layer never holds it in
    memory."""

    def __init__(self, size: int, seed: int) -> None:
        self._left = size
        self._random = random.Random(seed)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        size = self._left if size < 0 else min(size, self._left)
        self._left -= size
        return self._random.randbytes(size)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as source:
        while chunk := source.read(READ_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _add_file(archive: tarfile.TarFile, name: str, source: Path | bytes) -> None:
    info = tarfile.TarInfo(name)
    if isinstance(source, bytes):
        info.size = len(source)
        archive.addfile(info, io.BytesIO(source))
        return
    info.size = source.stat().st_size
    with open(source, "rb") as stream:
        archive.addfile(info, stream)


def build_tar(size_mib: int) -> Path:
    """A legacy-layout `docker save` tar whose layers hold `size_mib` MiB of random file content in
    total."""
    path = OUT_DIR / f"bench-{size_mib}mib.tar"
    if path.exists():
        return path
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    staging = OUT_DIR / "layer.tmp"
    layer_names, diff_ids = [], []
    partial = path.with_suffix(".partial")
    with tarfile.open(partial, "w") as archive:
        for index in range(max(1, -(-size_mib // LAYER_MIB))):
            mib = min(LAYER_MIB, size_mib - index * LAYER_MIB)
            with tarfile.open(staging, "w") as layer:
                info = tarfile.TarInfo(f"data/blob-{index}.bin")
                info.size = mib << 20
                layer.addfile(info, _RandomBytes(info.size, seed=index))
            diff_id = _file_sha256(staging)
            layer_names.append(f"{diff_id}/layer.tar")
            diff_ids.append("sha256:" + diff_id)
            _add_file(archive, layer_names[-1], staging)
        config = json.dumps(
            {"os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}
        ).encode()
        config_name = hashlib.sha256(config).hexdigest() + ".json"
        _add_file(archive, config_name, config)
        manifest = [{"Config": config_name, "RepoTags": ["bench:latest"], "Layers": layer_names}]
        _add_file(archive, "manifest.json", json.dumps(manifest).encode())
    staging.unlink()
    partial.replace(path)
    return path


def _median_seconds(action, runs: int = 3) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def run(quick: bool = False, size_mib: int | None = None) -> dict:
    size_mib = max(1, size_mib or (128 if quick else 1024))
    path = build_tar(size_mib)
    report = verify_tar(path)  # also the warm-up read that puts the file in the page cache
    if not report.ok:
        raise SystemExit(f"benchmark tar {path} failed verification: {report.problems}")
    tar_bytes = path.stat().st_size
    mib = tar_bytes / (1 << 20)
    verify_s = _median_seconds(lambda: verify_tar(path))
    hashlib_s = _median_seconds(lambda: _file_sha256(path))
    return {
        "tar_bytes": tar_bytes,
        "layers": len(report.layers),
        "verify_seconds": round(verify_s, 3),
        "hashlib_seconds": round(hashlib_s, 3),
        "verify_mib_per_s": round(mib / verify_s, 1),
        "hashlib_mib_per_s": round(mib / hashlib_s, 1),
        "tar_verify_ratio_vs_hashlib": round(hashlib_s / verify_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="use a 128 MiB tar instead of 1 GiB")
    parser.add_argument("--size-mib", type=int, help="total layer content in MiB (default 1024)")
    arguments = parser.parse_args()
    print(json.dumps(run(quick=arguments.quick, size_mib=arguments.size_mib)))


if __name__ == "__main__":
    main()

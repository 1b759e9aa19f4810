"""Image tars built here, in both layouts `docker save` writes (legacy and OCI), for the tests of
`verify_tar`, `snapshots verify`/`adopt` and their fuzzing: small layers with known payloads, so a
test can damage one byte."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

Entry = tuple[tarfile.TarInfo, bytes]
PAYLOADS = [b"first layer payload\n" * 50, b"SECOND-LAYER-MARKER " * 800]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_entry(name: str, data: bytes) -> Entry:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def special_entry(name: str, kind: bytes, linkname: str = "") -> Entry:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, b""


def tar_bytes(entries: list[Entry]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for info, data in entries:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


def layer_tar(index: int, payload: bytes) -> bytes:
    return tar_bytes([file_entry(f"layer{index}/data.txt", payload)])


def config_json(diff_ids: list[str]) -> bytes:
    return json.dumps(
        {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    ).encode()


def legacy_entries(
    *, gzip_layer: int | None = None, tags=("snap-x:latest",), diff_ids=None, store=None
) -> tuple[list[Entry], dict]:
    entries: list[Entry] = []
    layer_names, real_diff_ids = [], []
    for index, payload in enumerate(PAYLOADS):
        plain = layer_tar(index, payload)
        stored = gzip.compress(plain, mtime=0) if index == gzip_layer else plain
        stored = store(index, stored) if store else stored
        layer_dir = sha(f"layer-{index}".encode())
        entries += [
            special_entry(layer_dir, tarfile.DIRTYPE),
            file_entry(f"{layer_dir}/VERSION", b"1.0"),
            file_entry(f"{layer_dir}/json", b'{"id": "x"}'),
            file_entry(f"{layer_dir}/layer.tar", stored),
        ]
        layer_names.append(f"{layer_dir}/layer.tar")
        real_diff_ids.append("sha256:" + sha(plain))
    config = config_json(diff_ids or real_diff_ids)
    config_name = sha(config) + ".json"
    manifest = [{"Config": config_name, "RepoTags": list(tags), "Layers": layer_names}]
    entries += [
        file_entry(config_name, config),
        file_entry("manifest.json", json.dumps(manifest).encode()),
        file_entry("repositories", b"{}"),
    ]
    return entries, {
        "image_id": "sha256:" + sha(config),
        "config": config_name,
        "layers": layer_names,
        "diff_ids": real_diff_ids,
    }


def oci_entries(*, gzip_layer: int | None = 1) -> tuple[list[Entry], dict]:
    blobs: list[Entry] = []
    descriptors, layer_names, diff_ids = [], [], []
    for index, payload in enumerate(PAYLOADS):
        plain = layer_tar(index, payload)
        stored = gzip.compress(plain, mtime=0) if index == gzip_layer else plain
        blobs.append(file_entry(f"blobs/sha256/{sha(stored)}", stored))
        layer_names.append(f"blobs/sha256/{sha(stored)}")
        diff_ids.append("sha256:" + sha(plain))
        descriptors.append(
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": "sha256:" + sha(stored),
                "size": len(stored),
            }
        )
    config = config_json(diff_ids)
    oci_manifest = json.dumps(
        {
            "schemaVersion": 2,
            "config": {"digest": "sha256:" + sha(config), "size": len(config)},
            "layers": descriptors,
        }
    ).encode()
    index = {
        "schemaVersion": 2,
        "manifests": [{"digest": "sha256:" + sha(oci_manifest), "size": len(oci_manifest)}],
    }
    manifest = [
        {
            "Config": f"blobs/sha256/{sha(config)}",
            "RepoTags": ["snap-oci:v1"],
            "Layers": layer_names,
        }
    ]
    entries = [
        special_entry("blobs", tarfile.DIRTYPE),
        special_entry("blobs/sha256", tarfile.DIRTYPE),
        *blobs,
        file_entry(f"blobs/sha256/{sha(config)}", config),
        file_entry(f"blobs/sha256/{sha(oci_manifest)}", oci_manifest),
        file_entry("index.json", json.dumps(index).encode()),
        file_entry("manifest.json", json.dumps(manifest).encode()),
        file_entry("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'),
    ]
    return entries, {
        "image_id": "sha256:" + sha(config),
        "config": f"blobs/sha256/{sha(config)}",
        "layers": layer_names,
        "diff_ids": diff_ids,
    }


def write(tmp_path: Path, data: bytes, name: str = "snap.tar") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path

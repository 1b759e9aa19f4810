"""`lineage snapshots export/import` against a real Docker engine: the round trip, and hostile
archives.

Every hostile archive is derived from a REAL `docker save` tar of a committed container, whose image
is then removed from the engine, so a load that slipped through would add an image id to the
engine's list. Each is recorded as the run's export with the hostile file's own sha256 (unless the
test is about the digest), so it is the offline verification, not the digest comparison alone, that
must refuse it.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.integration.docker_helpers import (
    BUSYBOX,
    rootfs_tar,
)

RUN = "jobs/snap-task__1"


def sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def commit_a_change(docker_engine, docker_client, image: str, repository: str) -> str:
    """Run a container of `image` that changes a file, and commit it as `repository:latest` (returns
    the id)."""
    if BUSYBOX.exists():
        container = docker_client.containers.run(
            image, ["/bin/sh", "-c", "echo captured > /stage.txt"], network_mode="none", detach=True
        )
        assert container.wait(timeout=60)["StatusCode"] == 0
    else:
        container = docker_client.containers.create(image, ["/hello.txt"], network_mode="none")
    try:
        return docker_engine.commit(container.id, repository, "latest")
    finally:
        container.remove(force=True)


def ingest(run_cli: Cli, tmp_path: Path, facts: list[dict]) -> None:
    source = tmp_path / f"facts-{uuid.uuid4().hex[:6]}.jsonl"
    source.write_text("".join(json.dumps(fact) + "\n" for fact in facts))
    run_cli("ingest", str(source))


def capture(run_cli: Cli, tmp_path: Path, ref: str, run_dir: Path) -> None:
    ingest(
        run_cli,
        tmp_path,
        [
            {"type": "run.registered", "run": RUN, "task": "snap-task", "run_dir": str(run_dir)},
            {"type": "stage.marked", "run": RUN, "stage": "env-ready", "sandbox_ref": ref},
        ],
    )


def log_facts(run_cli: Cli, fact_type: str) -> list[dict]:
    return [
        json.loads(line)["fact"]
        for line in run_cli("log", "--type", fact_type, "--format", "jsonl").stdout.splitlines()
    ]


def engine_name(docker_client) -> str:
    info = docker_client.info()
    return f"{info['Name']} ({info['ID']})"


# -- the round trip --------------------------------------------------------------------------------


@pytest.mark.docker
def test_round_trip_commit_export_remove_import(
    docker_engine, docker_client, test_image, run_cli, tmp_path
):
    # untagged, as benchflow names sandbox refs; docker saves it as :latest
    ref = test_image.split(":")[0] + "-snap"
    image_id = commit_a_change(docker_engine, docker_client, test_image, ref)
    run_dir = tmp_path / "run"
    capture(run_cli, tmp_path, ref, run_dir)

    exported = json.loads(
        run_cli(
            "snapshots", "export", ref, "--to", str(run_dir / "snapshots"), "--format", "json"
        ).stdout
    )
    tar = run_dir / "snapshots" / f"{ref}.tar"
    assert [(row["status"], row["tar_path"], row["image_id"]) for row in exported] == [
        ("exported", str(tar), image_id)
    ]
    # no staged or partial file left behind
    assert sorted(p.name for p in tar.parent.iterdir()) == [tar.name]
    assert log_facts(run_cli, "snapshot.exported") == [
        {"ref": ref, "path": str(tar), "sha256": sha(tar), "image_id": image_id}
    ]

    assert docker_engine.remove_image(ref) is True
    assert docker_engine.image_id(ref) is None
    imported = json.loads(run_cli("snapshots", "import", "--run", RUN, "--format", "json").stdout)
    assert [(row["ref"], row["status"], row["image_id"]) for row in imported] == [
        (ref, "imported", image_id)
    ]
    assert docker_engine.image_id(ref) == image_id
    assert log_facts(run_cli, "snapshot.imported") == [
        {
            "ref": ref,
            "engine": engine_name(docker_client),
            "image_id": image_id,
            "tar_sha256": sha(tar),
            "tar_path": str(tar),
        }
    ]
    shown = json.loads(run_cli("snapshots", "show", ref, "--format", "json").stdout)
    assert (shown["snapshot"]["lifetime"], shown["snapshot"]["restorable"]) == ("imported", True)
    assert [event["kind"] for event in shown["events"]] == ["captured", "exported", "imported"]


@pytest.mark.docker
def test_bare_tar_matching_a_recorded_export_imports(
    docker_engine, docker_client, test_image, run_cli, tmp_path
):
    ref = test_image.split(":")[0] + "-bare"
    image_id = commit_a_change(docker_engine, docker_client, test_image, ref)
    capture(run_cli, tmp_path, ref, tmp_path / "run")
    run_cli("snapshots", "export", ref, "--to", str(tmp_path / "out"))
    tar = tmp_path / "out" / f"{ref}.tar"
    copy = tmp_path / "copy.tar"
    copy.write_bytes(tar.read_bytes())
    docker_engine.remove_image(ref)
    result = run_cli("snapshots", "import", str(copy), "--format", "json")
    assert [(row["ref"], row["status"]) for row in json.loads(result.stdout)] == [(ref, "imported")]
    assert docker_engine.image_id(ref) == image_id
    assert log_facts(run_cli, "snapshot.imported")[0]["tar_path"] == str(copy)


@pytest.mark.docker
def test_adopting_an_unrecorded_tar(docker_engine, docker_client, test_image, run_cli, tmp_path):
    ref = test_image.split(":")[0] + "-stray"
    image_id = commit_a_change(docker_engine, docker_client, test_image, ref)
    tar, _, _ = docker_engine.save_to(ref, tmp_path, "stray.tar")
    docker_engine.remove_image(ref)
    refused = run_cli("snapshots", "import", str(tar), ok=False)
    assert refused.exit_code == 1 and docker_engine.image_id(ref) is None
    adopted = json.loads(
        run_cli("snapshots", "import", str(tar), "--adopt", "--format", "json").stdout
    )
    assert [(row["ref"], row["status"], row["image_id"]) for row in adopted] == [
        (ref, "adopted", image_id)
    ]
    assert docker_engine.image_id(ref) == image_id
    assert log_facts(run_cli, "snapshot.adopted") == [
        {"ref": ref, "tar_sha256": sha(tar), "image_id": image_id, "tar_path": str(tar)}
    ]
    [row] = json.loads(run_cli("snapshots", "list", "--format", "json").stdout)
    assert (row["ref"], row["adopted"], row["lifetime"], row["run"]) == (
        ref,
        True,
        "imported",
        None,
    )
    # now the log knows it
    again = json.loads(run_cli("snapshots", "import", str(tar), "--format", "json").stdout)
    assert [row["status"] for row in again] == ["imported"]


# -- hostile archives ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Genuine:
    ref: str
    image_id: str
    base_id: str
    tar: Path


@pytest.fixture(scope="module")
def genuine(docker_engine, docker_client, tmp_path_factory):
    """A real export of a committed container; its image is removed, so any load would show in the
    image list."""
    repository = f"lineage-hostile-{uuid.uuid4().hex[:10]}"
    folder = tmp_path_factory.mktemp("genuine")
    docker_client.api.import_image_from_file(
        str(rootfs_tar(folder / "rootfs.tar")), repository=f"{repository}-base", tag="v1"
    )
    image_id = commit_a_change(docker_engine, docker_client, f"{repository}-base:v1", repository)
    tar, _, _ = docker_engine.save_to(repository, folder, "genuine.tar")
    docker_engine.remove_image(repository)
    yield Genuine(repository, image_id, docker_engine.image_id(f"{repository}-base:v1"), tar)
    docker_engine.remove_image(repository, force=True)
    docker_engine.remove_image(f"{repository}-base:v1", force=True)


def members(tar: Path) -> list[tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(tar) as archive:
        return [
            (info, archive.extractfile(info).read() if info.isreg() else b"")
            for info in archive.getmembers()
        ]


def rebuild(entries: list[tuple[tarfile.TarInfo, bytes]], dest: Path) -> Path:
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as archive:
        for info, data in entries:
            if info.isreg():
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return dest


def manifest(entries) -> list[dict]:
    return json.loads(next(data for info, data in entries if info.name == "manifest.json"))


def replaced(entries, name: str, data: bytes):
    return [(info, data if info.name == name else old) for info, old in entries]


def extra(
    name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "", data: bytes = b""
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, linkname, len(data)
    return info, data


def flipped_byte_in_a_layer(g: Genuine, dest: Path) -> Path:
    layer = manifest(members(g.tar))[0]["Layers"][-1]
    with tarfile.open(g.tar) as archive:
        info = archive.getmember(layer)
    data = bytearray(g.tar.read_bytes())
    data[info.offset_data + info.size // 2] ^= 0x01
    dest.write_bytes(bytes(data))
    return dest


def truncated(g: Genuine, dest: Path) -> Path:
    data = g.tar.read_bytes()
    dest.write_bytes(data[: len(data) // 2])
    return dest


def missing_config(g: Genuine, dest: Path) -> Path:
    entries = members(g.tar)
    images = manifest(entries)
    images[0]["Config"] = (
        ("blobs/sha256/" if images[0]["Config"].startswith("blobs/") else "")
        + "0" * 64
        + ("" if images[0]["Config"].startswith("blobs/") else ".json")
    )
    return rebuild(replaced(entries, "manifest.json", json.dumps(images).encode()), dest)


def layer_not_matching_diff_ids(g: Genuine, dest: Path) -> Path:
    entries = members(g.tar)
    other = io.BytesIO()
    with tarfile.open(fileobj=other, mode="w") as layer:
        info = tarfile.TarInfo("stage.txt")
        info.size = 7
        layer.addfile(info, io.BytesIO(b"forged\n"))
    return rebuild(replaced(entries, manifest(entries)[0]["Layers"][-1], other.getvalue()), dest)


def parent_member(g: Genuine, dest: Path) -> Path:
    return rebuild([*members(g.tar), extra("../escape.txt", data=b"out of the archive\n")], dest)


def symlink_member(g: Genuine, dest: Path) -> Path:
    return rebuild([*members(g.tar), extra("evil", tarfile.SYMTYPE, "/etc/passwd")], dest)


def duplicate_member(g: Genuine, dest: Path) -> Path:
    entries = members(g.tar)
    return rebuild(
        [*entries, next((info, data) for info, data in entries if info.name == "manifest.json")],
        dest,
    )


HOSTILE = {
    "flipped-byte-in-layer": (flipped_byte_in_a_layer, "rootfs.diff_ids"),
    "truncated": (truncated, "truncated"),
    "manifest-names-missing-config": (missing_config, "names config"),
    "layer-not-matching-diff-ids": (layer_not_matching_diff_ids, "rootfs.diff_ids"),
    "parent-dir-member": (parent_member, "'..' component"),
    "symlink-member": (symlink_member, "is a symbolic link (to '/etc/passwd')"),
    "duplicate-members": (duplicate_member, "appears more than once"),
}


def assert_rejected(
    run_cli: Cli, docker_engine, args: tuple[str, ...], needle: str, tar: Path
) -> None:
    before = docker_engine.list_image_ids()
    result = run_cli("snapshots", "import", *args, "--format", "json", ok=False)
    assert result.exit_code == 3, result.stderr
    assert needle in result.stderr
    assert docker_engine.list_image_ids() == before  # nothing was loaded
    [row] = json.loads(result.stdout)
    assert row["status"] == "rejected"
    [rejected] = log_facts(run_cli, "snapshot.import_rejected")
    assert (rejected["tar_sha256"], rejected["tar_path"]) == (sha(tar), str(tar))
    assert log_facts(run_cli, "snapshot.imported") == []


@pytest.mark.docker
@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_archive_recorded_as_the_export_is_rejected(
    name, genuine, docker_engine, run_cli, tmp_path
):
    derive, needle = HOSTILE[name]
    hostile = derive(genuine, tmp_path / f"{name}.tar")
    capture(run_cli, tmp_path, genuine.ref, tmp_path / "run")
    ingest(
        run_cli,
        tmp_path,
        [
            {
                "type": "snapshot.exported",
                "ref": genuine.ref,
                "path": str(hostile),
                "sha256": sha(hostile),
                "image_id": genuine.image_id,
            }
        ],
    )
    assert_rejected(run_cli, docker_engine, ("--run", RUN), needle, hostile)
    assert docker_engine.image_id(genuine.ref) is None


@pytest.mark.docker
def test_tampered_copy_of_the_recorded_export_is_rejected_on_its_digest(
    genuine, docker_engine, run_cli, tmp_path
):
    tar = tmp_path / "snapshots" / "genuine.tar"
    tar.parent.mkdir()
    tar.write_bytes(genuine.tar.read_bytes())
    capture(run_cli, tmp_path, genuine.ref, tmp_path / "run")
    ingest(
        run_cli,
        tmp_path,
        [
            {
                "type": "snapshot.exported",
                "ref": genuine.ref,
                "path": str(tar),
                "sha256": sha(tar),
                "image_id": genuine.image_id,
            }
        ],
    )
    flipped_byte_in_a_layer(genuine, tar)
    assert_rejected(run_cli, docker_engine, ("--run", RUN), "the file is not the one exported", tar)


@pytest.mark.docker
def test_recorded_image_id_that_differs_is_rejected(genuine, docker_engine, run_cli, tmp_path):
    capture(run_cli, tmp_path, genuine.ref, tmp_path / "run")
    # another real world
    ingest(
        run_cli,
        tmp_path,
        [
            {
                "type": "snapshot.exported",
                "ref": genuine.ref,
                "path": str(genuine.tar),
                "sha256": sha(genuine.tar),
                "image_id": genuine.base_id,
            }
        ],
    )
    assert_rejected(
        run_cli,
        docker_engine,
        ("--run", RUN),
        f"has image {genuine.base_id} (a different world)",
        genuine.tar,
    )


@pytest.mark.docker
def test_hostile_bare_tar_claiming_a_recorded_ref_is_rejected(
    genuine, docker_engine, run_cli, tmp_path
):
    capture(run_cli, tmp_path, genuine.ref, tmp_path / "run")
    ingest(
        run_cli,
        tmp_path,
        [
            {
                "type": "snapshot.exported",
                "ref": genuine.ref,
                "path": str(genuine.tar),
                "sha256": sha(genuine.tar),
                "image_id": genuine.image_id,
            }
        ],
    )
    hostile = symlink_member(genuine, tmp_path / "symlink.tar")
    assert_rejected(
        run_cli,
        docker_engine,
        (str(hostile),),
        f"claims to be recorded snapshot '{genuine.ref}'",
        hostile,
    )

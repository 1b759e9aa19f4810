"""DockerEngine against a real engine: save, verify offline, remove, load back, commit.

Tests marked `docker` need an engine (see docker_helpers); the others exercise failure paths with no
engine or a fake SDK client, so they run everywhere.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar

import pytest
import urllib3.exceptions

from rollout_lineage.adapters.snapshots.docker_engine import DockerEngine, DockerEngineError
from rollout_lineage.adapters.snapshots.snapshot_tar import verify_tar
from rollout_lineage.domain.errors import InvalidInput, StoreUnavailable
from tests.integration.docker_helpers import BUSYBOX


def file_sha256(path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def expected_layout(client) -> str:
    """`docker save` writes the OCI layout (with a legacy manifest.json) from Docker 25 on."""
    major = int(client.version()["Version"].split(".")[0])
    return "oci" if major >= 25 else "legacy"


@pytest.mark.docker
def test_ping_and_resolving_references(docker_engine, docker_client, test_image):
    assert docker_engine.ping() is True
    image_id = docker_engine.image_id(test_image)
    assert image_id == docker_client.images.get(test_image).id
    assert image_id.startswith("sha256:")
    assert image_id in docker_engine.list_image_ids()
    assert docker_engine.image_id("lineage-test-never-made:absent") is None


@pytest.mark.docker
def test_save_to_writes_a_tar_that_verifies_offline(
    docker_engine, docker_client, test_image, tmp_path
):
    path, tar_sha256, size = docker_engine.save_to(test_image, tmp_path, "snap.tar")
    assert path == tmp_path / "snap.tar"
    # no temporary file left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snap.tar"]
    assert (tar_sha256, size) == (file_sha256(path), path.stat().st_size)
    report = verify_tar(path)
    assert report.problems == ()
    assert report.image_id == docker_engine.image_id(test_image)
    assert report.tar_sha256 == tar_sha256
    assert report.repo_tags == (test_image,)
    assert report.layout == expected_layout(docker_client)
    assert len(report.layers) == 1 and report.layers[0].ok


@pytest.mark.docker
def test_removed_image_loads_back_with_the_same_id(docker_engine, test_image, tmp_path):
    original_id = docker_engine.image_id(test_image)
    path, _, _ = docker_engine.save_to(test_image, tmp_path, "snap.tar")
    assert docker_engine.remove_image(test_image) is True
    assert docker_engine.image_id(test_image) is None
    assert docker_engine.remove_image(test_image) is False  # idempotent
    loaded = docker_engine.load_tar(path)
    assert docker_engine.image_id(test_image) == original_id
    assert [(image.image_id, test_image in image.tags) for image in loaded] == [(original_id, True)]


@pytest.mark.docker
def test_commit_a_container_into_a_new_image(docker_engine, docker_client, test_image, tmp_path):
    repository = test_image.split(":")[0] + "-committed"
    if BUSYBOX.exists():  # a real change on disk, so the commit adds a layer
        container = docker_client.containers.run(
            test_image,
            ["/bin/sh", "-c", "echo changed > /changed.txt"],
            network_mode="none",
            detach=True,
        )
        assert container.wait(timeout=60)["StatusCode"] == 0
    else:
        container = docker_client.containers.create(test_image, ["/hello.txt"], network_mode="none")
    new_id = docker_engine.commit(container.id, repository, "stage-1")
    assert docker_engine.image_id(f"{repository}:stage-1") == new_id
    assert new_id != docker_engine.image_id(test_image)
    path, _, _ = docker_engine.save_to(f"{repository}:stage-1", tmp_path, "committed.tar")
    report = verify_tar(path)
    assert report.ok and report.image_id == new_id
    assert len(report.layers) == (2 if BUSYBOX.exists() else 1)


@pytest.mark.docker
def test_engine_refusals_become_lineage_errors(docker_engine, tmp_path):
    with pytest.raises(DockerEngineError, match="lineage-test-never-made"):
        docker_engine.save_to("lineage-test-never-made:absent", tmp_path, "x.tar")
    with pytest.raises(DockerEngineError, match="commit container"):
        docker_engine.commit("lineage-test-no-such-container", "lineage-test-x", "v1")
    not_a_tar = tmp_path / "not-a.tar"
    not_a_tar.write_bytes(b"definitely not a docker save tar")
    with pytest.raises(DockerEngineError):
        docker_engine.load_tar(not_a_tar)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a.tar"]


# -- no engine needed ------------------------------------------------------------------------------


def test_unreachable_engine_is_store_unavailable(tmp_path):
    engine = DockerEngine(f"unix://{tmp_path}/no-engine.sock", timeout_s=5)
    with pytest.raises(StoreUnavailable, match="Cannot reach the Docker engine"):
        engine.ping()


def test_unreadable_tar_is_invalid_input(tmp_path):
    with pytest.raises(InvalidInput, match="Cannot open"):
        DockerEngine(client=object()).load_tar(tmp_path / "missing.tar")


def test_file_name_must_not_leave_dest_dir(tmp_path):
    with pytest.raises(InvalidInput, match="plain file name"):
        DockerEngine(client=object()).save_to("any:ref", tmp_path, "../escape.tar")


class _BrokenStreamImage:
    tags: ClassVar[list[str]] = ["snap:v1"]

    def save(self, chunk_size, named):
        yield b"x" * 1000
        raise urllib3.exceptions.ProtocolError("Connection broken: engine went away mid-stream")


class _FakeClient:
    class images:
        @staticmethod
        def get(ref):
            return _BrokenStreamImage()


def test_interrupted_save_leaves_no_file_behind(tmp_path):
    with pytest.raises(StoreUnavailable, match="mid-stream"):
        DockerEngine(client=_FakeClient()).save_to("snap:v1", tmp_path, "snap.tar")
    assert list(tmp_path.iterdir()) == []

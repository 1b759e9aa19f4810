"""Fixtures for tests that need a real Docker engine, and a way to make images without a registry.

Without an engine the tests skip, unless LINEAGE_REQUIRE_INTEGRATION=1 (CI), where a missing engine
must fail loudly rather than turn a red run green by skipping. Images are made by `docker import` of
a rootfs tar built here: one text file, plus Debian's static busybox when installed so containers
can run `sh -c`.
"""

from __future__ import annotations

import io
import os
import tarfile
import uuid
from pathlib import Path

import pytest

from rollout_lineage.adapters.snapshots.docker_engine import DockerEngine
from rollout_lineage.domain.errors import StoreUnavailable

DOCKER_SOCKET = Path("/var/run/docker.sock")
BUSYBOX = Path("/bin/busybox")
START_HINT = (
    "start one with `dockerd --iptables=false --ip6tables=false "
    "--bridge=none --storage-driver=vfs &` and wait for /var/run/docker.sock"
)


def _no_engine(reason: str) -> None:
    if os.environ.get("LINEAGE_REQUIRE_INTEGRATION") == "1":
        pytest.fail(f"LINEAGE_REQUIRE_INTEGRATION=1 but {reason}; {START_HINT}.", pytrace=False)
    pytest.skip(f"{reason} (set LINEAGE_REQUIRE_INTEGRATION=1 to make this a failure)")


@pytest.fixture(scope="module")
def docker_engine():
    if not DOCKER_SOCKET.exists() and not os.environ.get("DOCKER_HOST"):
        _no_engine(f"no Docker engine: {DOCKER_SOCKET} is absent")
    engine = DockerEngine()
    try:
        engine.ping()
    except StoreUnavailable as exc:
        _no_engine(f"the Docker engine does not answer ({exc})")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def docker_client(docker_engine):
    import docker  # only once an engine is known to answer

    client = docker.from_env()
    yield client
    client.close()


def rootfs_tar(path: Path, *, with_busybox: bool = True) -> Path:
    """A tiny root filesystem: /hello.txt, and /bin/busybox with /bin/sh when the host has
    busybox-static."""
    with tarfile.open(path, "w") as archive:
        hello = b"hello from a lineage test image\n"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(hello)
        archive.addfile(info, io.BytesIO(hello))
        if with_busybox and BUSYBOX.exists():
            archive.add(BUSYBOX, "bin/busybox")
            shell = tarfile.TarInfo("bin/sh")
            shell.type, shell.linkname = tarfile.SYMTYPE, "busybox"
            archive.addfile(shell)
    return path


@pytest.fixture
def test_image(docker_client, tmp_path_factory):
    """A fresh `lineage-test-<random>:v1` image; removed with anything derived from it after the
    test."""
    repository = f"lineage-test-{uuid.uuid4().hex[:10]}"
    tar = rootfs_tar(tmp_path_factory.mktemp("rootfs") / "rootfs.tar")
    docker_client.api.import_image_from_file(str(tar), repository=repository, tag="v1")
    yield f"{repository}:v1"
    for container in docker_client.containers.list(
        all=True, filters={"ancestor": f"{repository}:v1"}
    ):
        container.remove(force=True)
    for image in docker_client.images.list():
        for tag in image.tags:
            if tag.startswith(repository):
                docker_client.images.remove(tag, force=True)

"""`snapshots list/show --check` asks a real Docker engine whether a snapshot's image is there
(issue #23, item 5).

"Restorable" was a belief: an adopted snapshot that was exported, then lost its tars and its image
(`docker rmi`), was still `restorable true` under `--check`, because no discard was recorded and
nothing asked the engine. Now a snapshot is restorable under `--check` only while a tar with its
recorded sha256 or an image with its recorded id (in the engine asked) backs it, and the reason says
which, or why neither.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import Cli
from tests.integration.test_snapshot_import_export import (
    RUN,
    capture,
    commit_a_change,
    engine_name,
)

pytestmark = pytest.mark.docker


def listed(run_cli: Cli, *args: str) -> dict:
    [row] = json.loads(run_cli("snapshots", "list", *args, "--format", "json").stdout)
    return row


def shown(run_cli: Cli, ref: str, *args: str) -> dict:
    return json.loads(run_cli("snapshots", "show", ref, *args, "--format", "json").stdout)[
        "snapshot"
    ]


@pytest.fixture
def adopted_and_exported(docker_engine, docker_client, test_image, run_cli, tmp_path):
    """A stray image saved to a tar, adopted (loaded back), then exported: two tars, one image
    id."""
    ref = test_image.split(":")[0] + "-stray"
    image_id = commit_a_change(docker_engine, docker_client, test_image, ref)
    stray, _, _ = docker_engine.save_to(ref, tmp_path, "stray.tar")
    docker_engine.remove_image(ref)
    run_cli("snapshots", "import", str(stray), "--adopt")
    out = tmp_path / "out"
    out.mkdir()
    run_cli("snapshots", "export", ref, "--to", str(out))
    [exported] = list(out.iterdir())
    return ref, image_id, stray, exported


def test_a_snapshot_whose_tars_and_image_are_gone_is_not_restorable(
    adopted_and_exported, docker_engine, docker_client, run_cli
) -> None:
    ref, image_id, stray, exported = adopted_and_exported
    assert listed(run_cli, "--check")["restorable"] is True
    stray.unlink()
    exported.unlink()
    row = listed(run_cli, "--check")  # the image alone still backs it
    assert row["restorable"] is True, row
    assert f"image {image_id} is in {engine_name(docker_client)}" in row["restorable_because"]
    assert docker_engine.remove_image(ref) is True
    row = listed(run_cli, "--check")
    assert row["restorable"] is False, row
    because = row["restorable_because"]
    assert "no tar with its recorded sha256" in because and str(exported) in because
    assert f"{engine_name(docker_client)} has no image {image_id}" in because
    assert row["image_check"] == f"{engine_name(docker_client)} has no image {image_id}"
    assert shown(run_cli, ref, "--check")["restorable"] is False
    table = run_cli("snapshots", "show", ref, "--check", "--format", "table").stderr
    assert "NOT restorable" in table and "has no image" in table


def test_a_tar_that_still_verifies_backs_a_snapshot_whose_image_is_gone(
    adopted_and_exported, docker_engine, run_cli
) -> None:
    ref, _, stray, exported = adopted_and_exported
    exported.unlink()
    assert docker_engine.remove_image(ref) is True
    row = listed(run_cli, "--check")
    assert row["restorable"] is True, row
    assert str(stray) in row["restorable_because"] and "has no image" in row["image_check"]


def test_a_truncated_tar_does_not_back_a_snapshot(adopted_and_exported, docker_engine, run_cli):
    ref, _, stray, exported = adopted_and_exported
    stray.unlink()
    exported.write_bytes(exported.read_bytes()[: exported.stat().st_size // 2])
    assert docker_engine.remove_image(ref) is True
    row = listed(run_cli, "--check")
    assert row["restorable"] is False and "not the recorded" in row["restorable_because"], row
    # Without --check only presence counts, and the engine is not asked: the list says so.
    row = listed(run_cli)
    assert row["restorable"] is True and row["image_check"].startswith("not checked"), row


def test_another_image_under_the_ref_does_not_stand_in_for_the_recorded_one(
    adopted_and_exported, docker_engine, docker_client, test_image, run_cli
) -> None:
    """The engine is asked by the recorded image id, never by the ref: a retag proves nothing."""
    ref, image_id, stray, exported = adopted_and_exported
    stray.unlink()
    exported.unlink()
    assert docker_engine.remove_image(ref) is True
    docker_client.images.get(test_image).tag(ref, "latest")  # another world under the same name
    assert docker_engine.image_id(ref) not in (None, image_id)
    row = listed(run_cli, "--check")
    assert row["restorable"] is False and f"has no image {image_id}" in row["restorable_because"]
    docker_engine.remove_image(f"{ref}:latest")


def test_a_retagged_image_still_backs_its_snapshot(
    adopted_and_exported, docker_engine, docker_client, run_cli
) -> None:
    """The image is there by its id under another name only: a world can still come back."""
    ref, image_id, stray, exported = adopted_and_exported
    stray.unlink()
    exported.unlink()
    docker_client.images.get(image_id).tag(ref + "-renamed", "v9")
    assert docker_engine.remove_image(ref) is True
    assert docker_engine.image_id(image_id) == image_id
    row = listed(run_cli, "--check")
    assert row["restorable"] is True and image_id in row["restorable_because"], row
    docker_engine.remove_image(f"{ref}-renamed:v9")


def test_a_captured_and_exported_snapshot_removed_without_a_discard_is_not_restorable(
    docker_engine, docker_client, test_image, run_cli, tmp_path
) -> None:
    """'captured; the image has not been discarded' was the belief: `docker rmi` records no
    discard."""
    ref = test_image.split(":")[0] + "-snap"
    image_id = commit_a_change(docker_engine, docker_client, test_image, ref)
    run_dir = tmp_path / "run"
    capture(run_cli, tmp_path, ref, run_dir)
    run_cli("snapshots", "export", ref, "--to", str(run_dir / "snapshots"))
    (run_dir / "snapshots" / f"{ref}.tar").unlink()
    assert listed(run_cli, "--check", "--run", RUN)["restorable"] is True  # the image is there
    assert docker_engine.remove_image(ref) is True
    row = listed(run_cli, "--check", "--run", RUN)
    assert row["restorable"] is False and f"has no image {image_id}" in row["restorable_because"]


def test_a_bare_capture_is_asked_for_by_its_ref(
    docker_engine, docker_client, test_image, run_cli, tmp_path
) -> None:
    """A capture records its ref, not an image id: the engine is asked which image the ref names."""
    ref = test_image.split(":")[0] + "-bare"
    image_id = commit_a_change(docker_engine, docker_client, test_image, ref)
    capture(run_cli, tmp_path, ref, tmp_path / "run")
    row = listed(run_cli, "--check", "--run", RUN)
    assert row["restorable"] is True and image_id in row["restorable_because"], row
    # without --check, the belief, and the engine is not asked
    assert listed(run_cli, "--run", RUN)["restorable_because"] == (
        "captured; the image has not been discarded"
    )
    assert docker_engine.remove_image(ref) is True
    row = listed(run_cli, "--check", "--run", RUN)
    assert row["restorable"] is False, row
    assert f"has no image named {ref!r}" in row["restorable_because"]

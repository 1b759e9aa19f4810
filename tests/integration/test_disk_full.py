"""A disk that fills up while the read models catch up: a clean exit 4, and the file resumes once
there is room.

The read models live on a small tmpfs (root may mount one, as CI is; elsewhere this test skips, or
fails under LINEAGE_REQUIRE_INTEGRATION); the log lives on the ordinary disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cli, integration_unavailable


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16M", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        integration_unavailable(f"cannot mount a tmpfs here ({mounted.stderr.strip()})")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=False)


def fact_file(path: Path, prefix: str, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"type": "run.registered", "run": f"jobs/{prefix}__{i}", "task": "t" * 200})
            + "\n"
            for i in range(n)
        )
    )
    return path


def runs(run_cli: Cli) -> int:
    return int(
        run_cli("sql", "SELECT count(*) AS n FROM runs", "--format", "csv").stdout.splitlines()[1]
    )


def test_a_full_disk_stops_catch_up_cleanly_and_it_resumes_with_room(
    small_disk: Path, tmp_path: Path
) -> None:
    run_cli = Cli(small_disk, store=f"sqlite:///{tmp_path / 'log' / 'events.sqlite'}")
    run_cli("ingest", str(fact_file(tmp_path / "a.jsonl", "a", 200)))
    assert runs(run_cli) == 200
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (shutil.disk_usage(small_disk).free - 100_000))
    run_cli("ingest", str(fact_file(tmp_path / "b.jsonl", "b", 3000)))

    result = run_cli("sql", "SELECT count(*) FROM runs", ok=False)
    assert (
        result.exit_code == 4
        and "No space left on device" in result.stderr
        and "free space" in result.stderr
    )
    assert "Traceback" not in result.output

    os.remove(filler)
    assert runs(run_cli) == 3200
    assert "match a rebuild" in run_cli("verify", "--read-models").stdout

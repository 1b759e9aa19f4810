"""The snapshot service through its ports: a store (`Recording`) and the read models (`Catalog`).

When the read models name a snapshot the log does not hold, the read-model file was not built from
this log: the service refuses with an integrity failure (exit 3) before anything reaches the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from rollout_lineage.adapters.snapshots.docker_engine import DockerEngine
from rollout_lineage.adapters.snapshots.snapshot_service import RunExports, SnapshotService
from rollout_lineage.adapters.snapshots.snapshot_tar import TarReport
from rollout_lineage.bootstrap import in_memory
from rollout_lineage.domain.errors import IntegrityFailure


class StaleCatalog:
    """Read models from another log: they list a snapshot this one never recorded."""

    def run_exports(self, run: str, stages: Sequence[str] = ()) -> RunExports:
        return RunExports(("/nowhere",), ("bf-snap-from-another-log",))

    def refs_with_tar(self, tar_sha256: str) -> list[str]:
        return []

    def refs_claimed(self, report: TarReport) -> list[str]:
        return []


def test_a_snapshot_the_read_models_name_but_the_log_lacks_is_an_integrity_failure(
    tmp_path: Path,
) -> None:
    with in_memory(tmp_path / "home") as lineage:
        engine = DockerEngine(base_url="unix:///nonexistent/docker.sock")
        service = SnapshotService(lineage, StaleCatalog(), engine)
        with pytest.raises(IntegrityFailure, match="bf-snap-from-another-log") as refused:
            service.import_run("any/run")
        assert refused.value.exit_code == 3
        assert "Nothing was loaded or recorded" in refused.value.message
        assert lineage.position() == 0

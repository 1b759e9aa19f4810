"""Rule 6: a stage entry's lifetime covers every ref it holds, sandbox and environment alike.

The registry is written as `write_stage_snapshots` (branch_lineage.py) writes it at capture and
annotated as `Rollout.cleanup()` finalizes it (`annotate_stage_snapshots_file`): without
`--keep-snapshots` every stage is `ephemeral: true, exported: null` (the sandbox is stopped with
delete, its environment plane with it); with `--keep-snapshots` on a backend without `export_image`,
`export_error` is recorded and the entry stays ephemeral.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Cli
from tests.writer_runs import benchflow_run, write_lineage_json

RUN = "nightly/csv-dedupe__5e0d1c2b"
EXPORT_ERROR = "snapshot export is not supported by the daytona sandbox backend (--keep-snapshots)"
REGISTRY = {
    "schema_version": 1,
    "stages": {
        "env-ready": {
            "environment_ref": "env-snap-csv-dedupe-11aa22bb",
            "exchanges_completed": None,
            "layers": ["environment", "sandbox"],
            "sandbox_ref": "bf-snap-csv-dedupe-0a1b2c3d4e5f",
            "ephemeral": True,
            "exported": None,
            "export_error": EXPORT_ERROR,
        },
        "pre-verify": {
            "environment_ref": "env-snap-csv-dedupe-33cc44dd",
            "exchanges_completed": 9,
            "layers": ["environment", "sandbox"],
            "sandbox_ref": "bf-snap-csv-dedupe-6f7a8b9c0d1e",
            "ephemeral": True,
            "exported": None,
        },
    },
}


def snapshots(run_cli: Cli) -> dict[str, dict[str, Any]]:
    rows = json.loads(
        run_cli(
            "sql",
            "SELECT ref, layer, lifetime, restorable, export_error FROM snapshots",
            "--format",
            "json",
        ).stdout
    )
    return {row.pop("ref"): row for row in rows}


def test_an_ephemeral_or_failed_export_entry_restores_neither_ref(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_dir = benchflow_run(tmp_path)
    write_lineage_json(run_dir / "stage_snapshots.json", REGISTRY)
    run_cli("import", str(run_dir))
    found = snapshots(run_cli)
    assert found == {
        "env-snap-csv-dedupe-11aa22bb": {
            "layer": "environment",
            "lifetime": "discarded",
            "restorable": False,
            "export_error": EXPORT_ERROR,
        },
        "bf-snap-csv-dedupe-0a1b2c3d4e5f": {
            "layer": "sandbox",
            "lifetime": "discarded",
            "restorable": False,
            "export_error": EXPORT_ERROR,
        },
        "env-snap-csv-dedupe-33cc44dd": {
            "layer": "environment",
            "lifetime": "discarded",
            "restorable": False,
            "export_error": None,
        },
        "bf-snap-csv-dedupe-6f7a8b9c0d1e": {
            "layer": "sandbox",
            "lifetime": "discarded",
            "restorable": False,
            "export_error": None,
        },
    }
    exported = run_cli("export", "stages", RUN).stdout
    assert json.loads(exported) == REGISTRY
    assert exported == (run_dir / "stage_snapshots.json").read_text()


def test_an_exported_entry_exports_its_sandbox_image(run_cli: Cli, tmp_path: Path) -> None:
    run_dir = benchflow_run(tmp_path)
    export = {
        "path": f"{run_dir}/snapshots/bf-snap-csv-dedupe-0a1b2c3d4e5f.tar",
        "sha256": "sha256:" + "9b" * 32,
        "image_id": "sha256:" + "4c" * 32,
    }
    registry = {
        "schema_version": 1,
        "stages": {
            "env-ready": {**REGISTRY["stages"]["env-ready"], "ephemeral": False, "exported": export}
        },
    }
    registry["stages"]["env-ready"].pop("export_error")
    write_lineage_json(run_dir / "stage_snapshots.json", registry)
    run_cli("import", str(run_dir))
    found = snapshots(run_cli)
    assert (
        found["bf-snap-csv-dedupe-0a1b2c3d4e5f"]["lifetime"],
        found["env-snap-csv-dedupe-11aa22bb"]["lifetime"],
    ) == ("exported", "captured")
    assert json.loads(run_cli("export", "stages", RUN).stdout) == registry

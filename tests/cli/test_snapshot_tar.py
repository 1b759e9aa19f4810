"""`snapshots verify` leads with the sentence `verify_tar` puts first (the rest of verify_tar's
tests are in tests/unit/test_snapshot_tar.py)."""

from __future__ import annotations

import json

from rollout_lineage.adapters.snapshots.snapshot_tar import verify_tar
from tests.snapshot_tars import file_entry, legacy_entries, tar_bytes, write


def test_the_most_important_problem_comes_first_whatever_the_order_found(tmp_path, run_cli):
    """Bytes appended after the end-of-archive marker are found during the pass, the altered layer
    only after it: the altered layer (content that is not what its digest says) is named first, then
    the damage, then what is missing; the CLI's error leads with the same sentence."""
    entries, _ = legacy_entries()
    manifest_at = next(i for i, (info, _) in enumerate(entries) if info.name == "manifest.json")
    manifest = json.loads(entries[manifest_at][1])
    manifest[0]["Layers"].append("missing/layer.tar")
    entries[manifest_at] = file_entry("manifest.json", json.dumps(manifest).encode())
    data = bytearray(tar_bytes(entries))
    data[data.index(b"SECOND-LAYER-MARKER") + 3] ^= 0x01
    path = write(tmp_path, bytes(data) + b"appended")
    problems = verify_tar(path).problems
    assert problems[0].startswith("Layer 1 (")
    assert problems[1].startswith("The tar has non-zero bytes after its end-of-archive marker")
    assert any("missing/layer.tar" in p for p in problems[2:])
    result = run_cli("snapshots", "verify", str(path), ok=False)
    assert result.exit_code == 3
    assert result.stderr.startswith(f"Error: {path}: Layer 1 (")

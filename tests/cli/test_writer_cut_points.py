"""Rule 7: cut points as benchflow's continue-run writers write them, and `lineage cut-point`
bounded by the recording.

The source run is built as `_build_rollout_result` and `write_stage_snapshots` (branch_lineage.py)
write it, with `trajectory/llm_trajectory.jsonl` as `Trajectory.to_jsonl` writes it; the
continuation's provenance as `build_rollout_config` (continue_run/orchestrator.py) writes
`source_provenance`, its cut-point block as the PR-head `cut_point_provenance` (configured) and
`served_cut_point` (served) write it, after `resolve_cut_point` turned `--cut-stage` into K.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cli
from tests.writer_runs import benchflow_run, write_config, write_lineage_json, write_result

SOURCE = "nightly/csv-dedupe__5e0d1c2b"
CONTINUED = "nightly/csv-dedupe__5e0d1c2b__continued"
DIGEST = "sha256:" + "4e" * 32
N_RECORDED = 6


def exchange(index: int) -> str:
    return json.dumps(
        {
            "request": {
                "timestamp": f"2026-11-03T09:13:{index:02d}",
                "method": "POST",
                "path": "/v1/chat/completions",
                "headers": {},
                "body": {
                    "model": "claude-sonnet-4-5",
                    "messages": [{"role": "user", "content": "go"}] * (index + 1),
                },
            },
            "response": {
                "timestamp": f"2026-11-03T09:13:{index:02d}",
                "status_code": 200,
                "headers": {},
                "body": {"id": f"c{index}", "choices": []},
            },
            "duration_ms": 812.5,
            "metadata": {},
        }
    )


def source_run(root: Path) -> Path:
    run_dir = benchflow_run(root)
    lines = [exchange(i) for i in range(N_RECORDED)]
    (run_dir / "trajectory").mkdir()
    # Trajectory.to_jsonl: one exchange a line; a blank line and a torn last line are skipped by the
    # reader.
    (run_dir / "trajectory" / "llm_trajectory.jsonl").write_text(
        "\n".join([*lines[:3], "", *lines[3:], '{"request": {']) + "\n"
    )
    write_lineage_json(
        run_dir / "stage_snapshots.json",
        {
            "schema_version": 1,
            "stages": {
                "post-research": {
                    "environment_ref": None,
                    "exchanges_completed": 4,
                    "layers": ["sandbox"],
                    "sandbox_ref": "bf-snap-csv-dedupe-0a1b2c3d4e5f",
                }
            },
        },
    )
    return run_dir


def continuation(
    root: Path, source: Path, block: dict[str, Any], configured: dict[str, Any] | None = None
) -> Path:
    run_dir = source.parent / f"{source.name}__continued"
    provenance = {
        "kind": "benchflow-continue",
        "continued_from": str(source),
        "original_error_category": None,
        "original_model": "claude-sonnet-4-5",
        "live_model": "claude-sonnet-4-5",
        "n_recorded_exchanges": N_RECORDED,
    }
    write_config(
        run_dir, agent="openhands", source={**provenance, "cut_point": configured or block}
    )
    write_result(run_dir, agent="openhands", source={**provenance, "cut_point": block})
    return run_dir


def test_a_pr_head_stage_cut_imports_as_what_it_is(run_cli: Cli, tmp_path: Path) -> None:
    source = source_run(tmp_path)
    # resolve_cut_point(None, stage_tags={"post-research": 4}, cut_stage="post-research") -> (4,
    # "post-research"); served_cut_point(router, configured_max_exchanges=4,
    # branch_stage="post-research") after the host run.
    served = {
        "n_replayed_exchanges": 4,
        "cut_point_digest": DIGEST,
        "accounting": "served",
        "configured_max_exchanges": 4,
        "branch_stage": "post-research",
    }
    configured = {
        "n_replayed_exchanges": 4,
        "cut_point_digest": DIGEST,
        "accounting": "configured",
        "branch_stage": "post-research",
    }
    run_cli("import", str(source), str(continuation(tmp_path, source, served, configured)))
    [row] = json.loads(
        run_cli(
            "sql",
            "SELECT accounting, stage, configured_k, served_k, cut_point_digest, "
            "recorded_request_digest, served_request_digest FROM cut_points",
            "--format",
            "json",
        ).stdout
    )
    assert row == {
        "accounting": "served",
        "stage": "post-research",
        "configured_k": 4,
        "served_k": 4,
        "cut_point_digest": DIGEST,
        "recorded_request_digest": None,
        "served_request_digest": None,
    }
    assert (
        run_cli("export", "stages", SOURCE).stdout == (source / "stage_snapshots.json").read_text()
    )
    document = json.loads(
        run_cli("cut-point", SOURCE, "--stage", "post-research", "--format", "json").stdout
    )
    assert (document["resolved"]["k"], document["exchanges_recorded"]) == (4, N_RECORDED)
    # what resolve_cut_point hands the replay for --cut-stage post-research: the K and the stage, as
    # written
    assert (
        document["resolved"]["configured_max_exchanges"],
        document["resolved"]["branch_stage"],
    ) == (4, "post-research")
    assert document["served"][0]["problems"] == [
        "the served cut point recorded no divergence list, so nobody checked the replay"
    ]


def test_a_block_mixing_the_two_layouts_is_refused(run_cli: Cli, tmp_path: Path) -> None:
    source = source_run(tmp_path)
    block = {
        "n_replayed_exchanges": 4,
        "cut_point_digest": DIGEST,
        "accounting": "served",
        "recorded_request_digest": DIGEST,
    }
    result = run_cli("import", str(continuation(tmp_path, source, block)), ok=False)
    assert result.exit_code == 1
    assert (
        "field source.cut_point.recorded_request_digest: expected only the fields" in result.stderr
    )
    assert (
        "a PR-head block (cut_point_digest) and a later one (request digests) are different layouts"
        in result.stderr
    )


@pytest.mark.parametrize("k", [0, N_RECORDED + 1])
def test_a_cut_outside_the_recording_is_refused_on_import(
    run_cli: Cli, tmp_path: Path, k: int
) -> None:
    source = source_run(tmp_path)
    block = {
        "n_replayed_exchanges": min(k, N_RECORDED),
        "cut_point_digest": DIGEST,
        "accounting": "served",
        "configured_max_exchanges": k,
    }
    result = run_cli("import", str(continuation(tmp_path, source, block)), ok=False)
    assert result.exit_code == 1
    assert (
        f"field source.cut_point.configured_max_exchanges: expected a cut "
        f"K in 1..{N_RECORDED} (benchflow validates 0 < K <= n_recorded;"
        in result.stderr
        and f"found {k}" in result.stderr
    )


def test_cut_point_exchanges_beyond_the_recording_is_refused(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("import", str(source_run(tmp_path)))
    assert run_cli("cut-point", SOURCE, "--exchanges", str(N_RECORDED)).stdout.splitlines()[0] == (
        f"cut point of {SOURCE} at K = {N_RECORDED} exchanges; "
        f"the last recorded stage at or before it is "
        "post-research (K = 4)"
    )
    result = run_cli("cut-point", SOURCE, "--exchanges", str(N_RECORDED + 1), ok=False)
    assert result.exit_code == 1 and result.stdout == ""
    assert (
        f"expected a cut K in 1..{N_RECORDED} (the exchanges "
        f"its recording holds), found --exchanges K = 7" in result.stderr
    )
    assert f"choose K <= {N_RECORDED}" in result.stderr


def test_cut_point_exchanges_without_a_known_recording_is_refused(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_cli("import", str(benchflow_run(tmp_path)))
    result = run_cli("cut-point", SOURCE, "--exchanges", "3", ok=False)
    assert result.exit_code == 1
    assert "expected a known number of recorded exchanges to check K = 3 against" in result.stderr
    assert "import the finished run with its trajectory/llm_trajectory.jsonl" in result.stderr

"""Reading run directories as untrusted input: caps, links, malformed JSON, times, CTRF, run
keys."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from rollout_lineage.adapters import rundir
from rollout_lineage.adapters.importers.ctrf import parse_ctrf
from rollout_lineage.adapters.importers.keys import run_key
from rollout_lineage.adapters.rundir import RunFolder, parse_time
from rollout_lineage.domain.errors import InvalidInput


def test_run_keys_follow_job_and_rollout_names_and_keep_the_ablate_out_dir() -> None:
    assert run_key("/data/jobs/nightly/csv-dedupe__7c1f2a90") == "nightly/csv-dedupe__7c1f2a90"
    assert (
        run_key("/home/ci/jobs/ablate-2026-11-02__10-15-00/ablation/csv-dedupe")
        == "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
    )
    assert run_key("/home/ci/jobs/nightly/csv-dedupe__7c1f2a90/") == "nightly/csv-dedupe__7c1f2a90"


def test_times_are_benchflow_str_datetime_or_iso_and_naive_means_utc() -> None:
    utc = datetime(2026, 1, 1, 12, 0, 25, tzinfo=UTC)
    assert parse_time("2026-01-01 12:00:25.000000", "result.json: field started_at") == utc
    assert parse_time("2026-01-01T12:00:25Z", "x") == utc
    assert parse_time("2026-01-01T14:00:25+02:00", "x") == utc
    with pytest.raises(
        InvalidInput, match=r"result.json: field started_at: expected a time .* found 'yesterday'"
    ):
        parse_time("yesterday", "result.json: field started_at")


def test_malformed_json_names_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "tree.json").write_text('{\n  "nodes": [\n    {"id": "root",,}\n  ]\n}\n')
    with pytest.raises(InvalidInput, match=r"tree\.json, line 3, column 19: expected valid JSON"):
        RunFolder(tmp_path).read_json("tree.json")


def test_a_file_above_the_cap_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rundir, "MAX_JSON_BYTES", 64)
    (tmp_path / "result.json").write_text('{"padding": "' + "x" * 100 + '"}')
    with pytest.raises(
        InvalidInput,
        match=r"result\.json: expected a JSON file of at most 64 bytes, found 115 bytes",
    ):
        RunFolder(tmp_path).read_json("result.json")


def test_links_out_of_the_folder_are_refused_and_links_inside_are_read(tmp_path: Path) -> None:
    outside = tmp_path / "secret.json"
    outside.write_text('{"token": "s3cret"}')
    run = tmp_path / "jobs" / "run"
    run.mkdir(parents=True)
    (run / "real.json").write_text('{"ok": true}')
    os.symlink(outside, run / "config.json")
    os.symlink(run / "real.json", run / "alias.json")
    folder = RunFolder(run)
    with pytest.raises(
        InvalidInput,
        match=r"config\.json: expected a file inside .*run, "
        r"found a link that resolves to .*secret\.json",
    ):
        folder.read_json("config.json")
    with pytest.raises(InvalidInput, match="outside"):
        folder.read_json("../../secret.json")
    assert folder.read_json("alias.json") == {"ok": True}
    assert folder.read_json("missing.json") is None


def test_listing_a_hold_names_links_and_never_follows_them(tmp_path: Path) -> None:
    hold = tmp_path / "run" / "branches" / "n1" / "parent"
    (hold / "agent").mkdir(parents=True)
    (hold / "agent" / "log.txt").write_bytes(b"hello\n")
    os.symlink(hold / "agent" / "log.txt", hold / "agent" / "again.txt")
    folder = RunFolder(tmp_path / "run")
    files, left_out = folder.regular_files("branches/n1/parent")
    assert [relative for relative, _ in files] == ["agent/log.txt"] and left_out == [
        "agent/again.txt (a link, not followed)"
    ]
    assert rundir.sha256_file(files[0][1]) == "sha256:" + hashlib.sha256(b"hello\n").hexdigest()
    # out of the run: named, not followed, nothing of /etc recorded
    os.symlink("/etc", hold / "escape")
    files, left_out = folder.regular_files("branches/n1/parent")
    assert [relative for relative, _ in files] == ["agent/log.txt"]
    assert left_out == ["agent/again.txt (a link, not followed)", "escape (a link, not followed)"]


def test_ctrf_keeps_raw_names_first_entry_wins_and_skips_malformed_entries() -> None:
    document = {
        "results": {
            "tests": [
                {"name": "tests/test_outputs.py::test_a", "status": "passed"},
                {"name": "tests/test_outputs.py::test_a", "status": "failed"},
                {"name": "", "status": "failed"},
                {"name": "test_b"},
                "not an entry",
                {"name": "test_c", "status": "skipped", "raw_status": "skipped"},
            ]
        }
    }
    assert parse_ctrf(document, "ctrf.json") == {
        "tests/test_outputs.py::test_a": "passed",
        "test_c": "skipped",
    }
    with pytest.raises(
        InvalidInput, match=r"ctrf\.json: field results\.tests\[0\]\.status: expected one of"
    ):
        parse_ctrf({"results": {"tests": [{"name": "t", "status": "exploded"}]}}, "ctrf.json")
    with pytest.raises(
        InvalidInput, match=r"ctrf\.json: field results\.tests: expected a JSON array"
    ):
        parse_ctrf({"results": {}}, "ctrf.json")


def test_special_files_and_directories_are_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "tree.json")
    (tmp_path / "result.json").mkdir()
    folder = RunFolder(tmp_path)
    with pytest.raises(
        InvalidInput, match=r"tree\.json: expected a regular file, found a special file"
    ):
        folder.read_json("tree.json")
    with pytest.raises(InvalidInput, match=r"result\.json: expected a file, found a directory"):
        folder.read_json("result.json")

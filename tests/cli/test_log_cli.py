"""The log through the CLI: ingest is atomic and idempotent, verify finds tampering, head catches
truncation."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli_helpers import many_runs, write_lines
from tests.conftest import Cli

LINES = [
    {
        "type": "run.registered",
        "run": "jobs/t__1",
        "task": "t",
        "occurred_at": "2026-11-02T10:00:00Z",
    },
    {
        "type": "stage.marked",
        "run": "jobs/t__1",
        "stage": "env-ready",
        "sandbox_ref": "bf-snap-t-1",
    },
    {"type": "run.scored", "run": "jobs/t__1", "reward": 1.0, "tests": {"test_a": "passed"}},
]


def position(run_cli: Cli) -> str:
    return run_cli("head").stdout.strip()


def test_ingest_appends_once_and_log_lists_the_events(run_cli: Cli, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "facts.jsonl", LINES)
    first = run_cli("ingest", str(source))
    assert "appended 4 events from 3 lines" in first.stderr
    again = run_cli("ingest", str(source))
    assert "appended 0 events" in again.stderr
    rows = [json.loads(line) for line in run_cli("log", "--format", "jsonl").stdout.splitlines()]
    assert [r["type"] for r in rows] == [
        "run.registered",
        "stage.marked",
        "snapshot.captured",
        "run.scored",
    ]
    assert rows[0]["occurred_at"] == "2026-11-02T10:00:00Z" and rows[0]["actor"] == "tester@lab"
    assert [
        r["type"]
        for r in json.loads(run_cli("log", "--type", "snapshot.", "--format", "json").stdout)
    ] == ["snapshot.captured"]


def test_ingest_from_stdin_and_dry_run(run_cli: Cli) -> None:
    text = "".join(json.dumps(line) + "\n" for line in LINES)
    dry = run_cli("ingest", "-", "--dry-run", input=text)
    assert len(dry.stdout.splitlines()) == 4 and "would be appended" in dry.stderr
    assert run_cli("log", "--format", "jsonl").stdout == ""
    run_cli("ingest", "-", input=text)
    assert len(run_cli("log", "--format", "jsonl").stdout.splitlines()) == 4


@pytest.mark.parametrize(
    ("bad_line", "expected"),
    [
        ("{not json", "line 2: expected one JSON object, found invalid JSON"),
        (
            {"type": "stage.marked", "run": "jobs/t__1", "stage": "mid-run"},
            "line 2: field stage: Input should be",
        ),
        ({"type": "run.teleported", "run": "jobs/t__1"}, "line 2: field type: expected one of"),
        ({"type": "run.scored", "run": "jobs/t__1"}, "line 2: field reward: Field required"),
        (
            {"type": "run.scored", "run": "jobs/t__1", "reward": 1, "colour": "red"},
            "line 2: field colour: Extra inputs are not permitted",
        ),
    ],
)
def test_one_malformed_line_rejects_the_whole_file(
    run_cli: Cli, tmp_path: Path, bad_line: object, expected: str
) -> None:
    run_cli("ingest", str(write_lines(tmp_path / "seed.jsonl", LINES[:1])))
    before = position(run_cli)
    result = run_cli(
        "ingest", str(write_lines(tmp_path / "bad.jsonl", [LINES[1], bad_line, LINES[2]])), ok=False
    )
    assert result.exit_code == 1
    assert expected in result.stderr and "nothing was appended" in result.stderr
    assert position(run_cli) == before


def test_a_conflicting_fact_in_a_file_appends_nothing_and_shows_both_values(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_cli("ingest", str(write_lines(tmp_path / "a.jsonl", LINES)))
    before = position(run_cli)
    conflicting = {**LINES[2], "reward": 0.0}
    result = run_cli(
        "ingest",
        str(write_lines(tmp_path / "b.jsonl", [{**LINES[0], "run": "jobs/t__2"}, conflicting])),
        ok=False,
    )
    assert "reward: recorded 1.0, now 0.0" in result.stderr
    assert position(run_cli) == before


def log_facts(run_cli: Cli) -> list[tuple[str, dict]]:
    return [
        (row["type"], row["fact"])
        for row in map(json.loads, run_cli("log", "--format", "jsonl").stdout.splitlines())
    ]


def test_chunked_ingest_records_what_a_whole_ingest_does(run_cli: Cli, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "facts.jsonl", many_runs(10))
    result = run_cli("ingest", "--chunk-size", "7", str(source))
    assert result.stderr.startswith("appended 40 events from 30 lines (40 facts with the 10")
    assert "; 0 already known) in 5 chunks" in result.stderr
    chunked = log_facts(run_cli)
    assert "appended 0 events" in run_cli("ingest", "--chunk-size", "4", str(source)).stderr
    run_cli("--home", str(tmp_path / "whole"), "ingest", str(source))
    assert log_facts_of(run_cli, tmp_path / "whole") == chunked


def log_facts_of(run_cli: Cli, home: Path) -> list[tuple[str, dict]]:
    out = run_cli("--home", str(home), "log", "--format", "jsonl").stdout
    return [(row["type"], row["fact"]) for row in map(json.loads, out.splitlines())]


def test_chunked_ingest_appends_nothing_for_a_malformed_last_line(
    run_cli: Cli, tmp_path: Path
) -> None:
    source = write_lines(tmp_path / "facts.jsonl", [*many_runs(5), "{not json"])
    result = run_cli("ingest", "--chunk-size", "2", str(source), ok=False)
    assert result.exit_code == 1 and "line 16: expected one JSON object" in result.stderr
    assert log_facts(run_cli) == []


def test_a_refusal_in_a_later_chunk_keeps_the_earlier_ones_and_a_rerun_completes(
    run_cli: Cli, tmp_path: Path
) -> None:
    lines = many_runs(4)
    run_cli("ingest", str(write_lines(tmp_path / "seed.jsonl", lines[3:6])))  # run 1, scored 1.0
    lines[5] = {**lines[5], "reward": 0.0}
    source = write_lines(tmp_path / "facts.jsonl", lines)
    result = run_cli("ingest", "--chunk-size", "3", str(source), ok=False)
    assert result.exit_code == 1
    assert (
        "facts 4 to 6 of 12 (chunk 2) were refused" in result.stderr
        and "reward: recorded 1.0, now 0.0" in result.stderr
    )
    assert "the 3 facts before them are recorded (4 events appended)" in result.stderr
    assert "run the same command again" in result.stderr
    # the seed's run 1 and chunk 1's run 0, nothing of runs 2 and 3
    assert len(log_facts(run_cli)) == 8
    lines[5] = {**lines[5], "reward": 1.0}
    write_lines(source, lines)
    rerun = run_cli("ingest", "--chunk-size", "3", str(source)).stderr
    assert rerun.startswith("appended 8 events from 12 lines (16 facts with the 4 they imply")
    assert "; 8 already known) in 4 chunks" in rerun
    assert len(log_facts(run_cli)) == 16


def test_a_chunked_ingest_records_only_the_lines_it_validated(
    run_cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollout_lineage.adapters import jsonl

    source = write_lines(tmp_path / "facts.jsonl", many_runs(3))
    real_iter_entries = jsonl.iter_entries
    passes = []

    # a harness appends (half a line) between the two passes
    def grows_after_the_first_pass(lines, where):
        passes.append(where)
        if len(passes) == 2:
            with source.open("a") as out:
                out.write(
                    json.dumps({"type": "run.registered", "run": "jobs/late", "task": "t"})
                    + '\n{"type": '
                )
        return real_iter_entries(lines, where)

    monkeypatch.setattr(jsonl, "iter_entries", grows_after_the_first_pass)
    result = run_cli("ingest", "--chunk-size", "4", str(source))
    assert len(passes) == 2 and "appended 12 events from 9 lines (12 facts" in result.stderr
    assert "already known) in 3 chunks" in result.stderr
    assert "jobs/late" not in run_cli("log", "--format", "jsonl").stdout


def test_a_chunked_ingest_of_a_file_cut_short_meanwhile_says_so(
    run_cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollout_lineage.adapters import jsonl

    source = write_lines(tmp_path / "facts.jsonl", many_runs(3))
    real_iter_entries = jsonl.iter_entries
    passes = []

    def truncated_after_the_first_pass(lines, where):
        passes.append(where)
        if len(passes) == 2:
            source.write_text(source.read_text().split("\n", 4)[0] + "\n")
        return real_iter_entries(lines, where)

    monkeypatch.setattr(jsonl, "iter_entries", truncated_after_the_first_pass)
    result = run_cli("ingest", "--chunk-size", "4", str(source), ok=False)
    assert result.exit_code == 1
    assert (
        "changed while it was ingested: 9 facts validated, 1 found when recording" in result.stderr
    )


def test_a_byte_order_mark_is_not_part_of_the_first_line(run_cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "facts.jsonl"
    source.write_bytes(
        b"\xef\xbb\xbf" + "".join(json.dumps(line) + "\n" for line in LINES).encode()
    )
    assert "appended 4 events from 3 lines" in run_cli("ingest", str(source)).stderr


def test_chunked_ingest_needs_a_file_and_no_dry_run(run_cli: Cli, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "facts.jsonl", LINES)
    from_stdin = run_cli("ingest", "--chunk-size", "2", "-", input=source.read_text(), ok=False)
    assert from_stdin.exit_code == 2 and "save the input to a file first" in from_stdin.stderr
    dry = run_cli("ingest", "--chunk-size", "2", "--dry-run", str(source), ok=False)
    assert dry.exit_code == 2 and "drop one of them" in dry.stderr
    assert log_facts(run_cli) == []


def test_schema_describes_every_fact_type(run_cli: Cli) -> None:
    schema = json.loads(run_cli("schema").stdout)
    assert schema["discriminator"]["propertyName"] == "type"
    assert "stage.marked" in schema["discriminator"]["mapping"]
    assert "occurred_at" in schema["$defs"]["StageMarked"]["properties"]


def store_file(run_cli: Cli) -> Path:
    return run_cli.home / "events.sqlite"


def test_verify_passes_on_an_intact_log_and_names_an_edited_event(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_cli("ingest", str(write_lines(tmp_path / "f.jsonl", LINES)))
    assert json.loads(run_cli("verify", "--format", "json").stdout)["intact"] is True
    with sqlite3.connect(store_file(run_cli)) as db:
        state = db.execute("SELECT state FROM stored_events WHERE rowid = 2").fetchone()[0]
        edited = bytearray(state)
        edited[edited.index(b"env-ready")] ^= 0x01  # one flipped bit in one byte
        db.execute("UPDATE stored_events SET state = ? WHERE rowid = 2", (bytes(edited),))
    result = run_cli("verify", "--format", "json", ok=False)
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["first_bad_position"] == 2 and "edited" in report["problem"]


def test_verify_names_a_deleted_event(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("ingest", str(write_lines(tmp_path / "f.jsonl", LINES)))
    with sqlite3.connect(store_file(run_cli)) as db:
        db.execute("DELETE FROM stored_events WHERE rowid = 2")
        db.execute("DELETE FROM lineage_chain WHERE position = 2")
    result = run_cli("verify", "--format", "json", ok=False)
    assert result.exit_code == 3
    assert json.loads(result.stdout)["first_bad_position"] == 3


def test_verify_names_an_event_deleted_without_its_link_and_a_forged_event(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_cli("ingest", str(write_lines(tmp_path / "f.jsonl", LINES)))
    with sqlite3.connect(store_file(run_cli)) as db:
        db.execute("DELETE FROM stored_events WHERE rowid = 3")
    assert (
        "was deleted"
        in json.loads(run_cli("verify", "--format", "json", ok=False).stdout)["problem"]
    )
    other = Cli(run_cli.home.parent / "other")
    other("ingest", str(write_lines(tmp_path / "g.jsonl", LINES)))
    with sqlite3.connect(store_file(other)) as db:
        db.execute(
            "INSERT INTO stored_events SELECT originator_id, originator_version "
            "+ 100, topic, state FROM stored_events WHERE rowid = 1"
        )
    assert (
        "inserted outside"
        in json.loads(other("verify", "--format", "json", ok=False).stdout)["problem"]
    )


def test_verify_notices_reordered_events(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("ingest", str(write_lines(tmp_path / "f.jsonl", LINES)))
    with sqlite3.connect(store_file(run_cli)) as db:  # events 3 and 4 swap places in the log
        db.execute("UPDATE stored_events SET rowid = 100 WHERE rowid = 3")
        db.execute("UPDATE stored_events SET rowid = 3 WHERE rowid = 4")
        db.execute("UPDATE stored_events SET rowid = 4 WHERE rowid = 100")
    assert (
        json.loads(run_cli("verify", "--format", "json", ok=False).stdout)["first_bad_position"]
        == 3
    )


def test_a_kept_head_catches_a_truncated_tail(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("ingest", str(write_lines(tmp_path / "f.jsonl", LINES)))
    kept = position(run_cli)
    run_cli("verify", "--head", kept)
    with sqlite3.connect(store_file(run_cli)) as db:
        db.execute("DELETE FROM stored_events WHERE rowid = 4")
        db.execute("DELETE FROM lineage_chain WHERE position = 4")
    # The Merkle tree kept in the store still has a leaf for the lost event...
    tree_says = json.loads(run_cli("verify", "--format", "json", ok=False).stdout)
    assert tree_says["first_bad_position"] == 4 and "holds no event there" in tree_says["problem"]
    with sqlite3.connect(store_file(run_cli)) as db:  # ...unless whoever truncated knew of it too
        db.execute("DELETE FROM lineage_merkle_leaves WHERE idx = 3")
        db.execute("DELETE FROM lineage_merkle_nodes WHERE (level, idx) IN ((1, 1), (2, 0))")
    run_cli("verify")  # the shorter chain is internally consistent...
    # ...but the kept head is gone
    result = run_cli("verify", "--head", kept, "--format", "json", ok=False)
    assert result.exit_code == 3 and "tail was truncated" in json.loads(result.stdout)["problem"]
    assert run_cli("verify", "--head", "nonsense", ok=False).exit_code == 1

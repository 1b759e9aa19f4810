"""One definition of the log: whatever a writer can see, every reader and `verify` see, and
positions follow the writers' rule (dense: the first event at 1, each one at the previous one's + 1)
on both backends.

The attacks (issue #23): an unsigned, correctly linked event inserted at position 2**62+1 passed
`verify --trusted-keys --head --read-models --saved-states`, since every reader stopped at 2**62; on
PostgreSQL one `setval` of the position sequence moved every later event past 2**62, out of every
reader's sight.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import open_store
from rollout_lineage.domain.errors import IntegrityFailure
from rollout_lineage.domain.facts import RunRegistered, RunScored
from tests.cli_helpers import key_label
from tests.conftest import Cli
from tests.raw_store import raw_store

JUMP = 2**62 + 1


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    Cli(tmp_path / "unused")("keys", "generate", "writer", "--dir", str(tmp_path))
    return tmp_path


def signed(store_url: str, home: Path, keys: Path, *facts: object) -> None:
    with open_store(store_url, home=str(home), signing_key=str(keys / "writer.key")) as lineage:
        for fact in facts:
            lineage.record([fact])  # type: ignore[list-item]


def full_verify(cli: Cli, keys: Path, head: str) -> tuple[int, dict]:
    result = cli(
        "verify",
        "--trusted-keys",
        str(keys / "writer.pub"),
        "--head",
        head,
        "--read-models",
        "--saved-states",
        "--format",
        "json",
        ok=False,
    )
    return result.exit_code, json.loads(result.stdout)


def test_an_unsigned_event_past_2_62_is_a_jump_verify_names_and_writers_refuse(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    home = tmp_path / "home"
    signed(store_url, home, keys, RunRegistered(run="jobs/t__1", task="t"))
    signed(store_url, home, keys, RunRegistered(run="jobs/t__2", task="t"))
    cli = Cli(home, store_url)
    kept = cli("head").stdout.strip()
    # correctly linked, but at a jumped position and with no signature
    with raw_store(store_url) as raw:
        raw.insert_copy(2, JUMP)  # in a stream the writer below does not read
        raw.relink()
    code, report = full_verify(cli, keys, kept)
    assert code == 3, report
    assert report["first_bad_position"] == JUMP
    assert (
        f"position {JUMP} follows position 2: positions 3-{JUMP - 1} hold no event"
        in (report["problem"])
    )
    # Readers show the break, never a log that stops at 2**62.
    refused = cli("sql", "SELECT count(*) AS n FROM events", ok=False)
    assert refused.exit_code == 3 and f"position {JUMP}" in refused.stderr
    with pytest.raises(IntegrityFailure, match="refusing to append"):
        signed(store_url, home, keys, RunScored(run="jobs/t__1", reward=1.0, tests={}))
    with raw_store(store_url) as raw:
        assert [row[0] for row in raw.events()] == [1, 2, JUMP], "the refused batch appended"


@pytest.mark.postgres
@pytest.mark.parametrize("moved_to", [2**62, 2**63 - 1, 1, "1, false"])
def test_a_moved_position_sequence_hides_nothing(
    postgres_url: str, tmp_path: Path, keys: Path, moved_to: int | str
) -> None:
    home = tmp_path / "home"
    signed(postgres_url, home, keys, RunRegistered(run="jobs/t__1", task="t"))
    cli = Cli(home, postgres_url)
    kept = cli("head").stdout.strip()
    with raw_store(postgres_url) as raw:
        raw.execute(f"SELECT setval('lineage_events_notification_id_seq', {moved_to})")
    signed(postgres_url, home, keys, RunScored(run="jobs/t__1", reward=1.0, tests={}))
    positions = [
        json.loads(line)["position"] for line in cli("log", "--format", "jsonl").stdout.splitlines()
    ]
    assert positions == [1, 2], "the writer follows the last link, not the sequence"
    runs = json.loads(cli("sql", "SELECT run, outcome FROM runs", "--format", "json").stdout)
    assert runs == [{"run": "jobs/t__1", "outcome": "scored"}]
    assert "checkpoint of 2 events" in cli("checkpoint").stderr
    code, report = full_verify(cli, keys, kept)
    assert code == 0, report
    assert report["signatures"] == f"2 events signed by {key_label(keys / 'writer.pub')}"
    assert report["events"] == 2


def test_a_gap_relinked_over_is_named(store_url: str, tmp_path: Path, keys: Path) -> None:
    """A deleted event whose neighbours were linked to each other, and the tree rebuilt: before the
    dense rule, every check inside the store passed."""
    home = tmp_path / "home"
    signed(
        store_url,
        home,
        keys,
        RunRegistered(run="jobs/t__1", task="t"),
        RunRegistered(run="jobs/t__2", task="t"),
        RunRegistered(run="jobs/t__3", task="t"),
    )
    with raw_store(store_url) as raw:
        raw.execute(f"DELETE FROM {raw.events_table} WHERE {raw.position} = 2")
        raw.relink()
    result = Cli(home, store_url)("verify", "--format", "json", ok=False)
    report = json.loads(result.stdout)
    assert result.exit_code == 3 and report["first_bad_position"] == 3
    assert "position 3 follows position 1: position 2 hold no event" in report["problem"]


@pytest.mark.parametrize("position", [0, -5])
def test_an_event_at_or_below_position_0_is_named(
    store_url: str, tmp_path: Path, keys: Path, position: int
) -> None:
    """Readers page from position 0 on; the walk starts below every position, so it names the
    event."""
    home = tmp_path / "home"
    signed(store_url, home, keys, RunRegistered(run="jobs/t__1", task="t"))
    with raw_store(store_url) as raw:
        raw.insert_copy(1, position)
        raw.relink()
    result = Cli(home, store_url)("verify", "--format", "json", ok=False)
    report = json.loads(result.stdout)
    assert result.exit_code == 3 and report["first_bad_position"] == position
    assert f"position {position} follows position 0: positions start at 1" in report["problem"]


@pytest.mark.parametrize("position", [3, JUMP, 2**63 - 1])
def test_an_event_without_a_link_stops_writers_and_verify_names_it(
    store_url: str, tmp_path: Path, keys: Path, position: int
) -> None:
    """Next to the last event, past 2**62, or at SQLite's last rowid (after which SQLite picks
    rowids at random): the writer refuses plainly (no retry as if it lost a race) and appends
    nothing."""
    home = tmp_path / "home"
    signed(store_url, home, keys, RunRegistered(run="jobs/t__1", task="t"))
    signed(store_url, home, keys, RunRegistered(run="jobs/t__2", task="t"))
    with raw_store(store_url) as raw:
        raw.insert_copy(2, position)
    with pytest.raises(IntegrityFailure, match="refusing to append"):
        signed(store_url, home, keys, RunScored(run="jobs/t__1", reward=1.0, tests={}))
    with raw_store(store_url) as raw:
        assert [row[0] for row in raw.events()] == [1, 2, position]
    result = Cli(home, store_url)("verify", "--format", "json", ok=False)
    report = json.loads(result.stdout)
    assert result.exit_code == 3 and report["first_bad_position"] == position, report


def test_a_link_without_an_event_past_the_end_stops_writers(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    """A link at 2**62 that points back at the position before it: dense as far as it goes, but no
    event."""
    home = tmp_path / "home"
    signed(store_url, home, keys, RunRegistered(run="jobs/t__1", task="t"))
    with raw_store(store_url) as raw:
        raw.execute(
            "INSERT INTO lineage_chain (position, previous, chain_hash) VALUES (?, ?, ?)",
            (2**62, 2**62 - 1, "sha256:" + "0" * 64),
        )
    with pytest.raises(IntegrityFailure, match="refusing to append"):
        signed(store_url, home, keys, RunScored(run="jobs/t__1", reward=1.0, tests={}))
    result = Cli(home, store_url)("verify", "--format", "json", ok=False)
    report = json.loads(result.stdout)
    assert result.exit_code == 3 and report["first_bad_position"] == 2**62, report


@pytest.mark.postgres
def test_positions_moved_during_the_insert_are_refused_and_roll_back(
    postgres_url: str, tmp_path: Path, keys: Path
) -> None:
    """Someone with DDL rights moves each new event's position in a trigger, after the writer set
    the sequence: the writer's check after the insert fails the transaction in the server, so
    nothing is committed (a Python exception alone would have been caught by the library, which then
    commits)."""
    home = tmp_path / "home"
    signed(postgres_url, home, keys, RunRegistered(run="jobs/t__1", task="t"))
    with raw_store(postgres_url) as raw:
        raw.execute(
            "CREATE FUNCTION shift() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN NEW.notification_id := NEW.notification_id + 10; RETURN NEW; END$$"
        )
        raw.execute(
            "CREATE TRIGGER shift BEFORE INSERT ON "
            "lineage_events FOR EACH ROW EXECUTE FUNCTION shift()"
        )
    with pytest.raises(IntegrityFailure, match="refusing to append"):
        signed(postgres_url, home, keys, RunScored(run="jobs/t__1", reward=1.0, tests={}))
    with raw_store(postgres_url) as raw:
        assert [row[0] for row in raw.events()] == [1]
        assert raw.execute("SELECT count(*) FROM lineage_chain") == [(1,)]
        assert raw.execute("SELECT count(*) FROM lineage_signatures") == [(1,)]
    assert Cli(home, postgres_url)("verify", ok=False).exit_code == 0


@pytest.mark.postgres
def test_a_second_event_at_a_taken_position_is_named(
    postgres_url: str, tmp_path: Path, keys: Path
) -> None:
    """With the unique index on positions dropped, two events can share one position."""
    home = tmp_path / "home"
    signed(postgres_url, home, keys, RunRegistered(run="jobs/t__1", task="t"))
    signed(postgres_url, home, keys, RunRegistered(run="jobs/t__2", task="t"))
    with raw_store(postgres_url) as raw:
        raw.execute("DROP INDEX lineage_events_notification_id_idx")
        raw.insert_copy(1, 2)
    result = Cli(home, postgres_url)("verify", ok=False)
    assert result.exit_code == 3, result.stderr
    assert "holds two rows at one position" in result.stderr
    assert "(notification_id)=(2) is duplicated" in result.stderr

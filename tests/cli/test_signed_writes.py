"""Signed writes: batches appended with a key verify against it; an appended, correctly linked
forgery, an edited signed event and a batch signed by an untrusted key are each reported by `verify
--trusted-keys`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import open_store
from rollout_lineage.domain.facts import RunRegistered, RunScored
from rollout_lineage.domain.integrity import link
from tests.cli_helpers import key_label, relink
from tests.conftest import Cli


@pytest.fixture
def writer_keys(tmp_path: Path) -> Path:
    keys = Cli(tmp_path / "unused")
    keys("keys", "generate", "harness-7", "--dir", str(tmp_path))
    keys("keys", "generate", "intruder", "--dir", str(tmp_path))
    (tmp_path / "trusted").write_text(
        "# keys whose writes we accept\n" + (tmp_path / "harness-7.pub").read_text()
    )
    return tmp_path


def record_signed(store: str, home: Path, key: Path, runs: range) -> None:
    with open_store(store, home=str(home), signing_key=str(key)) as lineage:
        for i in runs:
            lineage.record([RunRegistered(run=f"jobs/t__{i}", task="t")])
            lineage.record([RunScored(run=f"jobs/t__{i}", reward=1.0, tests={})])


def trusted_verify(cli: Cli, keys: Path) -> tuple[int, dict]:
    result = cli("verify", "--trusted-keys", str(keys / "trusted"), "--format", "json", ok=False)
    return result.exit_code, json.loads(result.stdout)


def test_signed_batches_verify_and_name_their_key_as_actor(
    store_url: str, tmp_path: Path, writer_keys: Path
) -> None:
    home = tmp_path / "home"
    record_signed(store_url, home, writer_keys / "harness-7.key", range(3))
    cli = Cli(home, store_url)
    code, report = trusted_verify(cli, writer_keys)
    harness = key_label(writer_keys / "harness-7.pub")
    assert code == 0 and report["signatures"] == f"6 events signed by {harness}"
    actors = {
        row["actor"] for row in map(json.loads, cli("log", "--format", "jsonl").stdout.splitlines())
    }
    assert actors == {"harness-7"}


def test_an_appended_linked_forgery_passes_the_chain_but_not_the_trusted_keys(
    store_url: str, tmp_path: Path, writer_keys: Path
) -> None:
    home = tmp_path / "home"
    record_signed(store_url, home, writer_keys / "harness-7.key", range(2))
    with open_store(store_url, home=str(home), actor="harness-7") as forger:  # no key: only a claim
        forger.record([RunRegistered(run="jobs/forged", task="t")])
    cli = Cli(home, store_url)
    cli("verify")  # the chain is intact: the forger linked the event as any writer does
    code, report = trusted_verify(cli, writer_keys)
    assert code == 3 and report["first_bad_position"] == 5
    assert report["problem"] == (
        "1 events are not covered by a trusted signature: position 5: no signature"
    )


def test_a_batch_signed_by_an_untrusted_key_is_reported(tmp_path: Path, writer_keys: Path) -> None:
    home = tmp_path / "home"
    store = f"sqlite:///{home / 'events.sqlite'}"
    record_signed(store, home, writer_keys / "harness-7.key", range(1))
    record_signed(store, home, writer_keys / "intruder.key", range(1, 2))
    code, report = trusted_verify(Cli(home), writer_keys)
    assert code == 3 and report["first_bad_position"] == 3
    intruder = key_label(writer_keys / "intruder.pub")
    assert f"positions 3-4: signed by {intruder}, not a trusted key" in report["problem"]


def test_an_event_edited_after_signing_fails_its_batch_signature(
    tmp_path: Path, writer_keys: Path
) -> None:
    home = tmp_path / "home"
    record_signed(
        f"sqlite:///{home / 'events.sqlite'}", home, writer_keys / "harness-7.key", range(2)
    )
    with sqlite3.connect(home / "events.sqlite") as db:
        state = db.execute("SELECT state FROM stored_events WHERE rowid = 2").fetchone()[0]
        db.execute(
            "UPDATE stored_events SET state = ? WHERE rowid = 2",
            (state.replace(b'"reward":1.0', b'"reward":0.5'),),
        )
        relink(db)
    code, report = trusted_verify(Cli(home), writer_keys)
    assert code == 3 and report["first_bad_position"] == 2
    harness = key_label(writer_keys / "harness-7.pub")
    assert f"the signature by {harness} over positions 2-2 does not verify" in report["problem"]


def test_an_event_inserted_by_hand_with_a_correct_link_is_reported(
    tmp_path: Path, writer_keys: Path
) -> None:
    home = tmp_path / "home"
    record_signed(
        f"sqlite:///{home / 'events.sqlite'}", home, writer_keys / "harness-7.key", range(1)
    )
    with sqlite3.connect(home / "events.sqlite") as db:
        row = db.execute(
            "SELECT originator_id, originator_version, "
            "topic, state FROM stored_events WHERE rowid = 2"
        ).fetchone()
        previous = db.execute("SELECT chain_hash FROM lineage_chain WHERE position = 2").fetchone()[
            0
        ]
        forged = (row[0], row[1] + 1, row[2], row[3])
        db.execute(
            "INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
            "VALUES (3, ?, ?, ?, ?)",
            forged,
        )
        db.execute("INSERT INTO lineage_chain VALUES (3, 2, ?)", (link(previous, 3, *forged),))
    cli = Cli(home)
    cli("verify")
    code, report = trusted_verify(cli, writer_keys)
    assert code == 3 and "position 3: no signature" in report["problem"]


def test_lineage_signing_key_signs_what_the_cli_appends_and_a_bad_key_appends_nothing(
    tmp_path: Path, writer_keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "facts.jsonl"
    source.write_text(json.dumps({"type": "run.registered", "run": "jobs/cli", "task": "t"}) + "\n")
    cli = Cli(tmp_path / "home")
    cli("init")
    monkeypatch.setenv("LINEAGE_SIGNING_KEY", str(writer_keys / "harness-7.pub"))
    refused = cli("ingest", str(source), ok=False)
    assert refused.exit_code == 1 and "expected a signer key" in refused.stderr
    monkeypatch.setenv("LINEAGE_SIGNING_KEY", str(writer_keys / "harness-7.key"))
    cli("ingest", str(source))
    code, report = trusted_verify(cli, writer_keys)
    harness = key_label(writer_keys / "harness-7.pub")
    assert code == 0 and report["signatures"] == f"1 events signed by {harness}"

"""Run bundles through the CLI: written from one store, checked with no store, shown, imported into
another (SQLite to PostgreSQL and back) idempotently with provenance, and refused on any changed
byte."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rollout_lineage.adapters.evidence import ed25519
from rollout_lineage.adapters.evidence.bundle_check import verify_bundle
from rollout_lineage.domain.errors import IntegrityFailure
from tests.cli_helpers import key_label, source_store
from tests.conftest import Cli


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    Cli(tmp_path / "unused")("keys", "generate", "lab", "--dir", str(tmp_path))
    return tmp_path


def facts_of(cli: Cli, run: str) -> list[tuple[str, dict]]:
    rows = [json.loads(line) for line in cli("log", "--format", "jsonl").stdout.splitlines()]
    return [
        (row["type"], row["fact"])
        for row in rows
        if row["fact"].get("run") == run or row["type"].startswith("snapshot.")
    ]


def test_a_bundle_travels_sqlite_to_postgresql_and_back(
    tmp_path: Path, keys: Path, postgres_url: str
) -> None:
    a = Cli(tmp_path / "a")
    source_store(
        f"sqlite:///{tmp_path / 'a' / 'events.sqlite'}", tmp_path / "a", tmp_path, keys / "lab.key"
    )
    a("bundle", "jobs/a", "--to", str(tmp_path / "a.bundle"), "--sign", str(keys / "lab.key"))
    checked = json.loads(
        Cli(tmp_path / "nowhere")(
            "bundle",
            "verify",
            str(tmp_path / "a.bundle"),
            "--key",
            str(keys / "lab.pub"),
            "--format",
            "json",
        ).stdout
    )[0]
    assert checked["runs"] == "jobs/a" and checked["events"] == 6
    assert checked["signed_events"] == f"6: 6 by {key_label(keys / 'lab.pub')} (trusted)"
    pg = Cli(tmp_path / "pg", postgres_url)
    first = pg("import", "--bundle", str(tmp_path / "a.bundle"), "--key", str(keys / "lab.pub"))
    assert "appended 6 events" in first.stderr
    again = pg("import", "--bundle", str(tmp_path / "a.bundle"), "--key", str(keys / "lab.pub"))
    assert "appended 0 events" in again.stderr
    sources = json.loads(pg("bundle", "sources", "--format", "json").stdout)
    assert [s["source_position"] for s in sources] == [1, 3, 4, 5, 6, 7]
    assert {s["proven"] for s in sources} == {"yes"} and len({s["origin"] for s in sources}) == 1
    pg("bundle", "jobs/a", "--to", str(tmp_path / "pg.bundle"), "--sign", str(keys / "lab.key"))
    back = Cli(tmp_path / "back")
    back("import", "--bundle", str(tmp_path / "pg.bundle"), "--key", str(keys / "lab.pub"))
    assert facts_of(back, "jobs/a") == facts_of(a, "jobs/a") == facts_of(pg, "jobs/a")
    back_sources = json.loads(back("bundle", "sources", "--format", "json").stdout)
    assert {s["origin"] for s in back_sources} == {_origin(tmp_path / "pg.bundle")}
    assert _origin(tmp_path / "pg.bundle") != sources[0]["origin"]  # the PostgreSQL log is its own


def _origin(bundle: Path) -> str:
    return json.loads(bundle.read_text())["checkpoint"].split("\n")[0]


@pytest.mark.slow
def test_every_flipped_byte_of_a_bundle_is_refused(tmp_path: Path, keys: Path) -> None:
    a = Cli(tmp_path / "a")
    source_store(
        f"sqlite:///{tmp_path / 'a' / 'events.sqlite'}", tmp_path / "a", tmp_path, keys / "lab.key"
    )
    a(
        "bundle",
        "jobs/a",
        "--to",
        str(tmp_path / "b"),
        "--sign",
        str(keys / "lab.key"),
    )
    data = (tmp_path / "b").read_bytes()
    verify_bundle(data, [ed25519.load_verifier(str(keys / "lab.pub"))], "b")
    missed = []
    for offset in range(len(data)):
        changed = bytearray(data)
        changed[offset] ^= 0x01
        try:
            verify_bundle(bytes(changed), [], "b")
        except IntegrityFailure:
            continue
        missed.append(offset)
    assert missed == []
    changed = bytearray(data)
    changed[len(data) // 2] ^= 0x04
    (tmp_path / "changed").write_bytes(bytes(changed))
    result = Cli(tmp_path / "nowhere")("bundle", "verify", str(tmp_path / "changed"), ok=False)
    assert result.exit_code == 3 and "changed" in result.stderr
    refused = Cli(tmp_path / "c")("import", "--bundle", str(tmp_path / "changed"), ok=False)
    assert refused.exit_code == 3 and not (tmp_path / "c" / "events.sqlite").exists()


def test_with_tars_carries_the_tar_and_a_changed_tar_is_not_bundled(
    tmp_path: Path, keys: Path
) -> None:
    a = Cli(tmp_path / "a")
    tar = source_store(
        f"sqlite:///{tmp_path / 'a' / 'events.sqlite'}", tmp_path / "a", tmp_path, keys / "lab.key"
    )
    a("bundle", "jobs/a", "--to", str(tmp_path / "with"), "--with-tars")
    carried = json.loads((tmp_path / "with").read_text())["tars"]
    assert [t["ref"] for t in carried] == ["snap-1"] and "data" in carried[0]
    data = (tmp_path / "with").read_bytes()
    start = data.index(b'"data":"') + 8
    for offset in range(start, data.index(b'"', start), 97):  # bytes inside the carried tar
        changed = bytearray(data)
        changed[offset] ^= 0x01
        with pytest.raises(IntegrityFailure, match="tar"):
            verify_bundle(bytes(changed), [], "with")
    tar.write_bytes(b"swapped")
    refused = a("bundle", "jobs/a", "--to", str(tmp_path / "again"), "--with-tars", ok=False)
    assert refused.exit_code == 1 and "not the recorded" in refused.stderr
    assert not (tmp_path / "again").exists()


def test_claims_of_verification_need_a_trusted_checkpoint_signature(
    tmp_path: Path, keys: Path
) -> None:
    a = Cli(tmp_path / "a")
    source_store(
        f"sqlite:///{tmp_path / 'a' / 'events.sqlite'}", tmp_path / "a", tmp_path, keys / "lab.key"
    )
    a("bundle", "jobs/a", "--to", str(tmp_path / "unsigned"))
    c = Cli(tmp_path / "c")
    refused = c("import", "--bundle", str(tmp_path / "unsigned"), ok=False)
    assert refused.exit_code == 1 and "snapshot.imported" in refused.stderr
    assert c("log", "--format", "jsonl").stdout == ""
    wrong_key = c(
        "import", "--bundle", str(tmp_path / "unsigned"), "--key", str(keys / "lab.pub"), ok=False
    )
    assert wrong_key.exit_code == 3 and "expected a signature by lab" in wrong_key.stderr


def test_show_prints_trees_and_the_audit_verdict_without_a_store(
    tmp_path: Path, keys: Path
) -> None:
    a = Cli(tmp_path / "a")
    source_store(
        f"sqlite:///{tmp_path / 'a' / 'events.sqlite'}", tmp_path / "a", tmp_path, keys / "lab.key"
    )
    a("bundle", "jobs/a", "jobs/b", "--to", str(tmp_path / "both"))
    shown = Cli(tmp_path / "nowhere")("bundle", "show", str(tmp_path / "both")).stdout
    assert (
        "jobs/a  task t · pass: reward 1.0" in shown
        and "jobs/b  task t · fail: reward 0.0" in shown
    )
    assert "verdict:" in shown and "audit at log position" in shown
    assert not (tmp_path / "nowhere").exists()


def test_a_bundle_of_an_unknown_run_or_onto_an_existing_file_is_refused(
    tmp_path: Path, keys: Path
) -> None:
    a = Cli(tmp_path / "a")
    source_store(
        f"sqlite:///{tmp_path / 'a' / 'events.sqlite'}", tmp_path / "a", tmp_path, keys / "lab.key"
    )
    unknown = a("bundle", "jobs/zzz", "--to", str(tmp_path / "z"), ok=False)
    assert unknown.exit_code == 1 and "none for jobs/zzz" in unknown.stderr
    (tmp_path / "exists").write_text("keep me")
    over = a("bundle", "jobs/a", "--to", str(tmp_path / "exists"), ok=False)
    assert over.exit_code == 1 and (tmp_path / "exists").read_text() == "keep me"


def test_sources_catch_an_imported_event_changed_afterwards(tmp_path: Path, keys: Path) -> None:
    a = Cli(tmp_path / "a")
    source_store(
        f"sqlite:///{tmp_path / 'a' / 'events.sqlite'}", tmp_path / "a", tmp_path, keys / "lab.key"
    )
    a("bundle", "jobs/b", "--to", str(tmp_path / "b.bundle"))
    c = Cli(tmp_path / "c")
    c("import", "--bundle", str(tmp_path / "b.bundle"))
    assert [s["proven"] for s in json.loads(c("bundle", "sources", "--format", "json").stdout)] == [
        "yes",
        "yes",
    ]
    with sqlite3.connect(tmp_path / "c" / "events.sqlite") as db:
        state = db.execute("SELECT state FROM stored_events WHERE rowid = 2").fetchone()[0]
        db.execute(
            "UPDATE stored_events SET state = ? WHERE rowid = 2",
            (state.replace(b'"reward":0.0', b'"reward":1.0'),),
        )
    result = c("bundle", "sources", "--format", "json", ok=False)
    assert result.exit_code == 3 and "position 2" in result.stderr
    assert "not the fact of the source event" in json.loads(result.stdout)[1]["proven"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("originator_version", "1"),
        ("position", True),
        ("leaf_index", 0.0),
        ("topic", None),
    ],
)
def test_a_field_re_encoded_as_another_json_type_is_refused(
    tmp_path: Path, keys: Path, field: str, value: object
) -> None:
    """`"1"` and `true` hash as 1, so re-encoding the bundle canonically with one of them passed
    every check and imported a value the source never held (an attack review's find)."""
    from rollout_lineage.adapters.evidence.bundles import canonical

    a = Cli(tmp_path / "a")
    source_store(
        f"sqlite:///{tmp_path / 'a' / 'events.sqlite'}", tmp_path / "a", tmp_path, keys / "lab.key"
    )
    a("bundle", "jobs/a", "--to", str(tmp_path / "b"))
    document = json.loads((tmp_path / "b").read_text())
    event = document["events"][0]
    if field == "originator_version":
        value = str(event[field])
    if field == "position" and event[field] != 1:
        pytest.skip("the first event is not at position 1")
    event[field] = value
    (tmp_path / "changed").write_bytes(canonical(document))
    result = Cli(tmp_path / "nowhere")("bundle", "verify", str(tmp_path / "changed"), ok=False)
    assert result.exit_code == 3 and f"expected {field} as" in result.stderr

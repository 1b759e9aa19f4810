"""A second attack on one log and its evidence (issue #23, item 6), by someone with write access to
the store but no signing key: variants of the positions, sequence, side-table, proof-file and
checkpoint attacks the first tests do not try, on SQLite and PostgreSQL, through the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import pytest

from rollout_lineage.adapters.evidence.bundles import canonical
from rollout_lineage.bootstrap import open_store
from rollout_lineage.domain import merkle
from rollout_lineage.domain.errors import IntegrityFailure
from rollout_lineage.domain.facts import RunRegistered, RunScored
from tests.cli.test_statement_limits import (
    ENDED_WITHIN_S,
    PEAK_BOUND_KB,
    home_with_a_run,  # noqa: F401 (a fixture)
    run_sql_measured,
)
from tests.cli_helpers import key_label
from tests.conftest import Cli
from tests.raw_store import CHAINED_ROLE, raw_store


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    Cli(tmp_path / "unused")("keys", "generate", "writer", "--dir", str(tmp_path))
    return tmp_path


def signed(store_url: str, home: Path, keys: Path, *runs: str) -> None:
    """One signed batch per run registered."""
    with open_store(store_url, home=str(home), signing_key=str(keys / "writer.key")) as lineage:
        for run in runs:
            lineage.record([RunRegistered(run=run, task="t")])


def three(store_url: str, tmp_path: Path, keys: Path) -> Cli:
    home = tmp_path / "home"
    signed(store_url, home, keys, "jobs/t__1", "jobs/t__2", "jobs/t__3")
    return Cli(home, store_url)


def verified(cli: Cli, *args: str) -> tuple[int, dict]:
    result = cli("verify", *args, "--format", "json", ok=False)
    return result.exit_code, json.loads(result.stdout) if result.stdout else {}


def trusted(keys: Path) -> tuple[str, str]:
    return "--trusted-keys", str(keys / "writer.pub")


# --- positions ------------------------------------------------------------------------------------


def test_reordered_positions_relinked_fail_the_signatures_and_a_kept_head(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    cli = three(store_url, tmp_path, keys)
    kept = cli("head").stdout.strip()
    with raw_store(store_url) as raw:
        p, t = raw.position, raw.events_table
        raw.execute(f"UPDATE {t} SET {p} = 100 WHERE {p} = 1")
        raw.execute(f"UPDATE {t} SET {p} = 1 WHERE {p} = 2")
        raw.execute(f"UPDATE {t} SET {p} = 2 WHERE {p} = 100")
        raw.relink()
    code, report = verified(cli, *trusted(keys))
    assert code == 3 and report["first_bad_position"] == 1, report
    code, report = verified(cli, "--head", kept)
    assert code == 3, report


def test_an_event_inserted_between_two_with_later_positions_shifted_is_unsigned(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    cli = three(store_url, tmp_path, keys)
    with raw_store(store_url) as raw:
        p, t = raw.position, raw.events_table
        for position in (3, 2):
            raw.execute(f"UPDATE {t} SET {p} = {p} + 1 WHERE {p} = ?", (position,))
        raw.insert_copy(1, 2)
        raw.relink()
    code, report = verified(cli, *trusted(keys))
    assert code == 3 and report["first_bad_position"] == 2, report


def test_a_gap_at_the_very_start_is_named(store_url: str, tmp_path: Path, keys: Path) -> None:
    cli = three(store_url, tmp_path, keys)
    with raw_store(store_url) as raw:
        raw.execute(f"DELETE FROM {raw.events_table} WHERE {raw.position} = 1")
        raw.relink()
    code, report = verified(cli)
    assert code == 3 and report["first_bad_position"] == 2, report
    assert "position 1 hold no event" in report["problem"]


def test_the_last_batch_removed_with_its_link_and_leaf_is_named_by_its_signature(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    """Truncation with the chain and the tree made consistent again: the signed batch the writer
    stored beside the removed event still names its positions, so the signature check must not
    ignore it."""
    cli = three(store_url, tmp_path, keys)
    with raw_store(store_url) as raw:
        raw.execute(f"DELETE FROM {raw.events_table} WHERE {raw.position} = 3")
        raw.execute("DELETE FROM lineage_chain WHERE position = 3")
        raw.execute("DELETE FROM lineage_merkle_leaves")
        raw.execute("DELETE FROM lineage_merkle_nodes")
    code, report = verified(cli, *trusted(keys))
    assert code == 3 and report["first_bad_position"] == 3, report
    assert "position 3" in report["problem"] and "holds no event" in report["problem"]


def test_a_signed_writer_refuses_plainly_to_reuse_the_positions_of_a_removed_tail(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    """The writer's signature row would collide with the removed batch's: read as a lost race, it
    was retried and then ended in a traceback."""
    cli = three(store_url, tmp_path, keys)
    with raw_store(store_url) as raw:
        raw.execute(f"DELETE FROM {raw.events_table} WHERE {raw.position} = 3")
        raw.execute("DELETE FROM lineage_chain WHERE position = 3")
    with pytest.raises(IntegrityFailure, match="a signed batch covers positions 3-3"):
        signed(store_url, cli.home, keys, "jobs/t__4")
    with raw_store(store_url) as raw:
        assert [row[0] for row in raw.events()] == [1, 2], "the refused batch appended"
        assert raw.execute("SELECT count(*) FROM lineage_chain") == [(2,)]


# --- PostgreSQL sequences -------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize(
    "moved",
    [
        "ALTER SEQUENCE lineage_events_notification_id_seq INCREMENT BY 2",
        "ALTER SEQUENCE lineage_events_notification_id_seq RESTART",
        "ALTER SEQUENCE lineage_events_notification_id_seq RESTART WITH 1000",
        "SELECT setval('lineage_events_notification_id_seq', 1, false)",
        "ALTER SEQUENCE lineage_events_notification_id_seq MINVALUE -100 RESTART WITH -50",
    ],
)
def test_a_moved_sequence_never_hides_or_gaps_an_event(
    postgres_url: str, tmp_path: Path, keys: Path, moved: str
) -> None:
    """Either the writer appends at the next dense position, or it refuses and appends nothing."""
    cli = three(postgres_url, tmp_path, keys)
    with raw_store(postgres_url) as raw:
        raw.execute(moved)
    try:
        with open_store(
            postgres_url, home=str(cli.home), signing_key=str(keys / "writer.key")
        ) as lineage:
            lineage.record([RunRegistered(run="jobs/t__4", task="t")])
            lineage.record(
                [RunRegistered(run="jobs/t__5", task="t"), RunRegistered(run="jobs/t__6", task="t")]
            )
    except IntegrityFailure as exc:
        assert "refusing to append" in str(exc)
    with raw_store(postgres_url) as raw:
        positions = [row[0] for row in raw.events()]
    assert positions == list(range(1, len(positions) + 1)), positions
    code, report = verified(cli, *trusted(keys))
    assert code == 0 and report["events"] == len(positions), report


@pytest.mark.postgres
def test_an_event_stored_without_a_position_is_named_by_verify_readers_and_writers(
    postgres_url: str, tmp_path: Path, keys: Path
) -> None:
    """With the column's NOT NULL dropped, an event at a NULL position: every read in position order
    missed it (`verify --trusted-keys --head --read-models --saved-states` exit 0, "2 events
    signed", the run pending) while the writer's aggregate saw it and refused the real score as
    contradicting it."""
    home = tmp_path / "home"
    signed(postgres_url, home, keys, "jobs/t__1", "jobs/t__2")
    cli = Cli(home, postgres_url)
    kept = cli("head").stdout.strip()
    with open_store(f"sqlite:///{tmp_path / 'scratch' / 'e.sqlite'}", home=str(tmp_path)) as other:
        other.record([RunRegistered(run="jobs/t__1", task="t")])
        other.record([RunScored(run="jobs/t__1", reward=0.0, tests={})])
    with raw_store(f"sqlite:///{tmp_path / 'scratch' / 'e.sqlite'}") as raw:
        forged = raw.events()[1]
    with raw_store(postgres_url) as raw:
        raw.execute("ALTER TABLE lineage_events ALTER COLUMN notification_id DROP NOT NULL")
        raw.execute(
            "INSERT INTO lineage_events (originator_id, originator_version, topic, state, "
            "notification_id) VALUES (?::uuid, ?, ?, ?, NULL)",
            (str(UUID(forged[1])), forged[2], forged[3], forged[4]),
        )
    result = cli(
        "verify",
        "--trusted-keys",
        str(keys / "writer.pub"),
        "--head",
        kept,
        "--read-models",
        "--saved-states",
        ok=False,
    )
    assert result.exit_code == 3, result.stdout
    assert "1 stored event(s) have no position" in result.stderr
    shown = cli("sql", "SELECT run, outcome FROM runs", ok=False)
    assert shown.exit_code == 3 and "have no position" in shown.stderr
    with pytest.raises(IntegrityFailure, match="refusing to append: 1 stored event"):
        signed(postgres_url, home, keys, "jobs/t__3")


# --- chain side tables ----------------------------------------------------------------------------


@pytest.mark.postgres
def test_a_duplicated_link_row_is_named(postgres_url: str, tmp_path: Path, keys: Path) -> None:
    cli = three(postgres_url, tmp_path, keys)
    with raw_store(postgres_url) as raw:
        raw.execute("ALTER TABLE lineage_chain DROP CONSTRAINT lineage_chain_pkey")
        raw.execute("INSERT INTO lineage_chain SELECT * FROM lineage_chain WHERE position = 2")
    code, report = verified(cli)
    assert code == 3 and report["first_bad_position"] == 2, report


def test_a_deleted_link_row_is_named(store_url: str, tmp_path: Path, keys: Path) -> None:
    cli = three(store_url, tmp_path, keys)
    with raw_store(store_url) as raw:
        raw.execute("DELETE FROM lineage_chain WHERE position = 2")
    code, report = verified(cli)
    assert code == 3 and report["first_bad_position"] == 2, report


@pytest.mark.postgres
@pytest.mark.parametrize("forged", ["'auditor'", "NULL"])
def test_a_role_forged_and_relinked_is_not_vouched_for_by_the_signatures(
    postgres_url: str, tmp_path: Path, keys: Path, forged: str
) -> None:
    """Leaves hold no role, and the chain that hashes it is unkeyed: re-linked over a forged role
    (or none), the log passed `verify --trusted-keys --read-models` with the forged role shown. The
    signature now covers the role too."""
    cli = three(postgres_url, tmp_path, keys)
    with raw_store(postgres_url) as raw:
        raw.execute(f"UPDATE lineage_chain SET {CHAINED_ROLE} = {forged} WHERE position = 2")
        raw.relink()
    code, report = verified(cli, *trusted(keys), "--read-models")
    assert code == 3 and report["first_bad_position"] == 2, report
    assert "or the role that recorded it" in report["problem"]


def test_a_signature_row_moved_to_cover_other_positions_is_refused(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    cli = three(store_url, tmp_path, keys)
    with raw_store(store_url) as raw:
        raw.execute(
            "UPDATE lineage_signatures SET first_position = 10, last_position = 10 "
            "WHERE first_position = 3"
        )
    code, report = verified(cli, *trusted(keys))
    assert code == 3 and report["first_bad_position"] == 3, report


def test_a_signature_row_widened_over_an_unsigned_event_is_refused(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    cli = three(store_url, tmp_path, keys)
    with raw_store(store_url) as raw:
        raw.insert_copy(3, 4)
        raw.relink()
        raw.execute("UPDATE lineage_signatures SET last_position = 4 WHERE first_position = 3")
    code, report = verified(cli, *trusted(keys))
    assert code == 3 and report["first_bad_position"] in (3, 4), report


def test_a_signature_row_copied_under_another_batch_is_refused(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    """Each signature names its batch's positions: a copy over another event must not verify."""
    cli = three(store_url, tmp_path, keys)
    with raw_store(store_url) as raw:
        raw.insert_copy(3, 4)
        raw.relink()
        raw.execute(
            "INSERT INTO lineage_signatures SELECT 4, 4, signer, signature FROM lineage_signatures "
            "WHERE first_position = 3"
        )
    code, report = verified(cli, *trusted(keys))
    assert code == 3, report


# --- the Merkle tree's tables ---------------------------------------------------------------------


def forge_tree(store_url: str, leaves: dict[int, bytes]) -> None:
    """What a careful forger of the tree does: leaves replaced or added (position -> leaf hash), and
    every inner node made again over them, so the tree is consistent in itself."""
    with raw_store(store_url) as raw:
        kept = dict(raw.execute("SELECT position, leaf_hash FROM lineage_merkle_leaves"))
        kept = {int(p): bytes(h) for p, h in kept.items()} | leaves
        raw.execute("DELETE FROM lineage_merkle_leaves")
        raw.execute("DELETE FROM lineage_merkle_nodes")
        built = merkle.RootBuilder()
        for index, position in enumerate(sorted(kept)):
            raw.execute(
                "INSERT INTO lineage_merkle_leaves VALUES (?, ?, ?)",
                (index, position, kept[position]),
            )
            for level, idx, h in built.add(kept[position]):
                raw.execute("INSERT INTO lineage_merkle_nodes VALUES (?, ?, ?)", (level, idx, h))


def test_a_node_planted_ahead_of_the_tree_is_named_before_it_is_used(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    home = tmp_path / "home"
    signed(store_url, home, keys, *(f"jobs/t__{i}" for i in range(1, 6)))
    cli = Cli(home, store_url)
    cli("head")
    with raw_store(store_url) as raw:
        raw.execute("INSERT INTO lineage_merkle_nodes VALUES (1, 2, ?)", (b"\x07" * 32,))
    code, report = verified(cli)
    assert code == 3 and "level 1, index 2" in report["problem"], report
    signed(store_url, home, keys, "jobs/t__6")  # leaves 4-5 complete: catch-up makes node (1, 2)
    made = cli("checkpoint", ok=False)
    assert made.exit_code == 3 and made.stdout == "", made.stdout
    assert "level 1, index 2" in made.stderr and "planted" in made.stderr


def test_a_leaf_and_its_nodes_planted_ahead_of_the_log_are_never_signed(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    """A leaf for position 4 before event 4 exists, with the nodes over it: catch-up would start
    after it and never store the real event's leaf, so every later checkpoint would be over the
    planted one."""
    home = tmp_path / "home"
    signed(store_url, home, keys, "jobs/t__1", "jobs/t__2", "jobs/t__3")
    cli = Cli(home, store_url)
    cli("head")
    forge_tree(store_url, {4: b"\x07" * 32})
    signed(store_url, home, keys, "jobs/t__4")
    for command in (["checkpoint"], ["checkpoint", "--sign", str(keys / "writer.key")], ["verify"]):
        result = cli(*command, ok=False)
        assert result.exit_code == 3, (command, result.stdout)
        assert "position 4" in result.stdout + result.stderr


def test_a_tree_forged_over_the_events_is_never_signed_into_a_checkpoint(
    store_url: str, tmp_path: Path, keys: Path
) -> None:
    """A signed checkpoint over a forged tree would make forged entries provable to anyone holding
    only the checkpoint (`prove --check` needs no store); `verify` names it, and signing must not go
    ahead."""
    home = tmp_path / "home"
    signed(store_url, home, keys, *(f"jobs/t__{i}" for i in range(1, 6)))
    cli = Cli(home, store_url)
    cli("head")
    forge_tree(store_url, {2: b"\x07" * 32})
    made = cli("checkpoint", "--sign", str(keys / "writer.key"), ok=False)
    assert made.exit_code == 3 and made.stdout == "", made.stdout
    assert "refusing to sign a checkpoint" in made.stderr and "position 2" in made.stderr
    bundled = cli(
        "bundle",
        "jobs/t__1",
        "--to",
        str(tmp_path / "b.json"),
        "--sign",
        str(keys / "writer.key"),
        ok=False,
    )
    assert bundled.exit_code == 3, bundled.stdout[:300]
    code, report = verified(cli)
    assert code == 3 and report["first_bad_position"] == 2, report


# --- proof files and checkpoints ------------------------------------------------------------------


def proved(tmp_path: Path) -> tuple[Cli, Path, dict]:
    cli = Cli(tmp_path / "home")
    cli("init")
    source = tmp_path / "facts.jsonl"
    source.write_text(
        "".join(
            json.dumps({"type": "run.registered", "run": f"jobs/t__{i}", "task": "t"}) + "\n"
            for i in range(5)
        )
    )
    cli("ingest", str(source))
    checkpoint = tmp_path / "cp"
    checkpoint.write_text(cli("checkpoint").stdout)
    document = json.loads(cli("prove", "3", "--checkpoint", str(checkpoint)).stdout)
    return cli, checkpoint, document


def checked(cli: Cli, tmp_path: Path, checkpoint: Path, text: str) -> int:
    path = tmp_path / "edited.json"
    path.write_text(text)
    result = cli("prove", "--check", str(path), "--checkpoint", str(checkpoint), ok=False)
    assert "Traceback" not in result.stdout + result.stderr
    return result.exit_code


def test_fields_in_another_order_still_verify(tmp_path: Path) -> None:
    cli, checkpoint, document = proved(tmp_path)
    proof = document["proofs"][0]
    reordered = {
        "proofs": [dict(reversed(list(proof.items())))],
        "checkpoint": document["checkpoint"],
    }
    assert checked(cli, tmp_path, checkpoint, json.dumps(reordered)) == 0


@pytest.mark.parametrize(
    "edit",
    [
        lambda p: p | {"note": "extra"},
        lambda p: {("posit\u0456on" if k == "position" else k): v for k, v in p.items()},
        lambda p: p | {"position": float(p["position"])},
        lambda p: p | {"position": True} if p["position"] == 1 else p | {"position": 1e400},
        lambda p: p | {"tree_size": 2**64 + p["tree_size"]},
        lambda p: p | {"leaf_index": 2**64 + p["leaf_index"]},
        lambda p: p | {"leaf_index": -1},
        lambda p: p | {"position": "HUGE"},
        lambda p: p | {"proof": [*p["proof"], p["proof"][0]]},
        lambda p: p | {"proof": p["proof"][:-1]},
        lambda p: p | {"entry": p["entry"] + "\n"},
        lambda p: p | {"root": p["root"].replace("=", "\uff1d")},
    ],
    ids=[
        "extra field",
        "cyrillic i",
        "float",
        "inf",
        "huge size",
        "huge index",
        "negative index",
        "5000 digits",
        "longer proof",
        "shorter proof",
        "entry newline",
        "fullwidth equals",
    ],
)
def test_an_edited_proof_file_is_refused(tmp_path: Path, edit: object) -> None:
    cli, checkpoint, document = proved(tmp_path)
    proof = edit(document["proofs"][0])  # type: ignore[operator]
    text = json.dumps({"checkpoint": document["checkpoint"], "proofs": [proof]})
    text = text.replace('"HUGE"', "1" + "0" * 5000)  # past Python's 4300 digits
    assert checked(cli, tmp_path, checkpoint, text) in (1, 3)


def test_a_checkpoint_text_with_an_extra_line_in_the_proof_file_is_refused(tmp_path: Path) -> None:
    cli, checkpoint, document = proved(tmp_path)
    text = json.dumps(document | {"checkpoint": document["checkpoint"] + "extension\n"})
    assert checked(cli, tmp_path, checkpoint, text) in (1, 3)


def test_a_valid_proof_for_another_log_is_refused(tmp_path: Path) -> None:
    cli, checkpoint, _ = proved(tmp_path)
    _, _, other = proved(tmp_path / "other")
    assert checked(cli, tmp_path, checkpoint, json.dumps(other)) in (1, 3)
    carried = json.dumps({"checkpoint": Path(checkpoint).read_text(), "proofs": other["proofs"]})
    assert checked(cli, tmp_path, checkpoint, carried) in (1, 3)


def test_a_checkpoint_signed_by_another_key_or_with_extra_lines_is_refused(
    tmp_path: Path, keys: Path
) -> None:
    cli, _, _ = proved(tmp_path)
    Cli(tmp_path / "unused")("keys", "generate", "other", "--dir", str(keys))
    other_signed = tmp_path / "other-cp"
    other_signed.write_text(cli("checkpoint", "--sign", str(keys / "other.key")).stdout)
    result = cli(
        "verify", "--checkpoint", str(other_signed), "--key", str(keys / "writer.pub"), ok=False
    )
    assert result.exit_code == 3 and "expected a signature by writer" in result.stderr
    signed_cp = tmp_path / "signed-cp"
    signed_cp.write_text(cli("checkpoint", "--sign", str(keys / "writer.key")).stdout)
    text = signed_cp.read_text()
    body, _, signatures = text.partition("\n\n")
    for edited in (
        body + "\nextension line\n\n" + signatures,  # a line added after signing
        body.replace("\n", "\r\n") + "\n\n" + signatures,
    ):
        signed_cp.write_text(edited)
        result = cli(
            "verify", "--checkpoint", str(signed_cp), "--key", str(keys / "writer.pub"), ok=False
        )
        assert result.exit_code in (1, 3), edited


@pytest.mark.parametrize("size", ["9" * 5000, str(2**64), "+5", "5 ", "\u0665"])
def test_a_checkpoint_with_a_size_no_log_has_is_refused_plainly(tmp_path: Path, size: str) -> None:
    """5,000 digits raised Python's int-conversion ValueError: a traceback, not an answer."""
    cli, checkpoint, _ = proved(tmp_path)
    origin, _, root, _ = checkpoint.read_text().split("\n")
    checkpoint.write_text(f"{origin}\n{size}\n{root}\n")
    for command in (["verify", "--checkpoint"], ["prove", "1", "--checkpoint"]):
        result = cli(*command, str(checkpoint), ok=False)
        assert result.exit_code == 1, result.stdout
        assert "expected a tree size (a whole number below 2**64" in result.stderr


@pytest.mark.parametrize("position", ["9" * 23, str(2**63)])
def test_prove_refuses_a_position_past_the_stores_integers_plainly(
    tmp_path: Path, position: str
) -> None:
    """It reached SQLite as an OverflowError (a traceback)."""
    cli, checkpoint, _ = proved(tmp_path)
    result = cli("prove", position, "--checkpoint", str(checkpoint), ok=False)
    assert result.exit_code == 1 and "expected a log position (below 2**63)" in result.stderr


@pytest.mark.postgres
def test_a_cached_position_sequence_keeps_two_writers_dense(
    postgres_url: str, tmp_path: Path
) -> None:
    """`CACHE 20` hands each session its own block of positions; `setval` under the writers' lock
    must still win over a block another session holds."""
    with open_store(postgres_url, home=str(tmp_path / "a")) as first:
        first.record([RunRegistered(run="jobs/a0", task="t")])
        with raw_store(postgres_url) as raw:
            raw.execute("ALTER SEQUENCE lineage_events_notification_id_seq CACHE 20")
        with open_store(postgres_url, home=str(tmp_path / "b")) as second:
            for i in range(1, 5):
                first.record([RunRegistered(run=f"jobs/a{i}", task="t")])
                second.record([RunRegistered(run=f"jobs/b{i}", task="t")])
    with raw_store(postgres_url) as raw:
        assert [row[0] for row in raw.events()] == list(range(1, 10))
    assert Cli(tmp_path / "a", postgres_url)("verify", ok=False).exit_code == 0


# --- long statements ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT len(list_transform(range(50000000), lambda x: x + 1))",
        "SELECT len(flatten(list_transform(range(10000), lambda x: range(10000))))",
        "SELECT max(x) FROM (SELECT unnest(range(3000000000)) AS x)",
        "SELECT length(regexp_extract_all(repeat('ab', 200000000), 'a')::VARCHAR)",
        "SELECT json_array_length(to_json(range(50000000)))",
        "SELECT levenshtein(repeat('a', 200000), repeat('b', 200000))",  # CPU only, one call
        "SELECT length(string_agg(x::VARCHAR, ',')) FROM range(400000000) t(x)",
    ],
)
def test_new_long_statements_stop_at_a_limit(
    home_with_a_run: Path,  # noqa: F811 (the fixture imported above)
    statement: str,
) -> None:
    """The second attack's statements (none escaped): each ends at the timeout or the cap, exit
    4."""
    code, err, seconds, peak_kb = run_sql_measured(home_with_a_run, "--timeout", "1", statement)
    assert code == 4 and "Traceback" not in err, err
    assert seconds < ENDED_WITHIN_S and peak_kb < PEAK_BOUND_KB, (seconds, peak_kb, err)


#: The read API under a 64 MB cap, in a process of its own: the memory bound is what the process
#: maps when the statement starts plus a budget, so a long pytest process whose allocators kept
#: hundreds of MB of freed memory mapped (from earlier tests) would let a 600 MB string through.
SMALL_CAP_PROBE = """
import sys, time
from pathlib import Path
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain.errors import ReadLimitExceeded
from rollout_lineage.settings import Settings
from tests.scenarios import nightly_run_facts

cap = {"LINEAGE_DUCKDB_MEMORY": "64MB"}
settings = Settings.from_env(cap, home=Path(sys.argv[1]), actor="t@lab")
with Lineage(settings) as lineage:
    lineage.record(nightly_run_facts())
    for statement in (
        "SELECT len(string_split(repeat('ab', 300000000), 'b')) AS n",
        "SELECT levenshtein(repeat('a', 60000), repeat('b', 60000)) AS n",
        "SELECT count(*) AS n FROM range(100000) a, range(100000) b WHERE a.range + b.range < 0",
    ):
        started = time.monotonic()
        try:
            answer = lineage.sql(statement, timeout=1)
        except ReadLimitExceeded:
            print("stopped", round(time.monotonic() - started, 1))
        else:
            print("answered", statement, answer)
    print("then", lineage.sql("SELECT 1 AS one"))
"""


def test_the_read_api_under_a_small_cap_stops_long_statements(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SMALL_CAP_PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 4, (done.stdout, done.stderr)
    assert [line.split()[0] for line in lines[:3]] == ["stopped"] * 3, done.stdout
    assert all(float(line.split()[1]) < 5 for line in lines[:3]), done.stdout
    assert lines[3] == "then [{'one': 1}]"


@pytest.mark.postgres
def test_a_bundle_carries_the_signed_role_and_refuses_another(
    postgres_url: str, tmp_path: Path, keys: Path
) -> None:
    """Batch signatures on PostgreSQL cover the role (`batch_message`), so a bundle carries it with
    each batch, and a bundle with the role changed no longer verifies."""
    cli = three(postgres_url, tmp_path, keys)
    bundle = tmp_path / "b.json"
    cli("bundle", "jobs/t__1", "--to", str(bundle), "--sign", str(keys / "writer.key"))
    document = json.loads(bundle.read_text())
    assert [batch["recorded_by"] for batch in document["batches"]] == ["lineage"]
    checked = Cli(tmp_path / "nowhere")(
        "bundle", "verify", str(bundle), "--key", str(keys / "writer.pub"), "--format", "json"
    )
    writer = key_label(keys / "writer.pub")
    assert json.loads(checked.stdout)[0]["signed_events"] == f"1: 1 by {writer} (trusted)"
    for edit in ({"recorded_by": "auditor"}, {"recorded_by": None}, {}):
        batch = {k: v for k, v in document["batches"][0].items() if k != "recorded_by"} | edit
        bundle.write_bytes(canonical(document | {"batches": [batch]}))
        refused = Cli(tmp_path / "nowhere")(
            "bundle", "verify", str(bundle), "--key", str(keys / "writer.pub"), ok=False
        )
        assert refused.exit_code == 3, (edit, refused.stdout)
        assert "batch 1" in refused.stderr, refused.stderr

"""`lineage verify --read-models`, attacked as issue #33 (item 2) attacked it: the read-model file
edited so that the digest it used to be compared by, a row count and the sum of DuckDB's
`hash(row)`, stays what it was.

DuckDB's row hash is no cryptographic hash: the hash of a row is a mix of its other columns XORed
with the hash of its last one, and an integer's (a timestamp's) hash is an invertible permutation.
So whatever a forger changes in a row, they can solve for a last-column value that gives the row its
old hash back (`restore_row_hash`). Every forgery below does that, asserts that the old digest is
fooled, and then that `verify --read-models` names the table (exit 3).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import Entry
from rollout_lineage.domain.facts.review_facts import ArtifactIssue, ReviewObservation
from tests import audit_scenarios as s
from tests.conftest import Cli

MASK = 2**64 - 1
#: The multiplier of DuckDB's murmurhash64 finaliser and its inverse modulo 2**64.
MURMUR = 0xD6E8FEB86659FD93
MURMUR_INVERSE = pow(MURMUR, -1, 2**64)
TABLE = "run_evidence"  # its last column is occurred_at, a timestamp: its hash can be solved for


def unmurmur(hashed: int) -> int:
    """The 64-bit integer whose DuckDB hash is `hashed` (murmurhash64's finaliser, backwards)."""
    x = hashed
    x ^= x >> 32
    x = (x * MURMUR_INVERSE) & MASK
    x ^= x >> 32
    x = (x * MURMUR_INVERSE) & MASK
    x ^= x >> 32
    return x - 2**64 if x >= 2**63 else x


def old_digest(db: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """What `verify --read-models` compared before issue #33: rows, and the sum of row hashes."""
    row = db.execute(f"SELECT count(*), sum(hash(t)::HUGEINT) FROM {TABLE} t").fetchone()
    assert row is not None
    return row[0], row[1]


def restore_row_hash(db: duckdb.DuckDBPyConnection, rowid: int, wanted: int) -> None:
    """Give the row at `rowid` the hash `wanted` by changing only its occurred_at."""
    row = db.execute(
        f"SELECT hash(t), hash(occurred_at) FROM {TABLE} t WHERE rowid = ?", [rowid]
    ).fetchone()
    assert row is not None
    rest = row[0] ^ row[1]  # the hash of every other column, mixed: the last one is XORed in
    micros = unmurmur(wanted ^ rest)
    db.execute(
        f"UPDATE {TABLE} SET occurred_at = make_timestamp(?::BIGINT) WHERE rowid = ?",
        [micros, rowid],
    )


def row_hashes(db: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Each run_evidence row's hash, by its node (one observation per node here)."""
    return dict(db.execute(f"SELECT node, hash(t) FROM {TABLE} t").fetchall())


def rowid_of(db: duckdb.DuckDBPyConnection, node: str) -> int:
    row = db.execute(f"SELECT rowid FROM {TABLE} WHERE node = ?", [node]).fetchone()
    assert row is not None
    return int(row[0])


def quarantined_run() -> list[Entry]:
    """A healthy ablation whose root directory the review skill's validator found truncated: the
    run is quarantined, and it is the batch's only run, so nothing is publishable (exit 11)."""
    review = ReviewObservation(
        rules="test",
        issues=(ArtifactIssue(check="result.parse", detail="truncated", file="result.json"),),
    )
    entries = []
    for entry in s.healthy_ablation():
        fact = entry.fact
        if isinstance(fact, f.EvidenceObserved) and fact.node == "root":
            fact = fact.model_copy(update={"review": review})
        entries.append(Entry(fact, entry.occurred_at))
    return entries


def empty_the_review_issues(db: duckdb.DuckDBPyConnection) -> None:
    """The attack of the issue: the quarantined run's review, without its issues."""
    row = db.execute(f"SELECT review FROM {TABLE} WHERE node = 'root'").fetchone()
    assert row is not None
    review = json.loads(row[0])
    review["issues"] = []
    db.execute(f"UPDATE {TABLE} SET review = ? WHERE node = 'root'", [json.dumps(review)])


def swap_a_value_between_rows(db: duckdb.DuckDBPyConnection) -> None:
    db.execute(
        f"UPDATE {TABLE} t SET tool_calls = o.tool_calls + 1, duration_sec = o.duration_sec + 1 "
        f"FROM {TABLE} o WHERE o.node <> t.node"
    )


def swap_values_between_columns(db: duckdb.DuckDBPyConnection) -> None:
    db.execute(
        f"UPDATE {TABLE} SET input_tokens = output_tokens, output_tokens = input_tokens "
        "WHERE node = 'root'"
    )


def null_to_empty_text(db: duckdb.DuckDBPyConnection) -> None:
    assert db.execute(f"SELECT count(*) FROM {TABLE} WHERE trial IS NULL").fetchone() == (2,)
    db.execute(f"UPDATE {TABLE} SET trial = '' WHERE node = 'root'")


def same_json_other_spelling(db: duckdb.DuckDBPyConnection) -> None:
    """The same JSON value, spelled with spaces: what a reader of the text sees is not the log's."""
    db.execute(f"UPDATE {TABLE} SET review = json_pretty(review) WHERE node = 'root'")
    assert db.execute(f"SELECT review LIKE '%\n%' FROM {TABLE} WHERE node = 'root'").fetchone() == (
        True,
    )


def change_a_value_and_its_order(db: duckdb.DuckDBPyConnection) -> None:
    """The root row changed and moved to the end of the table (deleted and inserted again)."""
    db.execute(f"CREATE TEMP TABLE moved AS SELECT * FROM {TABLE} WHERE node = 'root'")
    db.execute(f"DELETE FROM {TABLE} WHERE node = 'root'")
    db.execute("UPDATE moved SET acp_records = acp_records + 100")
    db.execute(f"INSERT INTO {TABLE} SELECT * FROM moved")


FORGERIES: dict[str, Callable[[duckdb.DuckDBPyConnection], None]] = {
    "the review's issues emptied": empty_the_review_issues,
    "values swapped between rows": swap_a_value_between_rows,
    "values swapped between columns": swap_values_between_columns,
    "NULL made empty text": null_to_empty_text,
    "the same JSON spelled otherwise": same_json_other_spelling,
    "a value changed and its row moved": change_a_value_and_its_order,
}


def forge(path: Path, forgery: Callable[[duckdb.DuckDBPyConnection], None]) -> None:
    """Apply the forgery, then restore every row's old hash: the old digest cannot tell."""
    with duckdb.connect(str(path)) as db:
        before, hashes = old_digest(db), row_hashes(db)
        forgery(db)
        for node, wanted in hashes.items():
            restore_row_hash(db, rowid_of(db, node), wanted)
        assert old_digest(db) == before, "the forgery must fool the digest of issue #33"
        assert row_hashes(db) == hashes


@pytest.mark.parametrize("forgery", FORGERIES.values(), ids=list(FORGERIES))
def test_a_forged_read_model_that_keeps_the_old_digest_is_named(
    lineage: Lineage, run_cli: Cli, forgery: Callable[[duckdb.DuckDBPyConnection], None]
) -> None:
    lineage.app.record(quarantined_run())
    assert "match a rebuild" in run_cli("verify", "--read-models").stdout
    forge(run_cli.home / "projections.duckdb", forgery)
    result = run_cli("verify", "--read-models", ok=False)
    assert result.exit_code == 3, result.stdout + result.stderr
    assert f"{TABLE} differ" in result.stderr and "rebuild" in result.stderr
    assert f"differ from a rebuild at position {lineage.position()}: {TABLE}" in result.stdout
    run_cli("rebuild")
    run_cli("verify", "--read-models")


def test_the_issues_attack_publishes_a_quarantined_run_and_is_named(
    lineage: Lineage, run_cli: Cli
) -> None:
    """The whole attack of the issue: `audit` goes from 11 (nothing publishable) to 0 on the forged
    file; `verify --read-models` is what an auditor runs to know the file is the log's."""
    lineage.app.record(quarantined_run())
    assert run_cli("audit", ok=False).exit_code == 11
    forge(run_cli.home / "projections.duckdb", empty_the_review_issues)
    assert run_cli("audit").stdout.splitlines()[-1] == "verdict: publishable"
    result = run_cli("verify", "--read-models", ok=False)
    assert result.exit_code == 3 and TABLE in result.stderr
    run_cli("rebuild")
    assert run_cli("audit", ok=False).exit_code == 11

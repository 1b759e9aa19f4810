"""Every attribute the tool shows as recorded is inside a chain hash, or not shown as recorded.

The attack (issue #23): on PostgreSQL, `update lineage_chain set recorded_by = ...` passed `verify
--read-models` and `events.recorded_by` showed the forged role. The role is now hashed into each
link (its own column); the old column, outside the chain, is never shown. `recorded_at` is the
envelope's `timestamp`, inside the stored state every link hashes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_lineage.domain.facts import RunRegistered
from tests.cli_helpers import key_label
from tests.conftest import Cli, open_lineage
from tests.raw_store import CHAINED_ROLE, raw_store


def recorded(store_url: str, home: Path) -> Cli:
    with open_lineage(store_url, home) as lineage:
        lineage.record([RunRegistered(run="jobs/t__1", task="t")])
        lineage.record([RunRegistered(run="jobs/t__2", task="t")])
    return Cli(home, store_url)


def roles(cli: Cli) -> list[str | None]:
    rows = json.loads(
        cli("sql", "SELECT recorded_by FROM events ORDER BY position", "--format", "json").stdout
    )
    return [row["recorded_by"] for row in rows]


def verify(cli: Cli) -> tuple[int, dict]:
    result = cli("verify", "--read-models", "--format", "json", ok=False)
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.postgres
@pytest.mark.parametrize("forged", ["'auditor'", "NULL"])
def test_an_edited_role_breaks_the_chain(postgres_url: str, tmp_path: Path, forged: str) -> None:
    cli = recorded(postgres_url, tmp_path / "home")
    assert roles(cli) == ["lineage", "lineage"]
    with raw_store(postgres_url) as raw:
        raw.execute(f"UPDATE lineage_chain SET {CHAINED_ROLE} = {forged} WHERE position = 2")
    code, report = verify(cli)
    assert code == 3 and report["first_bad_position"] == 2, report
    assert "does not match its chain hash" in report["problem"]


@pytest.mark.postgres
def test_the_unchained_role_column_is_never_shown(postgres_url: str, tmp_path: Path) -> None:
    cli = recorded(postgres_url, tmp_path / "home")
    with raw_store(postgres_url) as raw:
        raw.execute("UPDATE lineage_chain SET recorded_by = 'auditor'")
    code, report = verify(cli)
    assert code == 0, report
    assert roles(cli) == ["lineage", "lineage"], "a role no link vouches for was shown"


@pytest.mark.postgres
def test_links_made_before_roles_were_chained_verify_and_show_no_role(
    postgres_url: str, tmp_path: Path
) -> None:
    """A store written before this change: its links hash no role, and its old column holds one."""
    cli = recorded(postgres_url, tmp_path / "home")
    with raw_store(postgres_url) as raw:
        raw.execute(f"UPDATE lineage_chain SET {CHAINED_ROLE} = NULL")
        raw.relink()  # as an older writer made them: no role in the hash
    assert verify(cli)[0] == 0
    assert roles(cli) == [None, None]
    with raw_store(postgres_url) as raw:  # claiming a role for an old link is an edit
        raw.execute(f"UPDATE lineage_chain SET {CHAINED_ROLE} = 'lineage' WHERE position = 1")
    code, report = verify(cli)
    assert code == 3 and report["first_bad_position"] == 1


def test_an_edited_recording_time_breaks_the_chain(store_url: str, tmp_path: Path) -> None:
    cli = recorded(store_url, tmp_path / "home")
    with raw_store(store_url) as raw:
        [state] = [row[4] for row in raw.events() if row[0] == 2]
        stamp = json.loads(state)["timestamp"]
        edited = state.replace(stamp.encode(), b"2020-01-01T00:00:00+00:00")
        assert edited != state
        raw.execute(f"UPDATE {raw.events_table} SET state = ? WHERE {raw.position} = 2", (edited,))
    code, report = verify(cli)
    assert code == 3 and report["first_bad_position"] == 2


@pytest.fixture
def imported(store_url: str, tmp_path: Path) -> Cli:
    """A store (either backend) holding run jobs/b, imported from a bundle of a SQLite store signed
    by lab."""
    from tests.cli_helpers import source_store

    Cli(tmp_path / "unused")("keys", "generate", "lab", "--dir", str(tmp_path))
    source = tmp_path / "a"
    source_store(f"sqlite:///{source / 'events.sqlite'}", source, tmp_path, tmp_path / "lab.key")
    Cli(source)(
        "bundle", "jobs/b", "--to", str(tmp_path / "b.bundle"), "--sign", str(tmp_path / "lab.key")
    )
    target = Cli(tmp_path / "c", store_url)
    target("import", "--bundle", str(tmp_path / "b.bundle"))
    return target


@pytest.mark.parametrize(
    ("column", "forged", "said"),
    [
        ("origin", "'rollout-lineage/0123456789abcdef'", "the origin is rollout-lineage/0123"),
        ("source_position", "77", "the source position is 77, the source entry's 2"),
    ],
)
def test_an_edited_provenance_field_is_not_proven(
    store_url: str, imported: Cli, column: str, forged: str, said: str
) -> None:
    """The provenance table is outside the chain: every field `bundle sources` shows is checked
    against the source entry and checkpoint (an edited origin or source position used to print
    `proven yes`)."""
    with raw_store(store_url) as raw:
        raw.execute(f"UPDATE lineage_provenance SET {column} = {forged} WHERE position = 1")
    result = imported("bundle", "sources", "--format", "json", ok=False)
    assert result.exit_code == 3
    assert said in json.loads(result.stdout)[0]["proven"]


def test_a_source_checkpoint_is_labelled_unchecked_or_checked_against_a_key(
    store_url: str, imported: Cli, tmp_path: Path
) -> None:
    rows = json.loads(imported("bundle", "sources", "--format", "json").stdout)
    assert {row["checkpoint_signature"] for row in rows} == {
        "not checked (no --key): the checkpoint may be anyone's"
    }
    signed = imported("bundle", "sources", "--key", str(tmp_path / "lab.pub"), "--format", "json")
    assert {row["checkpoint_signature"] for row in json.loads(signed.stdout)} == {
        f"signed by {key_label(tmp_path / 'lab.pub')}"
    }
    Cli(tmp_path / "unused")("keys", "generate", "other", "--dir", str(tmp_path))
    other = imported(
        "bundle", "sources", "--key", str(tmp_path / "other.pub"), "--format", "json", ok=False
    )
    assert other.exit_code == 3
    assert "expected a signature by other" in json.loads(other.stdout)[0]["proven"]


@pytest.mark.postgres
def test_read_models_that_copied_the_unchained_role_are_rebuilt(
    postgres_url: str, tmp_path: Path
) -> None:
    """A read-model file made by the version before (events at projection version 2) copied the old,
    unchained column: it is rebuilt from the log, not kept."""
    import duckdb

    home = tmp_path / "home"
    cli = recorded(postgres_url, home)
    assert roles(cli) == ["lineage", "lineage"]
    with open_lineage(postgres_url, home) as lineage:
        path = lineage.read_models_path
    with duckdb.connect(str(path)) as db:  # as the version before left it
        db.execute("UPDATE events SET recorded_by = 'auditor'")
        db.execute("UPDATE lineage_projection_versions SET version = 2 WHERE name = 'events'")
        db.execute("UPDATE lineage_schema SET fingerprint = 'the schema of the version before'")
    assert roles(cli) == ["lineage", "lineage"]


@pytest.mark.parametrize(
    ("column", "forged"),
    [
        ("source_leaf_index", "'first'"),
        ("checkpoint", "'not a checkpoint'"),
        ("proof", "'[\"not base64!\"]'"),
        ("proof", "'not json'"),
        ("source_entry", "'text, not the stored bytes'"),
    ],
)
def test_a_provenance_value_of_the_wrong_kind_is_not_proven(
    store_url: str, imported: Cli, column: str, forged: str
) -> None:
    with raw_store(store_url) as raw:
        if raw.postgres and column in ("source_leaf_index", "source_entry"):
            pytest.skip("PostgreSQL's column types refuse the value")
        raw.execute(f"UPDATE lineage_provenance SET {column} = {forged} WHERE position = 1")
    result = imported("bundle", "sources", "--format", "json", ok=False)
    assert result.exit_code == 3, result.stderr
    assert json.loads(result.stdout)[0]["proven"].startswith("NO:")


@pytest.mark.postgres
def test_a_role_edited_with_the_chain_relinked_fails_a_kept_head(
    postgres_url: str, tmp_path: Path
) -> None:
    """A careful forger re-links the whole chain over the edited role: the chain is consistent
    again, but the head kept elsewhere no longer matches (as for any edit of the log)."""
    cli = recorded(postgres_url, tmp_path / "home")
    kept = cli("head").stdout.strip()
    with raw_store(postgres_url) as raw:
        raw.execute(f"UPDATE lineage_chain SET {CHAINED_ROLE} = 'auditor' WHERE position = 1")
        raw.relink()
    assert verify(cli)[0] == 0  # consistent, as a relinked forgery is
    assert roles(cli) == ["auditor", "lineage"]
    result = cli("verify", "--head", kept, "--format", "json", ok=False)
    report = json.loads(result.stdout)
    assert result.exit_code == 3 and "differs from the stored link" in report["problem"]

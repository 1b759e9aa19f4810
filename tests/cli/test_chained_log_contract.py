"""One contract, every implementation of the `ChainedLog` port: in memory, SQLite file, PostgreSQL
server.

Each case records through the application as a harness would and then reads the log only through the
port. The recording clock is fixed, so all three stores hold the same bytes and must answer with the
same chain. The last cases pin the eventsourcing internals the recorders override: an upgrade that
renames or reshapes them fails here, saying what to re-check, instead of silently dropping the
chain.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.domain import BaseAggregate
from eventsourcing.persistence import IntegrityError
from eventsourcing.popo import POPOAggregateRecorder, POPOApplicationRecorder
from eventsourcing.postgres import PostgresApplicationRecorder
from eventsourcing.sqlite import SQLiteAggregateRecorder

from rollout_lineage.adapters.chained_log import ChainedLog, next_links
from rollout_lineage.adapters.store.event_store import StoreURL
from rollout_lineage.adapters.store.memory_log import MEMORY_ENV, ChainedMemoryRecorder
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp, RetryAtOnce
from rollout_lineage.domain.events import aggregate_id
from rollout_lineage.domain.integrity import GENESIS, ChainWalker, link
from tests.scenarios import ABLATE_RUN, ablate_run_facts, nightly_run_facts

RECORDED_AT = datetime(2026, 11, 2, 10, 15, tzinfo=UTC)


def _app(env: dict[str, str]) -> LineageApp:
    return LineageApp(
        env=env, actor="tester@lab", tool_version="contract", clock=lambda: RECORDED_AT
    )


#: Apps whose log is read back through the read-only SQLite reader (`adapters/sqlite_log`) read
#: commands use.
READ_BACK: dict[int, Path] = {}


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        "sqlite-reader",
        pytest.param("postgresql", marks=pytest.mark.postgres),
    ]
)
def app(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LineageApp]:
    if request.param == "memory":
        env = MEMORY_ENV
    elif request.param.startswith("sqlite"):
        env = StoreURL.parse(f"sqlite:///{tmp_path / 'events.sqlite'}").application_env()
    else:
        env = StoreURL.parse(request.getfixturevalue("postgres_url")).application_env()
    application = _app(env)
    if request.param == "sqlite-reader":
        READ_BACK[id(application)] = tmp_path / "events.sqlite"
    yield application
    READ_BACK.pop(id(application), None)
    application.close()


def _log(app: LineageApp) -> ChainedLog:
    if id(app) in READ_BACK:
        from rollout_lineage.adapters.store.sqlite_log import SQLiteLog

        return SQLiteLog(READ_BACK[id(app)])
    assert isinstance(app.recorder, ChainedLog), type(app.recorder)
    return app.recorder


def _recorded(app: LineageApp) -> int:
    app.record(ablate_run_facts())
    return app.record(nightly_run_facts()).position


def test_an_empty_log_has_no_rows_links_or_head(app: LineageApp) -> None:
    log = _log(app)
    assert log.max_notification_id() is None
    assert log.log_rows(0, None, 10) == []
    assert log.chain_links(0, None) == []
    assert log.chain_hash_at(1) is None
    assert list(log.chain_rows()) == []
    assert log.existing_originators({aggregate_id("run", ABLATE_RUN)}) == set()


def test_rows_are_the_stored_events_in_position_order(app: LineageApp) -> None:
    last = _recorded(app)
    log = _log(app)
    rows = log.log_rows(0, None, 10_000)
    notifications = app.recorder.select_notifications(start=None, limit=10_000)
    assert [row[0] for row in rows] == list(range(1, last + 1)) == [n.id for n in notifications]
    assert [tuple(row[1:5]) for row in rows] == [
        (UUID(str(n.originator_id)).hex, n.originator_version, n.topic, bytes(n.state))
        for n in notifications
    ]
    assert log.max_notification_id() == last


def test_a_window_is_after_exclusive_stop_inclusive_and_limited(app: LineageApp) -> None:
    last = _recorded(app)
    log = _log(app)
    assert [row[0] for row in log.log_rows(3, 7, 2)] == [4, 5]
    assert [row[0] for row in log.log_rows(5, 7, 100)] == [6, 7]
    assert [row[0] for row in log.log_rows(last - 1, None, 100)] == [last]
    assert log.log_rows(last, None, 100) == []
    assert [entry[0] for entry in log.chain_links(3, 7)] == [4, 5, 6, 7]


def test_a_byte_budget_ends_the_rows_with_the_one_that_reaches_it(app: LineageApp) -> None:
    """Catch-up reads the log a DuckDB vector at a time and no more than a share of the memory cap
    in states."""
    _recorded(app)
    log = _log(app)
    rows = log.log_rows(0, None, 10_000)
    sizes = [len(row[4]) for row in rows]
    positions = [row[0] for row in rows]
    assert [row[0] for row in log.log_rows(0, None, 10_000, sum(sizes[:4]) + 1)] == positions[:5]
    assert [row[0] for row in log.log_rows(0, None, 10_000, sum(sizes[:4]))] == positions[:4]
    assert [row[0] for row in log.log_rows(0, None, 10_000, 1)] == positions[:1], (
        "a row larger than the budget is read alone, never skipped"
    )
    assert [row[0] for row in log.log_rows(3, 7, 100, 1)] == [4]
    assert [row[0] for row in log.log_rows(3, 7, 100, 0)] == [4]
    assert [row[0] for row in log.log_rows(0, None, 3, 10**12)] == positions[:3]
    assert log.log_rows(0, None, 10_000, 10**12) == rows


def test_every_link_chains_its_event_to_the_one_before(app: LineageApp) -> None:
    last = _recorded(app)
    log = _log(app)
    previous_position, previous_hash = 0, GENESIS
    links = log.chain_links(0, None)
    for row, (position, previous, chain_hash) in zip(
        log.log_rows(0, None, 10_000), links, strict=True
    ):
        assert (position, previous) == (row[0], previous_position) == (previous + 1, previous)
        # The role the store authenticated (PostgreSQL; None elsewhere) is part of the link.
        assert chain_hash == link(
            previous_hash, row[0], row[1], row[2], row[3], bytes(row[4]), row[5]
        )
        previous_position, previous_hash = position, chain_hash
    assert log.chain_hash_at(last) == previous_hash
    walker = ChainWalker()
    walker.feed(log.chain_rows())
    assert walker.report.intact and walker.report.events == last
    assert walker.report.head is not None and walker.report.head.chain_hash == previous_hash


def test_the_same_facts_at_the_same_time_make_the_same_chain_in_memory(app: LineageApp) -> None:
    last = _recorded(app)
    reference = _app(MEMORY_ENV)
    assert _recorded(reference) == last
    roles = {row[5] for row in _log(app).log_rows(0, None, 10_000)}
    if roles == {None}:  # a store that authenticates nobody: the very same chain
        assert _log(app).chain_links(0, None) == _log(reference).chain_links(0, None)
        return
    # PostgreSQL hashes the role it authenticated into each link: the same chain with that role.
    [role] = roles
    rows = [(r[1], r[2], r[3], bytes(r[4])) for r in _log(reference).log_rows(0, None, 10_000)]
    expected = next_links((0, GENESIS), list(range(1, last + 1)), rows, role)
    assert _log(app).chain_links(0, None) == expected


def test_existing_originators_names_the_streams_that_have_a_first_event(app: LineageApp) -> None:
    _recorded(app)
    recorded, unknown = aggregate_id("run", ABLATE_RUN), aggregate_id("run", "never/recorded")
    assert _log(app).existing_originators({recorded, unknown}) == {recorded}


def test_the_decision_reads_name_the_existing_streams_and_the_last_state(app: LineageApp) -> None:
    """The one read a decision makes on the chained stores must say what the two reads it replaces
    said."""
    from rollout_lineage.domain.application import ReadsForDeciding

    if not isinstance(app.recorder, ReadsForDeciding):
        pytest.skip("this log decides through the library's reads (one stream at a time)")
    unknown = aggregate_id("run", "never/recorded")
    assert app.recorder.decision_reads({unknown}) == ({}, None)
    _recorded(app)
    recorded = aggregate_id("run", ABLATE_RUN)
    existing, tail = app.recorder.decision_reads({recorded, unknown})
    last = app.recorder.select_notifications(start=app.recorder.max_notification_id(), limit=1)
    assert existing == {recorded: app.recorder.select_events(recorded)[-1].originator_version}
    assert tail is not None and len(tail) == 80 and last[0].state.startswith(tail)


@pytest.mark.parametrize("sizes", [(1, 40, 2, 33, 32)])
def test_batches_of_every_size_get_dense_positions_and_their_links(
    app: LineageApp, sizes: tuple[int, ...]
) -> None:
    """The PostgreSQL writer passes small batches value by value and large ones as arrays: both, and
    the sizes on either side of the switch, are chained alike."""
    last = 0
    for b, size in enumerate(sizes):
        recorded = app.record([f.RunRegistered(run=f"b{b}/r{k}", task="t") for k in range(size)])
        assert (recorded.position, recorded.appended) == (last + size, size)
        last += size
    walker = ChainWalker()
    walker.feed(_log(app).chain_rows())
    assert walker.report.intact and walker.report.events == last, walker.report.problem


#: Role names where the server's link (SQL text and `convert_to`) and `integrity.link` (Python's
#: f-string and UTF-8) could part: quotes, a backslash, a pipe like the link's own separator,
#: non-ASCII letters and a character outside the Basic Multilingual Plane.
ROLES = ['w"r\\it|er', "wrïtér", "writer\U0001f600"]


@pytest.mark.postgres
@pytest.mark.parametrize("role", ROLES)
def test_links_the_server_makes_are_the_links_python_makes(postgres_url: str, role: str) -> None:
    """The PostgreSQL writer's links are made in the server (`APPEND_FUNCTION`), `lineage verify`'s
    in Python: the two must agree byte for byte, for any role, batch size and state, else an intact
    store reads as tampered (or a tampered one as intact)."""
    import psycopg
    from psycopg import sql

    from rollout_lineage.adapters.store.postgres_store import CHAINED_ROLE

    base, _, query = postgres_url.partition("?")
    with psycopg.connect(base, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD 'pw'").format(sql.Identifier(role))
        )
    try:
        parts = StoreURL.parse(postgres_url).application_env()
        app = _app({**parts, "POSTGRES_USER": role, "POSTGRES_PASSWORD": "pw"})
        try:
            for size in (1, 40, 1000):
                app.record(
                    [
                        f.RunRegistered(run=f"{size}/r{k}", task="t" + "é" * (k % 5))
                        for k in range(size)
                    ]
                )
            rows = list(app.recorder.chain_rows())
        finally:
            app.close()
        walker = ChainWalker()
        walker.feed(iter(rows))
        assert walker.report.intact and walker.report.events == 1041, walker.report.problem
        with psycopg.connect(base, autocommit=True) as raw:
            schema = query.removeprefix("schema=")
            roles = raw.execute(
                sql.SQL("SELECT DISTINCT {} FROM {}.lineage_chain").format(
                    sql.Identifier(CHAINED_ROLE), sql.Identifier(schema)
                )
            ).fetchall()
        assert roles == [(role,)]
    finally:
        with psycopg.connect(base, autocommit=True) as admin:
            admin.execute(
                sql.SQL("REASSIGN OWNED BY {} TO CURRENT_USER").format(sql.Identifier(role))
            )
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.postgres
def test_a_replaced_append_function_is_caught_by_verify(postgres_url: str) -> None:
    """Anyone who may create objects in the store's schema may replace the server's append function
    (as they may write the tables): the links it makes are still checked by Python, so a function
    that links wrongly makes `verify` fail at the first event it wrote."""
    import psycopg

    from rollout_lineage.adapters.store.postgres_store import (
        APPEND_FUNCTION,
        APPEND_PARAMETERS,
        APPEND_RETURNS,
    )

    app = _app(StoreURL.parse(postgres_url).application_env())
    try:
        app.record([f.RunRegistered(run="r/0", task="t")])
        base, _, query = postgres_url.partition("?")
        schema = query.removeprefix("schema=")
        with psycopg.connect(base, autocommit=True) as raw:
            body = raw.execute(
                "SELECT prosrc FROM pg_proc WHERE proname = %s AND pronamespace = %s::regnamespace",
                (APPEND_FUNCTION, schema),
            ).fetchone()[0]
            forged = body.replace("'|by:'", "'|as:'")
            assert forged != body
            raw.execute(
                f"CREATE OR REPLACE FUNCTION {schema}.{APPEND_FUNCTION}({APPEND_PARAMETERS}) "
                f"RETURNS TABLE ({APPEND_RETURNS}) LANGUAGE plpgsql AS $body$" + forged + "$body$"
            )
        app.record([f.RunRegistered(run="r/1", task="t")])
        walker = ChainWalker()
        walker.feed(app.recorder.chain_rows())
        assert not walker.report.intact and walker.report.first_bad_position == 2
    finally:
        app.close()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def test_a_writer_holding_a_stream_sees_what_another_appended_to_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The decision read says each stream's last version, so a writer holding the stream at that
    version reads none of its events: one that another writer moved on must still be caught up
    before deciding."""
    from rollout_lineage.domain.errors import ConflictingFact

    url = (
        f"sqlite:///{tmp_path / 'events.sqlite'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )

    class CountingRaces(RetryAtOnce):
        lost = 0

        def after_lost_race(self, attempt: int) -> None:
            CountingRaces.lost += 1

    env = StoreURL.parse(url).application_env()
    first = LineageApp(env=env, actor="tester@lab", tool_version="contract", retry=CountingRaces())
    second = _app(env)
    try:
        first.record([f.RunRegistered(run="r/1", task="t")])
        assert first.record([f.RunRegistered(run="r/1", task="t")]).appended == 0  # held, current
        second.record([f.RunScored(run="r/1", reward=1.0)])
        assert first.record([f.RunScored(run="r/1", reward=1.0)]).appended == 0
        with pytest.raises(ConflictingFact):
            first.record([f.RunScored(run="r/1", reward=0.0)])
        assert (
            first.record([f.RunLocated(run="r/1", path="/runs/1", kind="recorded")]).position == 3
        )
        # Caught up before deciding, never by losing a race to the other writer's event and deciding
        # again.
        assert CountingRaces.lost == 0
    finally:
        first.close()
        second.close()


def test_a_refused_batch_appends_neither_events_nor_links(app: LineageApp) -> None:
    app.record([f.RunRegistered(run="r/1", task="t")])
    log = _log(app)
    before = (log.max_notification_id(), log.chain_links(0, None))
    stored = app.recorder.select_notifications(start=None, limit=1)[0]
    new = app.mapper.to_stored_event(
        app.mapper.to_domain_event(stored)  # the same stream and version again: a lost race
    )
    with pytest.raises(IntegrityError):
        app.recorder.insert_events([new])
    assert (log.max_notification_id(), log.chain_links(0, None)) == before
    position = app.record([f.RunRegistered(run="r/2", task="t")]).position
    # PostgreSQL's sequence drew the refused position; the writer sets it back, so positions stay
    # dense.
    assert position == 2
    assert log.chain_links(0, None) == [*before[1], (position, 1, log.chain_hash_at(position))]


# --- the eventsourcing internals the recorders rely on --------------------------------------------

RECHECK = (
    "eventsourcing changed an internal that {recorder} overrides ({where}); re-check that the "
    "override still runs inside the insert transaction and writes the chain, then update this pin"
)

PINNED = [
    # (library class, method, parameters, our recorder that overrides it) The SQLite and PostgreSQL
    # recorders replace the library's whole insert (their own transaction, chain included): what
    # must hold is that the library still appends through this method, with these parameters.
    (
        SQLiteAggregateRecorder,
        "insert_events",
        ["self", "stored_events"],
        "ChainedSQLiteRecorder",
    ),
    (
        PostgresApplicationRecorder,
        "insert_events",
        ["self", "stored_events"],
        "ChainedPostgresRecorder",
    ),
    (POPOAggregateRecorder, "_insert_events", ["self", "stored_events"], "ChainedMemoryRecorder"),
    (
        BaseAggregate,
        "__base_init__",
        ["self", "originator_id", "originator_version", "timestamp"],
        "events.LineageEvent.mutate",
    ),
]


@pytest.mark.parametrize(
    ("cls", "method", "parameters", "recorder"),
    PINNED,
    ids=[f"{c.__name__}.{m}" for c, m, _, _ in PINNED],
)
def test_an_overridden_internal_keeps_its_name_and_parameters(
    cls: type, method: str, parameters: list[str], recorder: str
) -> None:
    where = f"{cls.__module__}.{cls.__name__}.{method}"
    assert method in vars(cls), RECHECK.format(recorder=recorder, where=f"{where} is gone")
    named = [
        p.name
        for p in inspect.signature(vars(cls)[method]).parameters.values()
        if p.kind is not p.VAR_KEYWORD
    ]
    assert named == parameters, RECHECK.format(recorder=recorder, where=f"{where}{tuple(named)}")


CALLED_FROM = [
    # (the public method the library runs, the internal it must still call, our recorder)
    (POPOApplicationRecorder.insert_events, "self._insert_events(", "ChainedMemoryRecorder"),
]


@pytest.mark.parametrize(
    ("public", "call", "recorder"), CALLED_FROM, ids=[p.__qualname__ for p, _, _ in CALLED_FROM]
)
def test_the_library_still_calls_the_overridden_internal_on_insert(
    public: object, call: str, recorder: str
) -> None:
    source = inspect.getsource(public)  # type: ignore[arg-type]
    assert call in source, RECHECK.format(
        recorder=recorder,
        where=f"{public.__qualname__} no longer calls {call.rstrip('(')}",  # type: ignore[attr-defined]
    )


def test_the_memory_recorder_holds_the_library_lock_it_extends() -> None:
    recorder = ChainedMemoryRecorder()
    lock = getattr(recorder, "_database_lock", None)
    assert lock is not None and hasattr(lock, "_is_owned"), RECHECK.format(
        recorder="ChainedMemoryRecorder",
        where="POPORecorder._database_lock is no longer a re-entrant lock",
    )


def test_an_event_hidden_below_the_first_position_is_named_by_the_chain_walk(
    app: LineageApp,
) -> None:
    """A row inserted by hand at a position <= 0 has no link; the library's aggregate reads would
    still see it (an attack review used it to let a contradicting fact through while `verify` said
    intact)."""
    if not hasattr(app.recorder, "events_table_name"):
        pytest.skip("the in-memory log has no SQL to insert through")
    _recorded(app)
    recorder: Any = app.recorder
    table = recorder.events_table_name
    if hasattr(recorder, "chain_table"):  # PostgreSQL
        column, table = "notification_id", f'"{recorder.datastore.schema}".{table}'
    else:
        column = "rowid"
    copy = (
        f"INSERT INTO {table} ({column}, originator_id, originator_version, topic, state) "
        f"SELECT -1, originator_id, 999, topic, state FROM {table} WHERE {column} = 1"
    )
    with recorder.datastore.transaction(commit=True) as cursor:
        cursor.execute(copy)
    walker = ChainWalker()
    walker.feed(_log(app).chain_rows())
    assert not walker.report.intact and walker.report.first_bad_position == -1

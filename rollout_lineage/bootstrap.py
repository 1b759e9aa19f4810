"""The composition root: the only place that wires the domain to its adapters.

Everything is built lazily, so constructing a `Lineage` touches no file, socket or engine until a
command needs it. Each part can be handed in instead (`bootstrap(app=..., store_url=...,
read_models_path=...)`); `in_memory()` wires a log that lives in the process, for tests and
notebooks.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .domain.integrity import ChainReport, ChainWalker, Head
from .settings import Settings, tool_version

if TYPE_CHECKING:  # the write side loads on first write: read commands never need it
    from .adapters.chained_log import ChainedLog
    from .adapters.evidence.merkle_store import MerkleStore
    from .adapters.store.store_url import StoreURL
    from .domain.application import Entry, LineageApp, Recorded
    from .domain.facts import Fact
    from .projections.engine.runner import ReadModels


class Lineage:
    """One store, its read models and its engines, opened on demand; in a process forked from the
    one that opened them, opened again there (`_leave_inherited`)."""

    def __init__(
        self,
        settings: Settings,
        *,
        may_create: bool = True,
        app: LineageApp | None = None,
        store_url: StoreURL | None = None,
        read_models_path: Path | None = None,
    ) -> None:
        self.settings = settings
        # Writers (the harness API, import, ingest, init) create a store where none is; readers
        # never invent one.
        self.may_create = may_create
        self.created = False
        # Parts handed in take the place of the ones built from the settings (cached_property reads
        # __dict__).
        if app is not None:
            self.__dict__["app"] = app
        if store_url is not None:
            self.__dict__["store_url"] = store_url
        self.read_models_path = read_models_path or settings.projections_path
        self._app_handed_in = app is not None
        _OPENED.add(self)

    @cached_property
    def store_url(self) -> StoreURL:
        from .adapters.store.store_url import StoreURL

        return StoreURL.parse(self.settings.store_url)

    @cached_property
    def app(self) -> LineageApp:
        from .adapters.store.event_store import open_application
        from .domain.errors import StoreUnavailable

        creating = self._require_store()
        signer = None
        if self.settings.signing_key:
            from .adapters.evidence.ed25519 import load_signer

            signer = load_signer(self.settings.signing_key)
        try:
            app = open_application(
                self.store_url,
                actor=signer.name if signer else self.settings.actor,
                tool_version=tool_version(),
            )
        except StoreUnavailable:
            self._refuse_if_read_only()
            raise
        if signer is not None:
            from .adapters.evidence.batch_evidence import BatchEvidence

            app.recorder.batch_evidence = BatchEvidence(signer=signer)
        # Only now: an open that failed (a file where the folder should be) created nothing to
        # announce.
        self.created = creating
        return app

    @cached_property
    def log(self) -> ChainedLog:
        """The log as readers see it: for a SQLite file that exists, a plain read-only connection
        (no write side to load); otherwise the application's recorder, which must keep the hash
        chain."""
        from .adapters.chained_log import ChainedLog

        path = self.store_url.sqlite_path
        if "app" in self.__dict__ or path is None or not self.settings.store_exists:
            recorder = self.app.recorder
            if not isinstance(recorder, ChainedLog):
                raise TypeError(
                    f"expected the application's recorder to keep the hash "
                    f"chain (a ChainedLog), found {type(recorder).__name__}; "
                    f"open the application with open_application(StoreURL) or "
                    "adapters.memory_log.MEMORY_ENV"
                )
            return recorder
        from .adapters.store.sqlite_log import SQLiteLog

        return SQLiteLog(path)

    def _require_store(self) -> bool:
        """Whether opening will create the store (it may: `init`, `import`, `ingest`); refuse
        otherwise."""
        from .domain.errors import NoStoreHere

        if not self.settings.store_exists:
            if not self.may_create:
                where = self.settings.home
                searched = (
                    f"searched {', '.join(self.settings.searched)}"
                    if self.settings.searched
                    else f"looked at {where}"
                )
                raise NoStoreHere(
                    f"no lineage store here ({searched}; expected "
                    f"a .lineage/ folder with events.sqlite)",
                    hint="run `lineage init` or `lineage import PATH`, or name "
                    "one with --home, --store, LINEAGE_HOME or LINEAGE_STORE",
                )
            return True
        return False

    def _refuse_if_read_only(self) -> None:
        """The write side of an SQLite store that cannot be written fails in SQLite's words ("unable
        to open database file"); say what it is and which commands still work."""
        from .adapters.store.store_url import may_write
        from .domain.errors import StoreUnavailable

        path = self.store_url.sqlite_path
        if path is not None and path.exists() and not may_write(path):
            raise StoreUnavailable(
                f"expected to write the event store "
                f"{self.location}, found it read-only (a read-only "
                "mount, or no write permission): this command appends "
                "to it or keeps the log's Merkle tree beside it",
                hint="run it where the store can be written; reads (`runs`, "
                "`tree`, `sql`, ...) work while the read models are current",
            ) from None

    @property
    def location(self) -> str:
        """Where the store is, for people: the SQLite file's path, or the server URL without its
        password."""
        path = self.store_url.sqlite_path
        return (
            "/" + str(path).lstrip("/")
            if path is not None and path.is_absolute()
            else str(path or self.store_url.redacted())
        )

    def record(self, entries: Iterable[Entry | Fact]) -> Recorded:
        return self.app.record(entries)

    def position(self) -> int:
        return self.log.max_notification_id() or 0

    def head(self) -> Head | None:
        return self.verify().head

    def verify(self, kept_head: Head | None = None, *, extend_tree: bool = True) -> ChainReport:
        """Walk the hash chain, then check the Merkle tree against the events.

        With `extend_tree` (the commands') the tree is first extended to the end of the log, so it
        can prove every event. Without it nothing is written, and the store need not be writable
        (`lineage serve`, which may read a read-only store): the tree is checked as it is stored.
        That checks as much: a leaf the tree does not hold yet would be made from the very events
        being walked, so it has nothing to differ from."""
        walker = ChainWalker()
        from .adapters.progress import counted

        walker.feed(
            counted(
                self.log.chain_rows(), "verifying the hash chain", self.log.max_notification_id()
            )
        )
        if kept_head is not None:
            walker.check_head(kept_head, self.log.chain_hash_at(kept_head.position))
        # The Merkle tree lives in the store's database; a log in memory has the chain only.
        if walker.report.intact and self.store_url.kind != "memory":
            from .adapters.evidence.merkle_store import check_against_log

            tree = self.tree() if extend_tree else self._stored_tree()
            found = None
            if tree is not None:
                found = check_against_log(tree) or _same_events(walker.report, tree, extend_tree)
            if found:
                walker.report.first_bad_position, walker.report.problem = found
        return walker.report

    def tree(self) -> MerkleStore:
        """The log's Merkle tree, caught up with the log first (checking the chain on the way)."""
        from .adapters.evidence.merkle_store import MerkleStore

        tree = MerkleStore(self.app.recorder)
        tree.catch_up()
        return tree

    def _stored_tree(self) -> MerkleStore | None:
        """The Merkle tree as stored, read without the write side where the log reader can (a
        SQLite file opened read-only); None when the store keeps none yet (written before trees)."""
        from .adapters.evidence.merkle_store import LEAVES, MerkleStore
        from .adapters.store_port import EvidenceTables

        log = self.log
        if not isinstance(log, EvidenceTables):
            return MerkleStore(self.app.recorder)
        holds = getattr(log, "holds_table", None)
        return MerkleStore(log) if holds is None or holds(LEAVES) else None

    def read_models(self, *, as_of: int | None = None, catch_up: bool = True) -> ReadModels:
        from .projections.engine.runner import open_read_models

        return open_read_models(self, as_of=as_of, catch_up_now=catch_up)

    def sql(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        as_of: int | None = None,
        timeout: float | None = 30.0,
    ) -> list[dict[str, Any]]:
        """The read API: a read-only query over caught-up read models (or the log `as_of` a
        position), one dict per row; `$name` placeholders take `params`, never pasted into the SQL.
        Same rules as `lineage sql`."""
        from .projections.engine.user_sql import run_reads

        with self._reader(as_of) as db:
            columns, rows = run_reads(db, query, params, timeout=timeout)
            return [dict(zip(columns, row, strict=True)) for row in rows]

    def arrow(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        as_of: int | None = None,
        timeout: float | None = 30.0,
    ) -> Any:
        """The answer as a `pyarrow.Table` (needs pyarrow: `pip install
        'rollout-lineage[dataframes]'`)."""
        return self._fetch_whole(query, params, as_of, "to_arrow_table", timeout)

    def df(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        as_of: int | None = None,
        timeout: float | None = 30.0,
    ) -> Any:
        """The answer as a `pandas.DataFrame` (needs pandas: `pip install
        'rollout-lineage[dataframes]'`)."""
        return self._fetch_whole(query, params, as_of, "df", timeout)

    def _fetch_whole(
        self,
        query: str,
        params: Mapping[str, Any] | None,
        as_of: int | None,
        how: str,
        timeout: float | None,
    ) -> Any:
        from .projections.engine.user_sql import fetch_reads

        with self._reader(as_of) as db:
            return fetch_reads(db, query, params, how, timeout=timeout)

    def _reader(self, as_of: int | None) -> Any:
        from .projections.engine.read_only import read_only_models

        return read_only_models(self, as_of)

    def _leave_inherited(self) -> None:
        """In a forked child: the connections the parent opened stay the parent's, never used nor
        closed here (a SQLite connection must not cross a fork, SQLite's own rule; a PostgreSQL
        session is the parent's, and closing it here ends it for the parent too). The next use
        opens this process's own. An application handed in is the caller's, and stays."""
        if self._app_handed_in:
            return
        _LEFT_BEHIND.extend(
            self.__dict__.pop(part) for part in ("app", "log") if part in self.__dict__
        )

    def close(self) -> None:
        log = self.__dict__.pop("log", None)
        if log is not None and log is not getattr(self.__dict__.get("app"), "recorder", None):
            log.close()  # a reader of its own (the application closes its recorder)
        if "app" in self.__dict__:
            self.app.close()
            del self.__dict__["app"]

    def __enter__(self) -> Lineage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Every `Lineage` of this process, for the fork hook; and what a forked child inherited, kept so
#: that no finalizer closes the parent's connections from the child.
_OPENED: weakref.WeakSet[Lineage] = weakref.WeakSet()
_LEFT_BEHIND: list[Any] = []


def _after_fork_in_child() -> None:
    # Before Python 3.12 a cached_property computes under one lock for every instance: one a thread
    # of the parent held (opening a store) is held for ever here, by a thread this process lacks.
    for part in vars(Lineage).values():
        if isinstance(part, cached_property) and hasattr(part, "lock"):
            part.lock = threading.RLock()  # no such attribute from 3.12 on
    for lineage in list(_OPENED):
        lineage._leave_inherited()


os.register_at_fork(after_in_child=_after_fork_in_child)


def bootstrap(
    settings: Settings | None = None,
    *,
    app: LineageApp | None = None,
    store_url: StoreURL | None = None,
    read_models_path: Path | None = None,
) -> Lineage:
    return Lineage(
        settings or Settings.from_env(),
        app=app,
        store_url=store_url,
        read_models_path=read_models_path,
    )


def in_memory(
    home: str | Path, *, actor: str = "unknown", clock: Callable[[], datetime] | None = None
) -> Lineage:
    """A store whose log lives in this process (chain included) and whose read models are a file
    under `home`.

    `clock` (a callable returning an aware datetime) fixes recording times, so two logs fed the same
    facts hold the same bytes."""
    from .adapters.store.memory_log import MEMORY_ENV, MEMORY_URL
    from .adapters.store.store_url import StoreURL
    from .domain.application import LineageApp

    home_path = Path(home)
    settings = Settings.from_env({}, store=MEMORY_URL, home=home_path, actor=actor)
    options: dict[str, Any] = {} if clock is None else {"clock": clock}
    app = LineageApp(env=MEMORY_ENV, actor=actor, tool_version=tool_version(), **options)
    return Lineage(
        settings,
        app=app,
        store_url=StoreURL("memory", MEMORY_URL),
        read_models_path=home_path / "projections.duckdb",
    )


def open_store(
    store: str | None = None,
    *,
    home: str | None = None,
    actor: str | None = None,
    signing_key: str | None = None,
) -> Lineage:
    """The harness API: `with open_store() as lineage: lineage.record([...])` returns the log
    position.

    With `signing_key` (a .key file; else LINEAGE_SIGNING_KEY), every batch is signed and its actor
    is the key's name.
    """
    return Lineage(Settings.from_env(store=store, home=home, actor=actor, signing_key=signing_key))


def _same_events(
    report: ChainReport, tree: MerkleStore, extended: bool = True
) -> tuple[int, str] | None:
    """The Merkle tree must hold the events the chain walk counted: its leaf for the walk's last
    event is the walk's count (more leaves are events appended since the walk, each checked by
    `check_against_log`). A tree not `extended` to the log may also stop short of that event: it
    then holds fewer leaves than the walk counted, each checked against its event."""
    if report.problem is not None or report.head is None:
        return None
    index = tree.index_of(report.head.position)
    if index == report.events - 1:
        return None
    if index is None and not extended and tree.size() < report.events:
        return None
    return report.head.position, (
        f"the chain walk counts {report.events} events through position "
        f"{report.head.position}, the Merkle tree "
        f"{'has no leaf for it' if index is None else f'makes it leaf {index}'}: they do not "
        "describe the same log"
    )

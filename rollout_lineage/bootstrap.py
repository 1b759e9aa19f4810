"""The composition root: the only place that wires the domain to its adapters.

Everything is built lazily, so constructing a `Lineage` touches no file, socket or engine until a command
needs it. Each part can be handed in instead (`bootstrap(app=..., store_url=..., read_models_path=...)`);
`in_memory()` wires a log that lives in the process, for tests and notebooks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .domain.application import Entry, LineageApp, Recorded
from .domain.facts import Fact
from .domain.integrity import ChainReport, ChainWalker, Head
from .settings import Settings, tool_version

if TYPE_CHECKING:
    from .adapters.chained_log import ChainedLog
    from .adapters.event_store import StoreURL
    from .adapters.merkle_store import MerkleStore
    from .projections.runner import ReadModels


class Lineage:
    """One store, its read models and its engines, opened on demand."""

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
        # Writers (the harness API, import, ingest, init) create a store where none is; readers never invent one.
        self.may_create = may_create
        self.created = False
        # Parts handed in take the place of the ones built from the settings (cached_property reads __dict__).
        if app is not None:
            self.__dict__["app"] = app
        if store_url is not None:
            self.__dict__["store_url"] = store_url
        self.read_models_path = read_models_path or settings.projections_path

    @cached_property
    def store_url(self) -> StoreURL:
        from .adapters.event_store import StoreURL

        return StoreURL.parse(self.settings.store_url)

    @cached_property
    def app(self) -> LineageApp:
        from .adapters.event_store import open_application
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
                    f"no lineage store here ({searched}; expected a .lineage/ folder with events.sqlite)",
                    hint="run `lineage init` or `lineage import PATH`, or name one with --home, --store, "
                    "LINEAGE_HOME or LINEAGE_STORE",
                )
            self.created = True
        signer = None
        if self.settings.signing_key:
            from .adapters.ed25519 import load_signer

            signer = load_signer(self.settings.signing_key)
        app = open_application(
            self.store_url,
            actor=signer.name if signer else self.settings.actor,
            tool_version=tool_version(),
        )
        if signer is not None:
            from .adapters.batch_evidence import BatchEvidence

            app.recorder.batch_evidence = BatchEvidence(signer=signer)
        return app

    @property
    def location(self) -> str:
        """Where the store is, for people: the SQLite file's path, or the server URL without its password."""
        path = self.store_url.sqlite_path
        return (
            "/" + str(path).lstrip("/")
            if path is not None and path.is_absolute()
            else str(path or self.store_url.redacted())
        )

    @property
    def log(self) -> ChainedLog:
        """The application's recorder as readers use it; one without a hash chain is refused."""
        from .adapters.chained_log import ChainedLog

        recorder = self.app.recorder
        if not isinstance(recorder, ChainedLog):
            raise TypeError(
                f"expected the application's recorder to keep the hash chain (a ChainedLog), found "
                f"{type(recorder).__name__}; open the application with open_application(StoreURL) or "
                "adapters.memory_log.MEMORY_ENV"
            )
        return recorder

    def record(self, entries: Iterable[Entry | Fact]) -> Recorded:
        return self.app.record(entries)

    def position(self) -> int:
        return self.app.position()

    def head(self) -> Head | None:
        return self.verify().head

    def verify(self, kept_head: Head | None = None) -> ChainReport:
        walker = ChainWalker()
        walker.feed(self.log.chain_rows())
        if kept_head is not None:
            walker.check_head(kept_head, self.log.chain_hash_at(kept_head.position))
        if walker.report.intact and self._keeps_a_tree():
            from .adapters.merkle_store import check_against_log

            found = check_against_log(self.tree())
            if found:
                walker.report.first_bad_position, walker.report.problem = found
        return walker.report

    def _keeps_a_tree(self) -> bool:
        from .adapters.merkle_store import MerkleStore

        return MerkleStore.supports(self.log)

    def tree(self) -> MerkleStore:
        """The log's Merkle tree, caught up with the log first (checking the chain on the way)."""
        from .adapters.merkle_store import MerkleStore

        tree = MerkleStore(self.log)
        tree.catch_up()
        return tree

    def read_models(self, *, as_of: int | None = None, catch_up: bool = True) -> ReadModels:
        from .projections.runner import open_read_models

        return open_read_models(self, as_of=as_of, catch_up_now=catch_up)

    def sql(
        self,
        query: str,
        params: Mapping[str, Any] | None = None,
        *,
        as_of: int | None = None,
        timeout: float | None = 30.0,
    ) -> list[dict[str, Any]]:
        """The read API: a read-only query over caught-up read models (or the log `as_of` a position), one dict per
        row; `$name` placeholders take `params`, never pasted into the SQL. Same rules as `lineage sql`."""
        from .projections.user_sql import run_reads

        with self._reader(as_of) as db:
            columns, rows = run_reads(db, query, params, timeout=timeout)
            return [dict(zip(columns, row, strict=True)) for row in rows]

    def arrow(
        self, query: str, params: Mapping[str, Any] | None = None, *, as_of: int | None = None
    ) -> Any:
        """The answer as a `pyarrow.Table` (needs pyarrow: `pip install 'rollout-lineage[dataframes]'`)."""
        return self._fetch_whole(query, params, as_of, "to_arrow_table")

    def df(
        self, query: str, params: Mapping[str, Any] | None = None, *, as_of: int | None = None
    ) -> Any:
        """The answer as a `pandas.DataFrame` (needs pandas: `pip install 'rollout-lineage[dataframes]'`)."""
        return self._fetch_whole(query, params, as_of, "df")

    def _fetch_whole(
        self, query: str, params: Mapping[str, Any] | None, as_of: int | None, how: str
    ) -> Any:
        from .projections.user_sql import require_reads

        with self._reader(as_of) as db:
            require_reads(db, query)
            return db.fetch_whole(query, how, timeout=None, params=dict(params) if params else None)

    def _reader(self, as_of: int | None) -> Any:
        from .projections.runner import read_only_models

        return read_only_models(self, as_of)

    def close(self) -> None:
        if "app" in self.__dict__:
            self.app.close()
            del self.__dict__["app"]

    def __enter__(self) -> Lineage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    """A store whose log lives in this process (chain included) and whose read models are a file under `home`.

    `clock` (a callable returning an aware datetime) fixes recording times, so two logs fed the same facts hold
    the same bytes."""
    from .adapters.event_store import StoreURL
    from .adapters.memory_log import MEMORY_ENV, MEMORY_URL

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
    """The harness API: `with open_store() as lineage: lineage.record([...])` returns the log position.

    With `signing_key` (a .key file; else LINEAGE_SIGNING_KEY), every batch is signed and its actor is the key's name.
    """
    return Lineage(Settings.from_env(store=store, home=home, actor=actor, signing_key=signing_key))

"""What `lineage serve` reads: a private copy of the store's read models held open read-only,
caught up when the log moved, and answers remembered for the log position they were read at. Every
query is one of the commands' own (`run_list`, `report`, `diff`, `audit_report`, `user_sql`).
"""

from __future__ import annotations

import gc
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any, TypeVar

from ...adapters.duckdb_store import ReadModelDB
from ...adapters.statement_limits import GRACE_S
from ...domain.errors import InvalidInput, LineageError, ReadLimitExceeded
from ...domain.integrity import Head
from ..engine.paging import tracked_position
from ..engine.read_only import held_read_only_models
from ..engine.runner import OpenedStore, ReadSettings
from ..engine.shadows import shadow_on_demand
from ..engine.timeparse import parse_moment
from ..engine.user_sql import run_reads
from .arms import arm_stats as stats
from .arms.arms import PARENT, arms_table, split_run_fork
from .arms.charts import SUMMARY, Charts, charts
from .audit.audit_report import audit_report
from .branch_view import branch_view
from .diff import diff_document
from .report import RunReport, built_from, run_report
from .report_html import STYLE, esc, node_id, tree_svg
from .run_list import PAGE_FILTERS, SORTS, RunPage, page_runs, resolve_address, resolve_run
from .trajectory import Timeline, timeline, trajectory_source

#: The most rows an SQL answer carries (the page, its CSV and its JSON alike); one more says it was
#: cut.
SQL_ROW_LIMIT = 10_000
#: The most bytes an SQL answer carries as sent (its JSON or CSV; the page shows less of it:
#: `web/app.py`'s `SQL_PAGE_BYTES`): a row that would pass it is not sent, and the answer says it
#: was cut and why.
SQL_ANSWER_BYTES = 32 * 2**20
#: Seconds a statement may run, as `lineage sql`'s default --timeout: its check, its run and the
#: fetching of its answer together (an answer not read by then is closed).
SQL_TIMEOUT_S = 30.0
#: Users' queries that may run at once. One more is refused at once (503, with Retry-After), not
#: queued: a query waiting its turn would hold one of the server's worker threads, and enough of
#: them would hold up the pages again.
SQL_AT_ONCE = 4
#: Seconds a query may read the read models behind the log while other queries read them (they
#: hold the database open, so it cannot be caught up); past that a query waits for them to end
#: and the database to be caught up, so pages are never more than this and one timeout behind.
SQL_JOIN_BEHIND_S = 2.0
#: Rows fetched from DuckDB at a time for an answer: what the server holds of one answer at once
#: (it encodes and sends them before it fetches more).
SQL_FETCH_ROWS = 64
#: How many distinct values a filter offers to choose from.
FACET_LIMIT = 200
FACETS = ("task", "agent", "model", "status", "outcome", "skill_mode")
#: What the remembered answers may hold together, in bytes as `deep_size` counts them (it counts
#: 7.4 MB for the page of a 3,001-node run). A view of these read models costs ~10 ms to plan and
#: run even on a few runs (the `runs` view joins six tables), and a run page asks ~30 of them.
REMEMBERED_BYTES = 64 * 2**20
#: The parts of the integrity summary a run's audit findings and verdict are made from; the rest
#: (events, head) is shown as it stands at each request.
INTEGRITY_FINDINGS = ("intact", "problem", "first_bad_position")
T = TypeVar("T")


@dataclass(frozen=True)
class LogChange:
    """What the log's events after a position name: the runs they are about, and the runs'
    task and parent now; `everything` when one names no run (a snapshot fact names a ref shared
    across runs; a fact with no run is not traced), so no run page can be kept."""

    everything: bool
    runs: frozenset[str]
    tasks: frozenset[str | None]
    parents: frozenset[str]


@dataclass
class RememberedRun:
    """A run page as it was read: the runs its answer was read from (the run, every run of its
    task for the arm statistics, its continuations and the run it continues), and the integrity it
    was audited under."""

    answer: tuple[RunReport, str, dict[str, str]]
    run: str
    task: str | None
    depends_on: frozenset[str]
    integrity: dict[str, Any]

    def kept_after(self, change: LogChange) -> bool:
        """Whether no event of `change` can have changed this page (it would read the same)."""
        return not (
            change.everything
            or change.runs & self.depends_on
            or self.task in change.tasks
            or self.run in change.parents
        )


class Remembered:
    """Answers remembered, least recently used first to go once together they hold more than
    `budget` bytes (`deep_size`, counted once, when an answer is kept); one larger than the whole
    budget is not kept. Bounded by what the answers hold, not by how many there are: a run page
    can be megabytes, a resolved prefix a few bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.bytes = 0
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The answer kept under `key` (now the most recently used), or `default`."""
        found = self._entries.get(key)
        if found is None:
            return default
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, answer: T) -> T:
        self.drop(key)
        size = deep_size(answer) + deep_size(key)
        if size <= self.budget:
            self._entries[key] = (answer, size)
            self.bytes += size
        while self.bytes > self.budget:
            _, (_, let_go) = self._entries.popitem(last=False)
            self.bytes -= let_go
        return answer

    def drop(self, key: Hashable) -> None:
        found = self._entries.pop(key, None)
        if found is not None:
            self.bytes -= found[1]

    def keep_only(self, keep: Callable[[Hashable, Any], bool]) -> None:
        for key in [k for k, (answer, _) in self._entries.items() if not keep(k, answer)]:
            self.drop(key)


_NOT_KEPT = object()
#: Objects `deep_size` does not count or look inside: code and classes, shared by every answer.
_SHARED = (type, ModuleType, FunctionType)


def deep_size(value: Any) -> int:
    """Bytes `value` holds: `sys.getsizeof` of it and of every object it reaches (the garbage
    collector's referents: containers' items, instances' attributes), each object once, classes,
    modules and functions aside (an estimate: a string shared with other answers counts in each
    that holds it, so it errs high)."""
    seen: set[int] = set()
    total = 0
    level = [value]
    while level:
        new = [o for o in level if id(o) not in seen and not isinstance(o, _SHARED)]
        seen.update(map(id, new))
        total += sum(map(sys.getsizeof, new))
        level = gc.get_referents(*new)
    return total


class QueriesBusy(ReadLimitExceeded):
    """`SQL_AT_ONCE` users' queries are running already."""

    #: Seconds a client may wait before it asks again (the web adapter's Retry-After).
    retry_after = 1


class SQLAnswer:
    """One users' query as it is read, on a connection of its own: its columns, the log position
    of the read models it reads, and its rows one at a time (iterate it), until `close`: by its
    reader, at its end, or at the query's deadline (the timeout and the grace a stuck call gets)
    if no one did by then, so a client that stops reading holds no connection. Closing it gives
    its connection and its turn back (`release`)."""

    def __init__(
        self,
        columns: list[str],
        rows: Iterator[tuple[Any, ...]],
        position: int,
        release: Callable[[], None],
        deadline_s: float,
    ) -> None:
        self.columns = columns
        self.position = position
        self._rows = rows
        self._release = release
        self._lock = threading.Lock()
        self._closed = False
        self._expired = False
        self._timer = threading.Timer(deadline_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        while True:
            with self._lock:  # a fetch and the deadline's close never overlap
                if self._closed:
                    if self._expired:
                        raise ReadLimitExceeded(
                            f"the answer was not read within the query's {SQL_TIMEOUT_S:g} s "
                            "timeout and was closed",
                            hint="ask for less (filter, aggregate, LIMIT), or read it faster",
                        )
                    return
                row = next(self._rows, None)
            if row is None:
                self.close()
                return
            yield row

    def _expire(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._expired = True
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._timer.cancel()
            getattr(self._rows, "close", lambda: None)()
        self._release()


def _first_then(first: list[tuple[Any, ...]], rest: Iterator[Any]) -> Iterator[tuple[Any, ...]]:
    try:
        yield from first
        yield from rest
    finally:
        getattr(rest, "close", lambda: None)()


#: The scratch folder of a serving process's copy, in the temporary directory.
COPY_PREFIX = "lineage-serve-"
#: A file in that folder the serving process holds an exclusive lock on for as long as it runs: a
#: folder whose lock another process can take belongs to a server that is gone (a kill -9 or a
#: power cut skips `close`), and the next server to start removes it; a copy can be gigabytes.
OWNER_LOCK = "serving.lock"


def _owned_scratch() -> tuple[Path, Any]:
    """A new scratch folder and the open file holding its lock. Made under a name the sweep does
    not match and renamed once locked, so no sweep ever sees it unlocked."""
    import fcntl

    making = Path(tempfile.mkdtemp(prefix=f".{COPY_PREFIX}"))
    lock = open(making / OWNER_LOCK, "wb")  # noqa: SIM115 (held for the server's life)
    fcntl.flock(lock, fcntl.LOCK_EX)
    scratch = making.with_name(making.name.removeprefix("."))
    making.rename(scratch)
    return scratch, lock


def remove_abandoned_copies(parent: Path) -> list[Path]:
    """Remove this user's copies in `parent` whose server is gone (their lock can be taken); a
    folder without the lock file (an older version's) is left alone. Returns what was removed."""
    import fcntl

    removed = []
    for folder in parent.glob(f"{COPY_PREFIX}*"):
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            with open(folder / OWNER_LOCK, "rb") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        except OSError:  # held (BlockingIOError), no lock file, or removed by another server
            continue
    return removed


class ServedCopy:
    """An `OpenedStore` whose read models are a private copy in a scratch folder (removed by
    `close`; by the next server if this one is killed): the store, its log and settings are the
    store's own. Seeded from the store's file, caught up first and read under a read-only
    connection, so no writer can change it while it is copied."""

    def __init__(self, lineage: OpenedStore) -> None:
        self._lineage = lineage
        remove_abandoned_copies(Path(tempfile.gettempdir()))
        self._scratch, self._lock = _owned_scratch()
        self.read_models_path = self._scratch / "projections.duckdb"
        source = Path(lineage.read_models_path)
        try:  # the store's file, caught up first (a brief write lock) and then held read-only
            held = held_read_only_models(lineage)
        except BaseException:
            self.close()
            raise
        try:
            for suffix in ("", ".wal"):
                if Path(f"{source}{suffix}").exists():
                    shutil.copyfile(f"{source}{suffix}", f"{self.read_models_path}{suffix}")
        finally:
            held.close()

    @property
    def settings(self) -> ReadSettings:
        return self._lineage.settings

    @property
    def store_url(self) -> Any:
        return self._lineage.store_url

    @property
    def app(self) -> Any:
        return self._lineage.app

    @property
    def log(self) -> Any:
        return self._lineage.log

    def position(self) -> int:
        return self._lineage.position()

    def close(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)
        self._lock.close()


class ServedReads:
    """The read side of `lineage serve` (the web adapter's `Reads` port).

    One connection held open (a DuckDB open costs ~15 ms, more than a whole answer should) and
    reopened when the log moved; pages take turns on it. Users' SQL does not: each query runs on a
    connection of its own to the same read-only database (`ReadModelDB.cursor`), outside the turns,
    so a slow one holds up no page. The database is opened again after a write only once no query
    reads it (they hold it open); meanwhile pages answer from it as it stands, at the position they
    show, and so does a new query for `SQL_JOIN_BEHIND_S`; after that a new query waits for the
    others to end and the reopening, so neither is more than that and one timeout behind."""

    filters: tuple[str, ...] = PAGE_FILTERS
    sorts: tuple[str, ...] = tuple(SORTS)
    sql_row_limit: int = SQL_ROW_LIMIT
    tree_style: str = STYLE
    stats_columns: tuple[str, ...] = stats.COLUMNS
    chart_columns: tuple[str, ...] = SUMMARY

    def __init__(self, lineage: OpenedStore, integrity: Any) -> None:
        """`integrity()` walks the hash chain (`Lineage.verify().summary()`): asked when an answer
        shows it (a run page, the audit), once per log position (`lineage serve` starts its first
        walk at start)."""
        self._lineage = lineage
        self._copy: ServedCopy | None = None
        self._integrity_of = integrity
        #: Pages' turns on the held connection; a query waiting for the database to be reopened
        #: waits on it too.
        self._lock = threading.Condition()
        self._db: ReadModelDB | None = None
        #: Connections of users' queries open on the held database (it is not reopened while there
        #: are any), their answers not closed yet, and their turns.
        self._reading = 0
        self._queries: set[SQLAnswer] = set()
        #: When a request first found the log ahead of the held database while queries read it.
        self._behind_since: float | None = None
        self._turns = threading.BoundedSemaphore(SQL_AT_ONCE)
        self._at_once = SQL_AT_ONCE
        self._position = -1
        #: The log's head (position, chain hash) the held read models were caught up to: a log
        #: that no longer holds it is another log (replaced or rewritten), however long.
        self._head: Head | None = None
        self._integrity: tuple[Head | None, dict[str, Any]] | None = None
        #: Answers at the current log position, and run pages (`RememberedRun`, under ("run", id)),
        #: which are kept across writes that did not touch what they were read from.
        self._answers = Remembered(REMEMBERED_BYTES)

    @contextmanager
    def _current(self) -> Iterator[ReadModelDB]:
        """The held connection, caught up first if a writer appended since the last request.

        The log's head (its last position and that link's hash: two cheap queries) is checked
        before each request; when it changed, the copy is caught up on a writable connection and
        reopened read-only, as `lineage sql` does. The hash too: a store replaced by another log as
        long (a backup restored, then written to) moves no position, and the catch-up rebuilds the
        copy from the log now there. While users' queries read the database it is not reopened:
        pages answer from it as it stands."""
        with self._lock:
            if self._behind():
                if not self._reading:
                    self._catch_up()
                elif self._behind_since is None:
                    self._behind_since = time.monotonic()
            assert self._db is not None
            yield self._db

    def _behind(self) -> bool:
        return self._db is None or _head_of(self._lineage.log) != self._head

    def _catch_up(self) -> None:
        """Reopen the held database caught up with the log (the lock held, no query reading it)."""
        before = self._head
        self.close_unlocked()
        self._answers.keep_only(lambda _key, kept: isinstance(kept, RememberedRun))
        if self._copy is None:
            self._copy = ServedCopy(self._lineage)
        self._db = held_read_only_models(self._copy)
        self._position = tracked_position(self._db)
        self._head = _head_of(self._lineage.log, self._position)
        self._behind_since = None
        self._forget_runs_changed_since(self._db, before)

    def _forget_runs_changed_since(self, db: ReadModelDB, before: Head | None) -> None:
        """Drop the remembered run pages that the events after `before` may have changed: a
        write to one run leaves every other run's page as it was, and those stay remembered. All
        go when the log no longer holds `before` (another log: replaced, rewritten, cut)."""
        remembered = self._answers
        if not remembered.bytes:
            return
        if before is None or _head_of(self._lineage.log, before.position) != before:
            remembered.keep_only(lambda _key, _kept: False)
            return
        change = log_change(db, before.position)
        remembered.keep_only(
            lambda _key, kept: not isinstance(kept, RememberedRun) or kept.kept_after(change)
        )

    def _remembered(self, key: Hashable, read: Callable[[ReadModelDB], T]) -> T:
        """`read`'s answer at the current log position: read once, then remembered until the log
        moves (the read models are a function of the log prefix), so a repeated page costs a
        lookup. Users' SQL is never remembered (`now()`, `random()`)."""
        with self._current() as db:
            return self._recalled(db, key, read)

    def _recalled(self, db: ReadModelDB, key: Hashable, read: Callable[[ReadModelDB], T]) -> T:
        """`_remembered`, with the held read models at hand (the lock held)."""
        kept = self._answers.get(key, _NOT_KEPT)
        if kept is not _NOT_KEPT:
            found: T = kept
            return found
        return self._answers.put(key, read(db))

    def remembered_bytes(self) -> int:
        """What the remembered answers hold together, as `deep_size` counted them."""
        return self._answers.bytes

    @property
    def position(self) -> int:
        return self._position

    def _chain(self) -> dict[str, Any]:
        if self._integrity is None or self._integrity[0] != self._head:
            self._integrity = (self._head, self._integrity_of())
        return self._integrity[1]

    def close_unlocked(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def close(self) -> None:
        with self._lock:
            open_queries = list(self._queries)
        for answer in open_queries:
            answer.close()
        with self._lock:
            self.close_unlocked()
            if self._copy is not None:
                self._copy.close()
                self._copy = None

    def runs(
        self, filters: dict[str, str | None], since: str | None, sort: str, page: int, size: int
    ) -> RunPage:
        moment: datetime | None = parse_moment(since, "since") if since else None
        return self._remembered(
            ("runs", tuple(sorted(filters.items())), moment, sort, page, size),
            lambda db: page_runs(db, filters, since=moment, sort=sort, page=page, size=size),
        )

    def facets(self) -> dict[str, list[str]]:
        """The values each exact-match filter can take, for the runs page's choices."""
        lists = ", ".join(
            f"list(DISTINCT {_facet(name)} ORDER BY {_facet(name)}) "
            f"FILTER (WHERE {_facet(name)} IS NOT NULL)[:{FACET_LIMIT}] AS {name}"
            for name in FACETS
        )

        def read(db: ReadModelDB) -> dict[str, list[str]]:
            # one pass over the view, not one per filter
            row = db.rows(f"SELECT {lists} FROM runs")[0]
            return {name: row[name] or [] for name in FACETS}

        return self._remembered("facets", read)

    def run(self, given: str) -> tuple[RunReport, str, dict[str, str]]:
        """One run's report, its tree drawn as `lineage report` draws it, and our element id of each
        node.

        Remembered by the run it names (a prefix and the id share one entry) until an event
        touches what it was read from (`RememberedRun`), not only for one log position: after a
        write to another run this page is a lookup. Its audit's position and integrity are the
        current ones either way; it is read again when the chain's verdict changed. A prefix is
        resolved anew at each log position (a new run may make it ambiguous); an id kept is an
        exact id, which always wins, so it needs no query."""
        with self._current() as db:
            integrity = self._chain()
            kept = self._answers.get(("run", given))
            if kept is None:
                run = self._recalled(db, ("resolved run", given), lambda db: resolve_run(db, given))
                kept = self._answers.get(("run", run))
            else:
                run = given
            if kept is not None and _same_findings(kept.integrity, integrity):
                report, svg, ids = kept.answer
                audit = {**report.audit, "position": self._position, "integrity": integrity}
                return replace(report, audit=audit), svg, ids
            report = run_report(db, run, integrity, self._position)
            # drawn once too: a 10,000-node tree takes ~0.5 s to lay out and draw
            ids = {n.node: node_id(0, i) for i, n in enumerate(report.nodes)}
            answer = report, tree_svg(report, 0), ids
            self._answers.put(
                ("run", run),
                RememberedRun(
                    answer, run, report.run.get("task"), run_dependencies(db, report.run), integrity
                ),
            )
            return answer

    def trajectory(
        self, given: str, node: str, file: str | None, page: int | None, line: int | None
    ) -> Timeline:
        """A node's trajectory page: what the log recorded (remembered per log position), then the
        file read outside the lock, shown only while it has the recorded digest."""
        source = self._remembered(
            ("trajectory", given, node), lambda db: trajectory_source(db, given, node)
        )
        return timeline(source, file, page, line)

    def branches(self, given: str) -> dict[str, Any]:
        """`lineage export branch-view RUN`: benchflow's branch view of the trial."""
        return self._remembered(
            ("branches", given), lambda db: branch_view(db, resolve_run(db, given))
        )

    def compare(self, a: str, b: str) -> dict[str, Any]:
        with self._current() as db:
            return diff_document(db, resolve_address(db, a), resolve_address(db, b), self._position)

    def charts(self, group: str | None) -> Charts:
        """The charts page's numbers (`projections/reports/arms/charts.py`), bounded however many
        runs there are."""
        return self._remembered(("charts", group or None), lambda db: charts(db, group))

    def arms(self, given: str, baseline: str | None, every_task: bool) -> dict[str, Any]:
        """`lineage arms RUN[:FORK]` (the flip table) and `lineage arms RUN --stats` (None, with the
        reason, when RUN has no named arms, a FORK is given or the baseline is no arm), as those
        commands read them."""

        def read(db: ReadModelDB) -> dict[str, Any]:
            run, fork = split_run_fork(db, address)
            table = arms_table(db, run, fork, baseline or PARENT)
            found: dict[str, Any] = {"run": run, "fork": fork, "table": table, "stats": None}
            if fork is not None:
                found["stats_error"] = (
                    "the statistics pool every fork of the task: open the run alone"
                )
            else:
                found.update(self._stats_or_reason(db, run, baseline, every_task))
            return found

        with self._current() as db:  # remembered by what `given` names, as run pages are
            address = self._recalled(
                db, ("resolved address", given), lambda db: resolve_address(db, given)
            )
            return self._recalled(db, ("arms", address, baseline, every_task), read)

    def _stats_or_reason(
        self, db: ReadModelDB, run: str, baseline: str | None, every_task: bool
    ) -> dict[str, Any]:
        if not stats.has_named_arms(db, run):
            return {"stats_error": "no fork child of this run was recorded with an arm name"}
        try:
            return {"stats": stats.arm_stats(db, run, baseline, every_task)}
        except LineageError as exc:
            return {"stats_error": exc.message}

    def compare_stats(self, document: dict[str, Any]) -> dict[str, Any]:
        """For a compare of two arms: A's run's arm statistics with A's arm as the baseline, the
        rows of A's and B's arms (B against A: exact McNemar, paired bootstrap, the verdict), as
        `lineage arms A_RUN --stats --baseline A_ARM` prints them; or why there are none."""
        a, b = document["a"], document["b"]
        if not a.get("arm") or not b.get("arm"):
            return {
                "stats": None,
                "stats_error": "statistics compare arms: name two (RUN:FORK/ARM)",
            }

        def read(db: ReadModelDB) -> dict[str, Any]:
            found = self._stats_or_reason(db, a["run"], a["arm"], False)
            table = found.get("stats")
            if table is not None and b["arm"] not in [row["arm"] for row in table.rows]:
                return {
                    "stats": None,
                    "stats_error": f"B's arm {b['arm']!r} is no arm of A's run {a['run']!r}, "
                    f"whose arms are pooled over its task: compare two arms of one experiment",
                }
            if table is not None:
                keep = {a["arm"], b["arm"]}
                table = stats.ArmStats(
                    table.run,
                    table.task,
                    table.runs,
                    table.baseline,
                    [row for row in table.rows if row["arm"] in keep],
                )
            return {**found, "stats": table}

        return self._remembered(("compare-stats", a["run"], a["arm"], b["arm"]), read)

    def rounded(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows of arm statistics as `lineage arms --stats` prints them for people (3 decimals, p to
        3 significant digits)."""
        return [stats.rounded_row(row) for row in rows]

    def audit(self) -> dict[str, Any]:
        return self._remembered(
            "audit", lambda db: audit_report(db, self._chain(), position=self._position)
        )

    def head(self) -> str | None:
        return self._remembered("head", built_from)

    def escape(self, value: Any) -> str:
        return esc(value)

    @property
    def sql_answer_bytes(self) -> int:
        return SQL_ANSWER_BYTES

    def queries_running(self) -> int:
        """Users' queries whose answers are open now."""
        with self._lock:
            return self._reading

    def sql(self, query: str) -> SQLAnswer:
        """`lineage sql`'s check and limits (reads only, the memory cap, the timeout) on a
        connection of its own; its first rows fetched already, so a query that fails or runs past
        its timeout says so before any answer starts. The caller reads and closes it; the web
        adapter cuts it at `SQL_ROW_LIMIT` rows and `SQL_ANSWER_BYTES` bytes."""
        if not query.strip():
            raise InvalidInput("expected an SQL query (q=SELECT ...), found none")
        if not self._turns.acquire(blocking=False):
            raise QueriesBusy(
                f"expected at most {self._at_once} SQL queries at once, found that many running",
                hint=f"ask again in a moment: each ends within its {SQL_TIMEOUT_S:g} s timeout",
            )
        deadline = time.monotonic() + SQL_TIMEOUT_S
        try:
            db, position = self._connection_for_a_query(deadline)
        except BaseException:
            self._turns.release()
            raise
        answer: SQLAnswer | None = None

        def release() -> None:
            try:
                db.close()
            finally:
                with self._lock:
                    self._reading -= 1
                    if answer is not None:
                        self._queries.discard(answer)
                    self._lock.notify_all()
                self._turns.release()

        try:
            shadow_on_demand(db)
            columns, stream = run_reads(db, query, timeout=SQL_TIMEOUT_S, batch_rows=SQL_FETCH_ROWS)
            first = list(itertools.islice(stream, 1))
        except BaseException:
            release()
            raise
        left = deadline - time.monotonic() + GRACE_S
        answer = SQLAnswer(columns, _first_then(first, stream), position, release, left)
        with self._lock:
            self._queries.add(answer)
        return answer

    def _connection_for_a_query(self, deadline: float) -> tuple[ReadModelDB, int]:
        """A connection of its own to the held database, caught up first. When the log moved while
        other queries read it: on it as it stands for `SQL_JOIN_BEHIND_S`, then only once they end
        (they do by their deadline) and it is caught up."""
        with self._lock:
            while self._reading and self._behind():
                now = time.monotonic()
                if self._behind_since is None:
                    self._behind_since = now
                if now - self._behind_since < SQL_JOIN_BEHIND_S:
                    break  # the held database as it stands: its position is in the answer
                if now >= deadline:
                    raise QueriesBusy(
                        "expected the read models to be caught up with the log for this query, "
                        "found other queries still reading them as they were",
                        hint="ask again: they end within their timeout",
                    )
                self._lock.wait(deadline - now)
            if not self._reading and self._behind():
                self._catch_up()
            assert self._db is not None
            connection = self._db.cursor()
            self._reading += 1
            return connection, self._position


def _head_of(log: Any, position: int | None = None) -> Head:
    """The log's head at `position` (its last when None): the position and its link's hash ("" where
    the log holds no link there)."""
    if position is None:
        position = log.max_notification_id() or 0
    return Head(position, (log.chain_hash_at(position) or "") if position else "")


def _same_findings(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(key) == b.get(key) for key in INTEGRITY_FINDINGS)


def run_dependencies(db: ReadModelDB, run: dict[str, Any]) -> frozenset[str]:
    """The runs a run's page is read from: itself, every run of its task (its arms' statistics
    pool them), its continuations (its audit names what supersedes it) and the run it
    continues."""
    rows = db.rows(
        "SELECT run FROM runs WHERE task IS NOT DISTINCT FROM $task OR parent_run = $run "
        "OR run = $run OR run = $parent",
        {"task": run.get("task"), "run": run["run"], "parent": run.get("parent_run")},
    )
    return frozenset(r["run"] for r in rows) | {run["run"]}


def log_change(db: ReadModelDB, after: int) -> LogChange:
    """What the events after position `after` are about (`LogChange`), from the read models'
    `events` table, with each named run's task and parent as they now stand."""
    rows = db.rows(
        "SELECT DISTINCT subject, starts_with(type, 'snapshot.') AS snapshot FROM events "
        "WHERE position > ?",
        [after],
    )
    if any(r["subject"] is None or r["snapshot"] for r in rows):
        return LogChange(True, frozenset(), frozenset(), frozenset())
    named = sorted({r["subject"] for r in rows})
    registered = (
        db.rows("SELECT run, task, parent_run FROM runs WHERE list_contains(?, run)", [named])
        if named
        else []
    )  # the few runs written, not the `runs` view's every row
    return LogChange(
        False,
        frozenset(named),
        frozenset(r["task"] for r in registered),
        frozenset(r["parent_run"] for r in registered if r["parent_run"] is not None),
    )


def _facet(name: str) -> str:
    return "coalesce(outcome, 'pending')" if name == "outcome" else name

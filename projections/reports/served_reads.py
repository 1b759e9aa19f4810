"""What `lineage serve` reads: a private copy of the store's read models held open read-only,
caught up when the log moved, and answers remembered for the log position they were read at. Every
query is one of the commands' own (`run_list`, `report`, `diff`, `audit_report`, `user_sql`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from ...adapters.duckdb_store import ReadModelDB
from ...domain.errors import InvalidInput, LineageError
from ..engine.paging import tracked_position
from ..engine.read_only import held_read_only_models
from ..engine.runner import OpenedStore, ReadSettings
from ..engine.timeparse import parse_moment
from ..engine.user_sql import run_reads
from . import arm_stats as stats
from .arms import PARENT, arms_table, split_run_fork
from .audit.audit_report import audit_report
from .charts import SUMMARY, Charts, charts
from .diff import diff_document
from .report import RunReport, built_from, run_report
from .report_html import STYLE, esc, node_id, tree_svg
from .run_list import PAGE_FILTERS, SORTS, RunPage, page_runs, resolve_address, resolve_run

#: The most rows an SQL answer carries (the page, its CSV and its JSON alike); one more says it was
#: cut.
SQL_ROW_LIMIT = 10_000
#: Seconds a statement may run, as `lineage sql`'s default --timeout.
SQL_TIMEOUT_S = 30.0
#: How many distinct values a filter offers to choose from.
FACET_LIMIT = 200
FACETS = ("task", "agent", "model", "status", "outcome", "skill_mode")
#: How many answers are remembered for the current log position. A view of these read models
#: costs ~10 ms to plan and run even on a few runs (the `runs` view joins six tables), and a run
#: page asks ~30 of them.
REMEMBERED = 512
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

    One connection for the life of the server (a DuckDB open costs ~15 ms, more than a whole
    answer should); requests take turns on it."""

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
        self._lock = threading.Lock()
        self._db: ReadModelDB | None = None
        self._position = -1
        self._integrity: tuple[int, dict[str, Any]] | None = None
        self._memo: OrderedDict[Hashable, Any] = OrderedDict()
        #: Run pages, kept across writes that did not touch what they were read from.
        self._runs: OrderedDict[str, RememberedRun] = OrderedDict()

    @contextmanager
    def _current(self) -> Iterator[ReadModelDB]:
        """The held connection, caught up first if a writer appended since the last request.

        The log's last position is checked before each request (one cheap query); when it moved,
        the copy is caught up on a writable connection and reopened read-only, as `lineage sql`
        does."""
        with self._lock:
            head = self._lineage.log.max_notification_id() or 0
            if self._db is None or head != self._position:
                before = self._position
                self.close_unlocked()
                self._memo.clear()
                if self._copy is None:
                    self._copy = ServedCopy(self._lineage)
                self._db = held_read_only_models(self._copy)
                self._position = tracked_position(self._db)
                self._forget_runs_changed_since(self._db, before)
            yield self._db

    def _forget_runs_changed_since(self, db: ReadModelDB, before: int) -> None:
        """Drop the remembered run pages that the events after `before` may have changed: a
        write to one run leaves every other run's page as it was, and those stay remembered."""
        if not self._runs:
            return
        if before < 0 or before > self._position:  # first open, or a log that went back
            self._runs.clear()
            return
        change = log_change(db, before)
        for run in [run for run, kept in self._runs.items() if not kept.kept_after(change)]:
            del self._runs[run]

    def _remembered(self, key: Hashable, read: Callable[[ReadModelDB], T]) -> T:
        """`read`'s answer at the current log position: read once, then remembered until the log
        moves (the read models are a function of the log prefix), so a repeated page costs a
        lookup. Users' SQL is never remembered (`now()`, `random()`)."""
        with self._current() as db:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
            answer = read(db)
            self._memo[key] = answer
            if len(self._memo) > REMEMBERED:
                self._memo.popitem(last=False)
            return answer

    @property
    def position(self) -> int:
        return self._position

    def _chain(self) -> dict[str, Any]:
        if self._integrity is None or self._integrity[0] != self._position:
            self._integrity = (self._position, self._integrity_of())
        return self._integrity[1]

    def close_unlocked(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def close(self) -> None:
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

        Remembered by run id until an event touches what it was read from (`RememberedRun`), not
        only for one log position: after a write to another run this page is a lookup. Its audit's
        position and integrity are the current ones either way; it is read again when the chain's
        verdict changed. A prefix of a run id is resolved anew at each log position (a new run may
        make it ambiguous), so only exact ids are kept across writes."""
        with self._current() as db:
            integrity = self._chain()
            kept = self._runs.get(given)
            if kept is not None and _same_findings(kept.integrity, integrity):
                self._runs.move_to_end(given)
                report, svg, ids = kept.answer
                audit = {**report.audit, "position": self._position, "integrity": integrity}
                return replace(report, audit=audit), svg, ids
            if ("run", given) in self._memo:  # a prefix, remembered at this position only
                self._memo.move_to_end(("run", given))
                answer: tuple[RunReport, str, dict[str, str]] = self._memo[("run", given)]
                return answer
            run = resolve_run(db, given)
            report = run_report(db, run, integrity, self._position)
            # drawn once too: a 10,000-node tree takes ~0.5 s to lay out and draw
            ids = {n.node: node_id(0, i) for i, n in enumerate(report.nodes)}
            answer = report, tree_svg(report, 0), ids
            if run != given:
                self._memo[("run", given)] = answer
                if len(self._memo) > REMEMBERED:
                    self._memo.popitem(last=False)
                return answer
            self._runs[run] = RememberedRun(
                answer, run, report.run.get("task"), run_dependencies(db, report.run), integrity
            )
            if len(self._runs) > REMEMBERED:
                self._runs.popitem(last=False)
            return answer

    def compare(self, a: str, b: str) -> dict[str, Any]:
        with self._current() as db:
            return diff_document(db, resolve_address(db, a), resolve_address(db, b), self._position)

    def charts(self, group: str | None) -> Charts:
        """The charts page's numbers (`projections/reports/charts.py`), bounded however many runs
        there are."""
        return self._remembered(("charts", group or None), lambda db: charts(db, group))

    def arms(self, given: str, baseline: str | None, every_task: bool) -> dict[str, Any]:
        """`lineage arms RUN[:FORK]` (the flip table) and `lineage arms RUN --stats` (None, with the
        reason, when RUN has no named arms, a FORK is given or the baseline is no arm), as those
        commands read them."""

        def read(db: ReadModelDB) -> dict[str, Any]:
            run, fork = split_run_fork(db, resolve_address(db, given))
            table = arms_table(db, run, fork, baseline or PARENT)
            found: dict[str, Any] = {"run": run, "fork": fork, "table": table, "stats": None}
            if fork is not None:
                found["stats_error"] = (
                    "the statistics pool every fork of the task: open the run alone"
                )
            else:
                found.update(self._stats_or_reason(db, run, baseline, every_task))
            return found

        return self._remembered(("arms", given, baseline, every_task), read)

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

    def sql(self, query: str) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        """`lineage sql`'s check and limits (reads only, the memory cap, the timeout), at most
        `SQL_ROW_LIMIT` rows; the flag says whether there were more."""
        if not query.strip():
            raise InvalidInput("expected an SQL query (q=SELECT ...), found none")
        with self._current() as db:
            columns, stream = run_reads(db, query, timeout=SQL_TIMEOUT_S)
            rows: list[tuple[Any, ...]] = []
            for row in stream:
                if len(rows) == SQL_ROW_LIMIT:
                    return columns, rows, True
                rows.append(row)
            return columns, rows, False


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

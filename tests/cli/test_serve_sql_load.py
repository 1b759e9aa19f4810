"""`lineage serve`'s users' SQL under load (issue #33, items 4 and 5): one slow query must not hold
up the pages, and large answers at once must not grow the server without bound. Times here are
bounded waits and pacing, never a performance figure: the slow-query tests are about ordering (a
page answered while the query still runs), the memory test about the server's peak resident size."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.settings import Settings
from tests.conftest import EXAMPLES, Cli
from tests.serve_attack import (
    RUN,
    cpu_seconds,
    fetch,
    in_background,
    pr_layout_store,
    proc_status,
    served,
    wait_for,
)
from tests.serve_process import serving

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return pr_layout_store(tmp_path)


#: Counts to 10**12: DuckDB works at it until the timeout stops it.
SLOW_SQL = "SELECT count(*) AS n FROM range(1000000000000)"


# --- 4. one slow query must not hold up the pages -------------------------------------------------


def test_a_slow_query_does_not_hold_up_the_pages(home: Path, tmp_path: Path) -> None:
    """The query holds the server's read lock for its whole run: every page waited ~29 s. Here
    every page must answer while the query is still running."""
    with serving(home, env={"TMPDIR": str(tmp_path)}) as (process, base):
        before = cpu_seconds(process.pid)
        slow, _ = in_background(lambda: fetch(f"{base}/api/sql?q={quote(SLOW_SQL)}"))
        # the server is at work on it (DuckDB counting burns CPU), not still parsing the request
        wait_for(lambda: cpu_seconds(process.pid) - before > 0.5, "the server to run the query")
        for path in (
            "/runs",
            "/api/runs",
            f"/runs/{RUN}",
            f"/api/runs/{RUN}",
            "/audit",
            "/charts",
            "/api/sql?q=SELECT+41%2B1+AS+n",
            "/sql?q=SELECT+1",
        ):
            status, body, _ = fetch(base + path, timeout=60)
            assert status == 200, (path, body[:500])
            assert slow.is_alive(), f"the slow query had ended before {path} answered: it waited"


def test_a_write_during_a_slow_query_reaches_the_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page after a write answers while a query still runs on the read models as they were;
    the write shows once the query is gone, and a query asked after it sees it too."""
    from rollout_lineage.projections.reports import served_reads

    monkeypatch.setattr(served_reads, "SQL_TIMEOUT_S", 3.0)
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer,
        served(writer) as (client, reads),
    ):
        client.get("/api/runs")
        slow, answer = in_background(lambda: client.get("/api/sql", params={"q": SLOW_SQL}))
        wait_for(lambda: reads.queries_running() > 0, "the query to start")
        writer.record([f.RunRegistered(run="late/during", task="late")])
        assert client.get("/api/runs").status_code == 200
        assert client.get(f"/runs/{RUN}").status_code == 200
        assert slow.is_alive(), "the query had ended before the pages answered: they waited"
        slow.join(timeout=60)
        assert answer[0].status_code == 503 and "timeout" in answer[0].json()["error"]
        runs = [r["run"] for r in client.get("/api/runs", params={"task": "late"}).json()["runs"]]
        assert runs == ["late/during"]
        sql = client.get("/api/sql", params={"q": "SELECT run FROM runs WHERE task = 'late'"})
        assert sql.json()["rows"] == [{"run": "late/during"}]


def test_queries_past_the_limit_at_once_are_refused_not_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query waiting its turn holds one of the server's worker threads: enough of them would
    hold up the pages again. Past `SQL_AT_ONCE` a query is refused at once (503, saying why)."""
    from rollout_lineage.projections.reports import served_reads

    monkeypatch.setattr(served_reads, "SQL_TIMEOUT_S", 3.0)
    monkeypatch.setattr(served_reads, "SQL_AT_ONCE", 1)
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab"), may_create=False) as opened,
        served(opened) as (client, reads),
    ):
        slow, _ = in_background(lambda: client.get("/api/sql", params={"q": SLOW_SQL}))
        wait_for(lambda: reads.queries_running() > 0, "the query to start")
        refused = client.get("/api/sql", params={"q": "SELECT 1 AS n"})
        assert refused.status_code == 503, refused.text
        assert "at once" in refused.json()["error"] and "retry-after" in refused.headers
        assert client.get("/sql", params={"q": "SELECT 1"}).status_code == 503
        assert client.get("/api/runs").status_code == 200
        assert slow.is_alive()
        slow.join(timeout=60)
        assert client.get("/api/sql", params={"q": "SELECT 1 AS n"}).json()["rows"] == [{"n": 1}]


# --- 5. an answer is streamed, capped per request, and the server's memory bounded ----------------


def test_large_answers_at_once_leave_the_server_bounded(home: Path, tmp_path: Path) -> None:
    """Three queries of 10,000 rows of 20 kB each (200 MB an answer) at once: the answer was held
    whole and JSON-encoded (three copies), and the memory bound was re-armed per chunk above what
    the server already held (the server grew by 918 MiB, and answered two of the three with 500).
    Its peak resident size must grow by less than 256 MiB (DuckDB itself holds a vector of 2,048
    rows, 40 MB here, per query), and each answer is valid JSON that says where and why it was
    cut."""
    query = quote("SELECT i, repeat('x', 20000) AS s FROM range(10000) t(i)")
    with serving(home, env={"TMPDIR": str(tmp_path)}) as (process, base):
        assert fetch(f"{base}/api/sql?q={query}")[0] == 200  # warmed: DuckDB's first chunks
        resident = proc_status(process.pid)["VmRSS"]
        answers = [in_background(lambda: fetch(f"{base}/api/sql?q={query}")) for _ in range(3)]
        for thread, _ in answers:
            thread.join(timeout=300)
        peak = proc_status(process.pid)["VmHWM"]
        grown = peak - resident
        for _, (result,) in answers:
            status, body, _headers = result
            assert status == 200
            document = json.loads(body)
            assert document["truncated"] is True and "bytes" in document["cut"]
            assert len(body) <= document["byte_limit"] + 4096
            assert [row["i"] for row in document["rows"]] == list(range(len(document["rows"])))
        assert grown < 256 * 2**20, f"the server grew by {grown / 2**20:.0f} MiB"


def test_each_answer_is_cut_at_its_byte_cap_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rollout_lineage.projections.reports import served_reads

    monkeypatch.setattr(served_reads, "SQL_ANSWER_BYTES", 2**20)
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab"), may_create=False) as opened,
        served(opened) as (client, _reads),
    ):
        wide = "SELECT i, repeat('y', 1000) AS s FROM range(5000) t(i)"
        answer = client.get("/api/sql", params={"q": wide})
        document = answer.json()
        assert answer.status_code == 200 and document["truncated"] is True
        assert document["byte_limit"] == 2**20 and len(answer.content) <= 2**20 + 4096
        assert 500 < len(document["rows"]) < 5000 and "bytes" in document["cut"]
        csv = client.get("/api/sql", params={"q": wide, "format": "csv"})
        assert csv.headers["x-lineage-truncated"] == "true" and len(csv.content) <= 2**20
        lines = csv.text.splitlines()
        assert lines[0] == "i,s" and lines[-1].startswith(f"{len(lines) - 2},yyy")
        page = client.get("/sql", params={"q": wide})
        assert page.status_code == 200 and "cut" in page.text and len(page.content) < 2 * 2**20
        # one value larger than the whole cap: no row, and why
        one = client.get("/api/sql", params={"q": "SELECT repeat('z', 3000000) AS s"}).json()
        assert one["rows"] == [] and one["truncated"] is True and "bytes" in one["cut"]
        # under the cap nothing changes
        small = client.get("/api/sql", params={"q": "SELECT 41 + 1 AS n"}).json()
        assert small["rows"] == [{"n": 42}] and small["truncated"] is False and small["cut"] is None
        many = client.get("/api/sql", params={"q": "SELECT * FROM range(20000)"}).json()
        assert len(many["rows"]) == 10_000 and many["truncated"] is True
        assert "rows" in many["cut"]


def test_a_page_short_of_memory_is_503_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While queries run the whole process works under their memory bound, pages too: a page that
    finds no memory is told as such (503), never a 500 with a traceback."""
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab"), may_create=False) as opened,
        served(opened) as (client, reads),
    ):

        def no_memory(*_args: object) -> None:
            raise MemoryError

        monkeypatch.setattr(reads, "facets", no_memory)
        monkeypatch.setattr(reads, "audit", no_memory)
        page = client.get("/runs")
        assert page.status_code == 503 and "memory" in page.text
        api = client.get("/api/audit")
        assert api.status_code == 503 and "memory" in api.json()["error"]


def test_the_sql_page_shows_a_bounded_part_of_a_large_answer(tmp_path: Path) -> None:
    """Escaping makes `<` four bytes: 10,000 rows of 3,000 of them were a 120 MB page (and more
    while it was made). The page shows what fits SQL_PAGE_BYTES of escaped cells, says it was
    cut, and links the downloads."""
    from rollout_lineage.adapters.web.app import SQL_PAGE_BYTES

    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab"), may_create=False) as opened,
        served(opened) as (client, _reads),
    ):
        page = client.get("/sql", params={"q": "SELECT repeat('<', 3000) AS s FROM range(10000)"})
        assert page.status_code == 200
        assert SQL_PAGE_BYTES // 2 < len(page.content) < SQL_PAGE_BYTES + 64 * 1024
        assert "cut: the answer reached its cap of" in page.text and 'class="csv"' in page.text
        assert "<<" not in page.text


def test_an_answer_read_from_other_threads_than_the_one_that_asked(tmp_path: Path) -> None:
    """The server fetches an answer's rows from whichever worker thread sends the next piece. A
    thread's first call into DuckDB warms its error path with a statement of its own, which, run
    on the answer's connection, ended the result being read ("No open result set", mid-answer)."""
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab"), may_create=False) as opened,
        served(opened) as (_client, reads),
    ):
        answer = reads.sql("SELECT i FROM range(5000) t(i)")
        rows: list[Any] = []
        for _ in range(3):  # three fresh threads, each reading a part of it
            thread, out = in_background(lambda: list(itertools.islice(answer, 1000)))
            thread.join(timeout=60)
            assert isinstance(out[0], list), out[0]
            rows += out[0]
        rest, _ = in_background(lambda: list(answer))
        rest.join(timeout=60)
        assert [i for (i,) in rows] == list(range(3000))
        assert reads.queries_running() == 0

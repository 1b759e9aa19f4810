"""`lineage serve` over HTTP, as a browser or a script would use it, on a store built from
examples/.

Written as an attacker would: a run id and a test name holding `<script>` must stay text, a writing
SQL statement must be refused, a POST must find no route, a wide bind must need the token, and a
page elsewhere must not reach a loopback server through a rebound name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from rollout_lineage.adapters.web.app import CSP, build_app
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.main import cli
from rollout_lineage.cli.serve_cmds import ChainChecks, allowed_hosts
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.reports.served_reads import ServedReads
from rollout_lineage.settings import Settings
from tests.conftest import EXAMPLES, Cli
from tests.scenarios import ABLATE_RUN, ENV_READY_REF

HOSTILE_RUN = "evil/<script>document.title='pwned'</script>"
HOSTILE_TEST = "tests/t.py::<script>alert(1)</script>"
#: Shown as `evilexe.png` if the right-to-left override were obeyed.
REVERSED_RUN = "rlo/evil\u202egnp.exe"
#: A browser resolves `/runs/dots/../x` to `/runs/x`: another run's page.
DOTTED_RUN = "dots/../ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
TOKEN = "s3cret-token-0123456789"


def record_hostile(lineage: Lineage) -> None:
    lineage.record(
        [
            f.RunRegistered(run=HOSTILE_RUN, task="<img src=x onerror=alert(1)>", agent="a"),
            f.RunRegistered(run=REVERSED_RUN, task="t"),
            f.RunRegistered(run=DOTTED_RUN, task="dotted"),
            f.ForkOpened(
                run=HOSTILE_RUN,
                fork="f",
                node="root",
                children=(
                    f.ForkChild(index=0, node="<b>n1</b>", arm="<i>arm</i>"),
                    f.ForkChild(index=1, node="n2", arm="plain"),
                ),
            ),
            f.ChildScored(
                run=HOSTILE_RUN, fork="f", index=0, reward=1.0, tests={HOSTILE_TEST: "passed"}
            ),
            f.ChildScored(
                run=HOSTILE_RUN, fork="f", index=1, reward=0.0, tests={HOSTILE_TEST: "failed"}
            ),
        ]
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("serve") / "home"
    Cli(home)("import", str(EXAMPLES))
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as lineage:
        record_hostile(lineage)
    return home


@pytest.fixture
def opened(store: Path) -> Iterator[Lineage]:
    with Lineage(
        Settings.from_env({}, home=store, actor="tester@lab"), may_create=False
    ) as lineage:
        yield lineage


@contextmanager
def client_for(
    lineage: Lineage, token: str | None = None, host: str = "127.0.0.1"
) -> Iterator[TestClient]:
    """A client of the app as `lineage serve --host HOST` builds it; the read models closed
    after."""
    reads = ServedReads(lineage, ChainChecks(lineage))
    app = build_app(reads, token=token, allowed_hosts=allowed_hosts(host))
    try:
        with TestClient(app, base_url=f"http://{host}:8321") as client:
            yield client
    finally:
        reads.close()


@pytest.fixture
def client(opened: Lineage) -> Iterator[TestClient]:
    with client_for(opened) as c:
        yield c


def all_runs(client: TestClient, **params: str) -> list[dict]:
    answer = client.get("/api/runs", params=params).json()
    return answer["runs"]


# --- the JSON API ---------------------------------------------------------------------------------


def test_runs_filter_by_each_field_and_agree_with_sql(client: TestClient) -> None:
    everything = client.get("/api/sql", params={"q": "SELECT run, task, agent FROM runs"}).json()
    assert len(everything["rows"]) >= 7
    task = next(r["task"] for r in everything["rows"] if r["run"] == ABLATE_RUN)
    expected = sorted(r["run"] for r in everything["rows"] if r["task"] == task)
    assert sorted(r["run"] for r in all_runs(client, task=task)) == expected
    assert len(expected) < len(everything["rows"])  # the filter did filter
    assert all(r["outcome"] == "pending" for r in all_runs(client, outcome="pending"))
    assert [r["run"] for r in all_runs(client, q="<SCRIPT>")] == [HOSTILE_RUN]
    assert all_runs(client, task="no such task") == []


def test_runs_page_and_sort_in_sql(client: TestClient) -> None:
    whole = client.get("/api/runs", params={"sort": "run"}).json()
    names = [r["run"] for r in whole["runs"]]
    assert names == sorted(names)
    assert whole["total"] == len(names) and whole["pages"] == 1 and whole["page_size"] == 50
    descending = [r["run"] for r in all_runs(client, sort="-run")]
    assert descending == sorted(names, reverse=True)
    past_the_end = client.get("/api/runs", params={"page": "2"}).json()
    assert past_the_end["runs"] == [] and past_the_end["total"] == whole["total"]


def test_paging_cuts_in_sql(tmp_path: Path) -> None:
    """50 per page: 60 more runs make two pages, the second holding the rest, none twice."""
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as opened,
        client_for(opened) as client,
    ):
        before = client.get("/api/runs").json()["total"]
        opened.record([f.RunRegistered(run=f"bulk/run-{i:03}", task="bulk") for i in range(60)])
        first = client.get("/api/runs", params={"task": "bulk", "sort": "run"}).json()
        second = client.get("/api/runs", params={"task": "bulk", "sort": "run", "page": "2"}).json()
        assert (first["total"], first["pages"], len(first["runs"]), len(second["runs"])) == (
            60,
            2,
            50,
            10,
        )
        seen = [r["run"] for r in first["runs"] + second["runs"]]
        assert seen == [f"bulk/run-{i:03}" for i in range(60)]
        assert client.get("/api/runs").json()["total"] == before + 60  # live: no restart


def test_bad_sort_and_page_are_400_naming_what_was_expected(client: TestClient) -> None:
    answer = client.get("/api/runs", params={"sort": "reward; DROP TABLE runs"})
    assert answer.status_code == 400 and "expected" in answer.json()["error"]
    assert client.get("/api/runs", params={"page": "0"}).status_code == 400
    for page in ("x", "²", "-1", "1e3", "9" * 30):
        assert client.get("/api/runs", params={"page": page}).status_code == 400, page
    assert client.get("/api/runs", params={"since": "yesterday"}).status_code == 400


def test_one_run_by_an_id_with_slashes(client: TestClient) -> None:
    answer = client.get(f"/api/runs/{ABLATE_RUN}")
    assert answer.status_code == 200
    document = answer.json()
    assert document["run"]["run"] == ABLATE_RUN
    assert {n["node"] for n in document["nodes"]} >= {"root", "n2", "n3"}
    assert document["audit"]["verdict"]
    missing = client.get("/api/runs/no/such/run")
    assert missing.status_code == 404 and "no/such/run" in missing.json()["error"]


def test_sql_reads_and_refuses_writes_as_lineage_sql_does(client: TestClient) -> None:
    answer = client.get("/api/sql", params={"q": "SELECT 41 + 1 AS answer"})
    assert answer.json()["rows"] == [{"answer": 42}] and answer.json()["truncated"] is False
    for statement in (
        "DELETE FROM runs",
        "DROP VIEW runs",
        "CREATE TABLE x AS SELECT 1",
        "SET threads=4",
    ):
        refused = client.get("/api/sql", params={"q": statement})
        assert refused.status_code == 400, statement
        assert refused.json()["error"].startswith("expected read-only statements"), statement
    assert (
        client.get("/api/sql", params={"q": "SELECT count(*) AS n FROM runs"}).json()["rows"][0][
            "n"
        ]
        > 0
    )
    page = client.get("/sql", params={"q": "DELETE FROM runs"})
    assert page.status_code == 400 and "expected read-only statements" in page.text


def test_sql_csv_download_and_row_limit(client: TestClient) -> None:
    csv_answer = client.get(
        "/api/sql", params={"q": "SELECT run FROM runs ORDER BY run", "format": "csv"}
    )
    lines = csv_answer.text.splitlines()
    assert lines[0] == "run" and csv_answer.headers["content-type"].startswith("text/csv")
    assert HOSTILE_RUN in lines
    many = client.get("/api/sql", params={"q": "SELECT * FROM range(20000)"}).json()
    assert len(many["rows"]) == 10_000 and many["truncated"] is True


def test_sql_timeout_is_enforced(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from rollout_lineage.projections.reports import served_reads

    monkeypatch.setattr(served_reads, "SQL_TIMEOUT_S", 0.2)
    slow = client.get("/api/sql", params={"q": "SELECT count(*) FROM range(10000000000)"})
    assert slow.status_code == 503 and "timeout" in slow.json()["error"].lower()


# --- safe by default ------------------------------------------------------------------------------


def test_no_method_but_get_exists(client: TestClient) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/api/runs", "/api/sql?q=SELECT+1", "/runs", "/nowhere", "/static/style.css"):
            answer = client.request(method, path)
            assert answer.status_code == 405, (method, path)
            assert answer.headers["allow"] == "GET, HEAD"


def test_every_answer_carries_the_csp(client: TestClient) -> None:
    for path in (
        "/runs",
        f"/runs/{ABLATE_RUN}",
        "/api/runs",
        "/sql",
        "/static/style.css",
        "/nowhere",
        "/charts",
        "/api/charts",
        f"/arms/{ABLATE_RUN}",
        "/charts?group=nope",
    ):
        answer = client.get(path)
        assert answer.headers["content-security-policy"] == CSP, path
    assert "default-src 'self'" in CSP and "script-src 'none'" in CSP


def test_pages_fetch_nothing_from_elsewhere(client: TestClient) -> None:
    for path in (
        "/runs",
        f"/runs/{ABLATE_RUN}",
        "/sql?q=SELECT+1",
        "/audit",
        "/api",
        "/compare",
        "/charts",
        f"/arms/{ABLATE_RUN}",
    ):
        html = client.get(path).text
        assert "<script" not in html.lower(), path
        for link in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert link.startswith(("/", "?", "#")) and not link.startswith("//"), (path, link)
        for asset in re.findall(r'<link rel="stylesheet" href="([^"]+)"', html):
            assert client.get(asset).status_code == 200, asset


def test_hostile_run_id_and_test_name_stay_text(client: TestClient) -> None:
    runs = client.get("/runs", params={"q": "evil/"}).text
    assert "<script>document.title" not in runs and "<img src=x" not in runs
    assert "&lt;script&gt;document.title=" in runs
    run = client.get("/runs/" + HOSTILE_RUN.replace("<", "%3C").replace(">", "%3E"))
    assert run.status_code == 200
    assert (
        "<script>" not in run.text and "<b>n1</b>" not in run.text and "<i>arm</i>" not in run.text
    )
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in run.text  # the test's name, as text
    api = client.get("/api/runs/" + HOSTILE_RUN.replace("<", "%3C").replace(">", "%3E")).json()
    assert api["run"]["run"] == HOSTILE_RUN
    diff = client.get(
        "/compare", params={"a": f"{HOSTILE_RUN}:<b>n1</b>", "b": f"{HOSTILE_RUN}:n2"}
    )
    assert diff.status_code == 200 and "<script>" not in diff.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in diff.text


def test_invisible_characters_are_shown_not_obeyed(client: TestClient) -> None:
    page = client.get("/runs", params={"q": "rlo/"}).text
    assert "\u202e" not in page and "rlo/evil\\u202egnp.exe" in page
    assert "\u202e" not in client.get("/runs/rlo/evil%E2%80%AEgnp.exe").text
    assert client.get("/api/runs/rlo/evil%E2%80%AEgnp.exe").json()["run"]["run"] == REVERSED_RUN


def test_a_run_id_with_dot_segments_links_to_itself(client: TestClient) -> None:
    page = client.get("/runs", params={"task": "dotted"}).text
    (href,) = re.findall(r'class="run-link" href="([^"]+)"', page)
    assert "/../" not in href and "%2F..%2F" in href
    # its own page, not the run the dots lead to
    assert client.get(href).text.count(">dotted<") == 1
    assert client.get(href.replace("/runs/", "/api/runs/")).json()["run"]["run"] == DOTTED_RUN


def test_a_misspelt_filter_is_refused_not_ignored(client: TestClient) -> None:
    answer = client.get("/api/runs", params={"agnet": "openhands"})
    assert answer.status_code == 400 and "agnet" in answer.json()["error"]
    assert "agent" in answer.json()["error"]
    assert client.get("/runs", params={"agnet": "x"}).status_code == 400


def test_a_wide_bind_needs_the_token(opened: Lineage) -> None:
    with client_for(opened, token=TOKEN, host="0.0.0.0") as client:
        for path in ("/runs", "/api/runs", "/api/sql?q=SELECT+1", "/static/style.css"):
            assert client.get(path).status_code == 401, path
        assert client.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert (
            client.get("/api/runs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        )
        visit = client.get("/runs", params={"token": TOKEN, "q": "csv"}, follow_redirects=False)
        assert visit.status_code == 303 and visit.headers["location"] == "/runs?q=csv"
        assert "httponly" in visit.headers["set-cookie"].lower()
        assert client.get(visit.headers["location"]).status_code == 200  # with the cookie alone
        assert client.get("/api/runs").status_code == 200  # the cookie the visit left
        client.cookies.clear()
        assert client.get("/api/runs").status_code == 401


def test_serve_refuses_a_wide_bind_without_a_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--home", str(tmp_path), "serve", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "expected --token" in result.output and "0.0.0.0" in result.output
    short = CliRunner().invoke(
        cli, ["--home", str(tmp_path), "serve", "--host", "::", "--token", "x"]
    )
    assert short.exit_code == 2 and "at least 16" in short.output


def test_a_taken_port_is_a_usage_error_naming_it(store: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = CliRunner().invoke(cli, ["--home", str(store), "serve", "--port", port])
    assert result.exit_code == 2, result.output
    assert f"expected to listen on 127.0.0.1 port {port}" in result.output
    bad = CliRunner().invoke(
        cli, ["--home", str(store), "serve", "--host", "no such host", "--token", TOKEN]
    )
    assert bad.exit_code == 2 and "no such host" in bad.output


def test_a_rebound_name_cannot_reach_a_loopback_server(client: TestClient) -> None:
    answer = client.get("/api/runs", headers={"Host": "attacker.example:8321"})
    assert answer.status_code == 400
    assert client.get("/api/runs", headers={"Host": "localhost:8321"}).status_code == 200


# --- pages ----------------------------------------------------------------------------------------


def test_runs_page_filters_sorts_and_links_each_run(client: TestClient) -> None:
    page = client.get("/runs", params={"q": "csv-dedupe", "sort": "run"}).text
    linked = re.findall(r'class="run-link" href="/runs/([^"]+)"', page)
    assert linked and all("csv-dedupe" in run for run in linked)
    assert linked == sorted(linked)
    assert f"/runs/{ABLATE_RUN}" in page


def test_run_page_draws_the_tree_and_links_findings_to_nodes(client: TestClient) -> None:
    page = client.get(f"/runs/{ABLATE_RUN}").text
    assert '<svg class="tree"' in page and 'data-node="n2"' in page
    assert "test_keeps_order" in page and 'class="flip"' in page
    node_ids = set(re.findall(r'<g class="node[^"]*" id="([^"]+)"', page))
    for target in re.findall(r'<li class="finding[^"]*">.*?href="#([^"]+)"', page):
        assert target in node_ids
    assert 'action="/compare"' in page


def test_compare_two_arms(client: TestClient) -> None:
    page = client.get("/compare", params={"a": f"{ABLATE_RUN}:n2", "b": f"{ABLATE_RUN}:n3"}).text
    assert "Common ancestor" in page and "test_keeps_order" in page
    api = client.get(
        "/api/compare", params={"a": f"{ABLATE_RUN}:n2", "b": f"{ABLATE_RUN}:n3"}
    ).json()
    assert api["common_ancestor"] and api["a"]["node"] == "n2"
    bad = client.get("/api/compare", params={"a": f"{ABLATE_RUN}:nope", "b": f"{ABLATE_RUN}:n3"})
    assert bad.status_code in (400, 404) and "nope" in bad.json()["error"]


def test_audit_page_shows_the_verdict_of_the_cli(client: TestClient, store: Path) -> None:
    cli_answer = CliRunner().invoke(cli, ["--home", str(store), "audit", "--format", "json"])
    verdict = json.loads(cli_answer.stdout)["verdict"]
    assert client.get("/api/audit").json()["verdict"] == verdict
    assert f"verdict: {verdict}" in client.get("/audit").text


def test_the_api_page_documents_every_route(client: TestClient) -> None:
    page = client.get("/api").text
    routes = ("/api/runs?", "/api/runs/RUN", "/api/sql?q=", "/api/compare?", "/api/audit")
    for route in (*routes, "/api/arms/RUN", "/api/charts?group="):
        assert route in page, route


def test_new_events_show_without_a_restart(tmp_path: Path) -> None:
    """Answers are remembered per log position: a write must reach the very next request of each
    kind."""
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer,
        client_for(writer) as client,
    ):
        assert client.get("/api/runs/late/run").status_code == 404
        runs_page = client.get("/runs").text
        facets = client.get("/runs").text
        assert "late/run" not in runs_page and ">late-task<" not in facets
        writer.record([f.RunRegistered(run="late/run", task="late-task")])
        assert client.get("/api/runs/late/run").json()["run"]["task"] == "late-task"
        page = client.get("/runs").text
        assert "late/run" in page and ">late-task<" in page  # the row and the task filter's choice
        sql = client.get(
            "/api/sql", params={"q": "SELECT count(*) AS n FROM runs WHERE run = 'late/run'"}
        )
        assert sql.json()["rows"] == [{"n": 1}]


def test_a_log_rewritten_under_a_running_server_is_not_shown_intact(tmp_path: Path) -> None:
    """The chain is walked in full once; after that, the head that walk ended at must still be in
    the log."""
    import sqlite3

    from rollout_lineage.adapters.store.event_store import CHAIN_TABLE

    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer,
        client_for(writer) as client,
    ):
        first = client.get("/api/audit").json()
        assert first["integrity"]["intact"] is True
        walked = first["integrity"]["events"]
        writer.record([f.RunRegistered(run="late/run", task="late-task")])
        with sqlite3.connect(home / "events.sqlite") as db:
            db.execute(
                f"UPDATE {CHAIN_TABLE} SET chain_hash = ? WHERE position = ?",
                ("sha256:" + "0" * 64, walked),
            )
        answer = client.get("/api/audit")
        assert answer.status_code == 503, answer.text
        assert "hash chain is broken" in answer.json()["error"]
        page = client.get(f"/runs/{ABLATE_RUN}")
        assert page.status_code == 503 and "hash chain is broken" in page.text


def test_serves_a_server_store_live(store_url: str, tmp_path: Path) -> None:
    """The same on the SQLite file and on PostgreSQL, whose read models live in the cache (no file
    times)."""
    home = tmp_path / "home"
    Cli(home, store=store_url)("import", str(EXAMPLES / "pr-layout"))
    settings = Settings.from_env({}, store=store_url, home=home, actor="tester@lab")
    with Lineage(settings) as writer, client_for(writer) as client:
        before = client.get("/api/runs").json()["total"]
        assert client.get(f"/runs/{ABLATE_RUN}").status_code == 200
        writer.record([f.RunRegistered(run="late/run", task="late-task")])
        assert client.get("/api/runs").json()["total"] == before + 1
        assert client.get("/api/runs/late/run").json()["run"]["task"] == "late-task"


def test_the_chain_walk_started_at_start_is_the_one_pages_show(opened: Lineage) -> None:
    """`lineage serve` walks the chain in the background from the start; a page asking meanwhile
    waits for that walk (one at a time) and shows what `lineage verify` shows."""
    checks = ChainChecks(opened)
    walking = checks.start()
    # waits for the background walk, or walks first and the background one finds it done
    during = checks()
    walking.join(timeout=120)
    assert not walking.is_alive()
    expected = opened.verify().summary()
    assert during == expected and checks() == expected and expected["intact"] is True


def _fresh_page(lineage: Lineage, path: str) -> str:
    """`path` as a server started now renders it (nothing remembered)."""
    with client_for(lineage) as fresh:
        return fresh.get(path).text


def test_a_write_to_one_run_shows_on_its_page_at_once(tmp_path: Path) -> None:
    """Run pages are remembered across writes to other runs; a write to the run itself must reach
    its very next page, HTML and JSON alike."""
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    with (
        Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer,
        client_for(writer) as client,
    ):
        writer.record([f.RunRegistered(run="late/a", task="late-task")])
        assert "late-node" not in client.get("/runs/late/a").text
        client.get(f"/runs/{ABLATE_RUN}")
        writer.record(
            [
                f.ForkOpened(
                    run="late/a",
                    fork="f",
                    node="root",
                    children=(f.ForkChild(index=0, node="late-node", arm="late-arm"),),
                )
            ]
        )
        page = client.get("/runs/late/a")
        assert page.status_code == 200 and 'data-node="late-node"' in page.text
        assert "late-node" in {n["node"] for n in client.get("/api/runs/late/a").json()["nodes"]}
        assert page.text == _fresh_page(writer, "/runs/late/a")


def test_a_write_to_another_run_leaves_a_run_page_remembered_and_exact(tmp_path: Path) -> None:
    """B's page after a write to A is the one read before it (not read again), equal to what a
    fresh server renders, with the log position and the audit's integrity of now; a write to a run
    of B's task (its arms' statistics pool them) or a snapshot fact is read again."""
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    path = f"/runs/{ABLATE_RUN}"
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer:
        reads = ServedReads(writer, ChainChecks(writer))
        app = build_app(reads, token=None, allowed_hosts=allowed_hosts("127.0.0.1"))
        try:
            with TestClient(app, base_url="http://127.0.0.1:8321") as client:
                assert client.get(path).status_code == 200
                before, _svg, _ids = reads.run(ABLATE_RUN)
                writer.record([f.RunRegistered(run="late/a", task="late-task")])
                page = client.get(path)
                after, _svg, _ids = reads.run(ABLATE_RUN)
                assert after.nodes is before.nodes and after.arms is before.arms  # from memory
                assert f"Log position {writer.position()}." in page.text
                assert page.text == _fresh_page(writer, path)
                assert client.get(f"/api/runs/{ABLATE_RUN}").json() == _fresh_api(
                    writer, ABLATE_RUN
                )
                assert after.audit["position"] == reads.position == writer.position()
                assert after.audit["integrity"] == writer.verify().summary()

                writer.record([f.RunRegistered(run="late/same-task", task=before.run["task"])])
                again, _svg, _ids = reads.run(ABLATE_RUN)
                assert again.nodes is not before.nodes  # read again: its task's pool changed
                assert client.get(path).text == _fresh_page(writer, path)
                writer.record([f.SnapshotDiscarded(ref=ENV_READY_REF)])
                last, _svg, _ids = reads.run(ABLATE_RUN)
                assert last.nodes is not again.nodes  # a snapshot it presents: read again
                assert client.get(path).text == _fresh_page(writer, path)
        finally:
            reads.close()


def _fresh_api(lineage: Lineage, run: str) -> dict:
    with client_for(lineage) as fresh:
        answer: dict = fresh.get(f"/api/runs/{run}").json()
        return answer

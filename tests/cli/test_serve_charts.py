"""`lineage serve`'s charts and arm statistics over HTTP: the numbers are `lineage arms --stats`'s,
read back from the CLI on the same store (never written into the test), the grouping column is
checked against the `runs` view, every cap says so on the page, and a hostile task or arm name stays
text in the SVG.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from rollout_lineage.adapters.web.app import build_app
from rollout_lineage.bootstrap import Lineage
from rollout_lineage.cli.serve_cmds import ChainChecks, allowed_hosts
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.reports.arms import charts as charts_module
from rollout_lineage.projections.reports.served_reads import ServedReads
from rollout_lineage.settings import Settings
from tests.cli.test_arm_stats import record_trials
from tests.conftest import Cli
from tests.html_page import Page

WITH = [1.0, 0.5, 1.0, 0.0, 1.0, 0.25, 1.0, 1.0]
WITHOUT = [0.0, 0.5, 1.0, 0.0, 0.0, 0.75, 1.0, 0.0]
HOSTILE_TASK = "<script>alert('task')</script>"
HOSTILE_ARM = "<img src=x onerror=alert(1)>"
SUMMARY = charts_module.SUMMARY


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tasks of 8 paired trials (with-skill / no-skill), and a task and an arm named as an
    attack."""
    home = tmp_path_factory.mktemp("charts") / "home"
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as lineage:
        record_trials(lineage, "csv-dedupe", {"no-skill": WITHOUT, "with-skill": WITH})
        record_trials(lineage, "log-parse", {"no-skill": WITH[::-1], "with-skill": WITHOUT[::-1]})
        record_trials(
            lineage, HOSTILE_TASK, {HOSTILE_ARM: [1.0, 0.0, 1.0], "plain": [0.0, 0.0, 1.0]}, "h"
        )
    return home


@pytest.fixture
def client(store: Path) -> Iterator[TestClient]:
    with Lineage(
        Settings.from_env({}, home=store, actor="tester@lab"), may_create=False
    ) as lineage:
        reads = ServedReads(lineage, ChainChecks(lineage))
        app = build_app(reads, token=None, allowed_hosts=allowed_hosts("127.0.0.1"))
        try:
            with TestClient(app, base_url="http://127.0.0.1:8321") as c:
                yield c
        finally:
            reads.close()


def cli_stats(store: Path, run: str, *args: str) -> list[dict]:
    return json.loads(Cli(store)("arms", run, "--stats", *args, "--format", "json").stdout)


def cli_printed(store: Path, run: str, *args: str) -> list[dict[str, str]]:
    """`lineage arms RUN --stats --format markdown`: the rows as the CLI prints them for people."""
    lines = Cli(store)("arms", run, "--stats", *args, "--format", "markdown").stdout.splitlines()
    header = [c.strip() for c in lines[0].strip("|").split(" | ")]
    rows = [[c.strip() for c in line.strip("| ").split(" | ")] for line in lines[2:]]
    return [dict(zip(header, row, strict=True)) for row in rows]


def page_stats(html: str) -> list[dict[str, str]]:
    """The arm-statistics table of a page, cell by cell."""
    page = Page(html)
    (table,) = page.find("table", "arm-stats")
    start = page.elements.index(table)
    columns, rows = [], []
    for element in page.elements[start + 1 :]:
        if element.tag == "table":
            break
        if element.tag == "th":
            columns.append(page.text_of(element))
        elif element.tag == "tr" and "arm-stat" in element.classes:
            rows.append([])
        elif element.tag == "td":
            rows[-1].append(page.text_of(element))
    return [dict(zip(columns, row, strict=True)) for row in rows]


# --- the numbers are `lineage arms --stats`'s -----------------------------------------------------


def test_chart_numbers_are_lineage_arms_stats_per_task(client: TestClient, store: Path) -> None:
    answer = client.get("/api/charts", params={"group": "task"}).json()
    assert answer["group"] == "task"
    shown = {(row["group"], row["arm"]): row for row in answer["arms"]}
    for task in ("csv-dedupe", "log-parse", HOSTILE_TASK):
        run = f"{'h' if task == HOSTILE_TASK else 't'}/{task}__0"
        for expected in cli_stats(store, run):
            row = shown[(task, expected["arm"])]
            assert {k: row[k] for k in SUMMARY} == {k: expected[k] for k in SUMMARY}
    with_skill = shown[("csv-dedupe", "with-skill")]
    assert with_skill["reward_low"] is not None and with_skill["trials"] == len(WITH)
    assert answer["method"] == cli_stats(store, "t/csv-dedupe__0")[0]["method"]


def test_charts_pooled_over_every_run_are_arms_stats_all_tasks(
    client: TestClient, store: Path
) -> None:
    """Grouped by a column every run shares (the agent), an arm is pooled over every task:
    --all-tasks."""
    answer = client.get("/api/charts", params={"group": "agent"}).json()
    assert answer["groups"] == ["agent"]
    shown = {row["arm"]: row for row in answer["arms"]}
    for expected in cli_stats(store, "t/csv-dedupe__0", "--all-tasks"):
        assert {k: shown[expected["arm"]][k] for k in SUMMARY} == {k: expected[k] for k in SUMMARY}


def test_run_arms_and_compare_pages_print_what_the_cli_prints(
    client: TestClient, store: Path
) -> None:
    run = "t/csv-dedupe__3"
    printed = cli_printed(store, run)
    columns = [c for c in printed[0] if c != "method"]
    expected = [{c: row[c] for c in columns} for row in printed]
    assert page_stats(client.get(f"/runs/{run}").text) == expected
    assert page_stats(client.get(f"/arms/{run}").text) == expected
    other = cli_printed(store, run, "--baseline", "with-skill", "--all-tasks")
    assert page_stats(
        client.get(f"/arms/{run}", params={"baseline": "with-skill", "all_tasks": "1"}).text
    ) == [{c: row[c] for c in columns} for row in other]
    api = client.get(f"/api/arms/{run}").json()
    assert api["stats"]["rows"] == [
        {k: v for k, v in row.items() if k != "method"} | {"method": row["method"]}
        for row in cli_stats(store, run)
    ]
    assert api["arms"]["rows"] == json.loads(Cli(store)("arms", run, "--format", "json").stdout)
    compared = client.get(
        "/compare", params={"a": f"{run}:root/with-skill", "b": f"{run}:root/no-skill"}
    )
    against = cli_printed(store, run, "--baseline", "with-skill")
    assert page_stats(compared.text) == [{c: row[c] for c in columns} for row in against]
    assert "within noise" in compared.text or "beats" in compared.text or "trails" in compared.text


def test_compare_of_nodes_without_arms_says_why_there_are_no_statistics(
    client: TestClient,
) -> None:
    page = client.get("/compare", params={"a": "t/csv-dedupe__0:root", "b": "t/log-parse__0:root"})
    assert page.status_code == 200
    assert "No arm statistics: statistics compare arms" in page.text
    mixed = client.get(
        "/compare",
        params={"a": "t/csv-dedupe__0:root/with-skill", "b": f"h/{HOSTILE_TASK}__0:root/plain"},
    )
    assert "is no arm of A&#x27;s run" in mixed.text


# --- grouping, caps and budget --------------------------------------------------------------------


def test_a_bad_group_column_is_refused_with_the_real_columns(client: TestClient) -> None:
    for bad in ("nope", 'task"; DROP TABLE runs; --', "task OR 1=1", "TASK"):
        answer = client.get("/api/charts", params={"group": bad})
        assert answer.status_code == 400, bad
        error = answer.json()["error"]
        assert error.startswith("expected group to be a column of the runs view, one of run, task")
        assert "agent" in error and "skill_mode" in error and repr(bad) in error
        page = client.get("/charts", params={"group": bad})
        assert page.status_code == 400 and "expected group to be a column" in page.text
    assert client.get("/api/charts", params={"grupo": "task"}).status_code == 400
    columns = client.get("/api/charts").json()["columns"]
    sql = client.get("/api/sql", params={"q": "SELECT * FROM runs LIMIT 0"}).json()["columns"]
    assert set(columns) <= set(sql) and "task" in columns and "agent" in columns


def test_every_run_is_counted_once_over_time(client: TestClient) -> None:
    total = client.get("/api/runs").json()["total"]
    for group in ("task", "run", "skill_mode", "registered_at"):
        timeline = client.get("/api/charts", params={"group": group}).json()["timeline"]
        assert sum(sum(s["runs"]) for s in timeline["series"]) == total, group
        assert len(timeline["buckets"]) <= charts_module.TIME_BUCKETS


def test_groups_past_the_cap_are_counted_as_other_and_the_page_says_so(
    client: TestClient,
) -> None:
    answer = client.get("/api/charts", params={"group": "run"}).json()
    total = client.get("/api/runs").json()["total"]
    assert total > charts_module.GROUP_CAP
    assert len(answer["groups"]) == charts_module.GROUP_CAP == answer["caps"]["groups"]
    assert answer["groups_total"] == total
    assert answer["other_runs"] == total - charts_module.GROUP_CAP
    assert [s["group"] for s in answer["timeline"]["series"] if s["other"]] == [None]
    page = client.get("/charts", params={"group": "run"}).text
    assert f"Showing the {charts_module.GROUP_CAP} with the most runs" in page


def test_reward_intervals_past_the_budget_are_named_not_faked(
    client: TestClient, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(charts_module, "RESAMPLE_BUDGET", 10)
    answer = client.get("/api/charts", params={"group": "skill_mode"}).json()
    skipped = {(s["arm"], s["trials"]) for s in answer["no_interval"]}
    assert ("with-skill", 16) in skipped and ("no-skill", 16) in skipped
    rows = {row["arm"]: row for row in answer["arms"]}
    assert (
        rows["with-skill"]["reward_low"] is None and rows["with-skill"]["mean_reward"] is not None
    )
    assert rows["plain"]["reward_low"] is not None  # 3 trials fit the budget
    page = client.get("/charts", params={"group": "skill_mode"}).text
    assert "Reward intervals left out past this page's budget of 10 resampled trials" in page


def test_the_grid_counts_what_sql_counts(client: TestClient) -> None:
    grid = client.get("/api/charts").json()["grid"]
    counted = client.get(
        "/api/sql",
        params={
            "q": "SELECT r.task, c.arm, count(*) FILTER (WHERE c.status = 'pass') AS passes, "
            "count(*) FILTER (WHERE c.status IN ('pass', 'fail')) AS trials "
            "FROM children c JOIN runs r USING (run) GROUP BY ALL"
        },
    ).json()["rows"]
    assert sorted((c["task"], c["arm"], c["passes"], c["trials"]) for c in grid["cells"]) == sorted(
        (c["task"], c["arm"], c["passes"], c["trials"]) for c in counted
    )


# --- safe -----------------------------------------------------------------------------------------


def test_hostile_task_and_arm_names_stay_text_in_the_svg(client: TestClient) -> None:
    for group in ("task", "run"):
        html = client.get("/charts", params={"group": group}).text
        page = Page(html)
        assert not page.find("script") and not page.find("img"), group
        for element in page.elements:
            for name in ("src", "href", "action", "xlink:href"):
                link = element.attrs.get(name)
                assert link is None or (link.startswith(("/", "?", "#")) and link[:2] != "//")
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
    html = client.get("/charts").text
    cells = [e for e in Page(html).find("g", "cell") if e.attrs.get("data-arm") == HOSTILE_ARM]
    assert [c.attrs["data-task"] for c in cells] == [HOSTILE_TASK]
    labels = [Page(html).text_of(e) for e in Page(html).find("text", "group-label")]
    assert HOSTILE_TASK in labels  # shown as written, as text
    answer = client.get("/api/charts").json()
    assert {(r["group"], r["arm"]) for r in answer["arms"]} >= {(HOSTILE_TASK, HOSTILE_ARM)}
    arms = client.get(f"/arms/h/{HOSTILE_TASK}__0".replace("<", "%3C").replace(">", "%3E"))
    assert arms.status_code == 200 and "<img src=x" not in arms.text
    assert [row["arm"] for row in page_stats(arms.text)] == [HOSTILE_ARM, "plain"]


def test_the_charts_page_draws_svg_only(client: TestClient) -> None:
    html = client.get("/charts").text
    page = Page(html)
    for css in ("pass-rate", "mean-reward", "grid", "runs-over-time", "rewards-over-time"):
        assert page.find("svg", css), css
    assert len(page.find("line", "interval")) >= 4
    attributes = {name for element in page.elements for name in element.attrs}
    assert not {a for a in attributes if a == "style" or a.startswith("on")}, attributes


def test_a_new_run_reaches_the_next_charts_answer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer:
        record_trials(writer, "t1", {"a": [1.0, 0.0], "b": [0.0, 0.0]})
        reads = ServedReads(writer, ChainChecks(writer))
        app = build_app(reads, token=None, allowed_hosts=allowed_hosts("127.0.0.1"))
        try:
            with TestClient(app, base_url="http://127.0.0.1:8321") as client:
                assert client.get("/api/charts").json()["groups"] == ["t1"]
                writer.record([f.RunRegistered(run="late", task="t2")])
                assert client.get("/api/charts").json()["groups"] == ["t1", "t2"]
                arms = client.get("/arms/late")
                assert arms.status_code == 200
                assert "No arm statistics: no fork child of this run was recorded" in arms.text
                assert client.get("/api/arms/late").json()["stats"] is None
                assert client.get("/api/arms/late", params={"all_tasks": "yes"}).status_code == 400
                assert client.get("/api/arms/nope/nope").status_code == 404
        finally:
            reads.close()


def test_a_run_page_shows_the_first_arms_and_links_the_rest(tmp_path: Path) -> None:
    from rollout_lineage.adapters.web.app import ARMS_SHOWN

    home = tmp_path / "home"
    children = tuple(f.ForkChild(index=i, node=f"n{i + 1}", arm=f"arm-{i:03}") for i in range(260))
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer:
        writer.record(
            [
                f.RunRegistered(run="wide", task="t"),
                f.ForkOpened(run="wide", fork="root", node="root", children=children),
            ]
        )
        reads = ServedReads(writer, ChainChecks(writer))
        app = build_app(reads, token=None, allowed_hosts=allowed_hosts("127.0.0.1"))
        try:
            with TestClient(app, base_url="http://127.0.0.1:8321") as client:
                html = client.get("/runs/wide").text
                table = html.split('<table class="arms">', 1)[1].split("</table>", 1)[0]
                body = table.split("<tbody>", 1)[1]
                assert body.count("<tr>") == ARMS_SHOWN  # the parent row and the first 199 arms
                assert ">arm-198<" in body and ">arm-199<" not in body
                page = Page(html)
                capped = [page.text_of(e) for e in page.find("p", "capped")]
                assert capped == [f"The first {ARMS_SHOWN} rows; 61 more on the arms page."]
                whole = client.get("/api/arms/wide").json()["arms"]["rows"]
                assert len(whole) == 261
        finally:
            reads.close()

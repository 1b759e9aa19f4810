"""`lineage serve` in a real browser: the command started as a user starts it, headless Chromium
driving it.

The DOM Chromium builds is what a person sees, so the checks run on it: filtering the runs list
through its form, opening a run from the list, running an SQL query, a hostile run page whose
`<script>` stays text (and, CSP or not, never runs), and every resource the pages loaded coming from
the server itself.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rollout_lineage.domain import facts as f
from tests.browser_cdp import Chromium, chromium_binary
from tests.conftest import EXAMPLES, Cli, integration_unavailable, open_lineage
from tests.scenarios import ABLATE_RUN
from tests.serve_process import serving

pytestmark = pytest.mark.browser
HOSTILE_RUN = "evil/<script>document.title='pwned'</script>"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """`lineage serve` on a free loopback port over a store built from examples/, until the test
    ends."""
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES))
    with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as lineage:
        lineage.record([f.RunRegistered(run=HOSTILE_RUN, task="<i>t</i>")])
    with serving(home) as (_, base):
        yield base


def follow(browser: Chromium, page: str, action: str) -> None:
    """Do `action` (JavaScript that navigates: a form submitted, a link clicked) and wait for the
    new page."""
    browser.evaluate(page, action)
    browser.wait_for("Page.loadEventFired", page)


def texts(browser: Chromium, page: str, selector: str) -> list[str]:
    return browser.evaluate(
        page, f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.textContent)"
    )


def loaded_from_elsewhere(browser: Chromium, page: str, base: str) -> list[str]:
    urls = browser.evaluate(
        page,
        "[location.href, ...performance.getEntriesByType('resource').map(e => e.name)]",
    )
    return [url for url in urls if not url.startswith(base + "/")]


def test_a_person_filters_runs_opens_one_and_queries(server: str, tmp_path: Path) -> None:
    binary = chromium_binary()
    if binary is None:
        integration_unavailable("no headless Chromium on PATH (.ci/run installs `chromium`)")
    with Chromium(binary, tmp_path / "chromium-profile") as browser:  # type: ignore[arg-type]
        page = browser.open(f"{server}/runs", 1280, 900)
        everything = texts(browser, page, "a.run-link")
        assert ABLATE_RUN in everything and HOSTILE_RUN in everything

        follow(
            browser,
            page,
            "document.querySelector('input[name=q]').value = 'csv-dedupe';"
            "document.querySelector('select[name=sort]').value = 'run';"
            "document.getElementById('filters').submit()",
        )
        filtered = texts(browser, page, "a.run-link")
        assert filtered == sorted(r for r in everything if "csv-dedupe" in r) and filtered
        assert "csv-dedupe" in browser.evaluate(page, "location.search")
        (tmp_path / "runs.png").write_bytes(browser.screenshot(page, 0, 0, 1280, 900))

        follow(
            browser,
            page,
            f"[...document.querySelectorAll('a.run-link')]"
            f".find(a => a.textContent === {json.dumps(ABLATE_RUN)}).click()",
        )
        assert texts(browser, page, "h1.run-id") == [ABLATE_RUN]
        nodes = browser.evaluate(
            page, "[...document.querySelectorAll('svg.tree g.node')].map(g => g.dataset.node)"
        )
        assert {"root", "n2", "n3"} <= set(nodes)
        assert browser.evaluate(page, "document.querySelectorAll('table.arms td.flip').length") > 0
        shown_style = browser.evaluate(
            page, "getComputedStyle(document.querySelector('table.arms td.flip')).fontWeight"
        )
        assert shown_style in ("700", "bold")  # the style sheet loaded, under the CSP
        (tmp_path / "run.png").write_bytes(browser.screenshot(page, 0, 0, 1280, 900))
        assert loaded_from_elsewhere(browser, page, server) == []

        follow(browser, page, "location.href = '/sql'")
        follow(
            browser,
            page,
            "document.querySelector('textarea[name=q]').value = "
            + json.dumps("SELECT run, task FROM runs WHERE run LIKE 'evil/%' ORDER BY run")
            + "; document.getElementById('sql').submit()",
        )
        assert texts(browser, page, "table.results th") == ["run", "task"]
        assert texts(browser, page, "table.results td") == [HOSTILE_RUN, "<i>t</i>"]
        assert browser.evaluate(page, "document.querySelectorAll('table.results i').length") == 0
        assert browser.evaluate(page, "document.querySelector('a.csv').href").startswith(
            f"{server}/api/sql?"
        )
        (tmp_path / "sql.png").write_bytes(browser.screenshot(page, 0, 0, 1280, 700))

        follow(
            browser,
            page,
            "document.querySelector('textarea[name=q]').value = 'DELETE FROM runs';"
            "document.getElementById('sql').submit()",
        )
        assert texts(browser, page, "p.error")[0].startswith("expected read-only statements")

        hostile = browser.open(f"{server}/runs?q=evil", 1280, 600)
        follow(browser, hostile, "document.querySelector('a.run-link').click()")
        assert texts(browser, hostile, "h1.run-id") == [HOSTILE_RUN]
        assert browser.evaluate(hostile, "document.title") != "pwned"
        assert browser.evaluate(hostile, "document.scripts.length") == 0


def test_a_person_reads_the_charts_and_regroups_them(tmp_path: Path) -> None:
    """The charts page in Chromium: SVG drawn and styled under the CSP, the arms' numbers those of
    the API, a hostile task and arm name shown as text, and the group changed through the page's own
    form."""
    from tests.cli.test_arm_stats import record_trials

    binary = chromium_binary()
    if binary is None:
        integration_unavailable("no headless Chromium on PATH (.ci/run installs `chromium`)")
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES))
    hostile_task, hostile_arm = (
        "<script>document.title='pwned'</script>",
        "<img src=x onerror=alert(1)>",
    )
    with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as lineage:
        record_trials(
            lineage,
            "csv-dedupe",
            {
                "no-skill": [0.0, 1.0, 0.0, 1.0, 0.0, 0.0],
                "with-skill": [1.0, 1.0, 0.0, 1.0, 1.0, 1.0],
            },
        )
        record_trials(lineage, hostile_task, {hostile_arm: [1.0, 0.0], "plain": [0.0, 0.0]}, "h")
    with (
        serving(home, env={"TMPDIR": str(tmp_path)}) as (_process, server),
        Chromium(binary, tmp_path / "chromium-profile") as browser,  # type: ignore[arg-type]
    ):
        page = browser.open(f"{server}/charts", 1280, 1800)
        charts = browser.evaluate(
            page, "[...document.querySelectorAll('svg.chart')].map(s => s.getAttribute('class'))"
        )
        for kind in ("pass-rate", "mean-reward", "grid", "runs-over-time", "rewards-over-time"):
            assert f"chart {kind}" in charts, kind
        arms = browser.evaluate(
            page,
            "[...document.querySelectorAll('svg.pass-rate g.arm-line')].map(g => g.dataset.arm)",
        )
        assert "csv-dedupe / with-skill" in arms and f"{hostile_task} / {hostile_arm}" in arms
        with urllib.request.urlopen(f"{server}/api/charts", timeout=30) as answer:
            api = json.load(answer)
        drawn = browser.evaluate(
            page,
            "[...document.querySelectorAll('table.chart-arms tbody tr')]"
            ".map(r => [...r.cells].map(c => c.textContent))",
        )
        assert [(row[0], row[1], row[2]) for row in drawn] == [
            (r["group"], r["arm"], str(r["trials"])) for r in api["arms"]
        ]
        assert browser.evaluate(page, "document.scripts.length") == 0
        assert browser.evaluate(page, "document.querySelectorAll('svg img, main img').length") == 0
        assert browser.evaluate(page, "document.title") != "pwned"
        assert hostile_task in texts(browser, page, "svg.pass-rate text.group-label")
        fills = browser.evaluate(
            page,
            "[...document.querySelectorAll('svg.grid g.cell "
            "rect')].map(r => getComputedStyle(r).fill)",
        )
        # the style sheet's shades, under the CSP
        assert fills and "rgb(255, 255, 255)" not in fills
        interval = browser.evaluate(
            page,
            "getComputedStyle(document.querySelector('svg.pass-rate line.interval')).strokeWidth",
        )
        assert interval == "3px"
        (tmp_path / "charts.png").write_bytes(browser.screenshot(page, 0, 0, 1280, 1800))
        assert loaded_from_elsewhere(browser, page, server) == []

        follow(
            browser,
            page,
            "document.querySelector('select[name=group]').value = 'agent';"
            "document.getElementById('group').submit()",
        )
        assert browser.evaluate(page, "location.search") == "?group=agent"
        assert (
            browser.evaluate(page, "document.querySelector('select[name=group]').value") == "agent"
        )
        legend = texts(browser, page, "ul.legend span.series")
        assert "openhands" in legend or "agent" in legend
        (tmp_path / "charts-by-agent.png").write_bytes(browser.screenshot(page, 0, 0, 1280, 1800))
        assert Path(tmp_path / "charts.png").stat().st_size > 0

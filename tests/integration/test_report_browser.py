"""`lineage report` as a browser shows it: real headless Chromium renders the page and dumps its
DOM.

The DOM a browser builds is what an auditor sees, so the checks run on it, not on our own markup:
node boxes with their outcome classes, the flip table's cells, the log head, hostile names as text,
and nothing fetched.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rollout_lineage.domain import facts as f
from tests.conftest import EXAMPLES, Cli, integration_unavailable, open_lineage
from tests.html_page import Page, external_references
from tests.scenarios import ABLATE_RUN

pytestmark = pytest.mark.browser
HOSTILE_RUN = "evil/<script>document.title='pwned'</script>"


def chromium_dom(page: Path, profile: Path) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        integration_unavailable("no headless Chromium on PATH (.ci/run installs `chromium`)")
    result = subprocess.run(
        [
            binary,  # type: ignore[list-item]
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_chromium_renders_the_report(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store' / 'events.sqlite'}"
    run_cli = Cli(tmp_path / "home", store=store)
    run_cli("import", str(EXAMPLES / "pr-layout"))
    with open_lineage(store, tmp_path / "home") as lineage:
        lineage.record(
            [
                f.RunRegistered(run=HOSTILE_RUN, task="t"),
                f.ForkOpened(
                    run=HOSTILE_RUN,
                    fork="f",
                    node="root",
                    children=(f.ForkChild(index=0, node="<b>n1</b>", arm="<i>arm</i>"),),
                ),
            ]
        )
    target = tmp_path / "report.html"
    run_cli("report", ABLATE_RUN, HOSTILE_RUN, "--to", str(target))
    dumped = chromium_dom(target, tmp_path / "chromium-profile")
    assert "<html" in dumped and "</svg>" in dumped
    dom = Page(dumped)

    assert external_references(dom) == []
    assert dom.text_of(dom.find("title")[0]) == "rollout-lineage report"
    boxes = {
        g.attrs["data-node"]: g.classes
        for g in dom.find("g", "node")
        if g.attrs["id"].startswith("r0-")
    }
    assert boxes["root"] == {"node", "outcome-fail"}
    assert boxes["n2"] == {"node", "outcome-pass"} and boxes["n4"] == {"node", "outcome-error"}
    hostile = {
        g.attrs["data-node"]: g.classes
        for g in dom.find("g", "node")
        if g.attrs["id"].startswith("r1-")
    }
    assert hostile == {
        "root": {"node", "outcome-pending"},
        "<b>n1</b>": {"node", "outcome-pending"},
    }
    assert all(dom.text_of(b) != "n1" for b in dom.find("b"))  # the node name stayed text
    assert [dom.text_of(h) for h in dom.find("h2")] == [ABLATE_RUN, HOSTILE_RUN]
    [arms, *_] = dom.find("table", "arms")
    assert "test_streaming_large_input" in dom.text_of(arms)
    assert [dom.text_of(td) for td in dom.find("td", "flip")][:2] == ["passed", "passed"]
    head = run_cli("head").stdout.strip()
    assert [dom.text_of(c) for c in dom.find("code", "head")] == [head]


BOXES_JS = """Array.from(document.querySelectorAll('g.node')).map(g => {
  const r = g.querySelector('rect').getBoundingClientRect();
  return {section: g.closest('section').id, node: g.dataset.node, classes: g.getAttribute('class'),
          title: g.querySelector('title').textContent,
          texts: Array.from(g.querySelectorAll('text')).map(t => t.textContent),
          x: r.x + window.scrollX, y: r.y + window.scrollY, w: r.width, h: r.height};
})"""
CONTINUES_JS = """Array.from(document.querySelectorAll('section.run')).map(s => {
  const a = s.querySelector('svg g.continues a');
  return {run: s.querySelector('h2').textContent, link: a ? a.getAttribute('href') : null,
          title: s.querySelector('svg g.continues title')?.textContent ?? null};
})"""


def rgb(colour: str) -> tuple[int, int, int]:
    return (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16))


def test_in_chromium_at_1280_px_the_page_fits_and_draws_what_the_read_models_hold(
    tmp_path: Path,
) -> None:
    """Every example run on one page, opened at 1,280 x 900 CSS px over the DevTools protocol:
    nothing is wider than the window; each box's colour in a screenshot is its status's colour, and
    its drawn text the reward the `runs`/`children` views hold (a step draws none); the hover title
    holds the whole label; a continuation links to the run it continues."""
    from rollout_lineage.projections.reports.tree_view import OUTCOME_COLOURS
    from tests.browser_cdp import Chromium, chromium_binary, png_pixels

    binary = chromium_binary()
    if binary is None:
        integration_unavailable("no headless Chromium on PATH (.ci/run installs `chromium`)")
    run_cli = Cli(tmp_path / "home", store=f"sqlite:///{tmp_path / 'store' / 'events.sqlite'}")
    run_cli("import", str(EXAMPLES))
    runs = json.loads(run_cli("runs", "--format", "json").stdout)
    target = tmp_path / "report.html"
    run_cli("report", *(r["run"] for r in runs), "--to", str(target))
    expected: dict[tuple[int, str], tuple[str, float | None]] = {}
    for index, run in enumerate(runs):
        arms = json.loads(run_cli("arms", run["run"], "--format", "json").stdout)
        expected[(index, "root")] = (arms[0]["status"], run["reward"])
        for child in json.loads(
            run_cli(
                "sql",
                "-p",
                "r",
                run["run"],
                "SELECT node, status, reward FROM children WHERE run = $r",
                "--format",
                "json",
            ).stdout
        ):
            expected[(index, child["node"])] = (child["status"], child["reward"])

    with Chromium(binary, tmp_path / "chromium-profile") as browser:
        page = browser.open(target.resolve().as_uri(), 1280, 900)
        width = browser.evaluate(page, "document.documentElement.scrollWidth")
        assert width <= 1280, f"the page is {width} px wide in a 1,280 px window"
        boxes = browser.evaluate(page, BOXES_JS)
        links = browser.evaluate(page, CONTINUES_JS)
        shots = {
            (box["section"], box["node"]): png_pixels(
                browser.screenshot(page, box["x"] + box["w"] - 4, box["y"] + box["h"] / 2, 1, 1)
            )[0][0]
            for box in boxes
        }

    assert len(boxes) >= 30
    cut = 0
    for box in boxes:
        index = int(box["section"].removeprefix("run-"))
        where = f"{runs[index]['run']}:{box['node']}"
        painted = shots[(box["section"], box["node"])]
        for drawn in box["texts"]:
            assert drawn.removesuffix("…") in box["title"], where  # the whole label on hover
            cut += drawn.endswith("…")
        status, reward = expected.get((index, box["node"]), (None, None))
        if status is None:  # a step: white, and no reward drawn
            assert box["classes"] == "node outcome-step" and painted == (255, 255, 255), where
            assert not any("reward" in drawn for drawn in box["texts"]), where
            continue
        assert box["classes"] == f"node outcome-{status}", where
        assert painted == rgb(OUTCOME_COLOURS[status]), (where, painted, status)
        if reward is not None:
            assert box["texts"][2] == f"{status}: reward {reward!r}", where
        else:
            assert box["texts"][2].startswith(f"{status}: ") and "reward" not in box["texts"][2]
    assert cut, "some label is long enough to be cut in its box"
    sections = {link["run"]: f"#run-{i}" for i, link in enumerate(links)}
    continued = {link["run"]: link for link in links if link["title"] is not None}
    assert set(continued) == {r["run"] for r in runs if r["run"].endswith("__continued")}
    for run, link in continued.items():
        source = run.removesuffix("__continued")
        assert link["link"] == sections[source], link
        assert link["title"] == f"continues {source} at post-research"

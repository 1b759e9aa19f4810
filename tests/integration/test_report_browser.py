"""`lineage report` as a browser shows it: real headless Chromium renders the page and dumps its DOM.

The DOM a browser builds is what an auditor sees, so the checks run on it, not on our own markup: node boxes
with their outcome classes, the flip table's cells, the log head, hostile names as text, and nothing fetched.
"""

from __future__ import annotations

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

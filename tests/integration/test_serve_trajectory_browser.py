"""The trajectory view of `lineage serve` in headless Chromium (issue #36 item 1), at 800 and 1,400
CSS pixels: from the audit's finding to its line, highlighted and in view; no sideways scrolling
whatever the lines hold; a hostile command stays text; every resource from the server itself; and
after the file is edited, the recorded excerpt and no timeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser_cdp import Chromium, chromium_binary
from tests.cli.test_serve_trajectory import HACK, hacking_run
from tests.conftest import Cli, integration_unavailable
from tests.serve_process import serving

pytestmark = pytest.mark.browser
WIDTHS = (800, 1400)


def _evaluate(browser: Chromium, page: str, expression: str) -> object:
    return browser.evaluate(page, expression)


def test_a_finding_opens_its_line_at_both_widths_and_an_edit_hides_the_file(
    tmp_path: Path,
) -> None:
    binary = chromium_binary()
    if binary is None:
        integration_unavailable("no headless Chromium on PATH (.ci/run installs `chromium`)")
    run_dir = hacking_run(tmp_path, padding=60)
    home = tmp_path / "home"
    Cli(home)("import", str(run_dir))
    with (
        serving(home) as (_, base),
        Chromium(binary, tmp_path / "chromium-profile") as browser,  # type: ignore[arg-type]
    ):
        for width in WIDTHS:
            page = browser.open(f"{base}/audit", width, 900)
            href = _evaluate(
                browser,
                page,
                "[...document.querySelectorAll('a.evidence-line')]"
                ".map(a => a.getAttribute('href')).find(h => h.includes('file=acp'))",
            )
            assert isinstance(href, str) and "#L" in href, href
            browser.evaluate(page, f"location.href = {json.dumps(base + href)}")
            browser.wait_for("Page.loadEventFired", page)
            state = _evaluate(
                browser,
                page,
                """(() => {
                  const hit = document.querySelector('li.entry.highlighted');
                  const box = hit ? hit.getBoundingClientRect() : null;
                  return {
                    id: hit && hit.id, hash: location.hash,
                    inView: !!box && box.top < innerHeight && box.bottom > 0,
                    text: hit ? hit.textContent : '',
                    wide: document.documentElement.scrollWidth - innerWidth,
                    scripts: document.scripts.length,
                    title: document.title,
                    elsewhere: [location.href,
                      ...performance.getEntriesByType('resource').map(e => e.name)]
                      .filter(u => !u.startsWith(location.origin + '/')),
                  };
                })()""",
            )
            assert isinstance(state, dict)
            assert state["id"] == state["hash"][1:], state
            assert state["inView"], f"expected the highlighted line in view at {width} px"
            assert "sed -i" in state["text"]
            assert state["wide"] <= 0, f"expected no sideways scrolling at {width} px: {state}"
            assert state["scripts"] == 0 and "trajectory of" in state["title"]
            assert state["elsewhere"] == []
            page_one = href.split("&line=")[0].split("#")[0] + "&page=1"
            browser.evaluate(page, f"location.href = {json.dumps(base + page_one)}")
            browser.wait_for("Page.loadEventFired", page)
            hostile = _evaluate(
                browser,
                page,
                'document.body.innerText.includes("<script>document.title=1</script>")',
            )
            assert hostile, "expected the hostile command shown as text on page 1"
            Path(f"/tmp/h9-trajectory-{width}.png").write_bytes(
                browser.screenshot(page, 0, 0, width, 900)
            )

        acp = run_dir / "trajectory" / "acp_trajectory.jsonl"
        acp.write_bytes(acp.read_bytes().replace(b"test_dedupe.py", b"EDITED_XX_3.py"))
        for width in WIDTHS:
            page = browser.open(base + href.split("#")[0], width, 900)
            seen = _evaluate(
                browser,
                page,
                """({text: document.body.innerText,
                    entries: document.querySelectorAll('li.entry').length,
                    wide: document.documentElement.scrollWidth - innerWidth})""",
            )
            assert isinstance(seen, dict)
            assert "Changed since import" in seen["text"] and "EDITED_XX_3" not in seen["text"]
            assert HACK.split()[-1] in seen["text"]  # the excerpt the log recorded
            assert seen["entries"] == 0 and seen["wide"] <= 0

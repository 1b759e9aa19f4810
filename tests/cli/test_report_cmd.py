"""`lineage report RUN... --to FILE`: one self-contained page, every value from the log escaped."""

from __future__ import annotations

from pathlib import Path

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from tests.conftest import EXAMPLES, Cli
from tests.html_page import Page, external_references
from tests.scenarios import ABLATE_RUN, ablate_run_facts

CONTINUED = "nightly/csv-dedupe__7c1f2a90__continued"
HOSTILE_RUN = "evil/<script>alert('run')</script>"
HOSTILE_NODE = '"><img src=x onerror=alert(1)>'
HOSTILE_ARM = "</td></tr></table><iframe src=//evil.example>"
HOSTILE_TEST = "tests/t.py::test_<script>alert(3)</script>"


def report(run_cli: Cli, tmp_path: Path, *args: str) -> Page:
    target = tmp_path / "report.html"
    run_cli("report", *args, "--to", str(target))
    return Page(target.read_text(encoding="utf-8"))


def nodes(page: Page, run_index: int = 0) -> dict[str, set[str]]:
    """The node boxes of the page's run_index-th run, by recorded node name."""
    return {
        g.attrs["data-node"]: g.classes
        for g in page.find("g", "node")
        if g.attrs["id"].startswith(f"r{run_index}-")
    }


def test_the_page_shows_tree_arms_stages_cut_point_audit_and_head(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    page = report(run_cli, tmp_path, ABLATE_RUN, CONTINUED)
    assert external_references(page) == []
    assert [page.text_of(h) for h in page.find("h2")] == [ABLATE_RUN, CONTINUED]
    ablate = nodes(page)
    assert "outcome-fail" in ablate["root"] and "outcome-pass" in ablate["n2"]
    assert "outcome-error" in ablate["n4"] and "outcome-fail" in ablate["n3"]
    flipped = [page.text_of(td) for td in page.find("td", "flip")]
    # with-skill, then no-skill's three
    assert flipped[:4] == [
        "passed",
        "passed",
        "failed",
        "failed",
    ]
    head = run_cli("head").stdout.strip()
    assert [page.text_of(c) for c in page.find("code", "head")] == [head]
    stage_cells = [page.text_of(table) for table in page.find("table", "stages")]
    assert stage_cells and "exported" in stage_cells[0] and "discarded" in stage_cells[0]
    [cut] = page.find("table", "cut-point")
    assert "served" in page.text_of(cut) and "post-research" in page.text_of(cut)
    assert len(page.find("table", "divergences")) == 1
    # every finding about a node links to that node's box in this page
    node_ids = {g.attrs["id"] for g in page.find("g", "node")}
    ids = {e.attrs["id"] for e in page.elements if "id" in e.attrs}
    links = [a.attrs["href"][1:] for a in page.find("a")]
    assert all(link in ids for link in links)
    assert {"r0-n0", "r0-n4"} <= set(links) & node_ids  # the root's and the unscored arm's findings
    verdicts = [page.text_of(p) for p in page.find("p", "verdict")]
    assert verdicts == ["verdict: not publishable"] * 2  # every run of the page is quarantined


def test_an_arm_still_running_is_drawn_pending(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    lineage.record(ablate_run_facts(with_late_reward=False))
    page = report(run_cli, tmp_path, ABLATE_RUN)
    assert "outcome-pending" in nodes(page)["n5"]


def test_hostile_names_are_text_never_markup(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    lineage.record(
        [
            f.RunRegistered(run=HOSTILE_RUN, task="<b>task</b>", agent="a&b"),
            f.ForkOpened(
                run=HOSTILE_RUN,
                fork="f<1>",
                node="root",
                children=(
                    f.ForkChild(index=0, node=HOSTILE_NODE, arm=HOSTILE_ARM),
                    f.ForkChild(index=1, node="n2", arm="evil\u202egnp.exe"),
                ),
            ),
            f.ChildScored(
                run=HOSTILE_RUN, fork="f<1>", index=0, reward=1.0, tests={HOSTILE_TEST: "passed"}
            ),
            f.ChildScored(
                run=HOSTILE_RUN, fork="f<1>", index=1, reward=0.0, tests={HOSTILE_TEST: "failed"}
            ),
        ]
    )
    page = report(run_cli, tmp_path, HOSTILE_RUN)
    assert external_references(page) == []
    assert not page.find("script") and not page.find("img") and not page.find("iframe")
    assert [page.text_of(h) for h in page.find("h2")] == [HOSTILE_RUN]
    assert nodes(page)[HOSTILE_NODE] == {"node", "outcome-pass"}
    headers = [page.text_of(th) for th in page.find("th")]
    assert "test_<script>alert(3)</script>" in headers
    arm_cells = [page.text_of(td) for td in page.find("td")]
    assert HOSTILE_ARM in arm_cells and "<b>task</b>" in arm_cells
    assert "evil\\u202egnp.exe" in arm_cells  # a right-to-left override shown, not obeyed


def test_an_unknown_run_writes_nothing(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    target = tmp_path / "report.html"
    result = run_cli("report", ABLATE_RUN, "no/such-run", "--to", str(target), ok=False)
    assert result.exit_code == 1 and "expected a recorded run 'no/such-run'" in result.stderr
    assert not target.exists()


def test_a_report_as_of_a_position_names_that_head(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    before = lineage.record(ablate_run_facts(with_late_reward=False)).position
    lineage.record(ablate_run_facts())
    page = report(run_cli, tmp_path, ABLATE_RUN, "--as-of", str(before))
    [head] = [page.text_of(code) for code in page.find("code", "head")]
    assert head.startswith(f"{before}:sha256:") and head != run_cli("head").stdout.strip()
    run_cli("verify", "--head", head)  # the log still holds exactly that head at that position
    assert "outcome-pending" in nodes(page)["n5"]


def test_a_page_that_cannot_be_written_is_refused_plainly(run_cli: Cli, tmp_path: Path) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    target = tmp_path / "no-such-folder" / "report.html"
    result = run_cli("report", ABLATE_RUN, "--to", str(target), ok=False)
    assert result.exit_code == 1 and f"expected to write {target}" in result.stderr
    assert not target.parent.exists()

"""One truth per value: every reader prints the same reward, status word and custody state for one
node.

Over every run of the examples (the PR layout and the public fixtures), node by node: `tree --format
json`, the text tree, the report's drawn boxes (class, hover title, drawn text), the `children`,
`runs` and `custody` views, `arms`, `export tree` (benchflow's tree.json), `export ablation` and
`export openlineage` must agree. A step (a node without an outcome of its own) shows no reward
anywhere; OpenLineage, which must close every node, closes it with the outcome of the node the tree
names as its owner.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.reports.exports.openlineage import run_id
from tests.conftest import EXAMPLES, Cli
from tests.html_page import Page

WORDS = {"pass", "fail", "error", "skipped", "pending"}


@pytest.fixture
def examples_cli(run_cli: Cli) -> Cli:
    run_cli("import", str(EXAMPLES))
    return run_cli


def rows(run_cli: Cli, *args: str) -> list[dict[str, Any]]:
    return json.loads(run_cli(*args, "--format", "json").stdout)


def drawn_boxes(html: str) -> dict[int, dict[str, dict[str, Any]]]:
    """{run index: {node: {class, title, texts}}} from the report's SVG boxes, in document order."""
    page = Page(html)
    boxes: dict[int, dict[str, dict[str, Any]]] = {}
    current: dict[str, Any] | None = None
    for element in page.elements:
        if element.tag == "g" and "node" in element.classes:
            run_index = int(element.attrs["id"].split("-")[0][1:])
            current = {"classes": element.classes, "title": "", "texts": []}
            boxes.setdefault(run_index, {})[element.attrs["data-node"]] = current
        elif current is not None and element.tag == "title":
            current["title"] = page.text_of(element)
        elif current is not None and element.tag == "text":
            current["texts"].append(page.text_of(element))
        elif element.tag not in {"rect", "tspan"}:
            current = None
    return boxes


def openlineage_outcomes(run_cli: Cli, run: str) -> dict[str, dict[str, Any]]:
    """node -> the rolloutLineage_outcome facet of its terminal event (`run.facets` carry the node's
    name)."""
    found: dict[str, dict[str, Any]] = {}
    tree = json.loads(run_cli("tree", run, "--format", "json").stdout)
    by_id = {run_id(run, n["node"]): n["node"] for n in tree["nodes"]}
    for line in run_cli("export", "openlineage", run).stdout.splitlines():
        event = json.loads(line)
        facet = event["run"]["facets"].get("rolloutLineage_outcome")
        if facet is not None:
            found[by_id.get(event["run"]["runId"], event["run"]["runId"])] = facet
    return found


def test_every_reader_prints_the_same_reward_and_status_for_each_node(
    examples_cli: Cli, tmp_path: Path
) -> None:
    run_cli = examples_cli
    runs = rows(run_cli, "runs")
    assert len(runs) >= 6
    target = tmp_path / "report.html"
    run_cli("report", *(r["run"] for r in runs), "--to", str(target))
    boxes = drawn_boxes(target.read_text(encoding="utf-8"))
    checked = 0
    for index, run_row in enumerate(runs):
        run = run_row["run"]
        tree = json.loads(run_cli("tree", run, "--format", "json").stdout)
        text = run_cli("tree", run).stdout
        nodes = {n["node"]: n for n in tree["nodes"]}
        children = {
            c["node"]: c
            for c in rows(
                run_cli, "sql", "-p", "run", run, "SELECT * FROM children WHERE run = $run"
            )
        }
        arms = {a["node"]: a for a in rows(run_cli, "arms", run)}
        exported = {n["id"]: n for n in json.loads(run_cli("export", "tree", run).stdout)["nodes"]}
        lineage_facets = openlineage_outcomes(run_cli, run)
        assert tree["reward"] == run_row["reward"] and tree["status"] in WORDS
        assert set(boxes[index]) == set(nodes), run
        for name, node in nodes.items():
            box = boxes[index][name]
            where = f"{run}:{name}"
            owner = nodes[node["owner"]] if node["owner"] else None
            facet = lineage_facets[name]
            if node["status"] is None:  # a step: no reward of its own, anywhere
                assert box["classes"] == {"node", "outcome-step"}, where
                assert "reward" not in box["title"] and "reward" not in " ".join(box["texts"]), (
                    where
                )
                assert "reward" not in exported[name] and name not in children, where
                assert owner is not None and facet["status"] == owner["status"], where
                assert facet.get("reward") == owner["reward"], where
                continue
            checked += 1
            assert node["status"] in WORDS, where
            assert box["classes"] == {"node", f"outcome-{node['status']}"}, where
            assert node["result"] in box["title"], where
            assert box["texts"][2] in (node["result"], node["result"][:23] + "…"), where
            line = next(li for li in text.splitlines() if li.lstrip("│├└─ ").startswith(name + " "))
            assert line.endswith(node["result"]), where
            assert facet["status"] == node["status"] and facet.get("reward") == node["reward"], (
                where
            )
            if name == "root":
                assert arms.get("root", {}).get("status", node["status"]) == node["status"], where
                continue
            child = children[name]
            assert (child["status"], child["reward"]) == (node["status"], node["reward"]), where
            assert (arms[name]["status"], arms[name]["reward"]) == (node["status"], node["reward"])
            assert exported[name].get("reward") == node["reward"], where
        for fork in tree["forks"]:
            if not rows(
                run_cli,
                "sql",
                "-p",
                "f",
                fork["fork"],
                "-p",
                "run",
                run,
                "SELECT is_ablation FROM forks WHERE run = $run AND fork = $f",
            )[0]["is_ablation"]:
                continue
            ablation = json.loads(run_cli("export", "ablation", f"{run}:{fork['fork']}").stdout)
            for arm in ablation["arms"]:
                node = nodes[arm["node"]]
                assert (arm["status"], arm["reward"]) == (node["status"], node["reward"]), arm
    assert checked >= 16


def test_custody_reads_the_same_in_the_view_and_the_report_and_as_the_files_say(
    examples_cli: Cli, tmp_path: Path
) -> None:
    """7c1f2a90's hold was released (benchflow removes `branches/n2/parent/` only once every entry
    is back, and there is none); d4e5f6a7's was left behind."""
    run_cli = examples_cli
    custody = {(c["run"], c["fork"]): c for c in rows(run_cli, "sql", "SELECT * FROM custody")}
    assert custody[("nightly/csv-dedupe__7c1f2a90", "n2")]["released"] is True
    assert custody[("nightly/csv-dedupe__d4e5f6a7", "n1")]["released"] is False
    target = tmp_path / "report.html"
    runs = sorted({run for run, _ in custody})
    run_cli("report", *runs, "--to", str(target))
    page = Page(target.read_text(encoding="utf-8"))
    tables = page.find("table", "custody")
    assert len(tables) == len(runs)
    for run, table in zip(runs, tables, strict=True):
        cells = [page.text_of(td) for td in table_cells(page, table)]
        [fork] = [key for key in custody if key[0] == run]
        row = custody[fork]
        assert cells[0] == fork[1]
        assert cells[4] == json.dumps(row["released"])  # as the views print it: true / false


def table_cells(page: Page, table: Any) -> list[Any]:
    start = page.elements.index(table)
    out = []
    for element in page.elements[start + 1 :]:
        if element.tag == "table":
            break
        if element.tag == "td":
            out.append(element)
    return out


def test_v_and_the_status_words_are_defined_where_they_are_printed(
    examples_cli: Cli, tmp_path: Path
) -> None:
    run = "nightly/csv-dedupe__7c1f2a90"
    text = examples_cli("tree", run).stdout
    assert "V=0.5" in text
    assert text.splitlines()[-1].startswith("V: a fork's value, the mean reward of its children")
    assert "V: a fork's value" in " ".join(examples_cli("tree", "--help").stdout.split())
    target = tmp_path / "report.html"
    examples_cli("report", run, "--to", str(target))
    page = Page(target.read_text(encoding="utf-8"))
    [legend] = page.find("p", "legend")
    shown = page.text_of(legend)
    assert "V: a fork's value, the mean reward of its children" in shown
    assert all(f"{word} " in shown for word in WORDS)
    assert "<th>V</th>" in target.read_text(encoding="utf-8")  # the forks table, under that legend


def test_a_reward_prints_exactly_and_alike_in_tree_history_diff_and_report(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    """The tree, history and diff printed `{:g}` (0.123456789 as 0.123457), the report `repr`."""
    run = "exact/run"
    lineage.record(
        [
            f.RunRegistered(run=run, task="t"),
            f.RunScored(run=run, reward=0.25),
            f.ForkOpened(
                run=run,
                fork="f",
                node="root",
                children=(f.ForkChild(index=0, node="a"), f.ForkChild(index=1, node="b")),
            ),
            f.ChildScored(run=run, fork="f", index=0, reward=0.123456789),
            f.ChildScored(run=run, fork="f", index=1, reward=1.0),
        ]
    )
    shown = "reward 0.123456789"
    assert f"a  zero delta · fail: {shown}" in run_cli("tree", run).stdout
    assert f"scored: {shown}" in run_cli("history", f"{run}:a").stdout
    assert f"A: {shown}" in run_cli("diff", f"{run}:a", f"{run}:b").stdout
    assert "b  zero delta · pass: reward 1.0" in run_cli("tree", run).stdout
    target = tmp_path / "report.html"
    run_cli("report", run, "--to", str(target))
    boxes = drawn_boxes(target.read_text(encoding="utf-8"))[0]
    assert shown in boxes["a"]["title"] and boxes["root"]["texts"][2] == "fail: reward 0.25"

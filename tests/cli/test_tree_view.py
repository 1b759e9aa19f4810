"""`lineage tree`: exact terminal output, and Mermaid / DOT text whose structure parses."""

from __future__ import annotations

import re

import pytest

from rollout_lineage.bootstrap import Lineage
from tests import audit_scenarios as s
from tests.conftest import Cli
from tests.scenarios import ABLATE_RUN, NIGHTLY_RUN, ablate_run_facts, nightly_run_facts

ABLATE_TREE = f"""\
{ABLATE_RUN}  task csv-dedupe · fail: reward 0.0
root  [env-ready] sandbox bf-snap-csv-dedupe-a41c07e95b2d (exported) · fail: reward 0.0
├── n1  [pre-verify] sandbox bf-snap-csv-dedupe-6e02d8f3c917 (discarded), environment env-snap-csv-dedupe-0c55e1a7 (discarded)
└── fork root at env-ready, completed: V undefined (child 2 error)
    ├── n2  arm with-skill · pass: reward 1.0
    ├── n3  arm no-skill · fail: reward 0.0
    ├── n4  arm inject:prompts/hint.md · error: verifier produced no reward: reward.txt missing
    └── n5  arm config:{{"agent": {{"max_turns": 40}}}} · pass: reward 1.0
V: a fork's value, the mean reward of its children; undefined unless every child was scored
"""  # noqa: E501

NIGHTLY_TREE = f"""\
{NIGHTLY_RUN}  task csv-dedupe · pending: no outcome yet
root  [env-ready] sandbox bf-snap-csv-dedupe-19d7b3e2c4f0 (captured) · pending: no outcome yet
└── n1  [post-research] sandbox bf-snap-csv-dedupe-5a0f9c81e6d3 (captured)
    └── n2  [pre-verify] sandbox bf-snap-csv-dedupe-c2e84a7b1f95 (captured)
        └── fork n2 at pre-verify, completed: V=0.5
            ├── n3  delta injected_prompt sha256:d6d6d6d6d6d6 · pass: reward 1.0
            └── n4  delta injected_prompt sha256:d0d0d0d0d0d0 · fail: reward 0.0
V: a fork's value, the mean reward of its children; undefined unless every child was scored
"""

PARTIAL_TREE = f"""\
{s.PARTIAL}  task csv-dedupe · pass: reward 1.0
root  [env-ready] sandbox bf-snap-partial--3-env-ready (exported) · pass: reward 1.0
└── fork root at env-ready, partial: V undefined (partial: RuntimeError: sandbox died; child 1 error)
    ├── n1  arm with-skill · pass: reward 1.0
    └── n2  arm no-skill · error: RuntimeError: sandbox died
V: a fork's value, the mean reward of its children; undefined unless every child was scored
"""  # noqa: E501

ODD_TREE = """\
odd/run  task t · pending: no outcome yet
root  pending: no outcome yet
└── end
    └── a b
        └── fork f at cursor:a b from no snapshot, open: V undefined (fork still open)
            ├── a_b  arm say "hi" <b>#1</b> · fail: reward 0.25
            └── x-1.2  arm `tick` · pending: no outcome yet
V: a fork's value, the mean reward of its children; undefined unless every child was scored
"""


def test_terminal_tree_of_an_ablation(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    assert run_cli("tree", ABLATE_RUN).stdout == ABLATE_TREE


def test_terminal_tree_of_a_linear_run_with_a_pre_verify_fork(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(nightly_run_facts())
    assert run_cli("tree", NIGHTLY_RUN, "--format", "text").stdout == NIGHTLY_TREE


def test_terminal_tree_of_a_partial_fork_and_of_odd_node_ids(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(s.partial_fork() + s.odd_ids_run())
    assert run_cli("tree", s.PARTIAL).stdout == PARTIAL_TREE
    assert run_cli("tree", "odd/run").stdout == ODD_TREE


def test_tree_as_of_before_the_late_reward(lineage: Lineage, run_cli: Cli) -> None:
    before = lineage.record(ablate_run_facts(with_late_reward=False)).position
    lineage.record(ablate_run_facts())
    early = run_cli("tree", ABLATE_RUN, "--as-of", str(before)).stdout.splitlines()
    assert early[3] == (
        "└── fork root at env-ready, open: V undefined (child 2 error; fork still open)"
    )
    assert early[-2] == (
        '    └── n5  arm config:{"agent": {"max_turns": 40}} · pending: no outcome yet'
    )


MERMAID_ID = r"[A-Za-z_][A-Za-z0-9_]*"
NODE_LINE = re.compile(rf'^    (?P<id>{MERMAID_ID})\["(?P<label>[^"]*)"\]$')
EDGE_LINE = re.compile(rf"^    (?P<a>{MERMAID_ID}) --> (?P<b>{MERMAID_ID})$")
CLASS_DEF = re.compile(r"^    classDef (?P<name>\w+) fill:#[0-9a-f]{6}$")
CLASS_LINE = re.compile(rf"^    class (?P<ids>{MERMAID_ID}(?:,{MERMAID_ID})*) (?P<name>\w+)$")


def parse_mermaid(text: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Every line is the header, a node declaration or an edge; returns {id: label} and the
    edges."""
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    nodes: dict[str, str] = {}
    edges = []
    for line in lines[1:]:
        if node := NODE_LINE.match(line):
            assert node["id"] not in nodes, f"{node['id']} declared twice"
            nodes[node["id"]] = node["label"]
        elif edge := EDGE_LINE.match(line):
            edges.append((edge["a"], edge["b"]))
        elif CLASS_DEF.match(line) or CLASS_LINE.match(line):
            continue  # outcome colours: `mermaid_classes` reads them
        else:
            raise AssertionError(f"not a Mermaid node or edge: {line!r}")
    return nodes, edges


@pytest.mark.parametrize("scenario", ["ablation", "odd"])
def test_mermaid_declares_every_node_once_and_every_edge_joins_declared_nodes(
    lineage: Lineage, run_cli: Cli, scenario: str
) -> None:
    lineage.record(ablate_run_facts() if scenario == "ablation" else s.odd_ids_run())
    run = ABLATE_RUN if scenario == "ablation" else "odd/run"
    nodes, edges = parse_mermaid(run_cli("tree", run, "--format", "mermaid").stdout)
    expected = (
        {"root", "n1", "n2", "n3", "n4", "n5"}
        if scenario == "ablation"
        else {"root", "end", "a b", "a_b", "x-1.2"}
    )
    assert {label.split("<br/>")[0] for label in nodes.values()} == expected
    assert len(edges) == len(nodes) - 1, "a tree: one edge into every node but the root"
    assert all(a in nodes and b in nodes for a, b in edges)
    assert len({b for _, b in edges}) == len(edges), "no node has two parents"
    for label in nodes.values():
        assert not re.search(r"[<>`]", label.replace("<br/>", "")), f"unescaped markup in {label!r}"


def test_mermaid_ids_are_sanitised_unique_and_labels_escaped(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(s.odd_ids_run())
    nodes, edges = parse_mermaid(run_cli("tree", "odd/run", "--format", "mermaid").stdout)
    ids = {label.split("<br/>")[0]: node_id for node_id, label in nodes.items()}
    assert ids == {
        "root": "n_root",
        "end": "n_end",
        "a b": "n_a_b",
        "a_b": "n_a_b_2",
        "x-1.2": "n_x_1_2",
    }
    assert ("n_end", "n_a_b") in edges and ("n_a_b", "n_a_b_2") in edges
    assert (
        nodes["n_a_b_2"]
        == "a_b<br/>arm say #quot;hi#quot; #lt;b#gt;#35;1#lt;/b#gt;<br/>fail: reward 0.25"
    )
    assert nodes["n_x_1_2"] == "x-1.2<br/>arm #96;tick#96;<br/>pending: no outcome yet"


DOT_NODE = re.compile(
    r'^    "(?P<id>(?:[^"\\]|\\.)*)" \[label="(?:[^"\\]|\\.)*"'
    r'(?:, style=filled, fillcolor="#[0-9a-f]{6}", class="(?P<outcome>\w+)")?\];$'
)
DOT_EDGE = re.compile(r'^    "(?P<a>(?:[^"\\]|\\.)*)" -> "(?P<b>(?:[^"\\]|\\.)*)";$')


def test_dot_is_one_digraph_of_quoted_ids_and_escaped_labels(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(ablate_run_facts())
    lines = run_cli("tree", ABLATE_RUN, "--format", "dot").stdout.splitlines()
    assert lines[0] == f'digraph "{ABLATE_RUN}" {{' and lines[-1] == "}"
    nodes = [m["id"] for line in lines if (m := DOT_NODE.match(line))]
    edges = [(m["a"], m["b"]) for line in lines if (m := DOT_EDGE.match(line))]
    assert nodes == ["root", "n1", "n2", "n3", "n4", "n5"]
    assert edges == [("root", n) for n in ("n1", "n2", "n3", "n4", "n5")]
    assert len(nodes) + len(edges) + 4 == len(lines), (
        "nothing but the header, defaults, nodes, edges and the brace"
    )
    assert (
        'label="n5\\narm config:{\\"agent\\": {\\"max_turns\\": 40}}\\npass: reward 1.0"'
        in lines[8]
    )
    outcomes = {m["id"]: m["outcome"] for line in lines if (m := DOT_NODE.match(line))}
    assert outcomes == {
        "root": "fail",
        "n1": None,
        "n2": "pass",
        "n3": "fail",
        "n4": "error",
        "n5": "pass",
    }


def mermaid_classes(text: str) -> dict[str, str]:
    """{mermaid id: outcome class} from the `class` lines, each class declared with a fill first."""
    declared = {m["name"] for line in text.splitlines() if (m := CLASS_DEF.match(line))}
    classes = {}
    for line in text.splitlines():
        if m := CLASS_LINE.match(line):
            assert m["name"] in declared
            classes.update(dict.fromkeys(m["ids"].split(","), m["name"]))
    return classes


def test_pictures_colour_nodes_by_outcome(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts(with_late_reward=False))
    text = run_cli("tree", ABLATE_RUN, "--format", "mermaid").stdout
    assert mermaid_classes(text) == {
        "n_root": "fail",
        "n_n2": "pass",
        "n_n3": "fail",
        "n_n4": "error",
        "n_n5": "pending",  # its reward comes later
    }
    lineage.record(s.partial_fork())
    dot = run_cli("tree", s.PARTIAL, "--format", "dot").stdout.splitlines()
    outcomes = {m["id"]: m["outcome"] for line in dot if (m := DOT_NODE.match(line))}
    assert outcomes == {"root": "pass", "n1": "pass", "n2": "error"}


def test_a_continuation_links_to_its_source_run(run_cli: Cli) -> None:
    from tests.conftest import EXAMPLES

    run_cli("import", str(EXAMPLES))
    run = "nightly/csv-dedupe__7c1f2a90__continued"
    mermaid = run_cli("tree", run, "--format", "mermaid").stdout.splitlines()
    assert '    n_continues(["continues nightly/csv-dedupe__7c1f2a90 at post-research"])' in mermaid
    assert "    n_continues -.-> n_root" in mermaid
    dot = run_cli("tree", run, "--format", "dot").stdout.splitlines()
    assert '    "source:nightly/csv-dedupe__7c1f2a90" -> "root" [style=dashed];' in dot


def test_tree_of_an_unknown_run_is_a_clear_error(run_cli: Cli) -> None:
    result = run_cli("tree", "no/such-run", ok=False)
    assert result.exit_code == 1 and "expected a recorded run 'no/such-run'" in result.stderr


def test_tree_as_json_is_the_model_the_text_is_drawn_from(lineage: Lineage, run_cli: Cli) -> None:
    """`--format json` was a usage error, though every read command takes --format."""
    import json

    lineage.record(ablate_run_facts())
    document = json.loads(run_cli("tree", ABLATE_RUN, "--format", "json").stdout)
    assert (document["run"], document["status"], document["reward"]) == (ABLATE_RUN, "fail", 0.0)
    nodes = {n["node"]: n for n in document["nodes"]}
    assert list(nodes) == ["root", "n1", "n2", "n3", "n4", "n5"]
    assert nodes["n1"] | {"details": None} == {
        "node": "n1",
        "parent": "root",
        "status": None,
        "reward": None,
        "reason": None,
        "result": None,
        "label": None,
        "stages": ["pre-verify"],
        "owner": "root",
        "details": None,
        "forks": [],
    }
    assert (nodes["n4"]["status"], nodes["n4"]["reward"]) == ("error", None)
    assert nodes["n4"]["result"] == "error: verifier produced no reward: reward.txt missing"
    assert document["forks"] == [
        {
            "fork": "root",
            "node": "root",
            "kind": "fork",
            "outcome": "completed",
            "value": None,
            "value_text": "V undefined (child 2 error)",
        }
    ]
    text = run_cli("tree", ABLATE_RUN).stdout
    assert all(n["result"] in text for n in document["nodes"] if n["result"])

"""`lineage history`: a node's ancestry from the root run down, each step with the events that
shaped it."""

from __future__ import annotations

import json

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from tests import audit_scenarios as s
from tests.conftest import Cli
from tests.scenarios import ABLATE_RUN, ablate_run_facts


def history(run_cli: Cli, node: str, *args: str) -> dict:
    return json.loads(run_cli("history", node, "--format", "json", *args).stdout)


def types(step: dict) -> list[str]:
    return [event["type"] for event in step["events"]]


def test_a_fork_childs_history_from_the_root_with_when_and_who(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(s.healthy_ablation())
    document = history(run_cli, f"{s.HEALTHY}:root/with-skill")
    assert [(step["node"], step["kind"]) for step in document["steps"]] == [
        ("root", "root"),
        ("n1", "child"),
    ]
    root, child = document["steps"]
    assert types(root) == [
        "run.registered",
        "stage.marked",
        "snapshot.captured",
        "fork.opened",
        "custody.held",
        "custody.released",
        "fork.closed",
        "run.evidence_observed",
        "snapshot.exported",
        "run.scored",
        "run.finished",
    ]
    assert types(child) == [
        "fork.opened",
        "fork.child_restored",
        "fork.child_scored",
        "custody.handed_off",
        "run.evidence_observed",
    ], "an arm's own evidence is placed on its node"
    assert child["arm"] == "with-skill" and child["fork"] == "root" and child["child_index"] == 0
    opened = child["events"][0]
    assert (
        opened["summary"] == "created as child 0 of fork root, arm with-skill: "
        "delta skill_mode=with-skill, fresh-rollout"
    )
    assert opened["occurred_at"] == "2026-11-02T09:02:00Z" and opened["actor"] == "tester@lab"
    assert opened["recorded_at"].endswith("Z") and opened["recorded_at"] > opened["occurred_at"]
    assert child["events"][2]["summary"] == "scored: reward 1.0 (tests: 2 passed)"
    assert root["events"][-5]["summary"] == "fork root closed completed, V 0.5"


@pytest.mark.parametrize(
    "address", [f"{s.HEALTHY}:n2", f"{s.HEALTHY}:root/no-skill", f"{s.HEALTHY}:root/#1"]
)
def test_a_child_is_addressed_by_node_arm_or_index(
    lineage: Lineage, run_cli: Cli, address: str
) -> None:
    lineage.record(s.healthy_ablation())
    document = history(run_cli, address)
    assert (document["run"], document["node"]) == (s.HEALTHY, "n2")
    assert document["steps"][-1]["arm"] == "no-skill"


def test_arm_labels_with_colons_and_slashes_resolve(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    assert history(run_cli, f"{ABLATE_RUN}:root/inject:prompts/hint.md")["node"] == "n4"
    assert (
        history(run_cli, f'{ABLATE_RUN}:root/config:{{"agent": {{"max_turns": 40}}}}')["node"]
        == "n5"
    )


def test_a_fork_that_did_not_shape_the_node_is_left_out(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    document = history(run_cli, f"{ABLATE_RUN}:n1")
    root, n1 = document["steps"]
    assert "fork.opened" not in types(root) and "fork.closed" not in types(root)
    assert types(n1) == [
        "run.node_opened",
        "stage.marked",
        "snapshot.captured",
        "snapshot.captured",
        "snapshot.discarded",
        "snapshot.discarded",
    ]


def test_a_continuation_starts_in_the_run_it_continues(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.served_cut_point_with_divergence())
    document = history(run_cli, s.CONTINUED)
    assert [(step["run"], step["node"]) for step in document["steps"]] == [
        (s.SOURCE, "root"),
        (s.SOURCE, "n1"),
        (s.CONTINUED, "root"),
    ]
    assert "run.failed" in types(document["steps"][0])
    assert types(document["steps"][1])[-1] == "stage.marked", (
        "the continuation attaches where the cut stage was captured"
    )
    assert types(document["steps"][2]) == [
        "run.registered",
        "cut_point.served",
        "run.scored",
        "run.finished",
        "run.evidence_observed",
    ]
    served = document["steps"][2]["events"][1]["summary"]
    assert served == (
        f"replayed {s.SOURCE} up to K=12 (served accounting, "
        f"configured K=12, stage post-research), 1 divergences"
    )


def test_as_of_shows_the_history_before_a_later_reward(lineage: Lineage, run_cli: Cli) -> None:
    before = lineage.record(s.healthy_ablation(scored=False)).position
    lineage.record(s.late_no_skill_score())
    early = history(run_cli, f"{s.HEALTHY}:root/no-skill", "--as-of", str(before))
    late = history(run_cli, f"{s.HEALTHY}:root/no-skill")
    assert types(early["steps"][-1]) == ["fork.opened"] and early["position"] == before
    assert types(late["steps"][-1]) == [
        "fork.opened",
        "fork.child_restored",
        "fork.child_scored",
        "custody.handed_off",
    ]
    assert "fork.closed" not in types(early["steps"][0]) and "fork.closed" in types(
        late["steps"][0]
    )


def test_text_and_row_formats(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.unscored_arm())
    text = run_cli("history", f"{s.UNSCORED}:n2").stdout.splitlines()
    assert text[0].startswith(f"history of {s.UNSCORED}:n2 at log position ")
    assert text[1] == f"1. {s.UNSCORED} : root  (root)"
    step = text.index(f"2. {s.UNSCORED} : n2  (child 1 of fork root, arm no-skill)")
    assert text[step + 5].endswith(
        "fork.child_unscored: unscored: verifier produced no reward: reward.txt missing"
    )
    assert text[step + 6].startswith("         happened 2026-11-02T09:") and text[
        step + 6
    ].endswith(", by tester@lab")
    rows = run_cli("history", f"{s.UNSCORED}:n2", "--format", "csv").stdout.splitlines()
    assert rows[0] == "step,run,node,position,occurred_at,recorded_at,actor,type,summary"
    assert rows[-1].startswith(f"2,{s.UNSCORED},n2,")


def test_an_unknown_node_names_what_exists(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.healthy_ablation())
    result = run_cli("history", f"{s.HEALTHY}:n9", ok=False)
    assert result.exit_code == 1
    assert (
        "has no node or fork arm 'n9'; found nodes ['root', 'n1', "
        "'n2'] and arms ['root/with-skill', 'root/no-skill']" in result.stderr
    )
    assert run_cli("history", "no/such-run:n1", ok=False).exit_code == 1


def test_a_fork_child_recorded_as_its_own_run_continues_its_parents_ancestry(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(
        [
            *s.healthy_ablation(),
            f.RunRegistered(
                run="audit/child-run",
                task=s.TASK,
                role="branch-child",
                parent_run=s.HEALTHY,
                parent_node="n1",
            ),
        ]
    )
    document = history(run_cli, "audit/child-run")
    assert [(step["run"], step["node"]) for step in document["steps"]] == [
        (s.HEALTHY, "root"),
        (s.HEALTHY, "n1"),
        ("audit/child-run", "root"),
    ]
    assert "fork.child_scored" in types(document["steps"][1])

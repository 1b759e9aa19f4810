"""`lineage export openlineage`: RunEvents that the OpenLineage client's own models accept and write
back equal.

Each exported line is rebuilt with `openlineage-python`'s generated models (which check run ids are
UUIDs, event times ISO-8601 with a time, event types from the spec's enum, facets with a producer
and schema URL) and serialised again with the client's `Serde`: a field the spec does not know, or
one missing, makes them differ.
"""

from __future__ import annotations

import json
from typing import Any

from openlineage.client.event_v2 import (
    InputDataset,
    Job,
    OutputDataset,
    Run,
    RunEvent,
    RunState,
)
from openlineage.client.generated import parent_run
from openlineage.client.generated.base import RunFacet
from openlineage.client.serde import Serde

from rollout_lineage.bootstrap import Lineage
from tests.conftest import EXAMPLES, Cli
from tests.scenarios import ABLATE_RUN, ablate_run_facts

CONTINUED = "nightly/csv-dedupe__7c1f2a90__continued"
SOURCE = "nightly/csv-dedupe__7c1f2a90"


def _parent(body: dict[str, Any]) -> parent_run.ParentRunFacet:
    root = body.get("root")
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=body["run"]["runId"]),
        job=parent_run.Job(namespace=body["job"]["namespace"], name=body["job"]["name"]),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=root["run"]["runId"]),
            job=parent_run.RootJob(namespace=root["job"]["namespace"], name=root["job"]["name"]),
        )
        if root
        else None,
        producer=body["_producer"],
    )


def _custom(body: dict[str, Any]) -> RunFacet:
    fields = {k: v for k, v in body.items() if not k.startswith("_")}
    facet = RunFacet(producer=body["_producer"]).with_additional_properties(**fields)
    facet._schemaURL = body["_schemaURL"]  # a custom facet names its own schema
    return facet


def as_model(line: dict[str, Any]) -> RunEvent:
    facets = {
        name: _parent(body) if name == "parent" else _custom(body)
        for name, body in line["run"]["facets"].items()
    }
    return RunEvent(
        eventType=RunState(line["eventType"]),
        eventTime=line["eventTime"],
        producer=line["producer"],
        run=Run(runId=line["run"]["runId"], facets=facets),
        job=Job(namespace=line["job"]["namespace"], name=line["job"]["name"]),
        inputs=[InputDataset(namespace=d["namespace"], name=d["name"]) for d in line["inputs"]],
        outputs=[OutputDataset(namespace=d["namespace"], name=d["name"]) for d in line["outputs"]],
    )


def export(run_cli: Cli, *args: str) -> list[dict[str, Any]]:
    lines = run_cli("export", "openlineage", *args).stdout.splitlines()
    events = [json.loads(line) for line in lines]
    for event in events:
        model = as_model(event)
        assert Serde.to_dict(model) == event
        assert event["schemaURL"] == model.schemaURL  # the spec version the client writes
    return events


def by_node(events: list[dict[str, Any]], run_ids: dict[str, str]) -> dict[str, list[dict]]:
    names = {v: k for k, v in run_ids.items()}
    found: dict[str, list[dict]] = {}
    for event in events:
        found.setdefault(names[event["run"]["runId"]], []).append(event)
    return found


def test_every_example_run_exports_valid_run_events(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES))
    events = export(run_cli)
    runs = json.loads(run_cli("runs", "--format", "json").stdout)
    assert {e["job"]["name"] for e in events} == {r["task"] for r in runs}
    starts = [e for e in events if e["eventType"] == "START"]
    assert len(starts) == len({e["run"]["runId"] for e in events})  # one START per node run


def test_ablation_nodes_forks_rewards_and_snapshots(run_cli: Cli) -> None:
    from rollout_lineage.projections.reports.exports.openlineage import run_id

    run_cli("import", str(EXAMPLES / "pr-layout"))
    events = export(run_cli, ABLATE_RUN, "--namespace", "bench")
    ids = {node: run_id(ABLATE_RUN, node) for node in ("root", "n1", "n2", "n3", "n4", "n5")}
    nodes = by_node(events, ids)
    assert {e["job"]["namespace"] for e in events} == {"bench"}
    assert [e["eventType"] for e in nodes["n2"]] == ["START", "COMPLETE"]
    assert [e["eventType"] for e in nodes["n4"]] == ["START", "FAIL"]  # unscored, never read as 0.0
    start, end = nodes["n3"]
    assert start["run"]["facets"]["parent"]["run"]["runId"] == ids["root"]
    assert start["run"]["facets"]["parent"]["root"]["run"]["runId"] == ids["root"]
    delta = start["run"]["facets"]["rolloutLineage_delta"]
    assert (delta["arm"], delta["delta"]["skill_mode"]) == ("no-skill", "no-skill")
    outcome = end["run"]["facets"]["rolloutLineage_outcome"]
    assert (outcome["status"], outcome["reward"]) == ("fail", 0.0)
    assert outcome["tests"]["tests/test_outputs.py::test_keeps_order"] == "failed"
    unscored = nodes["n4"][1]["run"]["facets"]["rolloutLineage_outcome"]
    assert "reward" not in unscored and unscored["reason"].startswith("verifier produced no reward")
    root_end = nodes["root"][1]["run"]["facets"]
    stages = root_end["rolloutLineage_snapshots"]["stages"]
    assert [(s["stage"], s["sandbox_lifetime"]) for s in stages] == [("env-ready", "exported")]
    assert "parent" not in nodes["root"][0]["run"]["facets"]
    # the fork's snapshot: an output of the root, an input of every child restored from it
    snapshot = {"namespace": "bench.snapshots", "name": "bf-snap-csv-dedupe-a41c07e95b2d"}
    assert [{k: d[k] for k in snapshot} for d in nodes["root"][1]["outputs"]] == [snapshot]
    for child in ("n2", "n3", "n4", "n5"):
        assert [{k: d[k] for k in snapshot} for d in nodes[child][0]["inputs"]] == [snapshot]


def test_a_continuation_names_the_run_it_continues(run_cli: Cli) -> None:
    from rollout_lineage.projections.reports.exports.openlineage import run_id

    run_cli("import", str(EXAMPLES / "pr-layout"))
    [start, *_] = export(run_cli, CONTINUED)
    parent = start["run"]["facets"]["parent"]
    registered = json.loads(
        run_cli(
            "sql", f"SELECT parent_node FROM runs WHERE run = '{CONTINUED}'", "--format", "json"
        ).stdout
    )[0]["parent_node"]
    assert parent["run"]["runId"] == run_id(SOURCE, registered or "root")
    assert parent["root"]["run"]["runId"] == run_id(SOURCE, "root")


def test_an_arm_still_running_stays_started(lineage: Lineage, run_cli: Cli) -> None:
    from rollout_lineage.projections.reports.exports.openlineage import run_id

    lineage.record(ablate_run_facts(with_late_reward=False))
    events = export(run_cli, ABLATE_RUN)
    last = [e for e in events if e["run"]["runId"] == run_id(ABLATE_RUN, "n5")]
    assert [e["eventType"] for e in last] == ["START", "RUNNING"]
    assert last[1]["run"]["facets"]["rolloutLineage_outcome"]["status"] == "pending"
    again = run_cli("export", "openlineage", ABLATE_RUN).stdout
    assert again == run_cli("export", "openlineage", ABLATE_RUN).stdout  # same ids, same bytes


def test_an_unknown_run_exports_nothing(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    result = run_cli("export", "openlineage", ABLATE_RUN, "no/such-run", ok=False)
    assert result.exit_code == 1 and result.stdout == ""

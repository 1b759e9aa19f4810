"""`lineage cut-point`: K from the stage registry like benchflow's --cut-stage, failing closed;
served cut points."""

from __future__ import annotations

import json
import re

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.projections.reports.cut_point import (
    ReplayCutPointError,
    resolve_exchanges,
    resolve_stage,
)
from tests import audit_scenarios as s
from tests.conftest import Cli
from tests.scenarios import NIGHTLY_RUN, nightly_run_facts

REGISTRY = [
    {
        "stage": "env-ready",
        "node": "root",
        "exchanges_completed": None,
        "sandbox_ref": "a",
        "environment_ref": None,
    },
    {
        "stage": "post-research",
        "node": "n1",
        "exchanges_completed": 5,
        "sandbox_ref": "b",
        "environment_ref": None,
    },
    {
        "stage": "pre-verify",
        "node": "n2",
        "exchanges_completed": 0,
        "sandbox_ref": "c",
        "environment_ref": None,
    },
]


def test_resolution_rules() -> None:
    assert resolve_stage("r", REGISTRY, "post-research")["k"] == 5
    for stage, message in (
        ("env-ready", "exchanges_completed is unknown (null)"),
        ("pre-verify", "recorded 0 exchanges"),
        (
            "post-verify",
            "did not record stage 'post-verify'; recorded "
            "stages: ['env-ready', 'post-research', 'pre-verify']",
        ),
    ):
        with pytest.raises(ReplayCutPointError, match=re.escape(message)):
            resolve_stage("r", REGISTRY, stage)
    with pytest.raises(ReplayCutPointError, match="recorded no stages"):
        resolve_stage("r", [], "env-ready")
    assert resolve_exchanges("r", REGISTRY, 7, 12)["stage"] == "post-research"
    assert resolve_exchanges("r", REGISTRY, 3, 12)["stage"] == "pre-verify", (
        "0 <= 3: the last stage at or before K"
    )
    with pytest.raises(ReplayCutPointError, match="K >= 1"):
        resolve_exchanges("r", REGISTRY, 0, 12)


def test_a_stage_cut_point_and_the_continuations_served(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.served_cut_point_with_divergence())
    assert run_cli("cut-point", s.SOURCE, "--stage", "post-research").stdout.splitlines() == [
        f"cut point of {s.SOURCE} at stage post-research: K = 12 exchanges (node n1)",
        f"cut points served for continuations of {s.SOURCE}:",
        f"  {s.CONTINUED}: served accounting, stage post-research, "
        f"configured K 12, served K 12, 1 divergence(s)",
        "    exchange 7: served sha256:"
        + "bb" * 32
        + " vs recorded sha256:"
        + "aa" * 32
        + " (15/15 messages)",
        f"    problem: the replay diverged from the recording of {s.SOURCE} at exchange(s) [7]",
    ]
    document = json.loads(
        run_cli("cut-point", s.SOURCE, "--stage", "post-research", "--format", "json").stdout
    )
    assert document["resolved"]["k"] == 12 and document["resolved"]["node"] == "n1"
    [served] = document["served"]
    assert (served["configured_k"], served["served_k"], served["registry_k"]) == (12, 12, 12)
    assert served["divergences"][0]["exchange_index"] == 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--stage", "env-ready"),
            "cannot cut at stage 'env-ready': its exchanges_completed is unknown (null)",
        ),
        (
            ("--stage", "post-verify"),
            "did not record stage 'post-verify'; recorded "
            "stages: ['env-ready', 'post-research', 'pre-verify']",
        ),
        (("--exchanges", "0"), "expected K >= 1 exchanges to replay, found 0"),
    ],
)
def test_fail_closed_with_exit_code_1(
    lineage: Lineage, run_cli: Cli, args: tuple[str, ...], message: str
) -> None:
    lineage.record(nightly_run_facts())
    result = run_cli("cut-point", NIGHTLY_RUN, *args, ok=False)
    assert result.exit_code == 1 and result.stdout == ""
    assert message in result.stderr


def test_zero_exchanges_and_no_stages_fail_closed(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(
        [
            f.RunRegistered(run="r0", task="t"),
            f.StageMarked(run="r0", stage="env-ready", exchanges_completed=0),
            f.RunRegistered(run="bare", task="t"),
        ]
    )
    zero = run_cli("cut-point", "r0", "--stage", "env-ready", ok=False)
    assert (
        zero.exit_code == 1
        and "recorded 0 exchanges completed, so there is nothing to replay" in zero.stderr
    )
    bare = run_cli("cut-point", "bare", "--stage", "env-ready", ok=False)
    assert bare.exit_code == 1 and "run 'bare' recorded no stages" in bare.stderr
    assert (
        run_cli("cut-point", "r0", "--stage", "env-ready", "--exchanges", "3", ok=False).exit_code
        == 2
    )


def test_exchanges_and_the_listing_of_usable_stages(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(
        [
            *nightly_run_facts(),
            f.RunFinished(run=NIGHTLY_RUN, status="completed", exchanges_recorded=12),
        ]
    )
    assert run_cli("cut-point", NIGHTLY_RUN, "--exchanges", "7").stdout.splitlines()[0] == (
        f"cut point of {NIGHTLY_RUN} at K = 7 exchanges; the last "
        f"recorded stage at or before it is post-research (K = 5)"
    )
    assert run_cli("cut-point", NIGHTLY_RUN).stdout.splitlines() == [
        f"stages of {NIGHTLY_RUN} a replay can cut at:",
        "  env-ready: not usable, its exchanges_completed "
        "is unknown (null), and a cut point is never guessed",
        "  post-research: K = 5",
        "  pre-verify: K = 9",
        f"no continuation of {NIGHTLY_RUN} is recorded",
    ]


def test_served_rows_and_as_of_before_the_continuation(lineage: Lineage, run_cli: Cli) -> None:
    facts = s.served_cut_point_with_divergence()
    before = lineage.record(facts[:5]).position
    lineage.record(facts[5:])
    assert run_cli(
        "cut-point", s.SOURCE, "--format", "csv", "--as-of", str(before)
    ).stdout.splitlines() == [
        "run,accounting,stage,configured_k,served_k,registry_k,divergences,problems"
    ]
    rows = run_cli("cut-point", s.SOURCE, "--format", "jsonl").stdout.splitlines()
    assert [json.loads(row)["run"] for row in rows] == [s.CONTINUED]

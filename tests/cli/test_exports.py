"""Facts recorded by hand produce benchflow's files field for field (issue 3's round trips)."""

from __future__ import annotations

import json

from rollout_lineage.bootstrap import Lineage
from tests.conftest import EXAMPLES, Cli
from tests.scenarios import (
    ABLATE_RUN,
    NIGHTLY_RUN,
    ablate_run_facts,
    late_reward_facts,
    nightly_run_facts,
)

ABLATE_DIR = EXAMPLES / "pr-layout" / "ablate-2026-11-02__10-15-00"


def test_ablation_fork_exports_match_the_benchflow_files(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts())
    tree = json.loads(run_cli("export", "tree", ABLATE_RUN).stdout)
    stages = json.loads(run_cli("export", "stages", ABLATE_RUN).stdout)
    ablation = json.loads(run_cli("export", "ablation", f"{ABLATE_RUN}:root").stdout)
    assert tree == json.loads((ABLATE_DIR / "ablation/csv-dedupe/tree.json").read_text())
    assert stages == json.loads(
        (ABLATE_DIR / "ablation/csv-dedupe/stage_snapshots.json").read_text()
    )
    assert ablation == json.loads((ABLATE_DIR / "ablation.json").read_text())


def test_exports_are_byte_stable_with_sorted_keys_and_trailing_newline(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(ablate_run_facts())
    first = run_cli("export", "ablation", f"{ABLATE_RUN}:root").stdout
    run_cli("rebuild")
    assert run_cli("export", "ablation", f"{ABLATE_RUN}:root").stdout == first
    assert first == (ABLATE_DIR / "ablation.json").read_text()


def test_pre_verify_fork_has_a_value_and_no_delta_execution(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(nightly_run_facts())
    tree = json.loads(run_cli("export", "tree", NIGHTLY_RUN).stdout)
    by_id = {node["id"]: node for node in tree["nodes"]}
    assert [node["id"] for node in tree["nodes"]] == ["root", "n1", "n2", "n3", "n4"]
    assert by_id["n2"]["value"] == 0.5 and by_id["n2"]["stage"] == "pre-verify"
    assert "delta_execution" not in by_id["n3"] and by_id["n3"]["reward"] == 1.0
    stages = json.loads(run_cli("export", "stages", NIGHTLY_RUN).stdout)["stages"]
    assert list(stages) == ["env-ready", "post-research", "pre-verify"]
    assert "ephemeral" not in stages["pre-verify"], (
        "no lifetime fact yet: the entry stays as captured"
    )


def test_as_of_shows_the_report_before_and_after_a_later_reward(
    lineage: Lineage, run_cli: Cli
) -> None:
    before = lineage.record(ablate_run_facts(with_late_reward=False)).position
    lineage.record(late_reward_facts())
    early = json.loads(
        run_cli("export", "ablation", f"{ABLATE_RUN}:root", "--as-of", str(before)).stdout
    )
    late = json.loads(run_cli("export", "ablation", f"{ABLATE_RUN}:root").stdout)
    # an arm still running at that position is pending, not an error
    assert early["arms"][3]["status"] == "pending" and early["arms"][3]["reward"] is None
    assert early["arms"][3]["error"] is None
    assert late["arms"][3]["status"] == "pass" and late["arms"][3]["reward"] == 1.0
    rows = json.loads(
        run_cli(
            "sql",
            "SELECT count(*) AS n FROM child_outcomes",
            "--as-of",
            str(before),
            "--format",
            "json",
        ).stdout
    )
    assert rows == [{"n": 3}]


def test_unknown_run_is_a_clear_error(run_cli: Cli) -> None:
    result = run_cli("export", "tree", "no/such-run", ok=False)
    assert result.exit_code == 1
    assert "expected a recorded run 'no/such-run'" in result.stderr

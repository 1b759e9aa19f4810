"""`lineage arms RUN[:FORK]`: the arms x tests table, flips against the parent or a named arm."""

from __future__ import annotations

import json

from rollout_lineage.bootstrap import Lineage
from tests.conftest import EXAMPLES, Cli
from tests.scenarios import ABLATE_RUN, ablate_run_facts

TESTS = (
    "test_dedupe_exact",
    "test_header_preserved",
    "test_keeps_order",
    "test_streaming_large_input",
)


def arms(run_cli: Cli, *args: str) -> list[dict]:
    return json.loads(run_cli("arms", *args, "--format", "json").stdout)


def test_the_ablation_arms_against_the_parent(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    rows = arms(run_cli, f"{ABLATE_RUN}:root")
    assert [(r["arm"], r["node"], r["status"], r["reward"]) for r in rows] == [
        ("parent", "root", "fail", 0.0),
        ("with-skill", "n2", "pass", 1.0),
        ("no-skill", "n3", "fail", 0.0),
        ("inject:prompts/hint.md", "n4", "error", None),
        ('config:{"agent": {"max_turns": 40}}', "n5", "pass", 1.0),
    ]
    assert [row["test_streaming_large_input"] for row in rows] == [
        "passed",
        "passed",
        "failed",
        None,
        "skipped",
    ]
    # the parent's own failure (test_dedupe_exact) passes in every arm that was scored: a flip each
    # time
    assert [row["flips"] for row in rows] == [
        [],
        ["test_dedupe_exact"],
        ["test_dedupe_exact", "test_keeps_order", "test_streaming_large_input"],
        [],
        ["test_dedupe_exact", "test_streaming_large_input"],
    ]


def test_flips_against_a_named_arm_and_the_table_marks_them(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    rows = arms(run_cli, ABLATE_RUN, "--baseline", "with-skill")
    assert rows[0]["arm"] == "with-skill" and rows[0]["flips"] == []
    assert {row["arm"]: row["flips"] for row in rows}["no-skill"] == [
        "test_keeps_order",
        "test_streaming_large_input",
    ]
    table = run_cli("arms", ABLATE_RUN, "--baseline", "with-skill", "--format", "markdown").stdout
    header, _, *lines = table.splitlines()
    # after fork, arm, node, status, reward and the cost columns (tokens, usd, sandbox_seconds)
    assert header.split(" | ")[8:12] == list(TESTS)
    no_skill = next(line for line in lines if "| no-skill |" in line)
    assert "| failed (flip) | failed (flip) |" in no_skill
    csv_text = run_cli("arms", ABLATE_RUN, "--format", "csv").stdout
    assert "(flip)" not in csv_text and csv_text.splitlines()[0].endswith(",flips")


def test_every_fork_of_a_run_without_a_fork_named(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    rows = arms(run_cli, "nightly/csv-dedupe__d4e5f6a7")
    assert [(r["fork"], r["arm"], r["status"]) for r in rows] == [
        (None, "parent", "fail"),
        ("n1", "n3", "pass"),
        ("n1", "n4", "error"),  # the child raised
    ]


def test_an_arm_still_running_is_pending(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(ablate_run_facts(with_late_reward=False))
    rows = arms(run_cli, f"{ABLATE_RUN}:root")
    assert rows[-1]["status"] == "pending" and rows[-1]["reward"] is None


def test_unknown_fork_or_baseline_names_what_exists(run_cli: Cli) -> None:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    result = run_cli("arms", f"{ABLATE_RUN}:n9", ok=False)
    assert result.exit_code == 1 and "found forks ['root']" in result.stderr
    result = run_cli("arms", ABLATE_RUN, "--baseline", "nope", ok=False)
    assert result.exit_code == 1 and "'with-skill'" in result.stderr
    result = run_cli("arms", "no/such-run", ok=False)
    assert result.exit_code == 1 and "expected a recorded run 'no/such-run'" in result.stderr

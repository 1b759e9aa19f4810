"""`lineage audit` end to end on stores built from valid facts: findings, verdict and exit code."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import Lineage
from tests import audit_scenarios as s
from tests.cli_helpers import audit_json, matrix_file
from tests.conftest import Cli


def findings(report: dict, check: str | None = None) -> list[tuple[str, str, str]]:
    return [
        (f["level"], f["subject"], f["message"])
        for f in report["findings"]
        if check in (None, f["check"])
    ]


def test_a_healthy_ablation_is_publishable_with_exit_code_0(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.healthy_ablation())
    result = run_cli("audit")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:3] == [
        "classes: pass 1",
        f"  ok           healthy    {s.HEALTHY}  pass",
    ]
    assert "findings: none" in result.stdout
    assert result.stdout.splitlines()[-1] == "verdict: publishable"


def test_each_quarantine_finding_is_reported_and_named_with_exit_code_10(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    lineage.record(s.quarantine_store())
    report = audit_json(run_cli, "--matrix", str(matrix_file(tmp_path)), code=10)
    assert report["verdict"] == "publishable with quarantines" and report["exit_code"] == 10
    assert (
        "quarantine",
        f"{s.UNSCORED}:root",
        "arm no-skill (child 1) unscored: verifier produced no reward: reward.txt missing",
    ) in findings(report, "fork-consistency")
    assert (
        "quarantine",
        f"{s.PARTIAL}:root",
        "the fork ended partial: RuntimeError: sandbox died",
    ) in findings(report)
    assert (
        "quarantine",
        f"{s.CUSTODY}:root",
        "custody failed at release: ArtifactCustodyError: agent/trajectory.jsonl could "
        "not be moved back; the entries are preserved at /jobs/audit/branches/root/parent",
    ) in findings(report, "custody")
    assert findings(report, "cut-point") == [
        (
            "quarantine",
            s.CONTINUED,
            f"the replay diverged from the recording of {s.SOURCE} at exchange(s) [7]",
        )
    ]
    slots = {slot["trial"]: slot["status"] for slot in report["matrix"]}
    assert slots == {
        "1": "healthy",
        "2": "healthy",
        "3": "healthy",
        "4": "healthy",
        "5": "healthy",
        "6": "duplicate",
        "7": "missing",
    }
    duplicate = "slot (csv-dedupe, claude-agent-acp, claude-sonnet-4-5, no-skill, 6)"
    missing = "slot (csv-dedupe, claude-agent-acp, claude-sonnet-4-5, no-skill, 7)"
    assert [(level, subject) for level, subject, _ in findings(report, "matrix")] == [
        ("quarantine", duplicate),
        ("quarantine", missing),
    ]
    assert report["quarantined"] == sorted(
        [s.CUSTODY, s.PARTIAL, s.CONTINUED, s.UNSCORED, duplicate, missing]
    )
    assert s.HEALTHY not in report["quarantined"]
    health = {row["run"]: (row["health"], row["superseded_by"]) for row in report["runs"]}
    assert health[s.SOURCE] == ("unhealthy", s.CONTINUED), (
        "the failed source is superseded by its continuation"
    )
    assert {level for level, subject, _ in findings(report, "run-health")} == {"warning"}
    assert report["integrity"]["intact"] is True


def test_the_text_report_ends_with_the_verdict_naming_quarantines(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(s.unscored_arm())
    result = run_cli("audit", ok=False)
    assert result.exit_code == 11, "its one run is quarantined: nothing is left to publish"
    assert (
        f"  quarantine       fork-consistency       "
        f"{s.UNSCORED}:root: arm no-skill (child 1) unscored:" in result.stdout
    )
    assert result.stdout.splitlines()[-1] == (
        f"verdict: not publishable: 1 blocker(s) (selection 1); 1 quarantined "
        f"(fork-consistency 1): {s.UNSCORED}"
    )
    # The run list agrees with the verdict: a healthy run quarantined for its arm is listed as
    # quarantined.
    (listed,) = [line for line in result.stdout.splitlines() if f"  {s.UNSCORED}  " in line]
    assert listed.split()[:2] == ["quarantined", "healthy"]
    report = audit_json(run_cli, code=11)
    assert [(r["run"], r["health"], r["status"]) for r in report["runs"]] == [
        (s.UNSCORED, "healthy", "quarantined")
    ]
    assert findings(report, "selection") == [
        (
            "not-publishable",
            "store",
            "no healthy model run remains: all 1 current model run(s) are quarantined",
        )
    ]


def test_an_ephemeral_snapshot_presented_for_restore_makes_the_store_not_publishable(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(s.quarantine_store() + s.ephemeral_snapshot_restored())
    report = audit_json(run_cli, code=11)
    assert report["verdict"] == "not publishable"
    snap = s.ref(s.LIE, "pre-verify")
    [(level, subject, message)] = findings(report, "snapshot-truthfulness")
    assert (level, subject) == ("not-publishable", snap)
    assert message.startswith(
        f"fork n1 of {s.LIE} (at pre-verify) presents "
        f"snapshot {snap} as restorable, but it was discarded"
    )
    assert report["findings"][0]["level"] == "not-publishable", "blocking findings come first"


def test_as_of_shows_the_audit_before_a_later_event(lineage: Lineage, run_cli: Cli) -> None:
    before = lineage.record(s.healthy_ablation()).position
    lineage.record(s.ephemeral_snapshot_restored())
    assert run_cli("audit", "--as-of", str(before)).exit_code == 0
    assert audit_json(run_cli, "--as-of", str(before), code=0)["position"] == before
    assert audit_json(run_cli, code=11)["verdict"] == "not publishable"


def test_as_of_before_a_late_reward_sees_the_open_fork(lineage: Lineage, run_cli: Cli) -> None:
    before = lineage.record(s.healthy_ablation(scored=False)).position
    lineage.record(s.late_no_skill_score())
    early = audit_json(run_cli, "--as-of", str(before), code=11)
    assert (
        "quarantine",
        f"{s.HEALTHY}:root",
        "the fork is still open: not every arm has an outcome",
    ) in findings(early)
    assert (
        "quarantine",
        f"{s.HEALTHY}:root",
        "2 held entries were never released and the fork is still open",
    ) in findings(early)
    assert audit_json(run_cli, code=0)["quarantined"] == []


def test_filters_select_runs(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.healthy_ablation() + s.unscored_arm())
    assert [r["run"] for r in audit_json(run_cli, "--run", s.HEALTHY, code=0)["runs"]] == [
        s.HEALTHY
    ]
    assert audit_json(run_cli, "--task", "csv-dedupe", code=10)["quarantined"] == [s.UNSCORED]
    assert (
        audit_json(run_cli, "--since", "2026-11-02T09:00:00Z", code=10)["filters"]["since"]
        == "2026-11-02T09:00:00+00:00"
    )
    unknown = run_cli("audit", "--task", "no-such-task", ok=False)
    assert unknown.exit_code == 1
    assert (
        "expected a task some run recorded for --task, found 'no-such-task'; recorded tasks: "
        "csv-dedupe" in unknown.stderr
    )
    assert "`lineage runs`" in unknown.stderr
    prefix = s.HEALTHY[: len(s.HEALTHY) - 3]
    assert [r["run"] for r in audit_json(run_cli, "--run", prefix, code=0)["runs"]] == [s.HEALTHY]
    missing = run_cli("audit", "--run", "no-such-run", ok=False)
    assert missing.exit_code == 1 and "found 'no-such-run'" in missing.stderr
    empty = audit_json(run_cli, "--since", "2099-01-01T00:00:00Z", code=11)
    assert findings(empty) == [
        (
            "not-publishable",
            "store",
            "no model run matched the selection, so there is nothing to publish",
        )
    ]
    assert run_cli("audit", "--since", "yesterday", ok=False).exit_code == 1


def test_a_tampered_log_is_not_publishable(lineage: Lineage, run_cli: Cli) -> None:
    lineage.record(s.healthy_ablation())
    run_cli("project")
    with sqlite3.connect(run_cli.home / "events.sqlite") as db:
        state = bytearray(
            db.execute("SELECT state FROM stored_events WHERE rowid = 1").fetchone()[0]
        )
        state[state.index(b"claude")] ^= 0x01
        db.execute("UPDATE stored_events SET state = ? WHERE rowid = 1", (bytes(state),))
    report = audit_json(run_cli, code=11)
    assert report["integrity"]["intact"] is False and report["integrity"]["first_bad_position"] == 1
    assert [(level, subject) for level, subject, _ in findings(report, "integrity")] == [
        ("not-publishable", "log")
    ]


def test_row_formats_list_the_findings_and_the_verdict_goes_to_stderr(
    lineage: Lineage, run_cli: Cli
) -> None:
    lineage.record(s.healthy_ablation() + s.partial_fork())
    result = run_cli("audit", "--format", "csv", ok=False)
    assert result.exit_code == 10
    assert result.stdout.splitlines()[0] == "level,check,subject,run,address,message"
    assert len(result.stdout.splitlines()) == 3
    assert "verdict: publishable with quarantines" in result.stderr


def test_matrix_in_csv_and_as_a_list_of_slots(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    lineage.record(s.healthy_ablation())
    csv_path = tmp_path / "matrix.csv"
    csv_path.write_text(
        "task,agent,model,skill_mode,trial\ncsv-dedupe,claude-agent-acp,claude-sonnet-4-5,no-skill,1\n"
    )
    assert [
        slot["status"] for slot in audit_json(run_cli, "--matrix", str(csv_path), code=0)["matrix"]
    ] == ["healthy"]
    slots = [
        {
            "task": "csv-dedupe",
            "agent": "claude-agent-acp",
            "model": "claude-sonnet-4-5",
            "skill_mode": "no-skill",
            "trial": t,
        }
        for t in (1, 2)
    ]
    report = audit_json(run_cli, "--matrix", str(matrix_file(tmp_path, {"slots": slots})), code=10)
    assert [slot["status"] for slot in report["matrix"]] == ["healthy", "missing"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("task,agent,colour\nt,a,red\n", "line 2: expected a task and only the fields"),
        ('[{"agent": "a"}]', "slot 0: expected a task"),
        ('[{"task": "t", "trial": 1.5}]', "slot 0, field trial: expected a string"),
        ('[{"task": "t"}, {"task": "t"}]', "is listed twice"),
        ("{not json", "expected JSON, found invalid JSON"),
        # An attack review's finds: each was read as something else, or as no slot at all.
        ("task,agent,task\nt,a,u\n", "expected each column once, found ['task'] twice"),
        ("task,agent\nt,a,extra\n", "line 2: expected 2 values, found 3"),
        ("task,agent\n", "expected at least one slot, found none"),
        ("[]", "expected at least one slot, found none"),
    ],
)
def test_a_malformed_matrix_is_a_clear_error(
    lineage: Lineage, run_cli: Cli, tmp_path: Path, content: str, expected: str
) -> None:
    lineage.record(s.healthy_ablation())
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = run_cli("audit", "--matrix", str(path), ok=False)
    assert result.exit_code == 1 and expected in result.stderr


def test_help_documents_the_exit_codes(run_cli: Cli) -> None:
    text = run_cli("audit", "--help").stdout
    assert "0 publishable; 10 publishable with quarantines (named);" in " ".join(text.split())
    assert "11 not publishable" in " ".join(text.split())


def test_the_matrix_examples_in_help_and_readme_are_files_audit_accepts(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    """Each example the docs show, written to a file as a user would copy it, is read with the slots
    it says."""
    import re

    lineage.record(s.healthy_ablation())
    help_text = run_cli("audit", "--help").stdout
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    for source in (help_text, readme):
        csv_lines = re.findall(r"(task,agent,model,skill_mode,trial|csv-dedupe,claude\S+)", source)
        examples = {
            "m.csv": "\n".join(csv_lines[:2]) + "\n",
            "list.json": re.search(r'(\[\{"task".*?\}\])', source).group(1),
            "axes.json": re.search(r'(\{"task": \["csv-dedupe"\].*?\]\})', source).group(1),
        }
        sizes = {}
        for name, text in examples.items():
            path = tmp_path / name
            path.write_text(text, encoding="utf-8")
            result = run_cli("audit", "--format", "json", "--matrix", str(path), ok=False)
            assert result.exit_code in (10, 11), result.stderr  # some of its slots are missing
            sizes[name] = len(json.loads(result.stdout)["matrix"])
        assert sizes == {"m.csv": 1, "list.json": 1, "axes.json": 6}


def test_a_matrix_in_another_encoding_is_refused(
    lineage: Lineage, run_cli: Cli, tmp_path: Path
) -> None:
    """Read as UTF-8 with replacement characters, a UTF-16 file gave no slot and an audit verdict
    (exit 10)."""
    lineage.record(s.healthy_ablation())
    path = tmp_path / "matrix.csv"
    path.write_text("task,agent\nt,a\n", encoding="utf-16")
    result = run_cli("audit", "--matrix", str(path), ok=False)
    assert result.exit_code == 1 and "expected UTF-8 text" in result.stderr

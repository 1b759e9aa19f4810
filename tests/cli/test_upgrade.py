"""Stores written by earlier landings stay usable: their chain verifies, the read models build, and
importing the same runs again appends only what this version records beyond them (where each run
lives, its release-gate evidence, what solve rates read of it), never a conflict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import EXAMPLES, Cli

LANDING_1 = Path(__file__).resolve().parents[1] / "stores" / "landing-1-examples.sqlite"
GATE = Path(__file__).resolve().parents[1] / "stores" / "gate-examples.sqlite"
NIGHTLY = EXAMPLES / "pr-layout" / "jobs" / "nightly" / "csv-dedupe__7c1f2a90"
#: The examples these stores were written from (`import examples` then): the same runs again.
EARLIER = (str(EXAMPLES / "pr-layout"), str(EXAMPLES / "public"))


def log(run_cli: Cli) -> list[dict]:
    return [json.loads(line) for line in run_cli("log", "--format", "jsonl").stdout.splitlines()]


#: The main-line fixture's branch records (docs/benchflow-formats.md §16): a store written before
#: they were read learns them when the trial is imported again, as new facts, never a conflict.
BRANCH_RECORDS = {"fork.described", "fork.child_described", "run.trial_described"}


def test_a_store_from_the_first_landing_takes_the_same_runs_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(LANDING_1, home / "events.sqlite")
    run_cli = Cli(home)
    assert "intact" in run_cli("verify").stdout
    before = log(run_cli)
    assert len(before) == 88 and {e["actor"] for e in before} == {"landing-1@lab"}

    result = run_cli("import", *EARLIER)
    assert "0 runs rejected" in result.stderr and "left out" not in result.stderr
    added = log(run_cli)[len(before) :]
    # Beyond where each run lives, this version records that an ephemeral stage entry discards its
    # environment snapshot too (rule 6), which the first landing left as merely captured, and each
    # child's mounted/ archive as a custody hand-off (rule 8), the release gate's evidence and what
    # solve rates read of each trial folder: new facts, never a conflict.
    assert added and {e["type"] for e in added} == {
        "run.located",
        "snapshot.discarded",
        "custody.handed_off",
        "run.evidence_observed",
        "run.sample_observed",
        *BRANCH_RECORDS,
    }
    located = [e for e in added if e["type"] == "run.located"]
    # the directories the harness recorded were already known
    assert {e["fact"]["kind"] for e in located} == {"read"}
    assert [e["fact"]["ref"] for e in added if e["type"] == "snapshot.discarded"] == [
        "env-snap-csv-dedupe-0c55e1a7"
    ]
    assert "0 events appended" in run_cli("import", *EARLIER).stderr

    tree = json.loads(run_cli("export", "tree", "nightly/csv-dedupe__7c1f2a90").stdout)
    assert tree == json.loads((NIGHTLY / "tree.json").read_text())
    [row] = json.loads(
        run_cli(
            "sql",
            "SELECT run_dir, location FROM runs WHERE run = 'nightly/csv-dedupe__7c1f2a90'",
            "--format",
            "json",
        ).stdout
    )
    assert row == {
        "run_dir": "/home/ci/jobs/nightly/csv-dedupe__7c1f2a90",
        "location": str(NIGHTLY.resolve()),
    }


def test_a_store_with_release_gate_evidence_and_a_receipt_takes_the_same_runs_again(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(GATE, home / "events.sqlite")
    run_cli = Cli(home)
    assert "intact" in run_cli("verify").stdout
    before = log(run_cli)
    assert len(before) == 103 and {e["actor"] for e in before} == {"gate@lab"}

    result = run_cli("import", *EARLIER)
    assert "0 runs rejected" in result.stderr
    added = log(run_cli)[len(before) :]
    # New facts only (where the runs were read; the environment discards and mounted/ hand-offs that
    # the writer rules 6 and 8 read since this store was written; the review skill's review of each
    # run's files, a new observation of the same node; what solve rates read of each trial
    # folder), never a conflict.
    assert {e["type"] for e in added} <= {
        "run.located",
        "snapshot.discarded",
        "custody.handed_off",
        "run.evidence_observed",
        "run.sample_observed",
        *BRANCH_RECORDS,
    }
    evidence = run_cli(
        "sql", "SELECT count(*) AS n FROM evidence", "--format", "csv"
    ).stdout.splitlines()[1]
    assert evidence == "13"
    [receipt] = json.loads(
        run_cli("sql", "SELECT run, result, qualified FROM receipts", "--format", "json").stdout
    )
    assert receipt == {
        "run": "nightly/csv-dedupe__d4e5f6a7",
        "result": "sealed",
        "qualified": False,
    }
    audit = run_cli("audit", "--run", "nightly/csv-dedupe__d4e5f6a7", ok=False)
    assert audit.exit_code == 11 and "[preserved, unqualified]" in audit.stdout


LANDING_2 = Path(__file__).resolve().parents[1] / "stores" / "landing-2-examples.sqlite"
ABLATE = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"


def test_a_store_from_the_second_landing_takes_the_same_runs_again(tmp_path: Path) -> None:
    """The landing before the writer rules, the release gate and the read-path checks: it verifies,
    its read models build (with the head they come from), and the same runs import again with new
    facts only."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(LANDING_2, home / "events.sqlite")
    run_cli = Cli(home)
    assert "match a rebuild" in run_cli("verify", "--read-models").stdout
    before = log(run_cli)
    assert len(before) == 88 and {e["actor"] for e in before} == {"landing-2@lab"}

    result = run_cli("import", *EARLIER)
    assert "0 runs rejected" in result.stderr and "left out" not in result.stderr
    added = log(run_cli)[len(before) :]
    assert {e["type"] for e in added} <= {
        "run.located",
        "snapshot.discarded",
        "custody.handed_off",
        "run.evidence_observed",
        "run.sample_observed",
        *BRANCH_RECORDS,
    }
    assert "0 events appended" in run_cli("import", *EARLIER).stderr
    assert json.loads(
        run_cli("export", "tree", "nightly/csv-dedupe__7c1f2a90").stdout
    ) == json.loads((NIGHTLY / "tree.json").read_text())
    written = EXAMPLES / "pr-layout" / ABLATE.split("/")[0] / "ablation.json"
    assert json.loads(run_cli("export", "ablation", f"{ABLATE}:root").stdout) == json.loads(
        written.read_text()
    )


REVIEW_1 = Path(__file__).resolve().parents[1] / "stores" / "review-1-examples.sqlite"


def test_a_store_from_before_the_task_skill_sources_takes_the_same_runs_again(
    tmp_path: Path,
) -> None:
    """Its reviews carry no `task_skills_source` (read as None: nothing recorded where names came
    from); the same runs import again with where they were read and what solve rates read of them as
    the only new facts, and the audit is unchanged."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REVIEW_1, home / "events.sqlite")
    run_cli = Cli(home)
    assert "match a rebuild" in run_cli("verify", "--read-models").stdout
    before = log(run_cli)
    assert len(before) == 106 and {e["actor"] for e in before} == {"review-1@lab"}
    audited = run_cli("audit", ok=False)
    reviews = run_cli(
        "sql", "SELECT review FROM evidence WHERE review IS NOT NULL", "--format", "json"
    )
    skills = [r["review"]["skills"] for r in json.loads(reviews.stdout)]
    assert skills and all(s is None or s.get("task_skills_source") is None for s in skills)

    result = run_cli("import", *EARLIER)
    assert "0 runs rejected" in result.stderr
    added = {e["type"] for e in log(run_cli)[len(before) :]}
    assert added <= {"run.located", "run.sample_observed", *BRANCH_RECORDS}
    again = run_cli("audit", ok=False)
    assert again.exit_code == audited.exit_code
    body = [
        line
        for line in audited.stdout.splitlines()
        if "log position" not in line and "head" not in line
    ]
    assert [
        line
        for line in again.stdout.splitlines()
        if "log position" not in line and "head" not in line
    ] == body

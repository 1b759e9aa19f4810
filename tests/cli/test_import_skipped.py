"""`lineage import` names every folder it leaves out, with the reason (issue #27): `lineage import
examples` said "6 runs, 0 rejected" and nothing of two SkillsBench trials (only
`verifier/ctrf.json`) and `user_dogfood_results` (a result.json without config.json)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.conftest import EXAMPLES, Cli

PUBLIC = EXAMPLES / "public" / "benchflow-ai"
TRIALS = PUBLIC / "skillsbench-trajectories" / "claude-opus-4-5-0126-wenbo"
HARBOR = TRIALS / "claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920"
CTRF_ONLY = (
    TRIALS / "claude-code-claude-opus-4-5-skills-citation-check-229ca9",
    TRIALS / "claude-code-claude-opus-4-5-skills-exoplanet-detection-period-32bfa7",
)
DOGFOOD = PUBLIC / "benchflow" / "docs" / "examples" / "user_dogfood_results"
SUBAGENTS = PUBLIC / "benchflow" / "tests" / "fixtures" / "claude_subagents"


def skipped_lines(stderr: str) -> dict[str, str]:
    return {
        line.split(": ", 1)[0].removeprefix("skipped "): line.split(": ", 1)[1]
        for line in stderr.splitlines()
        if line.startswith("skipped ")
    }


def test_importing_the_examples_names_each_folder_it_leaves_out(run_cli: Cli) -> None:
    result = run_cli("import", str(EXAMPLES))
    said = skipped_lines(result.stderr)
    assert set(said) == {str(p) for p in (*CTRF_ONLY, DOGFOOD, SUBAGENTS)}, result.stderr
    for trial in CTRF_ONLY:
        assert "verifier/ctrf.json" in said[str(trial)] and "no result.json" in said[str(trial)]
    assert "config.json" in said[str(DOGFOOD)] and "user_rounds.jsonl" in said[str(DOGFOOD)]
    assert "plan_subagent.llm_trajectory.jsonl" in said[str(SUBAGENTS)]
    assert "10 runs," in result.stderr and result.stderr.rstrip().endswith("4 folders skipped")


def test_format_json_lists_what_was_left_out(run_cli: Cli) -> None:
    result = run_cli("import", str(TRIALS), "--format", "json")
    document = json.loads(result.stdout)
    assert document["runs"] == 1 and document["folders_skipped"] == 2
    assert [s["path"] for s in document["skipped"]] == [str(p) for p in CTRF_ONLY]
    assert all("no result.json" in s["reason"] for s in document["skipped"])
    assert document["rejected"] == []
    refused = run_cli("import", str(TRIALS), "--format", "json", "--dry-run", ok=False)
    assert refused.exit_code == 2 and "--dry-run" in refused.stderr


def test_hidden_folders_links_and_stray_files_are_named(run_cli: Cli, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    shutil.copytree(HARBOR, jobs / "visible")
    shutil.copytree(HARBOR, jobs / ".hidden" / "trial")
    shutil.copytree(HARBOR, tmp_path / "elsewhere" / "trial")
    os.symlink(tmp_path / "elsewhere", jobs / "linked")
    (jobs / "notes").mkdir()
    (jobs / "notes" / "todo.txt").write_text("rerun the failed arm")
    (jobs / "visible" / "stray").mkdir()  # inside a run: part of it, never named
    (jobs / "visible" / "stray" / "x.txt").write_text("x")
    said = skipped_lines(run_cli("import", str(jobs)).stderr)
    assert set(said) == {str(jobs / name) for name in (".hidden", "linked", "notes")}, said
    assert "hidden" in said[str(jobs / ".hidden")]
    assert "link" in said[str(jobs / "linked")] and "not followed" in said[str(jobs / "linked")]
    assert "todo.txt" in said[str(jobs / "notes")]


def test_a_folder_with_no_run_says_what_it_skipped(run_cli: Cli) -> None:
    refused = run_cli("import", str(CTRF_ONLY[0]), ok=False)
    assert refused.exit_code == 1
    assert "found no run directories" in refused.stderr
    assert "verifier/ctrf.json" in refused.stderr and "no result.json" in refused.stderr


def test_a_part_of_a_trial_named_alone_is_named_as_given(run_cli: Cli) -> None:
    """Never a folder above the paths the user named."""
    given = CTRF_ONLY[0] / "verifier"
    refused = run_cli("import", str(given), ok=False)
    assert f"skipped {given}: not a run" in refused.stderr

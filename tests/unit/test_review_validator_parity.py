"""The artifact contract says what benchflow's own validator says, sentence for sentence.

Inputs: run directories built by benchflow's writer functions (`tests/rollout_writer.py`:
`_init_rollout`, `_write_config`, `_write_llm_trajectory`, `_build_rollout_result`,
`build_rollout_results_record`), with one `damage` step where a scenario needs one. Judge:
`VALIDATOR_VERDICTS`, what
`.agents/skills/benchflow-experiment-review/scripts/validate_run_artifacts.py` at benchflow 17a3573b
printed for each directory (observed by running it; `tests/validator_scenarios.py` says how).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_lineage.adapters.review_skill.artifact_contract import check_rollout
from rollout_lineage.adapters.review_skill.review import read_rollout
from rollout_lineage.adapters.rundir import RunFolder
from rollout_lineage.domain.facts.review_facts import ArtifactIssue
from tests.validator_scenarios import SCENARIOS, VALIDATOR_VERDICTS

#: Checks the validator states of a whole file (no line), though we also record the first line
#: concerned.
WHOLE_FILE = (
    "missing",
    "empty",
    "no_agent_events",
    "no_requests",
    "no_responses",
    "fewer_responses",
)
WHOLE_FILE_TOO = ("llm.no_usage", "llm.usage_per_response", "results.row_count")


def validator_sentence(issue: ArtifactIssue) -> str:
    """How the validator words the issue, with the run directory written `<run>`."""
    if issue.check.startswith("result."):
        return issue.detail
    if issue.check.endswith(".missing"):
        return issue.detail.replace(f": {issue.file}", f": <run>/{issue.file}")
    whole = issue.check.endswith(WHOLE_FILE) or issue.check in WHOLE_FILE_TOO
    line = "" if whole or issue.line is None else f":{issue.line}"
    return f"<run>/{issue.file}{line}: {issue.detail}"


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_issue_is_the_validators(scenario: str, tmp_path: Path) -> None:
    run_dir = SCENARIOS[scenario](tmp_path / "jobs")
    issues = check_rollout(read_rollout(RunFolder(run_dir)))
    healthy, expected = VALIDATOR_VERDICTS[scenario]
    assert {validator_sentence(i) for i in issues} == set(expected)
    assert (not issues) == healthy

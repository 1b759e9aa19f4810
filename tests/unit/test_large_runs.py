"""Runs of the size users have: one Harbor trial whose CTRF lists 200,000 tests, under the default memory cap.

Per-test read models used to expand the test map once per test (quadratic): 2,000 tests exhausted the cap and
200,000 failed even with 8 GB. The CTRF here is the shape pytest-json-ctrf writes (`results.tests[]` entries
with name, status, duration, start, stop), copied around the public Harbor trial.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli

TRIAL = (
    EXAMPLES / "public" / "benchflow-ai" / "skillsbench-trajectories" / "claude-opus-4-5-0126-wenbo"
)
RUN = "claude-opus-4-5-0126-wenbo/claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920"
N_TESTS = 200_000


def trial_with_tests(tmp_path: Path, n: int, params: str = "") -> Path:
    jobs = tmp_path / "claude-opus-4-5-0126-wenbo"
    trial = RUN.split("/")[1]
    shutil.copytree(TRIAL / trial, jobs / trial)
    ctrf = jobs / trial / "verifier" / "ctrf.json"
    document = json.loads(ctrf.read_text())
    document["results"]["tests"] = [
        {
            "name": f"tests/test_outputs.py::TestCase{i // 1000}::test_case_{i}{params}",
            "status": "failed" if i % 7 == 0 else "passed",
            "duration": 0.0012,
            "start": 1769398357.2487,
            "stop": 1769398357.2499,
        }
        for i in range(n)
    ]
    document["results"]["summary"]["tests"] = n
    ctrf.write_text(json.dumps(document))
    return jobs


@pytest.mark.parametrize(
    "params", ["", "[" + "p" * 20 + "]"], ids=["short names", "parametrised names"]
)
def test_a_trial_with_200k_tests_imports_projects_exports_and_audits(
    run_cli: Cli, tmp_path: Path, params: str
) -> None:
    run_cli("import", str(trial_with_tests(tmp_path, N_TESTS, params)))
    counts = json.loads(
        run_cli(
            "sql",
            "SELECT status, count(*) AS n FROM tests GROUP BY ALL ORDER BY status",
            "--format",
            "json",
        ).stdout
    )
    assert counts == [
        {"status": "failed", "n": (N_TESTS + 6) // 7},
        {"status": "passed", "n": N_TESTS - (N_TESTS + 6) // 7},
    ]
    assert json.loads(run_cli("export", "tree", RUN).stdout)["nodes"][0]["id"] == "root"
    assert run_cli("audit", ok=False).exit_code in (0, 10, 11)
    assert "rebuilt" in run_cli("rebuild").stderr
    assert "match a rebuild" in run_cli("verify", "--read-models").stdout

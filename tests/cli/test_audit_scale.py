"""`lineage audit` at scale: counts per class first, runs filtered, grouped and paged without
changing the verdict, a verdict line that names counts and a few runs, and the bundled examples that
show each verdict (exit 0, 10 and 11).

Inputs: run directories written by benchflow's writer functions at 17a3573b as
`tests/rollout_writer.py` mirrors them (`_init_rollout`, `_write_config`, `_write_llm_trajectory`,
`_build_rollout_result`, `build_rollout_results_record`; `damage.delete` for a missing artifact),
audited in place (`lineage audit PATH`) or imported into a store.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, Cli
from tests.publishable_batch import write_batch
from tests.rollout_writer import FIXING, bash, damage, fixing_run, scripted_run, write_rollout

TASK = "csv-dedupe"
OWN = {"claude-agent-acp": "code-review", "codex-acp": "skill-creator", "openhands": "iterate"}


def healthy(n: int, *, agent: str = "claude-agent-acp", model: str = "claude-sonnet-4-5") -> list:
    """`n` passing no-skill runs, each its own sandbox (so its own rollout name)."""
    return [
        fixing_run(TASK, agent=agent, model=model, sandbox_id=f"sb-{agent}-{model}-{i}")
        for i in range(n)
    ]


def leaking() -> object:
    """An OpenHands no-skill run that reads a skill's SKILL.md: leakage."""
    read = bash("cat /root/.agents/skills/csv-tools/SKILL.md", "---\nname: csv-tools\n---\n")
    return scripted_run(TASK, [read, *FIXING], agent="openhands", model="gpt-5", final="Fixed.")


def unloaded() -> object:
    """A Codex with-skill run whose catalog shows only Codex's own skill, invoking nothing."""
    own = (OWN["codex-acp"], "Create a skill.")
    return fixing_run(
        TASK,
        agent="codex-acp",
        model="gpt-5",
        skill_mode="with-skill",
        catalog=[own],
        harness_skills=(own[0],),
    )


def batch(root: Path, n_healthy: int = 4) -> dict[str, Path]:
    """A mixed batch under `root/jobs`: healthy Claude Code runs, one fail, one leakage, one
    experiment-fidelity and one infrastructure run; the run directories by role."""
    jobs = root / "jobs"
    dirs = {f"healthy-{i}": write_rollout(jobs, run) for i, run in enumerate(healthy(n_healthy))}
    failing = fixing_run(TASK, rewards={"reward": 0.0}, sandbox_id="sb-fail")
    dirs["fail"] = write_rollout(jobs, failing)
    dirs["leakage"] = write_rollout(jobs, leaking())
    dirs["experiment_fidelity"] = write_rollout(jobs, unloaded())
    broken = fixing_run(TASK, model="claude-opus-4-5", sandbox_id="sb-broken")
    dirs["infrastructure"] = write_rollout(jobs, broken)
    damage.delete(dirs["infrastructure"], "trajectory/llm_trajectory.jsonl")
    return dirs


def run_id(run_dir: Path) -> str:
    return f"{run_dir.parent.name}/{run_dir.name}"


def audit(cli: Cli, *args: str, code: int) -> str:
    result = cli("audit", *args, ok=False)
    assert result.exit_code == code, result.stdout + result.stderr
    return result.stdout


def audit_json(cli: Cli, *args: str, code: int) -> dict:
    return json.loads(audit(cli, *args, "--format", "json", code=code))


@pytest.fixture
def mixed(tmp_path: Path) -> tuple[Cli, dict[str, Path]]:
    """The mixed batch, imported into a store."""
    dirs = batch(tmp_path / "runs")
    cli = Cli(tmp_path / "home")
    cli("import", str(tmp_path / "runs" / "jobs"))
    return cli, dirs


def test_counts_per_class_come_first_and_the_verdict_line_names_counts(
    mixed: tuple[Cli, dict[str, Path]],
) -> None:
    cli, dirs = mixed
    lines = audit(cli, code=10).splitlines()
    assert lines[0].endswith(": 8 run(s)")
    assert lines[1] == (
        "classes: pass 4, fail 1, leakage 1, experiment_fidelity 1, infrastructure 1"
    )
    withheld = sorted(run_id(dirs[k]) for k in ("leakage", "experiment_fidelity", "infrastructure"))
    assert lines[-1] == (
        "verdict: publishable with quarantines: 3 quarantined "
        f"(leakage 1, experiment_fidelity 1, infrastructure 1): {', '.join(withheld)}"
    )


def test_a_filter_lists_only_its_runs_and_never_changes_the_verdict(
    mixed: tuple[Cli, dict[str, Path]],
) -> None:
    cli, dirs = mixed
    whole = audit(cli, code=10).splitlines()
    leakage = audit(cli, "--class", "leakage", code=10).splitlines()
    assert leakage[:3] == [whole[0], whole[1], "showing 1-1 of 1 matching run(s) (class leakage)"]
    [listed] = [line for line in leakage if line.startswith("  quarantined")]
    assert run_id(dirs["leakage"]) in listed
    findings = leakage[leakage.index("findings:") + 1 : -2]
    assert findings and all(run_id(dirs["leakage"]) in line for line in findings)
    assert leakage[-1] == whole[-1], "the verdict is the batch's, whatever is listed"
    by_agent = audit_json(cli, "--agent", "codex-acp", "--agent", "openhands", code=10)
    assert sorted(r["run"] for r in by_agent["runs"]) == sorted(
        run_id(dirs[k]) for k in ("leakage", "experiment_fidelity")
    )
    by_model = audit_json(cli, "--model", "claude-opus-4-5", code=10)
    assert [r["run"] for r in by_model["runs"]] == [run_id(dirs["infrastructure"])]
    with_skill = audit_json(cli, "--skill-mode", "with-skill", "--class", "pass", code=10)
    assert with_skill["runs"] == [] and with_skill["view"]["matched"]["runs"] == 0
    assert (
        with_skill["quarantined"]
        == by_model["quarantined"]
        == audit_json(cli, code=10)["quarantined"]
    ), "--format json keeps every quarantined run"


def test_group_by_gives_one_row_per_value_with_its_classes(
    mixed: tuple[Cli, dict[str, Path]],
) -> None:
    cli, _ = mixed
    text = audit(cli, "--group-by", "agent", code=10).splitlines()
    assert text[2] == "showing 1-3 of 3 group(s) by agent"
    assert text[3].split() == ["agent", "runs", "withheld", "classes"]
    assert text[4].split() == [
        "claude-agent-acp",
        "6",
        "1",
        "pass",
        "4,",
        "fail",
        "1,",
        "infrastructure",
        "1",
    ]
    rows = cli("audit", "--group-by", "class", "--format", "csv", ok=False).stdout.splitlines()
    assert rows[0].startswith("class,runs,withheld,pass,fail,normal_timeout,")
    assert rows[1:3] == ["pass,4,0,4,,,,,,", "fail,1,0,,1,,,,,"]


def test_runs_are_listed_a_page_at_a_time(tmp_path: Path) -> None:
    """At 60 runs the text lists 50 and says how to see the rest; the verdict line names three."""
    dirs = batch(tmp_path / "runs", n_healthy=57)
    cli = Cli(tmp_path / "home")
    text = audit(cli, str(tmp_path / "runs" / "jobs"), code=10).splitlines()
    assert text[2] == "showing 1-50 of 61 run(s); page 1 of 2, --page 2 for the next"
    assert sum(line.startswith(("  ok ", "  quarantined ")) for line in text) == 50
    second = audit(cli, str(tmp_path / "runs" / "jobs"), "--page", "2", code=10).splitlines()
    assert second[2] == "showing 51-61 of 61 run(s); page 2 of 2"
    assert sum(line.startswith(("  ok ", "  quarantined ")) for line in second) == 11
    assert text[-1] == second[-1] and len(text[-1]) < 400
    sized = audit_json(
        cli, str(tmp_path / "runs" / "jobs"), "--page-size", "7", "--page", "3", code=10
    )
    assert len(sized["runs"]) == 7 and sized["view"]["pages"] == 9
    assert len(audit_json(cli, str(tmp_path / "runs" / "jobs"), code=10)["runs"]) == 61
    past = cli("audit", str(tmp_path / "runs" / "jobs"), "--page", "3", ok=False)
    assert past.exit_code == 1 and "expected --page from 1 to 2, found 3" in past.stderr
    assert len(dirs) == 61


def test_slots_are_filtered_and_grouped_by_state(
    mixed: tuple[Cli, dict[str, Path]], tmp_path: Path
) -> None:
    """With --matrix, --slot lists the slots in a state and the runs in them (`outside`: runs in no
    slot); without one, a slot filter is refused."""
    cli, dirs = mixed
    report = audit_json(cli, code=10)
    rows = {r["run"]: r for r in report["runs"]}
    fields = ("task", "agent", "model", "skill_mode", "trial")

    def slot(name: str) -> dict:
        return {k: rows[run_id(dirs[name])][k] for k in fields}

    missing = {**slot("healthy-0"), "trial": "csv-dedupe__00000000"}
    matrix = tmp_path / "matrix.json"
    matrix.write_text(json.dumps([slot("healthy-0"), slot("leakage"), missing]))
    unhealthy = audit_json(cli, "--matrix", str(matrix), "--slot", "unhealthy", code=10)
    assert [r["run"] for r in unhealthy["runs"]] == [run_id(dirs["leakage"])]
    assert [s["status"] for s in unhealthy["matrix"]] == ["unhealthy"]
    gone = audit(cli, "--matrix", str(matrix), "--slot", "missing", code=10)
    assert "showing 0 of 0 matching run(s) (slot missing)" in gone
    assert "csv-dedupe__00000000" in gone
    outside = audit_json(cli, "--matrix", str(matrix), "--slot", "outside", code=10)
    assert len(outside["runs"]) == 6
    grouped = audit_json(cli, "--matrix", str(matrix), "--group-by", "slot", code=10)
    assert [(g["slot"], g["runs"], g["slots"]) for g in grouped["groups"]] == [
        ("healthy", 1, 1),
        ("missing", 0, 1),
        ("unhealthy", 1, 1),
        ("outside", 6, 0),
    ]
    refused = cli("audit", "--slot", "missing", ok=False)
    assert refused.exit_code == 1 and "expected --matrix with a slot filter" in refused.stderr


def test_the_publishable_example_is_what_benchflows_writers_write(tmp_path: Path) -> None:
    """examples/publishable is `tests/publishable_batch.write_batch`'s output, file for file and
    byte for byte (git keeps no empty folder, so `_init_rollout`'s empty `artifacts/` is not
    there)."""
    written = write_batch(tmp_path / "publishable")

    def files(root: Path) -> dict[str, bytes]:
        return {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file()
        }

    assert files(written) == files(EXAMPLES / "publishable")


def test_the_examples_show_every_verdict(tmp_path: Path) -> None:
    """A newcomer sees exit 0 (the publishable batch), 10 (every example: quarantines named, healthy
    runs left) and 11 (the PR-layout runs alone: nothing healthy left)."""
    cli = Cli(tmp_path / "home")
    assert audit(cli, str(EXAMPLES / "publishable"), code=0).splitlines()[-1] == (
        "verdict: publishable"
    )
    assert "verdict: publishable with quarantines: 6 quarantined" in audit(
        cli, str(EXAMPLES), code=10
    )
    assert "verdict: not publishable: 1 blocker(s) (selection 1)" in audit(
        cli, str(EXAMPLES / "pr-layout"), code=11
    )

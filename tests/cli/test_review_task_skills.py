"""Skill loading judged against the task's own skill names, which benchflow's run directories never
state.

Inputs: run directories built by benchflow's writer functions (`tests/rollout_writer.py`:
`_init_rollout`, `_write_config`, `_write_llm_trajectory`, `_build_rollout_result`,
`build_rollout_results_record`; the task's provenance by `task_file_hashes` /
`task_source_provenance`), for OpenHands, Claude Code, Codex and Gemini, each run showing a
harness-global skill (`code-review`, kept where the harness keeps its own) and, where the case says,
the task's skill (`csv-tools`). Where the names come from is each batch's point: the task's
`source.file_hashes`, the custom runtime skills folder, a skills folder the configuration names,
inference across the batch's two arms, or nothing at all.

Judge: the experiment-review skill's own scripts at benchflow `SKILL_COMMIT`:
`validate_run_artifacts.py --json` on the run directory and `extract_harness_skills.py
<llm_trajectory.jsonl> --task-skill csv-tools` (the SOP: "use repeated `--task-skill <name>` ...
when that metadata is unavailable"), combined as SKILL.md says: with-skill healthy when
`task_skills_loading` is 1 (else experiment fidelity), no-skill healthy when it is 0 (else leakage).
`SCRIPT_VERDICTS` is what they said, observed by running them (`python -m
tests.cli.test_review_task_skills BENCHFLOW_GIT_DIR` prints the table again);
`test_the_skills_scripts_still_say_so` runs them again when benchflow's repository is on this
machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.rollout_writer import (
    FIXING,
    Rollout,
    bash,
    fixing_run,
    scripted_run,
    task_source,
    write_rollout,
    write_task,
)

#: The newest revision of the skill's scripts on any branch of benchflow (`git log --all --
#: .agents/skills`).
SKILL_COMMIT = "17a3573bf059e6e06682ce5a04f8d358abddebaf"
SKILL_DIR = ".agents/skills/benchflow-experiment-review/scripts"
TASK = "csv-dedupe"
TASK_SKILL = ("csv-tools", "Read, clean and deduplicate CSV files.")
GLOBAL_SKILL = ("code-review", "Review a change for defects.")
HARNESSES = {
    "openhands": "openhands",
    "claude": "claude-agent-acp",
    "codex": "codex-acp",
    "gemini": "gemini",
}

# --- the runs: one description per case, the names' source set per batch --------------------------

#: case -> (skill mode, startup catalog, skills it loads); `a`, `b`, `c` are the three cases of the
#: gap.
CASES: dict[str, tuple[str, list[tuple[str, str]], tuple[str, ...]]] = {
    # (a) with-skill, only the harness-global skill in the catalog, and it loads that one
    "a_with_global_only": ("with-skill", [GLOBAL_SKILL], (GLOBAL_SKILL[0],)),
    # (b) with-skill, the task's skill in the catalog, never invoked
    "b_with_task_uninvoked": ("with-skill", [TASK_SKILL, GLOBAL_SKILL], ()),
    # (c) no-skill, loads the harness-global skill
    "c_no_skill_global": ("no-skill", [GLOBAL_SKILL], (GLOBAL_SKILL[0],)),
    # a no-skill run that sees and loads the task's skill: leakage, whatever the source
    "d_no_skill_leak": ("no-skill", [TASK_SKILL, GLOBAL_SKILL], (TASK_SKILL[0],)),
}


def described(
    harness: str, case: str, catalog: list[tuple[str, str]] | None = None, **fields: object
) -> Rollout:
    mode, shown, loads = {**CASES, **LONE}[case]
    run = fixing_run(
        TASK,
        agent=HARNESSES[harness],
        skill_mode=mode,
        catalog=catalog or shown,
        load_skills=loads,
        harness_skills=(GLOBAL_SKILL[0],),
    )
    run.job_name = f"{harness}-{case}"  # one job folder per case: a run key naming it
    for key, value in fields.items():
        setattr(run, key, value)
    return run


def task_dir(root: Path) -> Path:
    """The task as its benchmark repository holds it, bundling `csv-tools`."""
    return write_task(
        root / "tasks", TASK, {TASK_SKILL[0]: "---\nname: csv-tools\n---\nUse csv.\n"}
    )


#: A with-skill run that shows only the harness-global skill and invokes nothing, alone in its
#: batch.
LONE = {"lone_with_global_uninvoked": ("with-skill", [GLOBAL_SKILL], ())}
# builds a batch of run directories under a folder, returns the folder
Batch = Callable[[Path], Path]


def file_hashes_batch(harness: str) -> Batch:
    """Source 3: the task has provenance, so config.json and result.json carry
    `source.file_hashes`."""

    def build(root: Path) -> Path:
        source = task_source(task_dir(root))
        for case in CASES:
            write_rollout(root / "jobs", described(harness, case, source=source))
        return root / "jobs"

    return build


def inferred_batch(harness: str) -> Batch:
    """Source 5: nothing in any run names the skills; both arms of the task and harness are
    imported."""

    def build(root: Path) -> Path:
        for case in CASES:
            write_rollout(root / "jobs", described(harness, case))
        return root / "jobs"

    return build


def runtime_folder_batch(root: Path) -> Path:
    """Source 2: `Rollout(skills_dir=...)` (custom_runtime) with the folder still on this machine;
    the task's bundled `csv-tools` (in its file_hashes) was stripped from the run, so it is not
    expected."""
    folder = root / "runtime-skills"
    (folder / "csv-kit").mkdir(parents=True)
    (folder / "csv-kit" / "SKILL.md").write_text("---\nname: csv-kit\n---\nCSV helpers.\n")
    source = task_source(task_dir(root))
    kit = ("csv-kit", "CSV helpers.")
    for case, catalog in (
        ("b_with_task_uninvoked", [kit, GLOBAL_SKILL]),
        ("a_with_global_only", [GLOBAL_SKILL]),
    ):
        run = described("claude", case, catalog=catalog, source=source, skills_dir=str(folder))
        write_rollout(root / "jobs", run)
    return root / "jobs"


def skills_folder_batch(root: Path) -> Path:
    """Source 4: no provenance, but the bundled skills dir config.json names is still on this
    machine."""
    folder = str(task_dir(root) / "environment" / "skills")
    for case in ("a_with_global_only", "b_with_task_uninvoked"):
        write_rollout(root / "jobs", described("openhands", case, bundled_skills_dir=folder))
    return root / "jobs"


def lone_batch(case: str) -> Batch:
    """Nothing names the skills and no other arm was imported."""

    def build(root: Path) -> Path:
        write_rollout(root / "jobs", described("gemini", case))
        return root / "jobs"

    return build


LONE_UNINVOKED = "lone_with_global_uninvoked"

BATCHES: dict[str, Batch] = {
    **{f"file_hashes-{h}": file_hashes_batch(h) for h in HARNESSES},
    **{f"inferred-{h}": inferred_batch(h) for h in HARNESSES},
    "runtime_folder-claude": runtime_folder_batch,
    "skills_folder-openhands": skills_folder_batch,
    "lone-gemini": lone_batch(LONE_UNINVOKED),
}
SOURCES = {
    "file_hashes": ("file_hashes", "config.json:source.file_hashes"),
    "inferred": ("inferred", "inferred: shown by the with-skill catalogs of 2 run(s)"),
    "runtime_folder": ("runtime_folder", "config.json:effective_skills_dir"),
    "skills_folder": ("skills_folder", "config.json:effective_skills_dir"),
    "lone": (None, None),
}

# --- what the skill's scripts said ----------------------------------------------------------------

#: Observed at SKILL_COMMIT: run -> (validator healthy, skill mode, task_skills_loading, loading
#: status) for each run (`<batch>/<job>`, the job naming harness and case).
SCRIPT_VERDICTS: dict[str, tuple[bool, str, int, str]] = {
    "file_hashes-openhands/openhands-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "file_hashes-openhands/openhands-b_with_task_uninvoked": (True, "with_skills", 1, "complete"),
    "file_hashes-openhands/openhands-c_no_skill_global": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "file_hashes-openhands/openhands-d_no_skill_leak": (
        True,
        "without_skills",
        1,
        "unexpected_complete_task_skills_loaded_without_skills",
    ),
    "file_hashes-claude/claude-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "file_hashes-claude/claude-b_with_task_uninvoked": (True, "with_skills", 1, "complete"),
    "file_hashes-claude/claude-c_no_skill_global": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "file_hashes-claude/claude-d_no_skill_leak": (
        True,
        "without_skills",
        1,
        "unexpected_complete_task_skills_loaded_without_skills",
    ),
    "file_hashes-codex/codex-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "file_hashes-codex/codex-b_with_task_uninvoked": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "file_hashes-codex/codex-c_no_skill_global": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "file_hashes-codex/codex-d_no_skill_leak": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "file_hashes-gemini/gemini-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "file_hashes-gemini/gemini-b_with_task_uninvoked": (True, "with_skills", 1, "complete"),
    "file_hashes-gemini/gemini-c_no_skill_global": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "file_hashes-gemini/gemini-d_no_skill_leak": (
        True,
        "without_skills",
        1,
        "unexpected_complete_task_skills_loaded_without_skills",
    ),
    "inferred-openhands/openhands-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "inferred-openhands/openhands-b_with_task_uninvoked": (True, "with_skills", 1, "complete"),
    "inferred-openhands/openhands-c_no_skill_global": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "inferred-openhands/openhands-d_no_skill_leak": (
        True,
        "without_skills",
        1,
        "unexpected_complete_task_skills_loaded_without_skills",
    ),
    "inferred-claude/claude-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "inferred-claude/claude-b_with_task_uninvoked": (True, "with_skills", 1, "complete"),
    "inferred-claude/claude-c_no_skill_global": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "inferred-claude/claude-d_no_skill_leak": (
        True,
        "without_skills",
        1,
        "unexpected_complete_task_skills_loaded_without_skills",
    ),
    "inferred-codex/codex-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "inferred-codex/codex-b_with_task_uninvoked": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "inferred-codex/codex-c_no_skill_global": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "inferred-codex/codex-d_no_skill_leak": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "inferred-gemini/gemini-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "inferred-gemini/gemini-b_with_task_uninvoked": (True, "with_skills", 1, "complete"),
    "inferred-gemini/gemini-c_no_skill_global": (
        True,
        "without_skills",
        0,
        "not_loaded_without_skills",
    ),
    "inferred-gemini/gemini-d_no_skill_leak": (
        True,
        "without_skills",
        1,
        "unexpected_complete_task_skills_loaded_without_skills",
    ),
    "runtime_folder-claude/claude-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "runtime_folder-claude/claude-b_with_task_uninvoked": (True, "with_skills", 1, "complete"),
    "skills_folder-openhands/openhands-a_with_global_only": (
        True,
        "with_skills",
        0,
        "missing_expected_task_skills",
    ),
    "skills_folder-openhands/openhands-b_with_task_uninvoked": (True, "with_skills", 1, "complete"),
    "lone-gemini/gemini-lone_with_global_uninvoked": (
        True,
        "with_skills",
        0,
        "expected_with_skills_but_no_task_skill_manifest",
    ),
}


def task_skill_args(batch: str) -> list[str]:
    """`--task-skill` as the SOP says: the task's skill, the runtime folder's where the run was
    given one, none where nothing names them (the lone batch: the script is as blind as we are)."""
    if batch.startswith("lone"):
        return []
    return ["--task-skill", "csv-kit" if batch.startswith("runtime_folder") else TASK_SKILL[0]]


def verdict(healthy: bool, mode: str, loading: int, status: str) -> str:
    """SKILL.md's class from the scripts' outputs (the run is a pass when healthy)."""
    if not healthy:
        return "infrastructure"
    if mode == "with_skills":
        return "pass" if loading == 1 else "experiment_fidelity"
    leaked = loading == 1 or status.startswith("partial_unexpected")
    return "leakage" if leaked else "pass"


def build_all(root: Path) -> dict[str, Path]:
    """Every batch under `root/<batch>`, by batch name."""
    return {name: build(root / name) for name, build in BATCHES.items()}


def run_dirs(jobs: Path) -> dict[str, Path]:
    """The batch's run directories by job name (`<harness>-<case>`)."""
    return {d.parent.name: d for d in sorted(jobs.glob("*/*")) if (d / "result.json").is_file()}


def observe(scripts: Path, root: Path) -> dict[str, tuple[bool, str, int, str]]:
    """Run the skill's two scripts on every run of every batch."""
    out = {}
    for name, jobs in build_all(root).items():
        for job, run_dir in run_dirs(jobs).items():
            checked = subprocess.run(
                [
                    sys.executable,
                    str(scripts / "validate_run_artifacts.py"),
                    str(run_dir),
                    "--json",
                ],
                capture_output=True,
                text=True,
                cwd=root,
            )
            [rollout] = json.loads(checked.stdout)["rollouts"]
            extracted = subprocess.run(
                [
                    sys.executable,
                    str(scripts / "extract_harness_skills.py"),
                    str(run_dir / "trajectory" / "llm_trajectory.jsonl"),
                    *task_skill_args(name),
                ],
                capture_output=True,
                text=True,
                cwd=root,  # the recorded task_path is relative: nothing here resolves it
            )
            skills = json.loads(extracted.stdout)
            out[f"{name}/{job}"] = (
                rollout["healthy"],
                skills["task_skill_mode"],
                skills["task_skills_loading"],
                skills["task_skills_loading_status"],
            )
    return out


def scripts_from(git_dir: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    for name in ("validate_run_artifacts.py", "extract_harness_skills.py"):
        text = subprocess.run(
            ["git", "-C", str(git_dir), "show", f"{SKILL_COMMIT}:{SKILL_DIR}/{name}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (into / name).write_text(text)
    return into


# --- the tests ------------------------------------------------------------------------------------


def expected_class(run: str) -> str:
    """The scripts' class for the run. Codex: `extract_harness_skills.py` recognises a Codex request
    only with `instructions`, which benchflow's `_base_record` does not log, so it reads the
    Responses body as Claude Code's and finds no catalog (observed: every Codex row says the catalog
    is absent). A Codex run takes the class the scripts give its case on the three harnesses they
    read, which agree."""
    batch, job = run.split("/")
    harness, case = job.split("-", 1)
    if harness != "codex":
        return verdict(*SCRIPT_VERDICTS[run])
    source = batch.split("-")[0]
    [agreed] = {
        verdict(*said)
        for other, said in SCRIPT_VERDICTS.items()
        if other.split("-")[0] == source
        and other.split("/")[1].split("-", 1) != ["codex", case]
        and other.split("/")[1].split("-", 1)[1] == case
    }
    return agreed


def audit_dirs(run_cli: Cli, *paths: Path) -> dict:
    result = run_cli("audit", *map(str, paths), "--format", "json", ok=False)
    assert result.exit_code in (10, 11), result.stdout + result.stderr
    return json.loads(result.stdout)


def audit_json_of(run_cli: Cli, *paths: Path, code: int) -> dict:
    result = run_cli("audit", *map(str, paths), "--format", "json", ok=False)
    assert result.exit_code == code, result.stdout + result.stderr
    return json.loads(result.stdout)


def by_job(report: dict) -> dict[str, dict]:
    return {r["run"].split("/")[-2]: r for r in report["runs"]}


@pytest.mark.parametrize("batch", sorted(BATCHES))
def test_each_run_gets_the_class_the_skills_scripts_give(batch: str, tmp_path: Path) -> None:
    jobs = BATCHES[batch](tmp_path / batch)
    runs = by_job(audit_dirs(Cli(tmp_path / "home"), jobs))
    assert set(runs) == {k.split("/")[1] for k in SCRIPT_VERDICTS if k.startswith(batch + "/")}
    got = {job: run["class"] for job, run in runs.items()}
    assert got == {job: expected_class(f"{batch}/{job}") for job in runs}
    source, origin = SOURCES[batch.split("-")[0]]
    for run in runs.values():
        if run["class"] == "pass":
            assert run["reasons"] == []
        elif run["class"] == "experiment_fidelity" and source is not None:
            # judged by the names, and the finding says where they came from (inferred: that they
            # were)
            [reason] = [r for r in run["reasons"] if "task_skills_loading=0" in r]
            assert origin in reason, reason


def test_a_lone_with_skill_run_that_invoked_nothing_is_reviewed_by_hand(tmp_path: Path) -> None:
    """Nothing names the skills and no other arm exists: the script's own
    `expected_with_skills_but_no_task_skill_manifest`, which it asks a person to review."""
    jobs = BATCHES["lone-gemini"](tmp_path / "lone")
    [run] = audit_dirs(Cli(tmp_path / "home"), jobs)["runs"]
    assert SCRIPT_VERDICTS["lone-gemini/gemini-lone_with_global_uninvoked"][3] == (
        "expected_with_skills_but_no_task_skill_manifest"
    )
    assert run["class"] == "experiment_fidelity"
    assert any(
        "review it by hand" in r and "no expected task skills named" in r for r in run["reasons"]
    )


def test_a_custom_runtime_run_whose_folder_is_gone_is_not_judged_by_the_stripped_skills(
    tmp_path: Path,
) -> None:
    """Its file_hashes name the task's bundled `csv-tools`, which benchflow stripped from the run;
    with the runtime folder gone nothing in its files names `csv-kit`, so its own startup catalog
    does: `csv-kit`, which Claude Code does not ship, loaded though never invoked. `csv-tools` is
    never expected of it."""
    jobs = runtime_folder_batch(tmp_path / "runtime")
    shutil.rmtree(tmp_path / "runtime" / "runtime-skills")
    cli = Cli(tmp_path / "home")
    runs = by_job(audit_json_of(cli, jobs, code=0))
    assert (
        runs["claude-b_with_task_uninvoked"]["class"],
        runs["claude-b_with_task_uninvoked"]["reasons"],
    ) == ("pass", [])
    cli("import", str(jobs))
    rows = json.loads(cli("sql", "SELECT run, review FROM evidence", "--format", "json").stdout)
    skills = {r["run"].split("/")[-2]: r["review"]["skills"] for r in rows}
    uninvoked = skills["claude-b_with_task_uninvoked"]
    assert (uninvoked["expected_task_skills"], uninvoked["task_skills_source"]) == (
        ["csv-kit"],
        "catalog",
    )
    assert uninvoked["task_skills_loading"] == 1


def test_the_names_and_their_source_are_read_from_the_log(tmp_path: Path) -> None:
    """Imported into a store, each run's review records the names and their source; the audit of the
    store gives the same classes after the run directories, the task and the skills folder are
    gone."""
    cli = Cli(tmp_path / "home")
    batches = ("inferred-claude", "file_hashes-gemini", "skills_folder-openhands")
    roots = {name: BATCHES[name](tmp_path / name) for name in batches}
    classes = {
        name: {j: r["class"] for j, r in by_job(audit_dirs(cli, roots[name])).items()}
        for name in batches
    }
    assert not cli.home.exists()
    for jobs in roots.values():
        cli("import", str(jobs))
    rows = json.loads(cli("sql", "SELECT run, review FROM evidence", "--format", "json").stdout)
    reviews = {row["run"].split("/")[-2]: row["review"] for row in rows}
    for name in batches:
        source, origin = SOURCES[name.split("-")[0]]
        for job in classes[name]:
            skills = reviews[job]["skills"]
            assert skills["task_skills_source"] == source and origin in skills["task_skills_from"]
            assert skills["expected_task_skills"] == [TASK_SKILL[0]]
    for name in batches:
        shutil.rmtree(tmp_path / name)
    report = cli("audit", "--format", "json", ok=False)
    stored = {r["run"].split("/")[-2]: r["class"] for r in json.loads(report.stdout)["runs"]}
    assert stored == {job: c for name in batches for job, c in classes[name].items()}


# --- nothing names the skills, one run alone: its own trajectory decides --------------------------
#
# The runs below are written by benchflow's writer functions at 17a3573b as
# `tests/rollout_writer.py` mirrors them (`_init_rollout`, `_write_config`,
# `_write_llm_trajectory`, `_build_rollout_result`, `build_rollout_results_record`), for a task
# without provenance: no file names its skills, and no other arm is in the batch. The skill's
# scripts say `expected_with_skills_but_no_task_skill_manifest` of such a with-skill run and ask
# for the SOP's manual procedure, which reads the catalog; these tests hold the audit to what that
# procedure finds (docs/review-skill.md, "Task skill names").

#: Per harness, a skill the SOP's sample catalogs show the harness shipping itself
#: (harness-skill-catalog-sop.md): Codex's and Gemini's name their files outside `/skills`.
OWN_SKILLS = {
    "openhands": ("code-simplifier", "Simplify code."),
    "claude": ("code-review", "Review a change for defects."),
    "codex": ("skill-creator", "Create a skill."),
    "gemini": ("skill-creator", "Create a skill."),
}


def lone_with_skill(root: Path, harness: str, catalog: list[tuple[str, str]]) -> Path:
    """A with-skill run that shows `catalog` at startup and invokes nothing, alone in its batch."""
    own = OWN_SKILLS[harness]
    run = fixing_run(
        TASK,
        agent=HARNESSES[harness],
        skill_mode="with-skill",
        catalog=catalog,
        harness_skills=(own[0],),
    )
    run.job_name = f"{harness}-lone"
    write_rollout(root / "jobs", run)
    return root / "jobs"


def evidence_skills(cli: Cli, jobs: Path) -> dict:
    cli("import", str(jobs))
    [row] = json.loads(cli("sql", "SELECT review FROM evidence", "--format", "json").stdout)
    return row["review"]["skills"]


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_a_lone_with_skill_run_whose_catalog_shows_the_task_skill_loaded_it(
    harness: str, tmp_path: Path
) -> None:
    """The task's skill in the harness's startup catalog, never invoked: loaded (the SOP's
    `task_skills_loading` 1 is every task skill "recovered in the startup skill catalog"). The
    harness's own skill beside it is not taken for the task's."""
    jobs = lone_with_skill(tmp_path / "runs", harness, [TASK_SKILL, OWN_SKILLS[harness]])
    cli = Cli(tmp_path / "home")
    [run] = audit_json_of(cli, jobs, code=0)["runs"]
    assert (run["health"], run["class"], run["reasons"]) == ("healthy", "pass", [])
    skills = evidence_skills(cli, jobs)
    assert skills["expected_task_skills"] == [TASK_SKILL[0]]
    assert (skills["task_skills_source"], skills["task_skills_loading"]) == ("catalog", 1)
    assert skills["invocations"] == [] and "the startup catalog at" in skills["task_skills_from"]


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_a_lone_with_skill_run_whose_catalog_shows_only_the_harness_own_is_reviewed_by_hand(
    harness: str, tmp_path: Path
) -> None:
    """Only a skill the harness ships, never invoked: nothing shows the task's skill loaded, so
    the run stays one to review by hand, as the script says."""
    jobs = lone_with_skill(tmp_path / "runs", harness, [OWN_SKILLS[harness]])
    [run] = audit_json_of(Cli(tmp_path / "home"), jobs, code=11)["runs"]
    assert run["class"] == "experiment_fidelity"
    [reason] = run["reasons"]
    assert "skill loading cannot be shown" in reason and "review it by hand" in reason


def test_the_clean_pass_eval_built_by_benchflows_writers_is_publishable(tmp_path: Path) -> None:
    """evals/files/clean-pass (an OpenHands with-skill pass whose startup catalog offers its
    `data-cleaning` skill and `invoke_skill`, never called) written by the writer functions instead
    of the eval's hand-made files, so no `task_skills` key names the skill: publishable, the skill
    loaded, exit 0."""
    run = fixing_run(
        "example-clean-pass",
        agent="openhands",
        skill_mode="with-skill",
        catalog=[("data-cleaning", "Clean task input data.")],
    )
    write_rollout(tmp_path / "runs" / "jobs", run)
    cli = Cli(tmp_path / "home")
    report = audit_json_of(cli, tmp_path / "runs" / "jobs", code=0)
    assert report["verdict"] == "publishable" and report["findings"] == []
    [audited] = report["runs"]
    assert (audited["health"], audited["result"]) == ("healthy", "pass")
    skills = evidence_skills(cli, tmp_path / "runs" / "jobs")
    assert (skills["harness"], skills["task_skills_loading"], skills["expected_task_skills"]) == (
        "openhands",
        1,
        ["data-cleaning"],
    )


#: Where a no-skill agent may find a task's skill file: benchflow's mount, each harness's skills
#: folder (agents/registry.py `skill_paths`), a task checkout.
SKILL_FILES = (
    "/root/.agents/skills/csv-tools/SKILL.md",
    "/home/agent/.claude/skills/csv-tools/SKILL.md",
    "~/.codex/skills/csv-tools/SKILL.md",
    "/app/tasks/csv-dedupe/environment/skills/csv-tools/SKILL.md",
)


@pytest.mark.parametrize("path", SKILL_FILES)
@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_a_no_skill_run_that_reads_a_skill_file_is_leakage(
    harness: str, path: str, tmp_path: Path
) -> None:
    """A no-skill run, alone and with nothing naming the task's skills, whose agent `cat`s a
    `SKILL.md` in a skills folder: the SOP's leakage scan ("scan tool/file traces for access to
    `SKILL.md`") flags it, so it is quarantined as leakage, the read named with its line."""
    own = OWN_SKILLS[harness]
    actions = [bash(f"cat {path}", "---\nname: csv-tools\n---\nUse csv.\n", "Reading it."), *FIXING]
    run = scripted_run(
        TASK,
        actions,
        agent=HARNESSES[harness],
        skill_mode="no-skill",
        catalog=[own],
        harness_skills=(own[0],),
        final="Fixed.",
    )
    write_rollout(tmp_path / "runs" / "jobs", run)
    [audited] = audit_json_of(Cli(tmp_path / "home"), tmp_path / "runs" / "jobs", code=11)["runs"]
    assert audited["class"] == "leakage"
    [reason] = audited["reasons"]
    assert f"{path} at trajectory/llm_trajectory.jsonl:" in reason
    assert f"{path} at trajectory/acp_trajectory.jsonl:" in reason


def test_a_no_skill_run_that_only_reads_the_harness_own_skill_file_stays_healthy(
    tmp_path: Path,
) -> None:
    """With the task's skills named (its file_hashes), a no-skill Codex run reading a skill Codex
    ships (`.codex/skills/.system/...`) has not touched the task's: healthy (SKILL.md's `0` is
    "task-specific skills were not injected")."""
    source = task_source(task_dir(tmp_path))
    path = "/home/agent/.codex/skills/.system/skill-creator/SKILL.md"
    actions = [bash(f"cat {path}", "---\nname: skill-creator\n---\n", "Reading it."), *FIXING]
    run = scripted_run(
        TASK, actions, agent="codex-acp", skill_mode="no-skill", source=source, final="Fixed."
    )
    write_rollout(tmp_path / "runs" / "jobs", run)
    [audited] = audit_json_of(Cli(tmp_path / "home"), tmp_path / "runs" / "jobs", code=0)["runs"]
    assert (audited["class"], audited["reasons"]) == ("pass", [])


BENCHFLOW_GIT = Path(
    os.environ.get("BENCHFLOW_GIT_DIR", "/work/.mirror/benchflow-ai+benchflow/repo")
)


@pytest.mark.skipif(
    not BENCHFLOW_GIT.is_dir(), reason="benchflow's repository is not on this machine"
)
def test_the_skills_scripts_still_say_so(tmp_path: Path) -> None:
    """SCRIPT_VERDICTS is what the scripts at SKILL_COMMIT say about these directories today."""
    scripts = scripts_from(BENCHFLOW_GIT, tmp_path / "scripts")
    assert observe(scripts, tmp_path / "runs") == SCRIPT_VERDICTS


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        scripts = scripts_from(Path(sys.argv[1]), Path(tmp) / "scripts")
        for run, said in observe(scripts, Path(tmp) / "runs").items():
            print(f"    {run!r}: {said!r},")

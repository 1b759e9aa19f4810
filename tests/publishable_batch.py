"""`examples/publishable/`: a small batch that `lineage audit` publishes (exit 0), written by
benchflow's writer functions as `tests/rollout_writer.py` mirrors them at benchflow 17a3573b
(`_init_rollout`, `_write_config`, `_write_llm_trajectory`, `_build_rollout_result`,
`build_rollout_results_record`).

One task, `sales-report`, bundling the skill `xlsx-tools` and taken from a GitHub benchmark repo, so
config.json and result.json carry its provenance (`source.file_hashes` names the skill). Claude
Code with claude-sonnet-4-5 runs it twice per arm: with-skill runs whose startup catalog shows the
task's skill (the first loads it), no-skill runs that see only Claude Code's own `code-review`. One
trial of each arm fails the verifier: a healthy fail is publishable, as a pass is. It is written as
benchflow writes from a checkout with its default jobs folder, `jobs/` (so results.jsonl records
`rollout_dir` relative to it).

`python -m tests.publishable_batch examples/publishable` writes it again;
`tests/cli/test_audit_scale.py` checks the folder is exactly what this writes.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from contextlib import chdir
from pathlib import Path

from tests.rollout_writer import fixing_run, task_source, write_rollout, write_task

TASK = "sales-report"
JOB = "skills-ablation"
TASK_SKILL = ("xlsx-tools", "Read and total spreadsheet columns.")
OWN_SKILL = ("code-review", "Review a change for defects.")  # Claude Code's own (the SOP)


def write_batch(folder: Path) -> Path:
    """The batch's run directories under `folder/jobs/skills-ablation/`; returns `folder`."""
    with tempfile.TemporaryDirectory() as scratch:
        task = write_task(Path(scratch), TASK, {TASK_SKILL[0]: "---\nname: xlsx-tools\n---\n"})
        source = task_source(task)
    for mode in ("with-skill", "no-skill"):
        catalog = [TASK_SKILL, OWN_SKILL] if mode == "with-skill" else [OWN_SKILL]
        for trial, reward in ((1, 1.0), (2, 0.0)):
            loads = (TASK_SKILL[0],) if mode == "with-skill" and trial == 1 else ()
            run = fixing_run(
                TASK,
                skill_mode=mode,
                catalog=catalog,
                load_skills=loads,
                harness_skills=(OWN_SKILL[0],),
                source=source,
                rewards={"reward": reward},
                sandbox_id=f"sb-{mode}-{trial}",
            )
            run.job_name = JOB
            folder.mkdir(parents=True, exist_ok=True)
            with chdir(folder):
                write_rollout(Path("jobs"), run)
    return folder


if __name__ == "__main__":
    target = Path(sys.argv[1])
    shutil.rmtree(target, ignore_errors=True)
    print(write_batch(target))

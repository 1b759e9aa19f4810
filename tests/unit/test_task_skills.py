"""Where a task's skill names come from (`task_skills.py`), and inference across a batch's arms
(pure).

The sources' order and each limit are docs/review-skill.md's "Task skill names"; the whole path
through benchflow's writers and the skill's own scripts is tests/cli/test_review_task_skills.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rollout_lineage.adapters.review_skill.task_skills import (
    MAX_ENTRIES,
    Arm,
    Inferred,
    find_task_skills,
    infer_task_skills,
    read_skills_folder,
    with_task_skills,
)
from rollout_lineage.domain.facts.review_facts import SkillCatalog, SkillTrace

T, G, H = "csv-tools", "code-review", "imagegen"  # the task's skill, two harness-global ones


def arm(mode: str, *catalog: str, task: str = "csv-dedupe", harness: str = "claude-code") -> Arm:
    return Arm(task=task, harness=harness, skill_mode=mode, catalog=catalog, named=False)


def names(
    arms: list[Arm], task: str = "csv-dedupe", harness: str = "claude-code"
) -> tuple[str, ...]:
    found = infer_task_skills(arms).get((task, harness))
    return found.names if found else ()


# --- inference ---------------------------------------------------------------------------------


def test_the_task_skills_are_what_with_skill_catalogs_show_beyond_the_no_skill_baseline() -> None:
    assert names([arm("with-skill", T, G), arm("no-skill", G)]) == (T,)


def test_one_with_skill_run_that_lost_its_skill_does_not_hide_it() -> None:
    """A with-skill catalog without the task's skill is the failure being judged, not a vote against
    it."""
    assert names([arm("with-skill", T, G), arm("with-skill", G), arm("no-skill", G)]) == (T,)


def test_a_no_skill_run_that_leaked_the_skill_does_not_hide_it() -> None:
    """The baseline is what every no-skill catalog shows: one leaking run does not remove the
    name."""
    assert names([arm("with-skill", T, G), arm("no-skill", G), arm("no-skill", T, G)]) == (T,)


def test_a_global_skill_every_no_skill_run_shows_is_never_a_task_skill() -> None:
    assert names([arm("with-skill", T, G, H), arm("no-skill", G, H), arm("no-skill", H, G)]) == (T,)


def test_names_compare_as_the_extract_script_compares_them() -> None:
    """Case and `_` / `-` do not tell skills apart (normalize_skill_name)."""
    assert names(
        [arm("with-skill", "CSV_Tools", "Code_Review"), arm("no-skill", "code-review")]
    ) == ("CSV_Tools",)


@pytest.mark.parametrize(
    "arms",
    [
        [arm("with-skill", T, G)],  # no no-skill arm: nothing to tell the global skills from
        [arm("no-skill", G)],  # no with-skill arm
        [arm("with-skill", G), arm("no-skill", G)],  # nothing beyond the baseline
        [arm("with-skill", T, G), arm("no-skill", G, harness="codex")],  # another harness
        [arm("with-skill", T, G), arm("no-skill", G, task="other")],  # another task
        [arm("with-skill", T, G), arm("self-gen", G)],  # self-gen is neither arm
        [arm("with-skill", T, G), Arm("csv-dedupe", "claude-code", "no-skill", None, False)],
    ],
)
def test_nothing_is_inferred_without_both_arms_of_one_task_and_harness(arms: list[Arm]) -> None:
    assert infer_task_skills(arms) == {}


def test_each_task_and_harness_is_inferred_apart() -> None:
    arms = [
        arm("with-skill", T, G),
        arm("no-skill", G),
        arm("with-skill", "pdf", H, task="pdf-merge", harness="codex"),
        arm("no-skill", H, task="pdf-merge", harness="codex"),
    ]
    found = infer_task_skills(arms)
    assert {key: value.names for key, value in found.items()} == {
        ("csv-dedupe", "claude-code"): (T,),
        ("pdf-merge", "codex"): ("pdf",),
    }
    assert "inferred" in found[("pdf-merge", "codex")].origin


def trace(skill: str, line: int) -> SkillTrace:
    return SkillTrace(
        file="trajectory/llm_trajectory.jsonl", line=line, marker="Skill", skill=skill
    )


def test_inferred_names_set_loading_and_turn_their_invocations_into_access() -> None:
    inferred = Inferred((T,), "inferred: from 2 arms")
    loaded = SkillCatalog(status="recovered", skills=(T, G), invocations=(trace(T, 3), trace(G, 4)))
    judged = with_task_skills(loaded, inferred)
    assert (judged.task_skills_loading, judged.task_skills_source) == (1, "inferred")
    assert (
        judged.expected_task_skills == (T,) and judged.task_skills_from == "inferred: from 2 arms"
    )
    assert [t.skill for t in judged.task_skill_access] == [T]
    missing = with_task_skills(SkillCatalog(status="recovered", skills=(G,)), inferred)
    assert missing.task_skills_loading == 0 and missing.task_skill_access == ()
    unread = with_task_skills(SkillCatalog(status="unknown"), inferred)
    assert unread.task_skills_loading is None


# --- sources 1 to 4 ------------------------------------------------------------------------------


def hashes(*paths: str) -> dict[str, Any]:
    return {"source": {"type": "github", "file_hashes": dict.fromkeys(paths, "sha256:" + "0" * 64)}}


def skills_folder(root: Path, *skills: str) -> str:
    for skill in skills:
        (root / skill).mkdir(parents=True)
        (root / skill / "SKILL.md").write_text(f"---\nname: {skill}\n---\n")
    return str(root)


def test_a_manifest_key_comes_first_and_is_read_as_the_script_reads_it() -> None:
    config = {
        "task_skills": "csv-tools; pdf",
        **hashes("task.toml", "environment/skills/x/SKILL.md"),
    }
    named = find_task_skills([("run_config.json", config), ("result.json", None)])
    assert named is not None
    assert (named.names, named.source, named.origin) == (
        ("csv-tools", "pdf"),
        "manifest",
        "run_config.json:task_skills",
    )


def test_file_hashes_name_the_bundled_skills() -> None:
    config = hashes(
        "task.toml",
        "environment/Dockerfile",
        f"environment/skills/{T}/SKILL.md",
        f"environment/skills/{T}/scripts/clean.py",
        "environment/skills/pdf/SKILL.md",
        "tests/skills/fake/SKILL.md",  # not under environment/skills
    )
    named = find_task_skills([("config.json", config), ("result.json", None)])
    assert named is not None
    assert (named.names, named.source, named.origin) == (
        (T, "pdf"),
        "file_hashes",
        "config.json:source.file_hashes",
    )


def test_file_hashes_of_a_whole_task_without_skills_say_it_bundles_none() -> None:
    named = find_task_skills([("config.json", hashes("task.toml", "instruction.md"))])
    assert named is not None and (named.names, named.source) == ((), "file_hashes")
    assert find_task_skills([("config.json", hashes("notes.txt"))]) is None  # not a task's hashes


def test_a_custom_runtime_run_reads_its_folder_and_never_the_stripped_bundled_skills(
    tmp_path: Path,
) -> None:
    folder = skills_folder(tmp_path / "runtime", "csv-kit")
    config = {
        "skill_source": "custom_runtime",
        "effective_skills_dir": folder,
        **hashes("task.toml", f"environment/skills/{T}/SKILL.md"),
    }
    named = find_task_skills([("config.json", config)])
    assert named is not None and (named.names, named.source) == (("csv-kit",), "runtime_folder")
    config["effective_skills_dir"] = str(tmp_path / "gone")
    assert find_task_skills([("config.json", config)]) is None


def test_a_named_folder_answers_when_it_still_exists(tmp_path: Path) -> None:
    folder = skills_folder(tmp_path / "copy" / "environment" / "skills", T)
    named = find_task_skills([("config.json", {"effective_skills_dir": folder})])
    assert named is not None and (named.names, named.source) == ((T,), "skills_folder")
    by_task = find_task_skills([("config.json", {"task_path": str(tmp_path / "copy")})])
    # the script's <task_path>/environment/skills
    assert by_task is not None and by_task.names == (T,)
    relative = {"effective_skills_dir": "tasks/csv-dedupe/environment/skills", "task_path": "copy"}
    assert find_task_skills([("config.json", relative)]) is None  # relative to benchflow's cwd


def test_a_folder_is_read_without_following_links_and_within_bounds(tmp_path: Path) -> None:
    real = skills_folder(tmp_path / "real", T, "pdf")
    os.symlink(real, tmp_path / "link")
    assert read_skills_folder(str(tmp_path / "link")) is None  # the folder itself is a link
    os.symlink(tmp_path / "real" / "pdf", tmp_path / "real" / "linked-skill")
    (tmp_path / "real" / "md-link").mkdir()
    os.symlink(tmp_path / "real" / T / "SKILL.md", tmp_path / "real" / "md-link" / "SKILL.md")
    (tmp_path / "real" / "no-md").mkdir()
    (tmp_path / "real" / "file.md").write_text("x")
    assert read_skills_folder(real) == (T, "pdf")
    big = tmp_path / "big"
    for n in range(MAX_ENTRIES + 1):
        (big / f"s{n}").mkdir(parents=True)
    assert read_skills_folder(str(big)) is None
    assert read_skills_folder(str(tmp_path / "real" / T / "SKILL.md")) is None  # not a folder

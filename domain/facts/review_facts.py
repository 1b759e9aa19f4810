"""What the experiment-review skill's review of one rollout found in its files, as recorded at
import.

The skill has three judges: its validator (the artifact contract), its reward-hacking patterns with
the verifier-hardening checklist, and its harness skill-catalog SOP. Each leaves observations here,
every one naming the file and line it rests on, so `lineage audit` (and `--as-of`, and a bundle)
judges from the log alone. Nothing here is a verdict: the audit decides what each observation means
for publishing.
"""

from __future__ import annotations

from typing import Literal

from .fact_base import Count, Digest, Model, Text

#: The three families of `references/reward-hacking-patterns.md`.
HackPattern = Literal["solution_contamination", "grader_gaming", "alignment_risk"]
#: How a startup skill catalog was recovered (the SOP's words).
CatalogStatus = Literal["recovered", "catalog_not_serialized", "unknown", "manual_review_required"]
#: Where the task's own skill names came from, in the order they are looked for
#: (docs/review-skill.md): a manifest key of the run's files, the custom runtime skills folder,
#: `source.file_hashes`, a skills folder the configuration names, or inference across the imported
#: batch's arms.
TaskSkillsSource = Literal[
    "manifest", "runtime_folder", "file_hashes", "skills_folder", "inferred", "catalog"
]
#: What kept the agent from a fair attempt (SKILL.md, "Capability Attribution").
FidelityKind = Literal[
    "missing_credential",
    "missing_resource",
    "missing_dependency",
    "insufficient_compute",
    "network",
    "permission",
    "provider",
    "sandbox",
]


class ArtifactIssue(Model):
    """One violation of the validator's artifact contract. `check` is a rule id of
    docs/review-skill.md."""

    check: Text
    detail: Text
    file: Text | None = None
    line: Count | None = None


class HackSignal(Model):
    """One trace of reward hacking or broken verifier isolation: the tool call (or record) that
    shows it."""

    pattern: HackPattern
    # e.g. test_mutation, reward_file_write, git_other_refs, solution_read, verifier_isolation
    kind: Text
    file: Text
    line: Count | None = None
    tool: Text | None = None
    evidence: Text  # the command, path or text, cut to a few hundred characters


class SkillTrace(Model):
    """A trajectory line where a skill was invoked, or a task skill's resources were touched."""

    file: Text
    line: Count
    marker: Text  # what matched: invoke_skill, SKILL.md, .codex/skills/..., a Skill tool call
    skill: Text | None = None


class SkillCatalog(Model):
    """The startup skill catalog recovered per the SOP, and whether the task's own skills were in
    it.

    `skills` is the whole catalog (harness-global skills included); `task_skills_loading` is 1 when
    every expected task skill was recovered in it, 0 when none or not all were, None when it cannot
    be told."""

    status: CatalogStatus
    harness: Text | None = None
    source_field: Text | None = None
    file: Text | None = None
    line: Count | None = None
    skills: tuple[Text, ...] = ()
    catalog_sha256: Digest | None = None
    expected_task_skills: tuple[Text, ...] = ()
    #: where `expected_task_skills` came from (None: nothing named them, or recorded before sources
    #: were)
    task_skills_source: TaskSkillsSource | None = None
    #: the file and key, the folder, or the arms they were inferred from
    task_skills_from: Text | None = None
    task_skills_loading: Literal[0, 1] | None = None
    invocations: tuple[SkillTrace, ...] = ()
    task_skill_access: tuple[SkillTrace, ...] = ()


class FidelitySignal(Model):
    """A trace that the agent lacked what a fair attempt needs (a key, an asset, a package,
    memory)."""

    kind: FidelityKind
    evidence: Text
    file: Text | None = None
    line: Count | None = None


class ReviewObservation(Model):
    """The whole review of one rollout directory. `rules` names the skill revision the checks
    follow."""

    rules: Text
    oracle: bool = False
    issues: tuple[ArtifactIssue, ...] = ()
    hacks: tuple[HackSignal, ...] = ()
    skills: SkillCatalog | None = None
    fidelity: tuple[FidelitySignal, ...] = ()

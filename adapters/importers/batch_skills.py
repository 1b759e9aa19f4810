"""The fifth source of a task's skill names: inference across the runs of one import.

benchflow's run directories do not name a task's skills, so where none of the run's own sources did
(`task_skills.find_task_skills`), the batch's two arms can: per task and harness, what the
with-skill catalogs show beyond what every no-skill catalog shows is the task's own skills
(`infer_task_skills`). `import_runs` reads every run of a batch before recording any, then calls
`infer_batch` on the plans, so the inferred names (and `task_skills_source: inferred` with the arms
they rest on) are recorded in each run's review fact, and audits, `--as-of` and bundles read them
from the log.
"""

from __future__ import annotations

from ...domain import facts as f
from ...domain.application import Entry
from ...domain.facts.review_facts import SkillCatalog
from ..review_skill.task_skills import Arm, infer_task_skills, with_task_skills
from .plan import RunPlan


def _registration(plan: RunPlan) -> f.RunRegistered | None:
    return next((e.fact for e in plan.entries if isinstance(e.fact, f.RunRegistered)), None)


def _arms(plan: RunPlan) -> list[tuple[int, Arm, SkillCatalog]]:
    """(entry index, arm, catalog) for each reviewed evidence fact of the plan."""
    registered = _registration(plan)
    found = []
    for index, entry in enumerate(plan.entries):
        fact = entry.fact
        if not isinstance(fact, f.EvidenceObserved) or fact.review is None:
            continue
        catalog = fact.review.skills
        if catalog is None:
            continue
        mode = (fact.skills.skill_mode if fact.skills else None) or (
            registered.skill_mode if registered else None
        )
        arm = Arm(
            task=registered.task if registered else None,
            harness=catalog.harness,
            skill_mode=mode,
            catalog=catalog.skills if catalog.status == "recovered" else None,
            # a run's own catalog names its skills only where its arms cannot (`from_catalog`)
            named=catalog.task_skills_source not in (None, "catalog"),
        )
        found.append((index, arm, catalog))
    return found


def infer_batch(plans: list[RunPlan]) -> None:
    """Judge each review whose files named no task skill against the names its task and harness's
    arms show (in place; a review is left as it was where they show none)."""
    arms = {id(plan): _arms(plan) for plan in plans}
    inferred = infer_task_skills(arm for found in arms.values() for _, arm, _ in found)
    if not inferred:
        return
    for plan in plans:
        entries = list(plan.entries)
        for index, arm, catalog in arms[id(plan)]:
            names = inferred.get((arm.task or "", arm.harness or ""))
            if arm.named or names is None:
                continue
            fact = entries[index].fact
            assert isinstance(fact, f.EvidenceObserved) and fact.review is not None
            review = fact.review.model_copy(update={"skills": with_task_skills(catalog, names)})
            entries[index] = Entry(
                fact.model_copy(update={"review": review}), entries[index].occurred_at
            )
        plan.entries = entries

"""The names of a task's own skills, from a rollout's files, in the order docs/review-skill.md
gives.

SKILL.md's `task_skills_loading` needs the task's skill names, and benchflow's run directories do
not carry them as such: they live in the task (`environment/skills/<name>/SKILL.md`, which
`task_bundled_skills_dir` names), and config.json keeps only a host path to a temporary copy removed
at cleanup. So they are looked for in this order, the first that answers wins, and which one
answered is recorded with the names:

1. `manifest`: a key the skill's `extract_harness_skills.py` reads (`task_skills`,
   `expected_task_skills`, ...) at any depth of the run's configuration or result.json (the evals'
   `run_config.json` carry one).
2. `runtime_folder`: for `skill_source: custom_runtime`, the runtime skills folder the run was given
   (`effective_skills_dir`, else `requested_skills_dir`), when it is still on this machine. Its
   `source.file_hashes` then describe the task's bundled skills, which benchflow stripped from the
   run (`strip_bundled_dir_from_copy`), so a custom-runtime run whose folder is gone goes on to
   inference.
3. `file_hashes`: `source.file_hashes`, which `_write_config` and `_build_rollout_result` record
   whenever the task has provenance (`task_file_hashes`: every file of the task by its posix path);
   the skills are the `environment/skills/<name>/SKILL.md` entries. A list that holds `task.toml` or
   `task.md` is the whole task, so one without skill entries says the task bundles none.
4. `skills_folder`: a folder the configuration names (`effective_skills_dir`,
   `requested_skills_dir`, `<task_path>/environment/skills` as the extract script looks) when it
   still exists here.

Folders are read read-only and bounded: absolute paths only (a relative one was relative to
benchflow's working directory, unknown here), the folder opened with O_NOFOLLOW, at most
`MAX_ENTRIES` entries, a skill only a real directory holding a regular `SKILL.md` (lstat: no link is
followed). The fifth source, inference across an imported batch, is `infer_task_skills` (pure): the
caller gathers the arms. The last, `catalog` (`from_catalog`), is for a with-skill run nothing else
named: the skills of its own startup catalog that the harness does not ship itself. Inference
replaces it when the batch holds both arms.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ...domain.facts.review_facts import SkillCatalog, SkillTrace, TaskSkillsSource
from .skill_traces import normalize_skill

#: The keys the skill's extract_harness_skills.py reads for task skill names (TASK_SKILL_KEYS).
TASK_SKILL_KEYS = frozenset(
    (
        "expected_task_skill_names",
        "expected_task_skills",
        "required_task_skills",
        "task_bundled_skills",
        "task_skill_names",
        "task_skills",
    )
)
#: The extract script's task-path keys: `<path>/environment/skills/*/SKILL.md` names the task's
#: skills.
TASK_PATH_KEYS = ("task_dir", "task_path", "tasks_dir")
HASHED_SKILL = re.compile(r"environment/skills/([^/]+)/SKILL\.md")
SKILL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
MAX_ENTRIES = 512  # a skills folder with more entries than this is not read


@dataclass(frozen=True)
class Named:
    """The task's skill names, which source gave them, and where exactly (file and key, or
    folder)."""

    names: tuple[str, ...]
    source: TaskSkillsSource
    origin: str


def _names(value: Any) -> list[str]:
    """The extract script's reading of a key's value: strings split on `,` `;` newlines, lists, and
    objects by `name`, `skill` or `id`."""
    if isinstance(value, str):
        return [part.strip() for part in re.split(r"[,;\n]", value) if part.strip()]
    if isinstance(value, list):
        return [name for item in value for name in _names(item)]
    if isinstance(value, dict):
        for key in ("name", "skill", "id"):
            if isinstance(value.get(key), str) and value[key].strip():
                return [value[key].strip()]
    return []


def _manifest(documents: list[tuple[str, dict[str, Any] | None]]) -> Named | None:
    """Every name under a `TASK_SKILL_KEYS` key, at any depth, walked without recursion, in
    order."""
    found: list[str] = []
    origins: list[str] = []
    for name, document in documents:
        stack: list[Any] = [document] if document is not None else []
        while stack:
            value = stack.pop(0)
            if isinstance(value, dict):
                for key, item in value.items():
                    if key in TASK_SKILL_KEYS and _names(item):
                        found += _names(item)
                        origins.append(f"{name}:{key}")
                    elif isinstance(item, (dict, list)):
                        stack.append(item)
            elif isinstance(value, list):
                stack += [item for item in value if isinstance(item, (dict, list))]
    if not found:
        return None
    return Named(_unique(found), "manifest", ", ".join(dict.fromkeys(origins)))


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for name in names:
        if name.strip():
            seen.setdefault(normalize_skill(name), name.strip())
    return tuple(seen.values())


def read_skills_folder(path: str) -> tuple[str, ...] | None:
    """The skills in a folder (`<name>/SKILL.md`), or None when it is not an absolute, real,
    readable folder of at most `MAX_ENTRIES` entries. Nothing is followed through a link, nothing is
    written."""
    if not path.startswith("/") or "\x00" in path:
        return None
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            return None
        names: list[str] = []
        with os.scandir(fd) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_ENTRIES:
                    return None
                if not (SKILL_NAME.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)):
                    continue
                try:
                    skill_md = os.lstat(f"{path.rstrip('/')}/{entry.name}/SKILL.md")
                except OSError:
                    continue
                if stat.S_ISREG(skill_md.st_mode):
                    names.append(entry.name)
    except OSError:
        return None
    finally:
        os.close(fd)
    return tuple(sorted(names))


def _field(documents: list[tuple[str, dict[str, Any] | None]], key: str) -> tuple[str, Any]:
    for name, document in documents:
        if document is not None and document.get(key) not in (None, ""):
            return name, document[key]
    return "", None


def _folder(source: TaskSkillsSource, where: str, path: Any) -> Named | None:
    names = read_skills_folder(path) if isinstance(path, str) else None
    return None if names is None else Named(names, source, f"{path} ({where})")


def _file_hashes(documents: list[tuple[str, dict[str, Any] | None]]) -> Named | None:
    for name, document in documents:
        source = (document or {}).get("source")
        hashes = source.get("file_hashes") if isinstance(source, dict) else None
        if not isinstance(hashes, dict) or not hashes:
            continue
        skills = [m.group(1) for key in hashes if (m := HASHED_SKILL.fullmatch(str(key)))]
        whole_task = "task.toml" in hashes or "task.md" in hashes
        if skills or whole_task:
            return Named(_unique(sorted(skills)), "file_hashes", f"{name}:source.file_hashes")
    return None


def find_task_skills(documents: list[tuple[str, dict[str, Any] | None]]) -> Named | None:
    """Sources 1 to 4 over the run's configuration and result.json (`(file name, object)`, in
    order)."""
    named = _manifest(documents)
    if named is not None:
        return named
    _, skill_source = _field(documents, "skill_source")
    if skill_source == "custom_runtime":
        for key in ("effective_skills_dir", "requested_skills_dir"):
            name, path = _field(documents, key)
            found = _folder("runtime_folder", f"{name}:{key}", path)
            if found is not None:
                return found
        return None  # file_hashes name the bundled skills this run did not get
    named = _file_hashes(documents)
    if named is not None:
        return named
    for key in ("effective_skills_dir", "requested_skills_dir"):
        name, path = _field(documents, key)
        found = _folder("skills_folder", f"{name}:{key}", path)
        if found is not None:
            return found
    for key in TASK_PATH_KEYS:
        name, path = _field(documents, key)
        if isinstance(path, str) and path.startswith("/"):
            task_skills = str(PurePosixPath(path) / "environment" / "skills")
            found = _folder("skills_folder", f"{name}:{key}", task_skills)
            if found is not None:
                return found
    return None


# --- the fifth source: inference across a batch's arms (pure) -------------------------------------


@dataclass(frozen=True)
class Arm:
    """One rollout of a batch as inference sees it: its task, harness, skill mode, recovered catalog
    (None: no catalog was recovered) and whether its files already named the task's skills."""

    task: str | None
    harness: str | None
    skill_mode: str | None
    catalog: tuple[str, ...] | None
    named: bool


@dataclass(frozen=True)
class Inferred:
    names: tuple[str, ...]
    origin: str


def infer_task_skills(arms: Iterable[Arm]) -> dict[tuple[str, str], Inferred]:
    """Per (task, harness): the skills some with-skill catalog shows beyond what every no-skill
    catalog of the same task and harness shows (the harness-global baseline). Only recovered
    catalogs count, and only where both arms have one; an empty difference names nothing."""
    with_skill: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    no_skill: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    for arm in arms:
        if arm.task is None or arm.harness is None or arm.catalog is None:
            continue
        into = {"with-skill": with_skill, "no-skill": no_skill}.get(arm.skill_mode or "")
        if into is not None:
            into.setdefault((arm.task, arm.harness), []).append(arm.catalog)
    inferred: dict[tuple[str, str], Inferred] = {}
    for key, catalogs in with_skill.items():
        baselines = no_skill.get(key)
        if not baselines:
            continue
        baseline = set.intersection(*({normalize_skill(n) for n in c} for c in baselines))
        names = _unique(n for c in catalogs for n in c if normalize_skill(n) not in baseline)
        if names:
            origin = (
                f"inferred: shown by the with-skill catalogs of "
                f"{len(catalogs)} run(s) and not by every no-skill catalog of "
                f"{len(baselines)} run(s) of task {key[0]}, harness {key[1]}"
            )
            inferred[key] = Inferred(tuple(sorted(names, key=normalize_skill)), origin)
    return inferred


# --- the last source: a with-skill run's own catalog, less the harness's own skills (pure) -----

#: The skills the SOP's samples show each harness shipping itself (harness-skill-catalog-sop.md, the
#: "Current PR4" notes per harness): never taken for a task's skill.
HARNESS_OWN = {
    "claude-code": frozenset(
        ("deep-research", "update-config", "keybindings-help", "verify", "code-review")
    ),
    "codex": frozenset(
        ("imagegen", "openai-docs", "plugin-creator", "skill-creator", "skill-installer")
    ),
    "openhands": frozenset(
        ("code-simplifier", "iterate", "pdflatex", "openhands-automation", "qa-changes")
    ),
    "gemini-cli": frozenset(("skill-creator",)),
}


def from_catalog(
    harness: str | None,
    names: tuple[str, ...],
    places: tuple[str | None, ...],
    mounts: Iterable[str],
    origin: str,
) -> Named | None:
    """The task's skills as a with-skill run's recovered startup catalog shows them: each entry but
    the harness's own. An entry that names its file (Codex, Gemini) is the task's only when that
    file is under the sandbox skills dir (`mounts`), where `deploy_skills` puts the task's skills
    and nothing else; one that names none (Claude Code, OpenHands) is the task's unless the SOP
    lists it as the harness's (`HARNESS_OWN`). None when no entry is left."""
    roots = tuple(mount.rstrip("/") + "/" for mount in mounts)
    own = HARNESS_OWN.get(harness or "", frozenset())
    kept = []
    for index, name in enumerate(names):
        place = places[index] if index < len(places) else None
        mounted = place is not None and place.startswith(roots)
        if mounted or (place is None and normalize_skill(name) not in own):
            kept.append(name)
    return Named(_unique(kept), "catalog", origin) if kept else None


def loading(expected: tuple[str, ...], catalog: SkillCatalog) -> int | None:
    """`task_skills_loading`: 1 when every expected skill is in the recovered catalog, 0 when one is
    not, None when nothing is expected or no catalog was recovered."""
    if not expected or catalog.status != "recovered":
        return None
    shown = {normalize_skill(name) for name in catalog.skills}
    return 1 if all(normalize_skill(name) in shown for name in expected) else 0


def with_task_skills(catalog: SkillCatalog, inferred: Inferred) -> SkillCatalog:
    """The catalog judged against inferred task skills: loading recomputed, and each recorded
    invocation of one of them added to the task-skill access (path reads under `/skills` are there
    already)."""
    wanted = {normalize_skill(name) for name in inferred.names}
    seen = {(t.file, t.line, normalize_skill(t.skill or "")) for t in catalog.task_skill_access}
    access: list[SkillTrace] = list(catalog.task_skill_access)
    for trace in catalog.invocations:
        key = (trace.file, trace.line, normalize_skill(trace.skill or ""))
        if trace.skill is not None and key[2] in wanted and key not in seen:
            seen.add(key)
            access.append(trace)
    value = loading(inferred.names, catalog)
    return catalog.model_copy(
        update={
            "expected_task_skills": inferred.names,
            "task_skills_source": "inferred",
            "task_skills_from": inferred.origin,
            "task_skills_loading": value,
            "task_skill_access": tuple(access),
        }
    )

"""One rollout directory as the experiment-review skill's judges read it: its files parsed once,
with lines.

The validator, the reward-hacking scan and the skill-catalog recovery each take a `Rollout` and
return observations (`domain/facts/review_facts.py`); none of them opens a file. `read_rollout` is
the
only reader, so every judge sees the same bytes, and a test can build a `Rollout` from rows without
a directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...domain.facts.review_facts import TaskSkillsSource

ACP, LLM, RESULTS = (
    "trajectory/acp_trajectory.jsonl",
    "trajectory/llm_trajectory.jsonl",
    "results.jsonl",
)
#: The validator's order: the first of these that parses is the run's configuration.
CONFIG_NAMES = ("run_config.json", "config.json", "metadata.json")

Row = tuple[int, dict[str, Any]]  # a 1-based line number and the JSON object on it


@dataclass(frozen=True)
class Jsonl:
    """A JSONL file: present or not, its object lines, and the lines that are not JSON objects."""

    name: str
    present: bool = False
    rows: tuple[Row, ...] = ()
    malformed: tuple[tuple[int, str], ...] = ()  # line number, why

    @classmethod
    def parse(cls, name: str, text: str) -> Jsonl:
        rows: list[Row] = []
        malformed: list[tuple[int, str]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                malformed.append((number, f"JSON parse error: {exc.msg}"))
                continue
            except (ValueError, RecursionError) as exc:
                malformed.append((number, f"JSON parse error: {exc}"))
                continue
            if isinstance(value, dict):
                rows.append((number, value))
            else:
                malformed.append((number, "expected a JSON object"))
        return cls(name, True, tuple(rows), tuple(malformed))

    @classmethod
    def of(cls, name: str, records: list[dict[str, Any]]) -> Jsonl:
        """A present file holding these records, one per line (for tests and in-memory rollouts)."""
        return cls.parse(name, "\n".join(json.dumps(r) for r in records) + "\n")


@dataclass(frozen=True)
class Rollout:
    """What the judges read of one rollout directory.

    `task`, `harness`, `skill_mode` (`with-skill` / `no-skill` / `self-gen` / None) and
    `task_skills` (the names of the task's own skills, as far as the files tell them) are read from
    result.json and the run's configuration by `read_rollout`, so the judges do not each guess
    them."""

    result: dict[str, Any] | None = None
    result_error: str | None = None
    config: dict[str, Any] | None = None
    config_name: str | None = None
    acp: Jsonl = field(default_factory=lambda: Jsonl(ACP))
    llm: Jsonl = field(default_factory=lambda: Jsonl(LLM))
    results: Jsonl = field(default_factory=lambda: Jsonl(RESULTS))
    task: str | None = None
    harness: str | None = None
    skill_mode: str | None = None
    task_skills: tuple[str, ...] = ()
    task_skills_source: TaskSkillsSource | None = None  # which source named them (task_skills.py)
    task_skills_from: str | None = None

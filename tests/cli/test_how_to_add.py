"""ARCHITECTURE's "How to add an event", done by the letter on a copy of the code.

The test copies the package into a temporary folder and adds a throw-away fact, `run.labelled`, one
step of the doc at a time. After each step it runs the guard tests on the copy and checks which of
them fail: a guard fails while its step is missing and passes once the step is done. At the end it
ingests the fact with the copy's `lineage` and reads it back as a read-model column and as a line of
history. When a step in the doc is wrong or missing, this test is where it shows.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"

#: The doc's steps for an event, by their first words. The test below does them in this order.
STEPS = [
    "Declare it",
    "List it",
    "Decide and evolve it",
    "Project it",
    "Say it in history",
    "Record it",
    "Test it",
]

#: What the copy needs: the package's folders and the guards the steps name.
PACKAGE = ["domain", "adapters", "projections", "cli", "rollout_lineage"]
GUARDS = ["tests/unit/test_fact_handlers.py", "tests/unit/test_read_model_columns.py"]

# The guards, by the name pytest gives each test.
DECIDED = "test_fact_handlers.py::test_every_fact_is_decided_and_evolved_by_exactly_one_aggregate"
IN_HISTORY = "test_fact_handlers.py::test_every_fact_reads_as_a_line_of_history"
PROJECTED = (
    "test_read_model_columns.py::test_every_fact_field_is_projected_or_ignored_with_a_reason"
)
SHAPE = "test_read_model_columns.py::test_a_table_shape_changes_only_with_its_projection_version"

THE_FACT = '''
class RunLabelled(Fact):
    """A throw-away fact (tests/cli/test_how_to_add.py): a label someone put on a run."""

    type: Literal["run.labelled"] = "run.labelled"
    run: Key
    label: Text


'''

HANDLERS = """
    @RUN_HANDLERS.decides(f.RunLabelled)
    def _decide_label(self, fact: f.RunLabelled) -> bool:
        return is_new_or_same(self.label, fact, f"label of run {fact.run!r}")

    @RUN_HANDLERS.evolves(f.RunLabelled)
    def _labelled(self, fact: f.RunLabelled) -> None:
        self.label = fact
"""

FACTS = [
    {"type": "run.registered", "run": "jobs/labelled", "task": "t1"},
    {"type": "run.labelled", "run": "jobs/labelled", "label": "flaky"},
]


def doc_steps() -> list[str]:
    """The first words (up to the colon) of each numbered step under "An event" in
    ARCHITECTURE.md."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("**An event", 1)[1].split("\n**", 1)[0]
    return re.findall(r"^\d+\. ([^:\n]+):", block, flags=re.MULTILINE)


def test_this_test_does_the_steps_the_doc_lists() -> None:
    assert doc_steps() == STEPS, (
        "ARCHITECTURE's steps for an event changed: change the test with them"
    )


class Copy:
    """The code copied into a folder: edit its files, run its guard tests and its `lineage`."""

    def __init__(self, root: Path, home: Path) -> None:
        self.root, self.home = root, home
        for folder in PACKAGE:
            # symlinks=True keeps rollout_lineage/domain -> ../domain pointing inside the copy.
            shutil.copytree(
                ROOT / folder,
                root / folder,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__"),
            )
        for name in ["pyproject.toml", "tests/__init__.py", "tests/unit/__init__.py", *GUARDS]:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, root / name)
        self.env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")

    def edit(self, path: str, old: str, new: str) -> None:
        """Replace the one place `old` is in `path` by `new` (a step's edit, where the doc says)."""
        file = self.root / path
        text = file.read_text(encoding="utf-8")
        assert text.count(old) == 1, (
            f"{path}: expected {old!r} once, found it {text.count(old)} times"
        )
        file.write_text(text.replace(old, new), encoding="utf-8")

    def guards(self) -> tuple[set[str], str]:
        """The guard tests that fail on the copy, and pytest's output."""
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *GUARDS],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        failed = set(re.findall(r"^FAILED tests/unit/(\S+)", done.stdout, flags=re.MULTILINE))
        assert done.returncode == (1 if failed else 0), done.stdout + done.stderr
        return failed, done.stdout

    def lineage(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "rollout_lineage.cli", "--home", str(self.home), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, (args, done.stdout, done.stderr)
        return done


@pytest.mark.slow
def test_an_event_and_its_column_added_the_way_architecture_says(tmp_path: Path) -> None:
    code = Copy(tmp_path / "code", tmp_path / "home")
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps(fact) + "\n" for fact in FACTS), encoding="utf-8")
    assert code.guards()[0] == set(), "the guards fail on the code as it is"

    # 1. Declare it: a frozen class with a `type`, in domain/facts/__init__.py. Nothing knows of it
    # yet.
    code.edit("domain/facts/__init__.py", "\nFACT_TYPES: tuple", THE_FACT + "FACT_TYPES: tuple")
    refused = code.lineage("ingest", str(facts), code=1)
    assert "found 'run.labelled'" in refused.stderr
    assert code.guards()[0] == set()

    # 2. List it in FACT_TYPES: now every guard that walks the facts sees it, and each names what is
    #    missing.
    code.edit(
        "domain/facts/__init__.py",
        "    RunRegistered,\n    RunLocated,",
        "    RunRegistered,\n    RunLabelled,\n    RunLocated,",
    )
    failed, output = code.guards()
    assert failed == {DECIDED, PROJECTED, IN_HISTORY}
    assert "'RunLabelled', [], []" in output  # no aggregate decides or evolves it
    assert "'RunLabelled.run', 'RunLabelled.label'" in output  # its fields reach no read model

    # 3. Decide and evolve it: two decorated methods on Run (the decider with is_new_or_same), its
    # state set up in Run.__init__.
    code.edit(
        "domain/run.py",
        "        self.report: f.AblationReported | None = None",
        "        self.label: f.RunLabelled | None = None\n"
        "        self.report: f.AblationReported | None = None",
    )
    code.edit(
        "domain/run.py", "\n    @property\n    def key", HANDLERS + "\n    @property\n    def key"
    )
    assert code.guards()[0] == {PROJECTED, IN_HISTORY}

    # 4. Project it: a column in a read model's column list (OUTCOMES in runs.py), its type in the
    # list's fact types and in the table's docs line ...
    runs = "projections/read_models/runs.py"
    code.edit(
        runs, '"run.failed", "run.finished"]', '"run.failed", "run.finished", "run.labelled"]'
    )
    code.edit(
        runs,
        '    fact("exchanges_recorded", "INTEGER"),\n',
        '    fact("exchanges_recorded", "INTEGER"),\n    fact("label"),\n',
    )
    code.edit(
        runs,
        "failed / finished facts (kind column)",
        "failed / finished / labelled facts (kind column)",
    )
    failed, output = code.guards()
    # ... projected now, but the table changed shape under the same version ...
    assert failed == {SHAPE, IN_HISTORY}
    found = re.search(
        r"runs: its tables changed shape; .* pin its new digest '([0-9a-f]{16})'", output
    )
    assert found, output
    # ... then bump the projection's version, which alone is not enough ...
    version = int(re.findall(r'name="runs",\n    version=(\d+),', code.read(runs))[0])
    code.edit(
        runs, f'name="runs",\n    version={version},', f'name="runs",\n    version={version + 1},'
    )
    failed, output = code.guards()
    assert failed == {SHAPE, IN_HISTORY}
    assert f"expected SHAPES to pin ({version + 1}, '{found[1]}')" in output
    # ... and pin the new shape in SHAPES, with the digest the guard printed.
    pinned = re.findall(r'"runs": \(\d+, "[0-9a-f]+"\),', code.read(GUARDS[1]))[0]
    code.edit(GUARDS[1], pinned, f'"runs": ({version + 1}, "{found[1]}"),')
    assert code.guards()[0] == {IN_HISTORY}

    # 5. Say it in history: a line in SUMMARIES (a root-level fact needs no place in _placements).
    code.edit(
        "projections/reports/history_text.py",
        "SUMMARIES: dict[str, Any] = {\n",
        "SUMMARIES: dict[str, Any] = {\n"
        '    "run.labelled": lambda f, w: f"run labelled {f[\'label\']}",\n',
    )
    assert code.guards()[0] == set()

    # 6. Record it: `lineage ingest` takes it as it is; read it back as a column and in history.
    code.lineage("ingest", str(facts))
    tables = json.loads(code.lineage("tables", "--format", "json").stdout)
    outcomes = next(table for table in tables if table["name"] == "run_outcomes")
    assert "labelled" in outcomes["description"] and outcomes["columns"].endswith("label VARCHAR")
    rows = code.lineage(
        "sql", "SELECT run, kind, label FROM run_outcomes", "--format", "json"
    ).stdout
    assert json.loads(rows) == [{"run": "jobs/labelled", "kind": "labelled", "label": "flaky"}]
    history = code.lineage("history", "jobs/labelled", "--format", "jsonl").stdout
    lines = [json.loads(line) for line in history.splitlines()]
    assert [(line["type"], line["summary"]) for line in lines][-1] == (
        "run.labelled",
        "run labelled flaky",
    )
    # It is decided like every fact: the same fact again appends nothing, another label is a
    # conflict.
    assert "appended 0 events" in code.lineage("ingest", str(facts)).stderr
    facts.write_text(json.dumps({**FACTS[1], "label": "solid"}) + "\n", encoding="utf-8")
    conflict = code.lineage("ingest", str(facts), code=1).stderr
    assert "label of run 'jobs/labelled' is already recorded with different values" in conflict

    # 7. Test it: the guards ran after every step above; a real fact also gets its decisions tested
    #    in
    # tests/unit/test_domain.py and its read model in tests/unit/test_projections.py.

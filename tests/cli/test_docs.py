"""Docs that cannot drift: the README tour names every command and only options that exist;
docs/modules.md's module and read-model tables match the files and the projections; every file
ARCHITECTURE.md names exists."""

from __future__ import annotations

import ast
import inspect
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rollout_lineage.cli.main import cli, interrupted
from rollout_lineage.domain.errors import LineageError
from rollout_lineage.domain.vocabulary import STAGES
from rollout_lineage.projections.read_models.outcome_words import (
    PASS_REWARD,
    STATUS_WORDS,
    V_MEANING,
)
from rollout_lineage.projections.read_models.registry import PROJECTIONS
from rollout_lineage.projections.reports.audit import checks as audit
from rollout_lineage.projections.reports.audit.audit_gate import ORACLE
from rollout_lineage.projections.reports.audit.checks import EXIT_CODES, SLOT_FIELDS
from tests.conftest import Cli

# the healthy timeout's result word, as `projections/reports/audit/checks.py` spells it
NORMAL_TIMEOUT = '"normal_timeout"'

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ARCHITECTURE = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
MODULES = (ROOT / "docs" / "modules.md").read_text(encoding="utf-8")
#: Every folder of the product that holds modules: a layer or one of its rooms.
ROOMS = tuple(
    str(folder.relative_to(ROOT))
    for layer in ("domain", "adapters", "projections", "cli")
    for folder in sorted([ROOT / layer, *(ROOT / layer).rglob("*")])
    if (folder / "__init__.py").is_file()
)


def holds_code(path: Path) -> bool:
    """A module worth a row: any module but an `__init__.py` that only names its package or
    re-exports (`domain/facts/__init__.py` declares the facts, so it has one)."""
    if path.name == "__main__.py":
        return False
    if path.name != "__init__.py":
        return True
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return any(isinstance(node, (ast.ClassDef, ast.FunctionDef)) for node in body)


def command_tree() -> dict[tuple[str, ...], click.Command]:
    """Every command by its path (`("export", "tree")`), groups included, loaded the way `lineage`
    loads them."""
    found: dict[tuple[str, ...], click.Command] = {}

    def walk(group: click.Group, path: tuple[str, ...]) -> None:
        context = click.Context(group)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            assert command is not None, name
            found[(*path, name)] = command
            if isinstance(command, click.Group):
                walk(command, (*path, name))

    walk(cli, ())
    return found


def options_of(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def section(text: str, heading: str) -> str:
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def tour_lines() -> list[str]:
    tour = section(README, "A tour of the CLI")
    block = tour.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.startswith("lineage ")]


def test_the_readme_tour_names_every_command() -> None:
    lines = tour_lines()
    named = " ".join(line.split("#", 1)[0] for line in lines)
    missing = []
    for path in command_tree():
        top = f"lineage {path[0]}"
        if len(path) == 1:
            if not re.search(rf"(?:lineage |\| ?){re.escape(path[0])}\b", named):
                missing.append(top)
        elif not any(
            line.startswith(top) and re.search(rf"\b{re.escape(path[1])}\b", line) for line in lines
        ):
            missing.append(" ".join(("lineage", *path)))
    assert not missing, f"README's tour does not show: {missing}"


def test_every_option_the_readme_mentions_exists() -> None:
    tree = command_tree()
    global_options = options_of(cli)
    everywhere = global_options | {o for c in tree.values() for o in options_of(c)}
    wrong = []
    for line in tour_lines():
        command = line.split()[1]
        family = {o for path, c in tree.items() if path[0] == command for o in options_of(c)}
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", line.split("#", 1)[0]):
            if option not in family | global_options:
                wrong.append(f"{option} on `lineage {command}`")
    # The performance section names bench/'s own flags.
    ours = README.replace(section(README, "Performance"), "")
    for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", ours):
        if option not in everywhere and option not in ("--help", "--version"):
            wrong.append(option)
    assert not wrong, f"the README mentions options no command has: {sorted(set(wrong))}"


def table_column(text: str, heading: str) -> list[str]:
    body = section(text, heading)
    return re.findall(r"^\| `([^`]+)` \|", body, flags=re.MULTILINE)


def test_the_module_table_lists_every_module_once() -> None:
    on_disk = {
        str(path.relative_to(ROOT))
        for room in ROOMS
        for path in (ROOT / room).glob("*.py")
        if holds_code(path)
    }
    listed = table_column(MODULES, "Modules")
    assert len(listed) == len(set(listed)), "a module is listed twice"
    assert set(listed) == on_disk, {
        "not listed": sorted(on_disk - set(listed)),
        "listed, not there": sorted(set(listed) - on_disk),
    }


def test_the_read_model_table_matches_the_projections() -> None:
    actual = {}
    for projection in PROJECTIONS:
        for name in projection.docs:
            kind = "view" if name in projection.views else "macro" if "(" in name else "table"
            actual[name] = (kind, projection.name)
    body = section(MODULES, "Read models people query")
    listed = {
        name: (kind, projection)
        for name, kind, projection in re.findall(
            r"^\| `([^`]+)` \| (\w+) \| `(\w+)` \|", body, flags=re.MULTILINE
        )
    }
    assert listed == actual


def test_every_file_and_name_architecture_points_to_exists() -> None:
    """ARCHITECTURE.md names files, and its "How to add" steps name what to edit in them (`NAME` in
    `path`): a file moved or a table renamed fails here, so the steps never send a newcomer to
    something gone."""
    assert "(modules.md)" in ARCHITECTURE, "ARCHITECTURE.md must link the module tables"
    folders = (*ROOMS, "rollout_lineage", "tests/unit", "tests/cli")

    def found(path: str) -> Path | None:
        """A path from the repository's root, or a bare file name (`rundir.py`) in one of the
        folders."""
        places = [ROOT / path] if "/" in path else [ROOT / folder / path for folder in folders]
        return next((place for place in places if place.exists()), None)

    named = re.findall(
        r"`((?:domain|adapters|projections|cli|tests|docs|examples)/[\w./-]*)`", ARCHITECTURE
    )
    named += re.findall(r"`(\w+\.py)`", ARCHITECTURE)
    missing = [path for path in named if "*" not in path and found(path) is None]
    steps = section(ARCHITECTURE, "How to add")
    pairs = re.findall(r"((?:`\w+`(?:, | and )?)+)\s+in\s+`([\w/]+\.py)`", steps)
    pairs += re.findall(r"(`\w+`) \(`([\w/]+\.py)`\)", steps)
    assert len(pairs) >= 8, pairs  # the steps still say where each name lives
    for names, path in pairs:
        place = found(path)
        text = place.read_text(encoding="utf-8") if place else ""
        missing += [
            f"{name} in {path}"
            for name in re.findall(r"`(\w+)`", names)
            if not re.search(rf"\b{name}\b", text)
        ]
    assert not missing, f"ARCHITECTURE.md points to what is not there: {missing}"


# --- the README's first lines, glossary, output habits and exit codes -----------------------------


def first_block() -> list[str]:
    """The README's opening code block: what a new user copies first."""
    assert README.startswith("# rollout-lineage\n\n```bash\n"), (
        "the README must open with its commands"
    )
    return README.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()


#: How each of the README's two commands starts: a virtual environment of its own, then the plain
#: install to try the tool, the test extra to run the tests.
VENV = "python -m venv .venv && . .venv/bin/activate && "


def test_the_readme_opens_with_two_commands_and_ci_runs_the_second() -> None:
    setup, tests = first_block()  # exactly two lines
    assert setup.startswith(f"{VENV}pip install . && lineage "), setup
    assert tests == f"{VENV}pip install -e '.[test]' && python -m pytest", tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").rstrip().splitlines()
    assert ci[-1] == tests, f".ci/run ends with {ci[-1]!r}, the README's test command is {tests!r}"
    assert "Python >= 3.11" in README.split("## ", 1)[0]
    assert ">=3.11" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_the_first_command_runs_in_a_fresh_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every `lineage` call of the first command, as typed, in a folder holding only `examples`:
    each exits 0, the store is the embedded `./.lineage` and the report is written in it, an
    ignored folder, not left in the checkout (the whole command, install included, in a fresh
    virtual environment: tests/cli/test_terminal_processes.py)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    calls = [c for c in first_block()[0].split(" && ") if c.startswith("lineage ")]
    assert len(calls) == 4, calls
    runner = CliRunner()
    for call in calls:
        args = shlex.split(call)
        result = runner.invoke(cli, args[1:], catch_exceptions=False)
        assert result.exit_code == 0, (call, result.output, result.stderr)
        assert result.stdout or args[1] in ("import", "report"), f"{call} printed nothing"
    assert (tmp_path / ".lineage").is_dir()
    report = tmp_path / ".lineage" / "report.html"
    assert report.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lineage", "examples"]
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert ".lineage/" in ignored and ".venv/" in ignored


def glossary() -> dict[str, tuple[str, str]]:
    """The glossary table: word -> (meaning, where you see it)."""
    rows = re.findall(
        r"^\| ([^|]+) \| (.+) \| ([^|]+) \|$", section(README, "Glossary"), flags=re.MULTILINE
    )
    return {word: (meaning, where) for word, meaning, where in rows if word != "word"}


def test_the_glossary_says_what_the_code_says() -> None:
    words = glossary()
    for word in ("arm", "fork", "node", "V", "custody", "cut point", "stage", "snapshot", "trial"):
        assert word in words, f"the glossary does not define {word!r}"
    assert V_MEANING.removeprefix("V: ") in words["V"][0], (words["V"][0], V_MEANING)
    assert re.findall(r"`([a-z-]+)`", words["stage"][0]) == list(STAGES)
    assert re.findall(r"`([a-z]+)` \(", words["status"][0]) == list(STATUS_WORDS)
    assert f"`pass` (reward >= {PASS_REWARD!r})" in words["status"][0]
    assert f"`{ORACLE}` lane" in words["lane"][0]
    assert "normal_timeout" in words and NORMAL_TIMEOUT in inspect.getsource(audit)
    fields = re.search(r"a task, agent, model, skill_mode and trial", words["slot"][0])
    assert fields is not None and tuple(re.split(r", | and ", fields[0][2:])) == SLOT_FIELDS


def test_every_command_and_column_the_glossary_points_to_exists(run_cli: Cli) -> None:
    tree = command_tree()
    for word, (_, where) in glossary().items():
        for name in re.findall(r"`([^`]+)`", where):
            if name.startswith("lineage "):
                words = name.split()[1:]
                path = tuple(w for w in words[:2] if not w.startswith("-"))
                command = tree.get(path) or tree[path[:1]]
                unknown = {w for w in words if w.startswith("--")} - options_of(command)
                assert not unknown, f"{word}: `{name}` has no option {unknown}"
            else:
                view, column = name.split(".")  # a read model's column, asked as a user would
                run_cli("sql", f"SELECT {column} FROM {view} LIMIT 0")


def test_the_commands_said_to_print_rows_take_format_and_no_headers() -> None:
    sentence = re.search(r"The commands that print rows \((.*?)\) take\s+`--format`", README, re.S)
    assert sentence is not None
    named = re.findall(r"`([a-z -]+)`", sentence[1])
    tree = command_tree()
    for name in named:
        path = tuple(name.split())
        commands = [c for p, c in tree.items() if p[: len(path)] == path and p != path] or [
            tree[path]
        ]
        for command in commands:
            assert {"--format", "--no-headers"} <= options_of(command), name
    prints_rows = {p for p, c in tree.items() if "table" in getattr(format_type(c), "choices", ())}
    missing = [
        " ".join(p) for p in prints_rows if not any(" ".join(p).startswith(n) for n in named)
    ]
    assert not missing, f"commands that print rows, not in the README's list: {sorted(missing)}"


def format_type(command: click.Command) -> click.ParamType | None:
    return next((p.type for p in command.params if "--format" in p.opts), None)


def defined_exit_codes() -> set[int]:
    """Every code the CLI can end with: success, click's usage error, each error class's code, the
    audit's verdicts, and Ctrl-C (asked of the function that handles it)."""
    errors, stack = set(), [LineageError]
    while stack:
        kind = stack.pop()
        errors.add(kind.exit_code)
        stack.extend(kind.__subclasses__())
    with pytest.raises(SystemExit) as interrupted_exit:
        interrupted()
    return {
        0,
        click.UsageError.exit_code,
        *errors,
        *EXIT_CODES.values(),
        interrupted_exit.value.code,
    }


def test_the_exit_code_table_lists_exactly_the_codes_the_cli_defines() -> None:
    listed = [
        int(code) for code in re.findall(r"^\| (\d+) \|", section(README, "Exit codes"), re.M)
    ]
    assert len(listed) == len(set(listed)), "an exit code is listed twice"
    assert set(listed) == defined_exit_codes()
    rows = dict(re.findall(r"^\| (\d+) \| (.+) \|$", section(README, "Exit codes"), re.M))
    for verdict, code in EXIT_CODES.items():
        assert verdict in rows[str(code)], (code, verdict, rows[str(code)])


def test_every_option_docs_security_names_exists() -> None:
    security = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    tree = command_tree()
    everywhere = options_of(cli) | {o for c in tree.values() for o in options_of(c)}
    wrong = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", security)) - everywhere
    assert not wrong, f"docs/security.md mentions options no command has: {sorted(wrong)}"
    assert "(docs/security.md)" in section(README, "Security model")


def test_the_two_pages_a_newcomer_reads_first_stay_short() -> None:
    """The README and the architecture page are read whole; measurements and their history live in
    bench/README.md, details in the docstrings they name."""
    assert len(README.splitlines()) <= 250
    assert len(ARCHITECTURE.splitlines()) <= 200

"""Docs that cannot drift: the README tour names every command and only options that exist; ARCHITECTURE.md's
module and read-model tables match the files and the projections."""

from __future__ import annotations

import re
from pathlib import Path

import click

from rollout_lineage.cli.main import cli
from rollout_lineage.projections.runner import PROJECTIONS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ARCHITECTURE = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
ROOMS = ("domain", "adapters", "adapters/importers", "projections", "cli")


def command_tree() -> dict[tuple[str, ...], click.Command]:
    """Every command by its path (`("export", "tree")`), groups included, loaded the way `lineage` loads them."""
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
        if path.name not in ("__init__.py", "__main__.py")
    }
    listed = table_column(ARCHITECTURE, "Modules")
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
    body = section(ARCHITECTURE, "Read models people query")
    listed = {
        name: (kind, projection)
        for name, kind, projection in re.findall(
            r"^\| `([^`]+)` \| (\w+) \| `(\w+)` \|", body, flags=re.MULTILINE
        )
    }
    assert listed == actual

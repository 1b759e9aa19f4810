"""Layering rules that keep the code navigable: the domain does no I/O, and every command explains
itself."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import click

from rollout_lineage.cli.main import cli


def walk(group: click.Group, prefix: str = "lineage") -> list[tuple[str, click.Command]]:
    found = []
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        found.append((f"{prefix} {name}", command))
        if isinstance(command, click.Group):
            found += walk(command, f"{prefix} {name}")
    return found


def test_every_command_and_option_has_help() -> None:
    for name, command in walk(cli):
        assert command.help, f"{name} has no help text"
        for param in command.params:
            if isinstance(param, click.Option) and param.name not in ("help",):
                assert param.help, f"{name} option {param.opts} has no help"


#: Which layers each layer may import (domain <- adapters <- projections <- cli; the composition
#: root sees all).
LAYERS = {
    "domain": set(),
    "adapters": {"domain"},
    "projections": {"domain", "adapters"},
    "cli": {"domain", "adapters", "projections", "rollout_lineage"},
    "rollout_lineage": {"domain", "adapters", "projections", "cli"},
}
#: Inside `projections/`, each room may import only the rooms before it: read models know nothing of
#: the engine that fills them, and the engine nothing of the reports that read them.
PROJECTION_ROOMS = {
    "read_models": set(),
    "engine": {"read_models"},
    "reports": {"read_models", "engine"},
}
REPO = Path(__file__).resolve().parents[2]


def _layer_of_import(
    module_layer: str, node: ast.ImportFrom | ast.Import, package: list[str]
) -> set[str]:
    """The project layers one import statement reaches (relative imports resolved against the
    module's package)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level:
        base = package[: len(package) - node.level + 1]
        names = [".".join([*base, node.module] if node.module else base)]
    else:
        names = [node.module or ""]
    reached = set()
    for name in names:
        parts = name.split(".")
        if parts[0] == "rollout_lineage" and len(parts) > 1 and parts[1] in LAYERS:
            reached.add(parts[1])
        elif parts[0] == "rollout_lineage" and len(parts) > 1:
            reached.add("rollout_lineage")
    return reached - {module_layer}


def test_every_module_imports_only_the_layers_below_it() -> None:
    """Checked for every module (not only those the domain test imports), lazy imports inside
    functions included."""
    broken = []
    for layer in ("domain", "adapters", "projections", "cli"):
        for path in sorted((REPO / layer).rglob("*.py")):
            package = ["rollout_lineage", layer, *path.relative_to(REPO / layer).parent.parts]
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for reached in _layer_of_import(layer, node, package) - LAYERS[layer]:
                        broken.append(
                            f"{path.relative_to(REPO)}:{node.lineno} ({layer}) imports {reached}"
                        )
    assert broken == []


def test_the_layer_check_sees_a_violation() -> None:
    """The check above must be able to fail: a projection importing the CLI is caught."""
    node = ast.parse("from ..cli import output").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _layer_of_import("projections", node, ["rollout_lineage", "projections"]) == {"cli"}


def test_the_help_table_matches_the_commands() -> None:
    from rollout_lineage.cli.main import COMMANDS

    context = click.Context(cli)
    for name, (_, _, first_paragraph) in COMMANDS.items():
        command = cli.get_command(context, name)
        assert command is not None and command.name == name
        assert (
            inspect.cleandoc(command.help or "").split("\n\n")[0].replace("\n", " ")
            == first_paragraph
        ), name


def _room_of_import(node: ast.ImportFrom | ast.Import, package: list[str]) -> set[str]:
    """The rooms of `projections/` one import statement reaches, from a module inside `package`."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level:
        base = package[: len(package) - node.level + 1]
        stem = [*base, node.module] if node.module else base
        names = [".".join(stem)] + [".".join([*stem, alias.name]) for alias in node.names]
    else:
        names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
    reached = set()
    for name in names:
        parts = name.split(".")
        if parts[:2] == ["rollout_lineage", "projections"] and len(parts) > 2:
            reached.add(parts[2])
    return reached & set(PROJECTION_ROOMS)


def test_each_projection_room_imports_only_the_rooms_before_it() -> None:
    broken = []
    rooms = REPO / "projections"
    assert sorted(p.name for p in rooms.iterdir() if p.suffix == ".py") == ["__init__.py"], (
        "every module of projections/ lives in a room: read_models/, engine/ or reports/"
    )
    for room, allowed in PROJECTION_ROOMS.items():
        for path in sorted((rooms / room).rglob("*.py")):
            package = ["rollout_lineage", "projections", room]
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for reached in _room_of_import(node, package) - allowed - {room}:
                        broken.append(
                            f"{path.relative_to(REPO)}:{node.lineno} ({room}) imports {reached}"
                        )
    assert broken == []


def test_the_room_check_sees_a_violation() -> None:
    """A read model importing a report is caught, by module and by package-relative name."""
    package = ["rollout_lineage", "projections", "read_models"]
    for source in ("from ..reports.audit import x", "from ..reports import audit"):
        node = ast.parse(source).body[0]
        assert isinstance(node, ast.ImportFrom)
        assert _room_of_import(node, package) == {"reports"}


def _modules() -> list[Path]:
    return sorted(
        path
        for layer in ("domain", "adapters", "projections", "cli")
        for path in (REPO / layer).rglob("*.py")
        if path.name != "__init__.py"
    ) + sorted((REPO / "rollout_lineage").glob("*.py"))


def test_no_module_name_is_used_twice() -> None:
    """One name, one module: `events.py` in two layers made every traceback and search ambiguous."""
    seen: dict[str, list[str]] = {}
    for path in _modules():
        seen.setdefault(path.stem, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_no_private_name_is_imported_from_another_module() -> None:
    """A leading underscore means "this module's own"; a name another module needs is made
    public."""
    broken = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        broken.append(
                            f"{path.relative_to(REPO)}:{node.lineno} imports {alias.name}"
                        )
    assert broken == []

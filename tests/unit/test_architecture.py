"""Layering rules that keep the code navigable: the domain does no I/O, and every command explains itself."""

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


#: Which layers each layer may import (domain <- adapters <- projections <- cli; the composition root sees all).
LAYERS = {
    "domain": set(),
    "adapters": {"domain"},
    "projections": {"domain", "adapters"},
    "cli": {"domain", "adapters", "projections", "rollout_lineage"},
    "rollout_lineage": {"domain", "adapters", "projections", "cli"},
}
REPO = Path(__file__).resolve().parents[2]


def _layer_of_import(
    module_layer: str, node: ast.ImportFrom | ast.Import, package: list[str]
) -> set[str]:
    """The project layers one import statement reaches (relative imports resolved against the module's package)."""
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
    """Checked for every module (not only those the domain test imports), lazy imports inside functions included."""
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

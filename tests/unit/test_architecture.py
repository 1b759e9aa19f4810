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
#: The rooms inside each layer and the rooms each may import ("" is the layer's own top-level
#: modules: ports and helpers every room shares). A file in the wrong room fails
#: `test_each_room_imports_only_the_rooms_it_may`.
ROOMS: dict[str, dict[str, set[str]]] = {
    # The facts (their families and base) and the aggregates and services that decide them; facts
    # use the words in `vocabulary.py`, which the read side shares without loading pydantic.
    "domain": {"facts": {""}, "": {"facts"}},
    "adapters": {
        "": set(),  # the store ports (chained_log, store_port), DuckDB, run-folder reading, files
        "evidence": {""},  # Merkle tree, signed batches, checkpoints, bundles, keys
        "store": {"", "evidence"},  # event stores write each batch's evidence in its transaction
        "snapshots": {""},  # docker save tars, the engine, restorability
        "review_skill": {""},  # the experiment-review skill's reading of one rollout
        "importers": {"", "review_skill"},  # run-directory layouts, reviewed at import
        "web": {""},  # lineage serve
    },
    # Read models know nothing of the engine that fills them, the engine nothing of the reports.
    "projections": {
        "read_models": set(),
        "engine": {"read_models"},
        "reports": {"read_models", "engine"},
    },
}
#: No folder of the product holds more modules side by side: past about twenty, a newcomer can no
#: longer see a folder's design.
MOST_MODULES_PER_FOLDER = 20
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


def _imported_names(node: ast.ImportFrom | ast.Import, package: list[str]) -> list[str]:
    """Every dotted name one import statement may reach, relative imports resolved against
    `package`: the module and each imported name under it (which may be a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package[: len(package) - node.level + 1]
        stem = ".".join([*base, node.module] if node.module else base)
    else:
        stem = node.module or ""
    return [stem] + [f"{stem}.{alias.name}" for alias in node.names]


def _room_of(layer: str, parts: list[str] | tuple[str, ...]) -> str:
    """The room of a module path inside `layer` (its first folder, or "" for a top-level
    module)."""
    first = parts[0] if parts else ""
    return first if first in ROOMS[layer] and first else ""


def _rooms_reached(layer: str, node: ast.ImportFrom | ast.Import, package: list[str]) -> set[str]:
    reached = set()
    for name in _imported_names(node, package):
        parts = name.split(".")
        if parts[:2] == ["rollout_lineage", layer] and len(parts) > 2:
            reached.add(_room_of(layer, parts[2:]))
    return reached


def test_each_room_imports_only_the_rooms_it_may() -> None:
    broken = []
    for layer, rooms in ROOMS.items():
        for path in sorted((REPO / layer).rglob("*.py")):
            inside = path.relative_to(REPO / layer).parts
            room = _room_of(layer, inside[:-1])
            package = ["rollout_lineage", layer, *inside[:-1]]
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for reached in _rooms_reached(layer, node, package) - rooms[room] - {room}:
                        broken.append(
                            f"{path.relative_to(REPO)}:{node.lineno} ({layer}/{room or '.'}) "
                            f"imports {layer}/{reached or '.'}"
                        )
    assert broken == []


def test_every_folder_is_a_room_of_the_table() -> None:
    """A new folder is declared in `ROOMS` with what it may import, and projections/ keeps no
    module outside its rooms."""
    for layer, rooms in ROOMS.items():
        folders = {p.name for p in (REPO / layer).iterdir() if (p / "__init__.py").is_file()}
        assert folders == set(rooms) - {""}, layer
    top = sorted(p.name for p in (REPO / "projections").iterdir() if p.suffix == ".py")
    assert top == ["__init__.py"], "every module of projections/ lives in a room"


def test_the_room_check_sees_a_violation() -> None:
    """A read model importing a report is caught, by module and by package-relative name; so is
    the evidence code importing an event store,."""
    cases = [
        ("projections", ["read_models"], "from ..reports.audit import checks", "reports"),
        ("projections", ["read_models"], "from ..reports import history", "reports"),
        ("adapters", ["evidence"], "from ..store.event_store import x", "store"),
        ("adapters", ["review_skill"], "from ..importers import plan", "importers"),
    ]
    for layer, inside, source, room in cases:
        node = ast.parse(source).body[0]
        assert isinstance(node, ast.ImportFrom)
        package = ["rollout_lineage", layer, *inside]
        assert room in _rooms_reached(layer, node, package) - ROOMS[layer][inside[0]], source


def test_no_folder_holds_more_than_twenty_modules() -> None:
    crowded = {}
    for layer in ("domain", "adapters", "projections", "cli"):
        for folder in [REPO / layer, *(p for p in (REPO / layer).rglob("*") if p.is_dir())]:
            modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
            if len(modules) > MOST_MODULES_PER_FOLDER:
                crowded[str(folder.relative_to(REPO))] = len(modules)
    assert crowded == {}


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports that run when a module is imported: not those inside functions, nor under
    `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                    visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(tree.body)
    return found


def test_no_import_circles() -> None:
    """No module imports, when it is imported, a module that imports it back, however far round:
    a circle makes import order matter and hides which module is the lower one."""
    modules: dict[str, tuple[Path, list[str]]] = {}
    packages = [
        path
        for layer in ("domain", "adapters", "projections", "cli")
        for path in (REPO / layer).rglob("__init__.py")
    ]
    for path in _modules() + sorted(packages) + [REPO / "rollout_lineage" / "__init__.py"]:
        if path.parts[len(REPO.parts)] == "rollout_lineage":
            parts = ["rollout_lineage", path.stem]
        else:
            parts = ["rollout_lineage", *path.relative_to(REPO).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
            package = parts
        else:
            package = parts[:-1]
        modules[".".join(parts)] = (path, package)
    graph: dict[str, set[str]] = {}
    for name, (path, package) in modules.items():
        reached = set()
        for node in _module_level_imports(ast.parse(path.read_text())):
            names = _imported_names(node, package)
            if isinstance(node, ast.ImportFrom) and any(n in modules for n in names[1:]):
                names = names[1:]  # `from . import x`: x, not the package's own __init__
            reached |= {n for n in names if n in modules and n != name}
        graph[name] = reached
    circles = []
    for start in graph:  # a depth-first walk from each module back to itself
        seen, stack = set(), [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert circles == []


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

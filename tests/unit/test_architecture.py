"""Layering rules that keep the code navigable: the domain does no I/O, and every command explains itself."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import click

from rollout_lineage.cli.main import cli

FORBIDDEN_IN_DOMAIN = (
    "duckdb",
    "_duckdb",
    "docker",
    "click",
    "sqlite3",
    "psycopg",
    "rich",
    "rollout_lineage.adapters",
    "rollout_lineage.projections",
    "rollout_lineage.cli",
)


def test_the_domain_imports_without_io_libraries() -> None:
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in FORBIDDEN_IN_DOMAIN)
    code = (
        f"import sys; {blocked}; import rollout_lineage.domain.application, rollout_lineage.domain.integrity, "
        "rollout_lineage.domain.vocabulary; print('ok')"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_importing_the_cli_opens_nothing() -> None:
    code = (
        "import sys; import rollout_lineage.cli.main; "
        "print(sorted(m for m in ('docker', 'psycopg', 'eventsourcing.sqlite') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.stdout.strip() == "[]", result.stderr


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


def test_help_lists_every_command_without_loading_them() -> None:
    """`lineage --help` answers in a blink: no DuckDB, eventsourcing or fact models (issue #14)."""
    code = (
        "import sys, contextlib, io; from rollout_lineage.cli.main import cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli(['--help'], prog_name='lineage')\n"
        "heavy = ('duckdb', '_duckdb', 'eventsourcing', 'pydantic', 'rollout_lineage.domain.facts', 'docker',"
        " 'rich')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.stdout.strip() == "[]", result.stderr


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


def test_reading_a_sqlite_store_loads_no_write_side(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`lineage sql` on a SQLite store catches the read models up through a plain read-only connection: no
    eventsourcing, PostgreSQL driver or fact models to import (issue #14), and the answer is the log's. DuckDB's
    engine is loaded without its Python relation layer (the `duckdb` package), which a query does not use."""
    home = str(tmp_path / ".lineage")
    write = (
        "from rollout_lineage import open_store, facts as f\n"
        f"with open_store(home={home!r}) as lineage:\n"
        "    lineage.record([f.RunRegistered(run='r1', task='t'), f.RunRegistered(run='r2', task='t')])"
    )
    subprocess.run([sys.executable, "-c", write], check=True)
    read = (
        "import sys, contextlib; from rollout_lineage.cli.main import cli\n"
        "with contextlib.suppress(SystemExit):\n"
        f"    cli(['--home', {home!r}, 'sql', 'SELECT count(*) AS n FROM runs', '--format', 'csv'],"
        " prog_name='lineage')\n"
        "heavy = ('eventsourcing', 'psycopg', 'pydantic', 'rollout_lineage.domain.facts', 'duckdb')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", read], capture_output=True, text=True, check=False
    )
    assert result.stdout.split() == ["n", "2", "[]"], result.stderr


def test_writing_to_a_sqlite_store_loads_no_postgresql_driver(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A harness or `lineage ingest` on the embedded store never imports psycopg: the PostgreSQL recorder lives in
    `adapters/postgres_store.py`, which only a PostgreSQL store URL names (issue #14: ingest start-up)."""
    facts = tmp_path / "facts.jsonl"
    facts.write_text('{"type": "run.registered", "run": "r1", "task": "t"}\n', encoding="utf-8")
    write = (
        "import sys, contextlib; from rollout_lineage.cli.main import cli\n"
        "with contextlib.suppress(SystemExit):\n"
        f"    cli(['--home', {str(tmp_path / '.lineage')!r}, 'ingest', {str(facts)!r}], prog_name='lineage')\n"
        "print([m for m in ('psycopg', 'psycopg_pool', 'eventsourcing.postgres') if m in sys.modules])"
    )
    result = subprocess.run(
        [sys.executable, "-c", write], capture_output=True, text=True, check=False
    )
    assert result.stdout.split() == ["[]"], result.stdout + result.stderr
    assert "appended 1 events" in result.stderr

"""Layering rules that keep the code navigable: the domain does no I/O, and every command explains itself."""

from __future__ import annotations

import subprocess
import sys

import click

from rollout_lineage.cli.main import cli

FORBIDDEN_IN_DOMAIN = ("duckdb", "docker", "click", "sqlite3", "psycopg", "rich", "rollout_lineage.adapters",
                       "rollout_lineage.projections", "rollout_lineage.cli")


def test_the_domain_imports_without_io_libraries() -> None:
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in FORBIDDEN_IN_DOMAIN)
    code = (f"import sys; {blocked}; import rollout_lineage.domain.application, rollout_lineage.domain.integrity, "
            "rollout_lineage.domain.vocabulary; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.stdout.strip() == "ok", result.stderr


def test_importing_the_cli_opens_nothing() -> None:
    code = ("import sys; import rollout_lineage.cli.main; "
            "print(sorted(m for m in ('docker', 'psycopg', 'eventsourcing.sqlite') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.stdout.strip() == "[]", result.stderr


def walk(group: click.Group, prefix: str = "lineage") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
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

"""The `lineage` command: global options, the error contract, and the command groups.

Exit codes (documented in the README): 0 success; 1 rejected input or a refused fact (`LineageError`);
2 usage error (click); 3 evidence does not match (tampered log, snapshot digest mismatch); 4 a store or
engine could not be reached or locked. `lineage audit` adds its verdict codes (see `cli/audit_cmds.py`).
"""

from __future__ import annotations

from typing import Any

import click
from eventsourcing.persistence import InterfaceError, OperationalError

from ..bootstrap import Lineage
from ..domain.errors import LineageError, StoreUnavailable
from ..settings import Settings


class LineageGroup(click.Group):
    """Turns our error family into `Error: ...` on stderr and its documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LineageError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except (OperationalError, InterfaceError) as exc:  # a store that went away under a read
            click.echo(
                f"Error: the event store could not be read: {exc} (check that it is reachable, then retry)",
                err=True,
            )
            ctx.exit(StoreUnavailable.exit_code)


@click.group(cls=LineageGroup)
@click.option(
    "--store",
    envvar="LINEAGE_STORE",
    help="Event store URL: sqlite:///PATH or postgresql://USER@HOST/DB "
    "(default: the SQLite file in LINEAGE_HOME).",
)
@click.option(
    "--home",
    envvar="LINEAGE_HOME",
    help="Folder for the embedded store and read models (default ./.lineage).",
)
@click.option("--actor", envvar="LINEAGE_ACTOR", help="Who is recording (default user@host).")
@click.version_option(package_name="rollout-lineage")
@click.pass_context
def cli(ctx: click.Context, store: str | None, home: str | None, actor: str | None) -> None:
    """rollout-lineage: an event-sourced lineage store for branching agent-benchmark rollouts."""
    lineage = Lineage(Settings.from_env(store=store, home=home, actor=actor))
    ctx.obj = lineage
    ctx.call_on_close(lineage.close)


def _register() -> None:
    from . import audit_cmds, export_cmds, import_cmds, log_cmds, query_cmds, snapshot_cmds

    for module in (log_cmds, query_cmds, export_cmds, import_cmds, snapshot_cmds, audit_cmds):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    cli(prog_name="lineage")

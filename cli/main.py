"""The `lineage` command: global options, the error contract, and the command groups.

Exit codes (documented in the README): 0 success; 1 rejected input or a refused fact
(`LineageError`); 2 usage error (click); 3 evidence does not match (tampered log, snapshot digest
mismatch); 4 a store or engine could not be reached or locked. `lineage audit` adds its verdict
codes (see `cli/audit_cmds.py`).
"""

from __future__ import annotations

# built in: swapping SIGINT's handler through it runs no Python a Ctrl-C could land in
import _signal  # type: ignore[import-not-found]
import contextlib
import importlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from ..adapters.interrupts import interrupts_held
from ..domain.errors import LineageError, StoreUnavailable

#: Every subcommand: its module, its name there, and the first paragraph of its help. `lineage
#: --help` lists them from here without importing them (pydantic, eventsourcing and DuckDB load only
#: for the command that runs); `tests/unit/test_architecture.py` keeps this table equal to the
#: commands themselves.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "arms": (
        "report_cmds",
        "arms",
        "RUN's arms x tests: one row per arm (every fork, "
        "or FORK's), one column per test, flips marked.",
    ),
    "audit": (
        "audit_cmds",
        "audit",
        "Review the store (or the run directories PATHS) "
        "like a release gate and end with a verdict.",
    ),
    "bundle": (
        "bundle_cmds",
        "bundle",
        "One file holding runs' events with their proofs, checkable without the store.",
    ),
    "checkpoint": (
        "evidence_cmds",
        "checkpoint",
        "Print a checkpoint of the log (origin, tree size, "
        "root hash) in the C2SP tlog-checkpoint format.",
    ),
    "cut-point": (
        "audit_cmds",
        "cut-point",
        "Resolve RUN's replay cut point from its stage registry "
        "and list the cut points its continuations served.",
    ),
    "diff": (
        "audit_cmds",
        "diff",
        "Compare two nodes or arms: delta chains from "
        "their common ancestor, rewards, per-test outcomes.",
    ),
    "export": (
        "export_cmds",
        "export",
        "Write benchflow artifacts (tree.json, stage_snapshots.json, "
        "ablation.json, the branch view), OpenLineage events or Parquet files from the log.",
    ),
    "head": (
        "log_cmds",
        "head",
        "Print POSITION:HASH of the last event; keep it elsewhere and pass it to `verify --head`.",
    ),
    "history": (
        "audit_cmds",
        "history",
        "The ancestry of NODE from the root run down, with "
        "the events that shaped each step (when and by whom).",
    ),
    "import": (
        "import_cmds",
        "import",
        "Import benchflow and Harbor run directories found under PATHS.",
    ),
    "init": (
        "log_cmds",
        "init",
        "Create an empty lineage store here (./.lineage, or where --home or --store say); "
        "an existing one is kept.",
    ),
    "ingest": (
        "log_cmds",
        "ingest",
        "Append facts from a JSON-lines FILE (or - for stdin), whole or not at all.",
    ),
    "keys": (
        "evidence_cmds",
        "keys",
        "Ed25519 key pairs in the signed-note format, for signing checkpoints and writes.",
    ),
    "log": (
        "log_cmds",
        "log",
        "The events in log order: position, when recorded, "
        "when it happened, type, subject and who.",
    ),
    "project": (
        "query_cmds",
        "project",
        "Catch the read models up with the log now (every read command also does this first).",
    ),
    "prove": (
        "evidence_cmds",
        "prove",
        "Print RFC 9162 inclusion proofs that the events "
        "at RUN:NODE (or POSITION) are in a checkpoint.",
    ),
    "rates": (
        "rates_cmds",
        "rates",
        "pass@k, pass^k and the solve rate over repeated trials of the imported benchflow jobs, "
        "counted as benchflow counts them.",
    ),
    "rebuild": (
        "query_cmds",
        "rebuild",
        "Drop every read model and rebuild it from the whole log.",
    ),
    "report": (
        "report_cmds",
        "report",
        "One self-contained HTML page (no script, no "
        "network) for RUN...: an auditor's view of each run.",
    ),
    "runs": (
        "query_cmds",
        "runs",
        "List the runs: task, agent, model, status, outcome, reward, how many forks, when "
        "registered.",
    ),
    "serve": (
        "serve_cmds",
        "serve",
        "Serve the read models as a local, read-only web application and JSON API.",
    ),
    "schema": ("log_cmds", "schema", "Print the JSON Schema of one `lineage ingest` line."),
    "snapshots": (
        "snapshot_cmds",
        "snapshots",
        "Verify, import and export `docker save` snapshot tars; show each snapshot's lifetime.",
    ),
    "sql": (
        "query_cmds",
        "sql",
        "Run a read-only SQL QUERY over the read models (`lineage tables` lists them); "
        "QUERY `-` reads it from stdin.",
    ),
    "tables": (
        "query_cmds",
        "tables",
        "List the read models (tables, views, SQL macros) with their columns and what a row is.",
    ),
    "tree": (
        "audit_cmds",
        "tree",
        "RUN's fork tree: stages and snapshots per node, each "
        "arm's delta and reward (or why none), V per fork.",
    ),
    "verify": (
        "log_cmds",
        "verify",
        "Check the hash chain of the whole log; exit 0 only if it is intact (3 if not).",
    ),
}


#: Commands that write and so may create the store where there is none (they say so); the rest never
#: invent one.
CREATES_A_STORE = frozenset({"init", "import", "ingest"})


#: The group's options that take a value, accepted after the subcommand too (`lineage sql Q --store
#: URL`).
GLOBAL_OPTIONS = ("--store", "--home", "--actor")


def hoist_global_options(args: list[str]) -> list[str]:
    """Move `--store`/`--home`/`--actor` (and their values) written after the subcommand in front of
    it, as git does not but people type anyway. Stops at `--`, so a value after it is never taken
    for an option."""
    hoisted: list[str] = []
    rest: list[str] = []
    i = 0
    seen_command = False
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if seen_command and name in GLOBAL_OPTIONS:
            takes_next = "=" not in arg and i + 1 < len(args)
            hoisted.extend(args[i : i + 2] if takes_next else [arg])
            i += 2 if takes_next else 1
            continue
        if not seen_command and name in GLOBAL_OPTIONS and "=" not in arg:
            rest.extend(args[i : i + 2])  # a global option before the command, with its value
            i += 2
            continue
        seen_command = seen_command or not arg.startswith("-")
        rest.append(arg)
        i += 1
    return hoisted + rest


class LineageGroup(click.Group):
    """Loads each subcommand on demand, and turns our error family into `Error: ...` with its exit
    code."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(args))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """click's own main, except that Ctrl-C outside a command (parsing, closing the store) is
        our exit 130, not click's "Aborted!" and exit 1."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort as exc:
            if isinstance(exc.__cause__, KeyboardInterrupt):
                interrupted()
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        # Not standalone, click returns the code a command exited with (ctx.exit) or its return
        # value.
        sys.exit(code if isinstance(code, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        with interrupts_held():
            found = importlib.import_module(f"{__package__}.{module}")
        return next(command for command in found.COMMANDS if command.name == attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        # A bare Command shortens the help as the loaded one would
        # (click.utils.make_default_short_help is deprecated), without importing the command's
        # module.
        rows = [
            (name, click.Command(name, help=text).get_short_help_str(limit))
            for name, (_, _, text) in sorted(COMMANDS.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        """The command, with Ctrl-C as a KeyboardInterrupt it ends on (one line, exit 130, the store
        closed). Run as `lineage` (`main`), a Ctrl-C before it (start-up, parsing) or after it
        (closing, shutdown) ends the process at once with the same line instead: there a
        KeyboardInterrupt would pass through click's main, or out of it as a traceback. The
        handlers are swapped with `_signal`'s own functions, so no Python runs in between."""
        try:
            if STANDALONE.ran and getattr(_signal.getsignal(SIGINT), "__name__", "") == START_UP:
                _signal.signal(SIGINT, _signal.default_int_handler)
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise with_suggestion(exc) from None
        except KeyboardInterrupt:
            interrupted()
        except BrokenPipeError:
            stdout_closed()
        except LineageError as exc:
            from .output import note

            note(f"Error: {exc}")
            ctx.exit(exc.exit_code)
        except Exception as exc:
            if isinstance(exc, RuntimeError) and str(exc).startswith("Query interrupted"):
                # Ctrl-C while DuckDB runs a statement: DuckDB stops it and raises this instead.
                interrupted()
            from eventsourcing.persistence import InterfaceError, OperationalError

            if not isinstance(exc, (OperationalError, InterfaceError)):
                raise
            # a store that went away under a read
            from .output import note

            if "readonly database" in str(exc):  # SQLite's words for a file it may not write
                note(
                    f"Error: expected to write the event store, "
                    f"found it read-only ({exc}): this command "
                    "keeps the log's Merkle tree or opens the write side (`runs`, `tree`, "
                    "`sql` and other reads do not; run it where the store can be written)"
                )
            else:
                note(
                    f"Error: the event store could not be read: {exc} (check that it is reachable, "
                    "then retry)"
                )
            ctx.exit(StoreUnavailable.exit_code)
        finally:
            if STANDALONE.ran and _signal.getsignal(SIGINT) is _signal.default_int_handler:
                _signal.signal(SIGINT, interrupted_at_exit)


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
    """rollout-lineage: an event-sourced lineage store for branching agent-benchmark rollouts.

    \b
    Environment:
      LINEAGE_STORE          event store URL (as --store)
      LINEAGE_HOME           folder of the embedded store and read models (as --home)
      LINEAGE_ACTOR          who is recording (as --actor)
      LINEAGE_DUCKDB_MEMORY  memory cap of the read models (default 256MB)
      LINEAGE_LOCK_TIMEOUT   seconds to wait for the read-model file's lock
      LINEAGE_PROGRESS       1: progress on stderr even when it is not a terminal; 0: never
      LINEAGE_CEILING_DIRECTORIES  absolute folders (colon-separated) the search does not go up into
    Without --store or --home, the store is the nearest .lineage/ in this folder or a parent.
    Shell completion: eval "$(_LINEAGE_COMPLETE=bash_source lineage)" (zsh_source, fish_source).
    """
    from ..bootstrap import Lineage
    from ..settings import Settings

    show_notices()
    show_progress(ctx)
    # As `git init`: `lineage init` makes ./.lineage even below a folder that has one.
    settings = Settings.from_env(
        store=store, home=home, actor=actor, search=ctx.invoked_subcommand != "init"
    )
    lineage = Lineage(settings, may_create=ctx.invoked_subcommand in CREATES_A_STORE)
    ctx.obj = lineage
    if settings.found_in_parent and ctx.invoked_subcommand in CREATES_A_STORE:
        from .output import note  # a write landing in a parent's store is said, never silent

        note(
            f"using the lineage store at {settings.home} (found in a parent folder; "
            "`lineage init` makes one here)"
        )
    ctx.call_on_close(lineage.close)

    def say_if_created() -> None:
        if lineage.created:
            from .output import note

            note(f"created a new lineage store at {lineage.location}")

    ctx.call_on_close(say_if_created)


class _Notices(logging.Handler):
    """The library's notices (e.g. waiting for a lock) as plain lines on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        from .output import note

        note(record.getMessage())


def show_notices() -> None:
    logger = logging.getLogger("rollout_lineage")
    if not any(isinstance(handler, _Notices) for handler in logger.handlers):
        logger.addHandler(_Notices(logging.INFO))
        logger.setLevel(logging.INFO)


def show_progress(ctx: click.Context) -> None:
    from ..adapters.progress import listening
    from .output import ProgressLine, progress_wanted

    if progress_wanted():
        line = ProgressLine(sys.stderr)
        ctx.with_resource(listening(line))
        ctx.call_on_close(line.close)


def with_suggestion(exc: click.UsageError) -> click.UsageError:
    """click's "No such command 'tre'." with the commands it may have meant, as click does for
    options."""
    import ast
    import difflib
    import re

    found = re.fullmatch(r"No such command (.+)\.", exc.message)
    group = exc.ctx.command if exc.ctx is not None else None
    if found is None or not isinstance(group, click.Group) or exc.ctx is None:
        return exc
    typed = ast.literal_eval(found[1])  # click quotes the name with repr()
    names = group.list_commands(exc.ctx)
    close = [n for n in names if n.startswith(typed)] or difflib.get_close_matches(typed, names)
    if not close:
        return exc
    return click.UsageError(
        f"{exc.message} Did you mean {' or '.join(repr(n) for n in close[:3])}?", exc.ctx
    )


#: What a shell shows for a command its reader stopped reading (128 + SIGPIPE), as git ends.
BROKEN_PIPE_EXIT = 141


def stdout_closed() -> NoReturn:
    """The reader of stdout went away (`lineage log | head -1`): end quietly, as git does, with the
    shell's code for it. Nothing more can reach that reader, so stdout is pointed at /dev/null
    (Python's final flush would otherwise complain on stderr)."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(BROKEN_PIPE_EXIT)


def interrupted() -> NoReturn:
    """Ctrl-C: one line and the shell's convention (128 + SIGINT), not a traceback. Every write is
    one transaction, so an interrupted command has appended whole batches or nothing."""
    from .output import note  # it ends a progress line first

    note("interrupted")
    sys.exit(130)


class _Standalone:
    """Whether this process is the `lineage` command (`main`), not a caller of `cli` (CliRunner):
    only then are SIGINT and the unraisable hook ours to change."""

    ran = False


STANDALONE = _Standalone()
SIGINT = signal.SIGINT
#: The start-up's handler (`rollout_lineage.interrupted_at_start_up`), until the command runs.
START_UP = "interrupted_at_start_up"


def main() -> None:
    try:
        STANDALONE.ran = True
        sys.unraisablehook = interrupted_if_unraisable
        cli.main(prog_name="lineage")
    except KeyboardInterrupt:
        interrupted()
    finally:
        # the command is over: a Ctrl-C while the interpreter shuts down ends it at once, with
        # the same one line
        if _signal.getsignal(SIGINT) not in (signal.SIG_IGN, signal.SIG_DFL, None):
            _signal.signal(SIGINT, interrupted_at_exit)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()


def interrupted_if_unraisable(unraisable: Any) -> None:
    """A Ctrl-C that lands in code whose exceptions cannot propagate (a weakref callback, a
    `__del__`, run whenever the garbage collector does) would be printed as "Exception ignored"
    with a traceback, and lost: the command would go on and exit 0. It ends the command there
    instead, as at start-up and shutdown (every write is one transaction, so whole batches were
    appended or nothing); anything else is reported as Python reports it."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        interrupted_at_exit(signal.SIGINT, None)
    sys.__unraisablehook__(unraisable)


def interrupted_at_exit(_number: int, _frame: object) -> None:
    """Ctrl-C where it cannot be raised as a KeyboardInterrupt the command handles: once the command
    is over, while the interpreter shuts down (nothing is left to close or flush), or in code that
    cannot raise (`interrupted_if_unraisable`). The line goes straight to stderr's file and the
    process ends at once."""
    with contextlib.suppress(OSError):
        os.write(sys.__stderr__.fileno() if sys.__stderr__ else 2, b"interrupted\n")
    os._exit(130)

"""One way to print rows, shared by every read command (`--format
table|tsv|csv|json|jsonl|markdown`).

stdout carries data only; progress and diagnostics go to stderr. Every format but the table streams
row by row, so a long answer starts printing at once and never has to fit in memory. A table is for
a terminal: piped, a command prints TSV unless told otherwise. One value prints the same way
everywhere: floats in their shortest exact form, times in UTC ISO 8601 with a `Z`, nothing at all
for a missing value. Every text format escapes what it writes (`write_rows`): values, column names
and a table's title, so a recorded name is shown, never obeyed by the terminal.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import click

FORMATS = ("table", "tsv", "csv", "json", "jsonl", "markdown")
#: Formats with a header row that `--no-headers` leaves out.
HEADED = frozenset({"table", "tsv", "csv", "markdown"})
MAX_POSITION = 2**62  # both stores keep positions in 64-bit integers
#: A log position (or a count) as an option takes it: a 20-digit number is a usage error, not an
#: overflow deep inside.
POSITION = click.IntRange(min=0, max=MAX_POSITION)


def output_options(
    *choices: str, default: str = "table", help: str = ""
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--format` and `--no-headers`, the same for every command. `choices` are the command's
    formats (the row formats unless it says otherwise); the default `table` becomes `tsv` when
    stdout is not a terminal, so `lineage runs | cut -f1` works. The format arrives as the command's
    `fmt`; `--no-headers` is kept on the context for `write_rows`."""
    formats = choices or FORMATS
    piped = " (tsv when stdout is not a terminal)" if default == "table" else ""

    def resolve(ctx: click.Context, _param: click.Parameter, value: str | None) -> str:
        if value is not None:
            return value
        return "tsv" if default == "table" and not sys.stdout.isatty() else default

    def keep(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        ctx.meta[_NO_HEADERS] = value

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        func = click.option(
            "--no-headers",
            is_flag=True,
            expose_value=False,
            callback=keep,
            help="Leave out the header row (table, tsv, csv, markdown).",
        )(func)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(formats),
            callback=resolve,
            help=(help or "Output format.") + f" [default: {default}{piped}]",
        )(func)

    return decorate


_NO_HEADERS = "rollout_lineage.no_headers"


def _headers_wanted() -> bool:
    ctx = click.get_current_context(silent=True)
    return not (ctx is not None and ctx.find_root().meta.get(_NO_HEADERS, False))


def iso_time(value: datetime | date) -> str:
    """The one form times print in: ISO 8601, in UTC with `Z` when the time has a zone (as the log
    stores it)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value.isoformat()


def _json_default(value: Any) -> Any:
    """What json.dumps cannot write by itself, inside documents and nested values too."""
    if isinstance(value, (datetime, date, Decimal)):
        return _jsonable(value)
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return iso_time(value)
    # DuckDB's DECIMAL (e.g. `0.1 + 0.2`): a JSON number, not a string
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except (
            ValueError,
            RecursionError,
        ):  # not JSON after all, or nested too deep to read back: the text
            return value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or Infinity; a reader would choke on them
    return value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=_json_default)
    if isinstance(value, bool):
        return "true" if value else "false"  # as JSON and SQL spell them, not Python's True
    if isinstance(value, float):
        # The shortest text that reads back as the same float: 0.123456789, not 0.123457.
        return repr(value)
    if isinstance(value, (datetime, date)):
        return iso_time(value)
    return str(value)


def _tsv_field(text: str) -> str:
    """A TSV field as PostgreSQL's COPY text format writes one: a tab or newline inside a value is
    escaped, so every line is one row and every tab a column boundary."""
    escaped = (
        text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )
    return terminal_safe(escaped)


_CONTROL = {
    code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), *range(0x7F, 0xA0)) if code != 0x0A
}


def terminal_safe(text: str) -> str:
    """Control characters from recorded ids and values (escape sequences, carriage returns) shown,
    not obeyed: a run named with ESC[2J must not clear an auditor's screen or hide the rows above
    it. Invisible format characters (a right-to-left override that shows `evil\u202egnp.exe` as
    `evilexe.png`) and Unicode line and paragraph separators are shown as escapes too."""
    text = text.translate(_CONTROL)
    if text.isascii():
        return text
    return "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cf", "Zl", "Zp") else ch for ch in text
    )


def _table_text(text: str) -> str:
    """A value, column name or title in a table: one line, control characters shown."""
    return terminal_safe(text).replace("\n", "\\n")  # a newline would draw a row of its own


def _markdown_text(text: str) -> str:
    """A value or column name in a markdown table: one line, no `|` that splits a cell."""
    return _table_text(text).replace("|", "\\|")


def write_rows(
    rows: Iterable[dict[str, Any]], columns: Sequence[str], fmt: str, *, title: str | None = None
) -> None:
    """`rows` in `fmt`, each written as it comes (the table excepted: it is drawn once, capped).

    The one place rows are printed, so the one place they are escaped: each text format escapes
    everything it writes, values, column names (a test name is one in `arms`, a query's alias in
    `sql`) and the table's title alike, and no command can print a recorded id raw. Table and
    markdown show a newline as `\\n` (each row stays one line), TSV as COPY does; CSV keeps it,
    inside quotes as CSV has it; JSON and JSON lines escape every control character themselves."""
    if fmt == "table":
        _write_table(rows, columns, title, _headers_wanted())
    else:
        # the stream CliRunner swaps in, too
        WRITERS[fmt](sys.stdout, rows, columns, _headers_wanted())


Writer = Callable[[Any, Iterable[dict[str, Any]], Sequence[str], bool], None]


def _json_row(row: dict[str, Any], columns: Sequence[str]) -> str:
    return json.dumps({c: _jsonable(row.get(c)) for c in columns}, default=_json_default)


def _write_jsonl(out: Any, rows: Iterable[dict[str, Any]], columns: Sequence[str], _: bool) -> None:
    for row in rows:
        out.write(_json_row(row, columns) + "\n")


def _write_json(out: Any, rows: Iterable[dict[str, Any]], columns: Sequence[str], _: bool) -> None:
    out.write("[")
    for i, row in enumerate(rows):
        out.write(("," if i else "") + "\n  " + _json_row(row, columns))
    out.write("\n]\n")


def _write_csv(
    out: Any, rows: Iterable[dict[str, Any]], columns: Sequence[str], headers: bool
) -> None:
    writer = csv.writer(out, lineterminator="\n")
    if headers:
        writer.writerow([terminal_safe(c) for c in columns])
    for row in rows:
        writer.writerow([terminal_safe(_cell(row.get(c))) for c in columns])


def _write_tsv(
    out: Any, rows: Iterable[dict[str, Any]], columns: Sequence[str], headers: bool
) -> None:
    if headers:
        out.write("\t".join(_tsv_field(c) for c in columns) + "\n")
    for row in rows:
        out.write("\t".join(_tsv_field(_cell(row.get(c))) for c in columns) + "\n")


def _write_markdown(
    out: Any, rows: Iterable[dict[str, Any]], columns: Sequence[str], headers: bool
) -> None:
    if headers:
        out.write("| " + " | ".join(_markdown_text(c) for c in columns) + " |\n")
        out.write("|" + "|".join("---" for _ in columns) + "|\n")
    for row in rows:
        out.write("| " + " | ".join(_markdown_text(_cell(row.get(c))) for c in columns) + " |\n")


WRITERS: dict[str, Writer] = {
    "jsonl": _write_jsonl,
    "json": _write_json,
    "csv": _write_csv,
    "tsv": _write_tsv,
    "markdown": _write_markdown,
}


#: The width a table written to a pipe or file may take: enough that no value is cut or folded.
UNBOUNDED_WIDTH = 1_000_000

#: A table is drawn whole, so it shows this many rows and says how many more there were (the other
#: formats stream).
TABLE_ROWS = 1000


#: Columns naming what a row is about, the values people copy into the next command: on a terminal
#: they are never cut, and the other columns give way first (a row wider than the terminal is
#: wrapped by it rather than an id cut).
ID_COLUMNS = frozenset({"run", "ref", "fork", "arm", "node", "position"})


def column_widths(natural: Sequence[int], available: int, keep: Iterable[int] = ()) -> list[int]:
    """Each column's width on a terminal: its natural width when all fit, else a fair share (narrow
    columns keep theirs, what they leave goes to the wide ones), never below one character. The
    columns in `keep` (ids) always keep their natural width; the others share what they leave."""
    widths = list(natural)
    kept = set(keep)
    remaining = available - sum(natural[i] for i in kept)
    order = sorted((i for i in range(len(natural)) if i not in kept), key=lambda i: natural[i])
    for done, i in enumerate(order):
        share = max(1, remaining // (len(order) - done))
        widths[i] = max(1, min(natural[i], share))
        remaining -= widths[i]
    return widths


#: The least a column other than an id is given on a terminal (its `…` included); a column that
#: cannot have it is left out, and the table says so.
MIN_CELL = 6


def columns_that_fit(columns: Sequence[str], natural: Sequence[int], width: int) -> list[int]:
    """The columns a terminal `width` wide shows: every id (`ID_COLUMNS`), then the others, left
    to right, while each still gets `MIN_CELL` characters (or its whole value, if shorter)."""
    used = 1 + sum(natural[i] + 3 for i, c in enumerate(columns) if c in ID_COLUMNS)
    shown = []
    for i, column in enumerate(columns):
        if column not in ID_COLUMNS:
            need = min(natural[i], MIN_CELL) + 3
            if used + need > width:
                continue
            used += need
        shown.append(i)
    return shown


def _table_cells(
    rows: Iterable[dict[str, Any]], columns: Sequence[str]
) -> tuple[list[list[str]], int]:
    """The first `TABLE_ROWS` rows as escaped cell texts, and how many more were left out (counted,
    not drawn: a long answer must not be held in memory as a table)."""
    cells: list[list[str]] = []
    left_out = 0
    for row in rows:
        if len(cells) >= TABLE_ROWS:
            left_out += 1
            continue
        cells.append([_table_text(_cell(row.get(c))) for c in columns])
    return cells, left_out


def _fit_to_terminal(
    columns: Sequence[str], natural: list[int], width: int
) -> tuple[list[int], list[int], int]:
    """The columns shown, their widths and the table's width on a terminal of `width`: other
    columns give way (or are left out) before an id is cut, and the table is never narrower than
    its ids."""
    shown = columns_that_fit(columns, natural, width)
    natural = [natural[i] for i in shown]
    ids = [n for n, i in enumerate(shown) if columns[i] in ID_COLUMNS]
    fitted = column_widths(natural, width - 3 * len(shown) - 1, ids)
    return shown, fitted, max(width, sum(fitted) + 3 * len(shown) + 1)


def _write_table(
    rows: Iterable[dict[str, Any]], columns: Sequence[str], title: str | None, headers: bool = True
) -> None:
    from rich.cells import cell_len
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    cells, left_out = _table_cells(rows, columns)
    heads = [_table_text(c) for c in columns]
    # On a terminal a row is one line: a cell too long for its share of the width ends in `…`. A
    # table written to a pipe or a file keeps every value whole (so do the other formats).
    terminal = sys.stdout.isatty()
    width = shutil.get_terminal_size().columns if terminal else UNBOUNDED_WIDTH
    natural = [
        max([cell_len(c) if headers else 1, *(cell_len(r[i]) for r in cells)])
        for i, c in enumerate(heads)
    ]
    shown, fitted = list(range(len(columns))), natural
    if terminal:
        shown, fitted, width = _fit_to_terminal(columns, natural, width)
    table = Table(
        # Text, not str, here too: a title or column name like "[red]x" is data, not rich markup.
        title=Text(_table_text(title)) if title is not None else None,
        show_lines=False,
        header_style="bold",
        show_header=headers,
    )
    for i, column_width in zip(shown, fitted, strict=True):
        table.add_column(Text(heads[i]), width=column_width, overflow="ellipsis", no_wrap=True)
    for values in cells:
        # Text, not str: a value like "[red]x" is data, not rich markup.
        table.add_row(*(Text(values[i]) for i in shown))
    Console(file=sys.stdout, width=width, soft_wrap=False).print(table)
    if len(shown) < len(columns):
        hidden = ", ".join(c for i, c in enumerate(columns) if i not in shown)
        note(
            f"left out to fit {width} columns without cutting an id: {hidden} "
            "(a wider terminal, or --format tsv, csv or json, shows every column)"
        )
    if left_out:
        note(
            f"showed the first {TABLE_ROWS} rows; {left_out} more were left out "
            "(--format tsv, csv, jsonl or json stream every row)"
        )


def write_document(document: Any, fmt: str) -> None:
    """A single JSON document (a report) in the JSON formats."""
    click.echo(
        json.dumps(
            document, indent=2 if fmt == "json" else None, sort_keys=True, default=_json_default
        )
    )


def write_text(text: str, *, escape: bool = True) -> None:
    """Text on stdout as it is (add the newline you want): escaped for a terminal unless it is a
    file format that must stay byte-exact (an export), whose JSON already escapes what a terminal
    would obey."""
    click.echo(terminal_safe(text) if escape else text, nl=False)


def write_line(text: str) -> None:
    write_text(text + "\n")


def note(message: str) -> None:
    if ProgressLine.current is not None:
        ProgressLine.current.close()  # a message starts on a line of its own, never after a bar
    click.echo(terminal_safe(message), err=True)


class ProgressLine:
    """One line on stderr that redraws itself (`\\r`) as long operations advance: at most ten times
    a second, each task on its own line. Drawn only where a person watches (stderr is a terminal) or
    when LINEAGE_PROGRESS=1 asks for it; never on stdout, which carries data only."""

    #: The line being drawn in this process, so `note` can end it first.
    current: ProgressLine | None = None

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.task: str | None = None
        self.drawn_at = 0.0
        ProgressLine.current = self

    def __call__(self, task: str, done: int, total: int | None) -> None:
        import time

        now = time.monotonic()
        finished = total is not None and done >= total
        if task == self.task and not finished and now - self.drawn_at < 0.1:
            return
        if self.task is not None and task != self.task:
            self.stream.write("\n")
        self.task, self.drawn_at = task, now
        of = f" of {total:,} ({100 * done / total:.0f}%)" if total else ""
        self.stream.write(f"\r{task}: {done:,}{of}")
        self.stream.flush()

    def close(self) -> None:
        if self.task is not None:
            self.stream.write("\n")
            self.stream.flush()
            self.task = None


def progress_wanted(environ: Any = None) -> bool:
    import os

    env = os.environ if environ is None else environ
    setting = env.get("LINEAGE_PROGRESS", "auto")
    return setting == "1" or (setting == "auto" and sys.stderr.isatty())


def terminal_width() -> int | None:
    """The width of the terminal stdout is (a longer line would be wrapped by it, across a tree's
    guides), or None when stdout is piped or a file: every line is then kept whole."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None

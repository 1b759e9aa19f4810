"""One way to print rows, shared by every read command (`--format table|json|jsonl|csv|markdown`).

stdout carries data only; progress and diagnostics go to stderr. JSON streams row by row so a long answer
starts printing at once and never has to fit in memory twice.
"""

from __future__ import annotations

import csv
import json
import math
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from datetime import date, datetime
from typing import Any

import click

FORMATS = ("table", "json", "jsonl", "csv", "markdown")
MAX_POSITION = 2**62  # both stores keep positions in 64-bit integers
#: A log position (or a count) as an option takes it: a 20-digit number is a usage error, not an overflow deep inside.
POSITION = click.IntRange(min=0, max=MAX_POSITION)


def format_option(
    default: str = "table", extra: Sequence[str] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice([*FORMATS, *extra]),
        default=default,
        show_default=True,
        help="Output format.",
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
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
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


_CONTROL = {
    code: f"\\x{code:02x}" for code in (*range(0x00, 0x20), *range(0x7F, 0xA0)) if code != 0x0A
}


def terminal_safe(text: str) -> str:
    """Control characters from recorded ids and values (escape sequences, carriage returns) shown, not obeyed:
    a run named with ESC[2J must not clear an auditor's screen or hide the rows above it. Invisible format
    characters (a right-to-left override that shows `evil\u202egnp.exe` as `evilexe.png`) and Unicode line and
    paragraph separators are shown as escapes too."""
    text = text.translate(_CONTROL)
    if text.isascii():
        return text
    return "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cf", "Zl", "Zp") else ch for ch in text
    )


def write_rows(
    rows: Iterable[dict[str, Any]], columns: Sequence[str], fmt: str, *, title: str | None = None
) -> None:
    out = sys.stdout  # the stream CliRunner swaps in, too
    if fmt == "jsonl":
        for row in rows:
            out.write(json.dumps({c: _jsonable(row.get(c)) for c in columns}, default=str) + "\n")
    elif fmt == "json":
        out.write("[")
        for i, row in enumerate(rows):
            out.write(
                ("," if i else "")
                + "\n  "
                + json.dumps({c: _jsonable(row.get(c)) for c in columns}, default=str)
            )
        out.write("\n]\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in columns])
    elif fmt == "markdown":
        out.write("| " + " | ".join(columns) + " |\n")
        out.write("|" + "|".join("---" for _ in columns) + "|\n")
        for row in rows:
            out.write(
                "| "
                + " | ".join(
                    terminal_safe(_cell(row.get(c))).replace("|", "\\|").replace("\n", " ")
                    for c in columns
                )
                + " |\n"
            )
    else:
        _write_table(rows, columns, title)


#: A table is drawn whole, so it shows this many rows and says how many more there were (the other formats stream).
TABLE_ROWS = 1000


def _write_table(rows: Iterable[dict[str, Any]], columns: Sequence[str], title: str | None) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    left_out = 0
    for row in rows:
        if table.row_count >= TABLE_ROWS:
            left_out += 1  # counted, not drawn: a long answer must not be held in memory as a table
            continue
        # Text, not str: a value like "[red]x" is data, not rich markup; a newline in a value would draw a row.
        table.add_row(
            *(Text(terminal_safe(_cell(row.get(c))).replace("\n", "\\n")) for c in columns)
        )
    Console(file=sys.stdout, width=max(120, Console().width), soft_wrap=False).print(table)
    if left_out:
        note(
            f"showed the first {TABLE_ROWS} rows; {left_out} more were left out "
            "(--format csv, jsonl or json stream every row)"
        )


def write_document(document: Any, fmt: str) -> None:
    """A single JSON document (a report) in the JSON formats."""
    click.echo(
        json.dumps(document, indent=2 if fmt == "json" else None, sort_keys=True, default=str)
    )


def note(message: str) -> None:
    click.echo(terminal_safe(message), err=True)

"""One recorded value on one line of text, as tables show it: a newline inside it is printed `\\n`.

Text formats (`tree`, `history`, `audit`) build lines from recorded ids and messages; a run id
holding a newline would otherwise start a line of its own and could draw a node or a finding that is
not in the log. The other control characters are escaped by the printer (`cli/output.terminal_safe`)
on the way out.
"""

from __future__ import annotations

from typing import Any


def one_line(value: Any) -> str:
    return str(value).replace("\n", "\\n")

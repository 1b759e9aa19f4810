"""Shared pieces of the fuzz tests: a CLI call that fails on any unhandled exception, and hostile
JSON values.

Each fuzz example gets a fresh store in a `tempfile.TemporaryDirectory()` rather than pytest's
`tmp_path`, because hypothesis runs many examples inside one test call and a function-scoped
directory would be shared.
"""

from __future__ import annotations

import json
import math
import os
import traceback
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from hypothesis import currently_in_test_context, event
from hypothesis import strategies as st

from rollout_lineage.cli.main import cli


def examples(count: int) -> int:
    """`count` examples per fuzz test, scaled by LINEAGE_FUZZ_SCALE (e.g. 20 for a long hunt;
    default 1)."""
    return max(1, int(count * float(os.environ.get("LINEAGE_FUZZ_SCALE", "1"))))


#: The exit codes the CLI documents (cli/main.py); anything else, or a traceback, is a bug.
DOCUMENTED_EXIT_CODES = {0, 1, 2, 3, 4}


def invoke(home: Path, *args: str, input: bytes | str | None = None) -> Result:
    """`lineage --home HOME ARGS` with exceptions caught, then refused unless they are a documented
    exit."""
    result = CliRunner().invoke(
        cli,
        ["--home", str(home), "--actor", "fuzzer@lab", *args],
        input=input,
        catch_exceptions=True,
    )
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        trace = (
            "".join(traceback.format_exception(*result.exc_info))
            if result.exc_info
            else repr(result.exception)
        )
        raise AssertionError(
            f"lineage {' '.join(args)} raised an unhandled "
            f"{type(result.exception).__name__}: {result.exception}\n{trace}"
        )
    assert result.exit_code in DOCUMENTED_EXIT_CODES, (result.exit_code, result.stderr)
    return result


def note(label: str) -> None:
    """A hypothesis event (shown by --hypothesis-show-statistics), ignored outside a hypothesis
    test."""
    if currently_in_test_context():
        event(label)


def head(home: Path) -> str:
    """`lineage head`: POSITION:HASH of the last event (a fresh store answers 0:sha256:000...)."""
    # read commands never create a store; a refused first write leaves none behind
    invoke(home, "init")
    result = invoke(home, "head")
    assert result.exit_code == 0, result.stderr
    return result.stdout.strip()


def position(head_text: str) -> int:
    return int(head_text.split(":", 1)[0])


def log_rows(home: Path) -> list[dict[str, Any]]:
    result = invoke(home, "log", "--format", "jsonl")
    assert result.exit_code == 0, result.stderr
    return json_lines(result.stdout)


def json_lines(text: str) -> list[Any]:
    """Parse JSON lines split on "\\n" only (str.splitlines would also split inside U+0085 or U+2028
    in a value)."""
    return [json.loads(line) for line in text.split("\n") if line]


def as_fact(row: dict[str, Any]) -> dict[str, Any]:
    """A `lineage log` row back in the shape of a fact (`type` plus its fields)."""
    return {"type": row["type"], **row["fact"]}


# -- hostile JSON values ---------------------------------------------------------------------------
#
# Two values once broke the log where a fact takes any JSON (`rewards`, `source`,
# `workspace_digest`, ...) or a plain float (`timing`, `wall_clock_sec`): a non-finite float (stored
# as null) and a lone UTF-16 surrogate (the event could not be encoded). The domain now refuses
# both; tests/cli/test_fuzz_ingest.py holds the regression tests, and the general strategies below
# aim NaN/Infinity (`NON_FINITE`) at the reward fields.

HUGE_INTS = st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**40, -(10**40), 10**400])
NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
ODD_FLOATS = st.sampled_from([-0.0, 1e308, -1e308, 5e-324, 1e-300, 2.0**53 + 1])
ODD_STRINGS = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "é" * 600,
        "x" * 513,
        "../../etc/passwd",
        "sha256:" + "0" * 63,
        "2026-13-45T99:99:99Z",
        "null",
        "NaN",
        "\u202e",
        "a\nb",
        "\U0001f600",
    ]
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    HUGE_INTS,
    st.floats(allow_nan=False, allow_infinity=False),
    ODD_FLOATS,
    st.text(max_size=40),
    ODD_STRINGS,
)

json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)


def dumps(value: Any) -> str:
    """JSON the way a sloppy harness writes it: NaN and Infinity pass (Python's json reads them
    back)."""
    return json.dumps(value, allow_nan=True)

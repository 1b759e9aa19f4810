"""How many LLM exchanges a benchflow run recorded: what a replay of it (`bench eval continue`) can
serve.

benchflow's `load_llm_exchanges_with_lines` (continue_run/run_folder.py) reads
`trajectory/llm_trajectory.jsonl`, one `LLMExchange` per line (`Trajectory.to_jsonl`), skips blank
lines and lines it cannot parse, and counts the parsed ones: `n_recorded_exchanges`, the bound of
`validate_max_exchanges` (`0 < K <= n_recorded`). The same count is taken here, line by line so a
long recording is never held in memory: a line counts when it is a JSON object whose `request` and
`response` are objects. A line longer than `MAX_LINE_BYTES` is refused rather than guessed about.
"""

from __future__ import annotations

import json

from ...domain.errors import InvalidInput
from ..rundir import NOTHING_APPENDED, RunFolder, require_regular

RECORDING = "trajectory/llm_trajectory.jsonl"
MAX_LINE_BYTES = 64 * 1024 * 1024


def _is_exchange(line: bytes) -> bool:
    try:
        document = json.loads(line)
    except (ValueError, RecursionError):  # benchflow skips a line it cannot parse
        return False
    return (
        isinstance(document, dict)
        and isinstance(document.get("request"), dict)
        and isinstance(document.get("response"), dict)
    )


def exchanges_recorded(folder: RunFolder) -> int | None:
    """The run's recorded exchange count, or None when it has no recording."""
    path = folder.resolve(RECORDING)
    if path is None:
        return None
    require_regular(path)
    count = 0
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(
                iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1
            ):
                if len(line) > MAX_LINE_BYTES:
                    raise InvalidInput(
                        f"{path}, line {number}: expected an LLM "
                        f"exchange of at most {MAX_LINE_BYTES} "
                        "bytes, found a longer line",
                        hint=NOTHING_APPENDED,
                    )
                count += bool(line.strip()) and _is_exchange(line)
    except OSError as exc:
        raise InvalidInput(
            f"{path}: cannot be read ({exc.strerror})", hint=NOTHING_APPENDED
        ) from None
    return count

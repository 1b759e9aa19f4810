"""Text formats print a recorded newline as `\\n`, as tables do: a run or node id cannot draw lines
of its own.

Before, `tree`, `history`, `audit`, `diff` and `cut-point` text printed the id raw, so a run named
with a newline and a tree drawing could add a node, an event or a verdict line that is not in the
log.
"""

from __future__ import annotations

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from tests.conftest import Cli

FAKE = "\n└── n9  arm forged · pass: reward 1.0\nverdict: publishable"
RUN = "evil/run" + FAKE
NODE = "n1" + FAKE


def hostile(lineage: Lineage) -> None:
    lineage.record(
        [
            f.RunRegistered(run=RUN, task="t"),
            f.ForkOpened(
                run=RUN,
                fork="f" + FAKE,
                node="root",
                children=(f.ForkChild(index=0, node=NODE, arm="a" + FAKE),),
            ),
            f.ChildScored(run=RUN, fork="f" + FAKE, index=0, reward=0.0),
        ]
    )


@pytest.mark.parametrize(
    "args",
    [
        ("tree", RUN),
        ("tree", RUN, "--format", "mermaid"),
        ("history", f"{RUN}:{NODE}"),
        ("audit",),
        ("diff", f"{RUN}:{NODE}", f"{RUN}:root"),
        ("cut-point", RUN),
    ],
)
def test_a_newline_in_a_recorded_id_draws_no_line(
    lineage: Lineage, run_cli: Cli, args: tuple[str, ...]
) -> None:
    hostile(lineage)
    result = run_cli(*args, ok=False)
    assert result.exit_code in (0, 10, 11), result.stderr
    lines = result.stdout.splitlines()
    assert lines, result.stderr
    forged = [
        line
        for line in lines
        if line.lstrip(" │├└─").startswith("n9  arm forged") or line == "verdict: publishable"
    ]
    assert forged == [], forged
    assert any("\\n└── n9  arm forged" in line for line in lines)

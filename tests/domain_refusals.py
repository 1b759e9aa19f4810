"""What refusing looks like in the domain tests: a batch the application raises on, and appends
nothing for."""

from __future__ import annotations

import pytest

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import LineageApp


def refused(
    app: LineageApp, error: type[Exception], *facts: f.Fact, verified_here: bool = False
) -> str:
    before = app.position()
    with pytest.raises(error) as caught:
        app.record(facts, verified_here=verified_here)
    assert app.position() == before, "a refused batch must append nothing"
    return str(caught.value)

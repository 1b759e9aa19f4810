"""The domain on a real SQLite file: a long-lived writer reads only the events stored since its last
record."""

from __future__ import annotations

import pytest

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.errors import InvariantViolated

RUN = "job/task__1"


def test_recording_into_a_long_run_reads_only_what_is_new(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A long-lived writer catches its cached run up with the events stored since, not the whole
    stream (issue #14): the events read per record stay flat as the run grows, and another writer's
    events are still seen."""
    from tests.conftest import open_lineage

    url = f"sqlite:///{tmp_path / 'events.sqlite'}"
    with open_lineage(url, tmp_path) as writer, open_lineage(url, tmp_path) as other:
        app = writer.app
        select = app.recorder.select_events
        read: list[int] = []

        def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
            found = select(*args, **kwargs)
            read[-1] += len(found)
            return found

        app.recorder.select_events = counting  # type: ignore[method-assign]
        writer.record([f.RunRegistered(run=RUN, task="task")])
        parent = "root"
        for i in range(1, 301):
            read.append(0)
            writer.record([f.NodeOpened(run=RUN, node=f"n{i}", parent=parent)])
            parent = f"n{i}"
        # only the other writers' events since the last record (none here)
        assert max(read[50:]) <= 1, read
        other.record([f.NodeOpened(run=RUN, node="from-elsewhere", parent="n300")])
        read.append(0)
        # sees the other's node
        writer.record([f.NodeOpened(run=RUN, node="n301", parent="from-elsewhere")])
        assert read[-1] == 1
        with pytest.raises(InvariantViolated):
            writer.record([f.NodeOpened(run=RUN, node="n302", parent="nowhere")])
        # the refused batch left no trace
        writer.record([f.NodeOpened(run=RUN, node="n302", parent="n301")])
        assert app.run(RUN).version == 304

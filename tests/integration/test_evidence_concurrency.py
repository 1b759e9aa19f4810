"""The Merkle tree and signed batches with several writers and checkpoint takers at once, on both
backends.

Writers append signed batches from their own processes while another process keeps catching the tree
up and taking checkpoints; afterwards every checkpoint taken along the way is extended by the final
log, the tree is the tree of the events, and every event is covered by the writers' key.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from rollout_lineage.adapters.evidence import ed25519
from rollout_lineage.adapters.evidence.batch_evidence import check_coverage
from rollout_lineage.adapters.evidence.checkpoints import check_extends, make_checkpoint
from rollout_lineage.bootstrap import open_store
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.signed_note import Checkpoint
from tests.conftest import open_lineage

WRITERS, BATCHES = 4, 25


def _write(store_url: str, home: str, key: str, writer: int) -> None:
    with open_store(store_url, home=home, signing_key=key) as lineage:
        for i in range(BATCHES):
            run = f"w{writer}/r{i}"
            lineage.record(
                [f.RunRegistered(run=run, task="t"), f.StageMarked(run=run, stage="env-ready")]
            )


def _checkpoints(store_url: str, home: str, out: multiprocessing.Queue, count: int) -> None:
    with open_lineage(store_url, home) as lineage:
        for _ in range(count):
            made = make_checkpoint(lineage.tree())
            out.put((made.origin, made.size, made.root))


def test_checkpoints_taken_while_signed_writers_run_are_all_extended(
    store_url: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    key = ed25519.generate("writers")
    (tmp_path / "writers.key").write_text(str(key))
    with open_store(
        store_url, home=str(home), signing_key=str(tmp_path / "writers.key")
    ) as lineage:
        lineage.record([f.RunRegistered(run="first", task="t")])
    context = multiprocessing.get_context("spawn")
    taken = context.Queue()
    processes = [
        context.Process(
            target=_write, args=(store_url, str(home), str(tmp_path / "writers.key"), w)
        )
        for w in range(WRITERS)
    ]
    processes += [
        context.Process(target=_checkpoints, args=(store_url, str(home), taken, 15))
        for _ in range(2)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(300)
        assert process.exitcode == 0
    checkpoints = [taken.get(timeout=5) for _ in range(30)]

    with open_lineage(store_url, home) as lineage:
        tree = lineage.tree()
        assert tree.size() == 1 + WRITERS * BATCHES * 2
        for origin, size, root in checkpoints:
            assert check_extends(tree, Checkpoint(origin, size, root)) is None
        report = lineage.verify()
        assert report.intact, report.problem
        coverage = check_coverage(lineage.app.recorder, [key.verifier])
        assert coverage.uncovered == [] and coverage.signed == tree.size()

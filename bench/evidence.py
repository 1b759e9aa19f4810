"""Figures for the evidence commands at scale: prints one JSON object.

The log is run.py's synthetic store (built once under bench/out/, reused). The tree is dropped and
built from it again (`tree_first_build_s`: what an existing store pays once, on first use); after
that a checkpoint, a consistency check against an older checkpoint and an inclusion proof read only
the stored subtrees, which is what the `_ms` figures measure. `verify_full_events_per_s` is the
whole `lineage verify` walk (chain and tree against every event).

Usage: python bench/evidence.py [--events N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import big_store

from rollout_lineage.adapters.evidence import ed25519
from rollout_lineage.adapters.evidence.checkpoints import check_extends, make_checkpoint
from rollout_lineage.adapters.evidence.merkle_store import MerkleStore
from rollout_lineage.domain.signed_note import Checkpoint, Note


def ms(action: Callable[[], object], runs: int = 5) -> float:
    def once() -> float:
        start = time.perf_counter()
        action()
        return (time.perf_counter() - start) * 1000

    return round(statistics.median(once() for _ in range(runs)), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    events = parser.parse_args().events
    figures: dict[str, object] = {"events": events}
    with big_store(events) as lineage:
        tree = MerkleStore(lineage.app.recorder)
        with lineage.app.recorder.datastore.transaction(commit=True) as c:  # measure a first build
            c.execute(f"DELETE FROM {tree.leaves}")
            c.execute(f"DELETE FROM {tree.nodes}")
        start = time.perf_counter()
        tree.catch_up()
        figures["tree_first_build_s"] = round(time.perf_counter() - start, 2)
        size = tree.size()
        figures["tree_size"] = size
        key = ed25519.generate("bench")
        half = Checkpoint(make_checkpoint(tree).origin, size // 2, tree.root(size // 2))
        signed_half = ed25519.sign_note(Note(half.text()), key)

        def signed_checkpoint() -> Note:
            return ed25519.sign_note(Note(make_checkpoint(lineage.tree()).text()), key)

        def verify_checkpoint() -> None:
            ed25519.verify_note(signed_half, [key.verifier], "bench")
            assert check_extends(lineage.tree(), half) is None

        figures["checkpoint_signed_ms"] = ms(signed_checkpoint)
        figures["verify_checkpoint_ms"] = ms(verify_checkpoint)
        figures["prove_one_event_ms"] = ms(lambda: tree.inclusion(size // 3, size))
        start = time.perf_counter()
        report = lineage.verify()
        assert report.intact, report.problem
        figures["verify_full_events_per_s"] = round(report.events / (time.perf_counter() - start))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

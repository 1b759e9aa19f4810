"""Synthetic but realistic facts for the benchmarks: runs with stages, an ablation-like fork and
outcomes.

Each run yields 12 events (registration, two stages and their two snapshot captures, a node, a fork
with three children, three child outcomes, the closing, and the run's score), so N events means N/12
runs.
"""

from __future__ import annotations

from collections.abc import Iterator

from rollout_lineage.domain import facts as f

EVENTS_PER_RUN = 12


def run_facts(i: int) -> list[f.Fact]:
    run = f"bench/task-{i % 97}__{i:08d}"
    rewards = [float((i + k) % 2) for k in range(3)]
    children = tuple(
        f.ForkChild(
            index=k,
            node=f"n{k + 2}",
            arm=arm,
            kind="skill-mode" if k < 2 else "inject",
            delta=f.Delta(skill_mode=arm)
            if k < 2
            else f.Delta(injected_prompt_sha256="sha256:" + "ab" * 32),
            delta_execution="fresh-rollout",
        )
        for k, arm in enumerate(("with-skill", "no-skill", "inject"))
    )
    return [
        f.RunRegistered(
            run=run,
            task=f"task-{i % 97}",
            agent="claude-agent-acp",
            model="claude-sonnet-4-5",
            trial=str(i % 5),
        ),
        f.StageMarked(run=run, stage="env-ready", sandbox_ref=f"bf-snap-{i:08d}-a"),
        f.NodeOpened(run=run, node="n1", parent="root"),
        f.StageMarked(
            run=run,
            stage="pre-verify",
            node="n1",
            exchanges_completed=i % 40,
            sandbox_ref=f"bf-snap-{i:08d}-b",
        ),
        f.ForkOpened(
            run=run,
            fork="root",
            node="root",
            stage="env-ready",
            layers=("sandbox",),
            children=children,
        ),
        *(
            f.ChildScored(
                run=run,
                fork="root",
                index=k,
                reward=r,
                tests={"test_a": "passed" if r else "failed", "test_b": "passed"},
            )
            for k, r in enumerate(rewards)
        ),
        f.ForkClosed(run=run, fork="root", outcome="completed", value=sum(rewards) / 3),
        f.RunScored(run=run, reward=rewards[0], tests={"test_a": "passed"}),
    ]


def batches(n_events: int, runs_per_batch: int = 100, start: int = 0) -> Iterator[list[f.Fact]]:
    n_runs = max(1, n_events // EVENTS_PER_RUN)
    for first in range(start, start + n_runs, runs_per_batch):
        yield [
            fact
            for i in range(first, min(first + runs_per_batch, start + n_runs))
            for fact in run_facts(i)
        ]

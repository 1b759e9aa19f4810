"""Hand-written facts for the runs in examples/pr-layout, as a harness would record them live.

The expected exports are the benchflow files in examples/pr-layout (written independently of this
code), so a projection bug shows up as a field-by-field difference.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import Entry

ABLATE_RUN = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
ABLATE_DIR = "/home/ci/jobs/ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
ENV_READY_REF = "bf-snap-csv-dedupe-a41c07e95b2d"
PRE_VERIFY_REF = "bf-snap-csv-dedupe-6e02d8f3c917"
T0 = datetime(2026, 11, 2, 10, 15, 3, tzinfo=UTC)


def _tests(keeps_order: str, streaming: str) -> dict[str, str]:
    return {
        "tests/test_outputs.py::test_header_preserved": "passed",
        "tests/test_outputs.py::test_dedupe_exact": "passed",
        "tests/test_outputs.py::test_keeps_order": keeps_order,
        "tests/test_outputs.py::test_streaming_large_input": streaming,
    }


def _child(
    index: int, node: str, arm: str, kind: str, delta: f.Delta, source: str | None = None
) -> f.ForkChild:
    return f.ForkChild(
        index=index,
        node=node,
        arm=arm,
        kind=kind,
        source=source,
        delta=delta,
        delta_execution="fresh-rollout",
    )


ABLATION_ARMS = (
    _child(0, "n2", "with-skill", "skill-mode", f.Delta(skill_mode="with-skill")),
    _child(1, "n3", "no-skill", "skill-mode", f.Delta(skill_mode="no-skill")),
    _child(
        2,
        "n4",
        "inject:prompts/hint.md",
        "inject",
        f.Delta(
            injected_prompt_sha256="sha256:c1d8b603f4ada215e54c8bae2fb054072d024c001245400adb47ec274625efb1"
        ),
        source="prompts/hint.md",
    ),
    _child(
        3,
        "n5",
        'config:{"agent": {"max_turns": 40}}',
        "config-override",
        f.Delta(
            config_override_sha256="sha256:aceb559c2fdd18ae537e9f220613c203b501a840168f192dcd2aa9c4453c971d",
            config_override_keys=("agent",),
        ),
    ),
)


# Facts the ablate scenario implies beyond its own: a snapshot capture per stage ref, and its
# run_dir as a location.
ABLATE_IMPLIED = 4


def ablate_run_facts(*, with_late_reward: bool = True) -> list[Entry]:
    """The bench eval ablate example: env-ready fork with four arms (one unscored, tests
    flipping)."""
    at = iter(T0 + timedelta(seconds=10 * i) for i in range(100))
    run = ABLATE_RUN
    facts: list[f.Fact] = [
        f.RunRegistered(
            run=run,
            task="csv-dedupe",
            task_path="tasks/csv-dedupe",
            agent="claude-agent-acp",
            model="claude-sonnet-4-5",
            skill_mode="no-skill",
            sandbox="docker",
            run_dir=ABLATE_DIR,
        ),
        f.StageMarked(run=run, stage="env-ready", node="root", sandbox_ref=ENV_READY_REF),
        f.NodeOpened(run=run, node="n1", parent="root"),
        f.StageMarked(
            run=run,
            stage="pre-verify",
            node="n1",
            exchanges_completed=3,
            sandbox_ref=PRE_VERIFY_REF,
            environment_ref="env-snap-csv-dedupe-0c55e1a7",
        ),
        f.ForkOpened(
            run=run,
            fork="root",
            node="root",
            stage="env-ready",
            layers=("sandbox",),
            snapshot=f.SnapshotRefs(sandbox=ENV_READY_REF),
            children=ABLATION_ARMS,
            ablation={
                "task": {"id": "csv-dedupe", "path": "tasks/csv-dedupe"},
                "agent": "claude-agent-acp",
                "model": "claude-sonnet-4-5",
                "sandbox": "docker",
                "environment": None,
                "snapshot_layers": ["sandbox"],
            },
        ),
        f.ChildRestored(
            run=run,
            fork="root",
            index=0,
            layers=("sandbox",),
            snapshot=f.SnapshotRefs(sandbox=ENV_READY_REF),
        ),
        f.ChildScored(
            run=run,
            fork="root",
            index=0,
            reward=1.0,
            tests=_tests("passed", "passed"),
            wall_clock_sec=203.1,
        ),
        f.ChildScored(
            run=run,
            fork="root",
            index=1,
            reward=0.0,
            tests=_tests("failed", "failed"),
            wall_clock_sec=181.0,
        ),
        f.ChildUnscored(
            run=run,
            fork="root",
            index=2,
            reason="verifier produced no reward: reward.txt missing",
            wall_clock_sec=136.2,
        ),
    ]
    if with_late_reward:
        facts += late_reward_facts()
    facts += [
        f.SnapshotExported(
            ref=ENV_READY_REF,
            path="/home/ci/jobs/ablate-2026-11-02__10-15-00/snapshots/bf-snap-csv-dedupe-a41c07e95b2d.tar",
            sha256="sha256:6573b8b3a7510b984eb230180bd9cf7b001da99924b932ad6fd0b9355839509a",
            image_id="sha256:361d52bf6dd39ce20e51a873b3fb9a2792df72ea2a92d8233427f059a5629707",
        ),
        f.SnapshotDiscarded(ref=PRE_VERIFY_REF),
        f.SnapshotDiscarded(ref="env-snap-csv-dedupe-0c55e1a7"),
        f.RunScored(run=run, reward=0.0, rewards={"reward": 0.0}, tests=_tests("failed", "failed")),
    ]
    return [Entry(fact, next(at)) for fact in facts]


def late_reward_facts() -> list[f.Fact]:
    return [
        f.ChildScored(
            run=ABLATE_RUN,
            fork="root",
            index=3,
            reward=1.0,
            tests=_tests("passed", "skipped"),
            wall_clock_sec=220.7,
        ),
        f.ForkClosed(run=ABLATE_RUN, fork="root", outcome="completed", value=None),
    ]


NIGHTLY_RUN = "nightly/csv-dedupe__7c1f2a90"


def nightly_run_facts() -> list[Entry]:
    """A plain run with three stages and an in-place pre-verify fork whose two children were both
    scored."""
    run = NIGHTLY_RUN
    prompt = "sha256:" + "d6" * 32
    return [
        Entry(fact)
        for fact in (
            f.RunRegistered(
                run=run, task="csv-dedupe", agent="openhands", model="claude-sonnet-4-5"
            ),
            f.StageMarked(
                run=run, stage="env-ready", sandbox_ref="bf-snap-csv-dedupe-19d7b3e2c4f0"
            ),
            f.NodeOpened(run=run, node="n1", parent="root"),
            f.StageMarked(
                run=run,
                stage="post-research",
                node="n1",
                exchanges_completed=5,
                sandbox_ref="bf-snap-csv-dedupe-5a0f9c81e6d3",
            ),
            f.NodeOpened(run=run, node="n2", parent="n1"),
            f.StageMarked(
                run=run,
                stage="pre-verify",
                node="n2",
                exchanges_completed=9,
                sandbox_ref="bf-snap-csv-dedupe-c2e84a7b1f95",
            ),
            f.ForkOpened(
                run=run,
                fork="n2",
                node="n2",
                stage="pre-verify",
                layers=("sandbox",),
                snapshot=f.SnapshotRefs(sandbox="bf-snap-csv-dedupe-c2e84a7b1f95"),
                children=(
                    f.ForkChild(index=0, node="n3", delta=f.Delta(injected_prompt_sha256=prompt)),
                    f.ForkChild(
                        index=1,
                        node="n4",
                        delta=f.Delta(injected_prompt_sha256="sha256:" + "d0" * 32),
                    ),
                ),
            ),
            f.ChildScored(run=run, fork="n2", index=0, reward=1.0),
            f.ChildScored(run=run, fork="n2", index=1, reward=0.0),
            f.ForkClosed(run=run, fork="n2", outcome="completed", value=0.5),
        )
    ]

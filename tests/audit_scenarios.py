"""Hand-written facts for the audit commands: one run per situation an auditor must see, all of them
valid.

Every run here is accepted by the domain; situations the domain refuses outright (V not the mean,
served K above configured K, restoring a discarded snapshot) are tested on rows in
`tests/unit/test_audit_checks.py`. Runs share task, agent, model and skill mode and differ by trial,
so one matrix covers them all.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import Entry

TASK, AGENT, MODEL, SKILL = "csv-dedupe", "claude-agent-acp", "claude-sonnet-4-5", "no-skill"
T0 = datetime(2026, 11, 2, 9, 0, 0, tzinfo=UTC)
HOLD = "/jobs/audit/branches/root/parent"
ENTRIES = (
    f.CustodyEntry(path="agent/trajectory.jsonl", sha256="sha256:" + "a1" * 32, size=120),
    f.CustodyEntry(path="verifier/ctrf.json", sha256="sha256:" + "b2" * 32, size=64),
)
HEALTHY, UNSCORED, PARTIAL, CUSTODY = (
    "audit/healthy__1",
    "audit/unscored__2",
    "audit/partial__3",
    "audit/custody__4",
)
SOURCE, CONTINUED, TWIN_A, TWIN_B, LIE = (
    "audit/source__5",
    "audit/source__5__continued",
    "audit/twin-a__6",
    "audit/twin-b__6",
    "audit/lie__8",
)


def tests(order: str) -> dict[str, str]:
    return {
        "tests/test_outputs.py::test_header": "passed",
        "tests/test_outputs.py::test_order": order,
    }


def at(facts: list[f.Fact], start: int = 0) -> list[Entry]:
    """Facts a minute apart from T0 + start minutes, so `occurred_at` is reproducible."""
    return [Entry(fact, T0 + timedelta(minutes=start + i)) for i, fact in enumerate(facts)]


def register(run: str, trial: str, **extra: object) -> f.RunRegistered:
    return f.RunRegistered(
        run=run, task=TASK, agent=AGENT, model=MODEL, skill_mode=SKILL, trial=trial, **extra
    )


def ref(run: str, stage: str) -> str:
    return f"bf-snap-{run.split('/')[-1].replace('_', '-')}-{stage}"


ARMS = (
    f.ForkChild(
        index=0,
        node="n1",
        arm="with-skill",
        kind="skill-mode",
        delta=f.Delta(skill_mode="with-skill"),
        delta_execution="fresh-rollout",
    ),
    f.ForkChild(
        index=1,
        node="n2",
        arm="no-skill",
        kind="skill-mode",
        delta=f.Delta(skill_mode="no-skill"),
        delta_execution="fresh-rollout",
    ),
)


def ablation_start(run: str, trial: str) -> list[f.Fact]:
    """Registration, an env-ready capture and a two-arm skill ablation forked from it, custody
    held."""
    snap = ref(run, "env-ready")
    return [
        register(run, trial),
        f.StageMarked(run=run, stage="env-ready", sandbox_ref=snap),
        f.ForkOpened(
            run=run,
            fork="root",
            node="root",
            stage="env-ready",
            layers=("sandbox",),
            snapshot=f.SnapshotRefs(sandbox=snap),
            children=ARMS,
        ),
        f.CustodyHeld(run=run, fork="root", location=HOLD, entries=ENTRIES),
    ]


def arm(run: str, index: int, outcome: f.Fact) -> list[f.Fact]:
    return [
        f.ChildRestored(
            run=run,
            fork="root",
            index=index,
            layers=("sandbox",),
            snapshot=f.SnapshotRefs(sandbox=ref(run, "env-ready")),
        ),
        outcome,
        f.CustodyHandedOff(
            run=run, fork="root", index=index, location=f"{HOLD}/../children/n{index + 1}/mounted"
        ),
    ]


ACP_OK = f.TrajectoryFile(present=True, size=3333, records=18, agent_events=18)
LLM_OK = f.TrajectoryFile(
    present=True, size=32974, records=9, requests=9, responses=9, responses_with_usage=9
)
RESULTS_OK = f.ResultsRow(present=True, rows=1, training_ready=True)


def evidence(
    run: str, node: str = "root", *, trial: str | None = None, **overrides: object
) -> f.EvidenceObserved:
    """What a healthy benchflow rollout directory holds for the release gate (with-skill arms: their
    skills loaded)."""
    values: dict[str, object] = {
        "run": run,
        "node": node,
        "trial": trial,
        "acp_trajectory": ACP_OK,
        "llm_trajectory": LLM_OK,
        "results": RESULTS_OK,
        "token_usage": f.TokenUsage(
            input_tokens=21624, output_tokens=520, total_tokens=22144, source="litellm_callback"
        ),
        "started_at": "2026-11-02T09:00:00+00:00",
        "finished_at": "2026-11-02T09:02:50+00:00",
        "duration_sec": 170.1,
        "tool_calls": 7,
        "partial_trajectory": False,
        "skills": f.SkillLoading(skill_mode="no-skill", invocations=0),
    }
    return f.EvidenceObserved(**{**values, **overrides})


WITH_SKILL = f.SkillLoading(
    skill_mode="with-skill", skills_dir="/home/agent/.claude/skills", invocations=1, marker_lines=1
)


def run_end(run: str, reward: float = 1.0) -> list[f.Fact]:
    return [
        evidence(run),
        evidence(run, "n1", skills=WITH_SKILL),
        f.SnapshotExported(
            ref=ref(run, "env-ready"),
            path=f"/jobs/snapshots/{ref(run, 'env-ready')}.tar",
            sha256="sha256:" + "c3" * 32,
            image_id="sha256:" + "d4" * 32,
        ),
        f.RunScored(run=run, reward=reward, tests=tests("passed" if reward >= 1 else "failed")),
        f.RunFinished(run=run, status="completed", trajectory="acp"),
    ]


def healthy_ablation(run: str = HEALTHY, trial: str = "1", *, scored: bool = True) -> list[Entry]:
    facts = ablation_start(run, trial) + arm(
        run, 0, f.ChildScored(run=run, fork="root", index=0, reward=1.0, tests=tests("passed"))
    )
    if scored:
        facts += arm(
            run, 1, f.ChildScored(run=run, fork="root", index=1, reward=0.0, tests=tests("failed"))
        )
        facts += [
            f.CustodyReleased(run=run, fork="root", entries=ENTRIES),
            f.ForkClosed(run=run, fork="root", outcome="completed", value=0.5),
            *run_end(run),
        ]
    return at(facts)


def late_no_skill_score(run: str = HEALTHY) -> list[Entry]:
    """The rest of `healthy_ablation(scored=False)`: the no-skill arm's reward and everything after
    it."""
    return at(
        [
            *arm(
                run,
                1,
                f.ChildScored(run=run, fork="root", index=1, reward=0.0, tests=tests("failed")),
            ),
            f.CustodyReleased(run=run, fork="root", entries=ENTRIES),
            f.ForkClosed(run=run, fork="root", outcome="completed", value=0.5),
            *run_end(run),
        ],
        start=30,
    )


def unscored_arm() -> list[Entry]:
    run = UNSCORED
    return at(
        ablation_start(run, "2")
        + arm(
            run, 0, f.ChildScored(run=run, fork="root", index=0, reward=1.0, tests=tests("passed"))
        )
        + arm(
            run,
            1,
            f.ChildUnscored(
                run=run,
                fork="root",
                index=1,
                reason="verifier produced no reward: reward.txt missing",
            ),
        )
        + [
            f.CustodyReleased(run=run, fork="root", entries=ENTRIES),
            f.ForkClosed(run=run, fork="root", outcome="completed", value=None),
            *run_end(run),
        ]
    )


def partial_fork() -> list[Entry]:
    run = PARTIAL
    return at(
        ablation_start(run, "3")
        + arm(
            run, 0, f.ChildScored(run=run, fork="root", index=0, reward=1.0, tests=tests("passed"))
        )
        + arm(
            run, 1, f.ChildFailed(run=run, fork="root", index=1, error="RuntimeError: sandbox died")
        )
        + [
            f.CustodyReleased(run=run, fork="root", entries=ENTRIES),
            f.ForkClosed(
                run=run, fork="root", outcome="partial", error="RuntimeError: sandbox died"
            ),
            *run_end(run),
        ]
    )


def custody_failure_preserved() -> list[Entry]:
    run = CUSTODY
    return at(
        ablation_start(run, "4")
        + arm(
            run, 0, f.ChildScored(run=run, fork="root", index=0, reward=1.0, tests=tests("passed"))
        )
        + arm(
            run, 1, f.ChildScored(run=run, fork="root", index=1, reward=0.0, tests=tests("failed"))
        )
        + [
            f.CustodyFailed(
                run=run,
                fork="root",
                phase="release",
                preserved_location=HOLD,
                entries=ENTRIES,
                error="ArtifactCustodyError: agent/trajectory.jsonl could not be moved back",
            ),
            f.ForkClosed(run=run, fork="root", outcome="partial", error="ArtifactCustodyError"),
            *run_end(run),
        ]
    )


def served_cut_point_with_divergence() -> list[Entry]:
    """A source run with a post-research stage at K=12 and its continuation, whose replay diverged
    at exchange 7."""
    source, run = SOURCE, CONTINUED
    return at(
        [
            register(source, "5"),
            f.StageMarked(run=source, stage="env-ready", sandbox_ref=ref(source, "env-ready")),
            f.NodeOpened(run=source, node="n1", parent="root"),
            f.StageMarked(run=source, stage="post-research", node="n1", exchanges_completed=12),
            f.RunFailed(run=source, error="provider returned 529 overloaded", category="provider"),
            register(run, "5", role="continuation", parent_run=source),
            f.CutPointServed(
                run=run,
                source_run=source,
                accounting="served",
                configured_k=12,
                served_k=12,
                stage="post-research",
                recorded_request_digest="sha256:" + "cc" * 32,
                served_request_digest="sha256:" + "cc" * 32,
                divergences=(
                    f.Divergence(
                        exchange_index=7,
                        served_request_digest="sha256:" + "bb" * 32,
                        recorded_request_digest="sha256:" + "aa" * 32,
                        n_messages_served=15,
                        n_messages_recorded=15,
                    ),
                ),
            ),
            f.RunScored(run=run, reward=1.0, tests=tests("passed")),
            f.RunFinished(run=run, status="completed", trajectory="llm"),
            evidence(run),
        ]
    )


def duplicate_slot() -> list[Entry]:
    """Two unrelated healthy runs for the same slot (trial 6)."""
    return at(
        [fact for run in (TWIN_A, TWIN_B) for fact in (register(run, "6"), *run_end_plain(run))]
    )


def run_end_plain(run: str) -> list[f.Fact]:
    return [
        evidence(run),
        f.RunScored(run=run, reward=0.0, tests=tests("failed")),
        f.RunFinished(run=run, status="completed", trajectory="acp"),
    ]


def ephemeral_snapshot_restored() -> list[Entry]:
    """The pre-verify snapshot is discarded without an export, then a fork opens on it: a restorable
    lie."""
    run, snap = LIE, ref(LIE, "pre-verify")
    prompt = ("sha256:" + "e5" * 32, "sha256:" + "f6" * 32)
    return at(
        [
            register(run, "8"),
            f.NodeOpened(run=run, node="n1", parent="root"),
            f.StageMarked(
                run=run, stage="pre-verify", node="n1", exchanges_completed=9, sandbox_ref=snap
            ),
            f.SnapshotDiscarded(ref=snap),
            f.ForkOpened(
                run=run,
                fork="n1",
                node="n1",
                stage="pre-verify",
                layers=("sandbox",),
                snapshot=f.SnapshotRefs(sandbox=snap),
                children=tuple(
                    f.ForkChild(index=i, node=f"n{i + 2}", delta=f.Delta(injected_prompt_sha256=p))
                    for i, p in enumerate(prompt)
                ),
            ),
            f.ChildScored(run=run, fork="n1", index=0, reward=1.0),
            f.ChildScored(run=run, fork="n1", index=1, reward=1.0),
            f.ForkClosed(run=run, fork="n1", outcome="completed", value=1.0),
            *run_end_plain(run),
        ]
    )


def quarantine_store() -> list[Entry]:
    """Everything except the restorable lie: publishable with quarantines."""
    return (
        healthy_ablation()
        + unscored_arm()
        + partial_fork()
        + custody_failure_preserved()
        + served_cut_point_with_divergence()
        + duplicate_slot()
    )


#: Trials 1-7: 1 healthy, 2-4 quarantined by their forks, 5 filled by the continuation, 6 duplicate,
#: 7 missing.
MATRIX = {
    "task": TASK,
    "agent": AGENT,
    "model": MODEL,
    "skill_mode": SKILL,
    "trial": [str(i) for i in range(1, 8)],
}


def odd_ids_run() -> list[Entry]:
    """Node ids and arm labels that are not safe identifiers in Mermaid or DOT."""
    run = "odd/run"
    return at(
        [
            f.RunRegistered(run=run, task="t"),
            f.NodeOpened(run=run, node="end", parent="root"),
            f.NodeOpened(run=run, node="a b", parent="end"),
            f.ForkOpened(
                run=run,
                fork="f",
                node="a b",
                children=(
                    f.ForkChild(
                        index=0,
                        node="a_b",
                        arm='say "hi" <b>#1</b>',
                        delta=f.Delta(injected_prompt_sha256="sha256:" + "11" * 32),
                    ),
                    f.ForkChild(
                        index=1,
                        node="x-1.2",
                        arm="`tick`",
                        delta=f.Delta(injected_prompt_sha256="sha256:" + "22" * 32),
                    ),
                ),
            ),
            f.ChildScored(run=run, fork="f", index=0, reward=0.25),
        ]
    )

"""Every invariant of the domain, on the in-memory store: a violation raises and records nothing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rollout_lineage.adapters.store.memory_log import MEMORY_ENV
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.application import Entry, LineageApp
from rollout_lineage.domain.errors import (
    ClaimRefused,
    ConflictingFact,
    CustodyBroken,
    InvariantViolated,
    SnapshotNotRestorable,
    StageNotRecorded,
    UnknownSubject,
)
from tests.domain_refusals import refused
from tests.scenarios import ABLATE_IMPLIED, ablate_run_facts

RUN = "job/task__1"


@pytest.fixture
def app() -> LineageApp:
    app = LineageApp(env=MEMORY_ENV, actor="tester@lab", tool_version="test")
    app.record(
        [
            f.RunRegistered(run=RUN, task="task"),
            f.StageMarked(run=RUN, stage="env-ready", sandbox_ref="snap-a"),
        ]
    )
    return app


def two_children(**delta: object) -> tuple[f.ForkChild, ...]:
    return (
        f.ForkChild(index=0, node="n1", delta=f.Delta(**delta)),
        f.ForkChild(index=1, node="n2"),
    )


def fork(stage: str | None = "env-ready", node: str = "root", **delta: object) -> f.ForkOpened:
    return f.ForkOpened(
        run=RUN, fork="root", node=node, stage=stage, children=two_children(**delta)
    )


def test_resending_a_fact_appends_nothing(app: LineageApp) -> None:
    assert app.record([f.RunRegistered(run=RUN, task="task")]).appended == 0


def test_a_conflicting_fact_shows_both_values(app: LineageApp) -> None:
    message = refused(app, ConflictingFact, f.RunRegistered(run=RUN, task="other-task"))
    assert "task: recorded 'task', now 'other-task'" in message


def test_where_a_run_lives_is_located_not_registered() -> None:
    app = LineageApp(env=MEMORY_ENV, actor="tester@lab", tool_version="test")
    # A registration's run_dir becomes a location the harness recorded; the registration itself
    # carries none.
    first = app.record(
        [
            f.RunRegistered(run=RUN, task="task", run_dir="/home/ci/job/task__1"),
            f.RunLocated(run=RUN, path="/a/job/task__1"),
        ]
    )
    assert [(fact.type, getattr(fact, "run_dir", None)) for fact in first.new_facts][:2] == [
        ("run.registered", None),
        ("run.located", None),
    ]
    assert app.run(RUN).registration.run_dir is None
    # So with or without run_dir, in either order, it is the same registration.
    assert app.record([f.RunRegistered(run=RUN, task="task")]).appended == 0
    assert (
        app.record([f.RunRegistered(run=RUN, task="task", run_dir="/home/ci/job/task__1")]).appended
        == 0
    )
    moved = [f.RunRegistered(run=RUN, task="task"), f.RunLocated(run=RUN, path="/b/job/task__1")]
    assert [fact.type for fact in app.record(moved).new_facts] == ["run.located"]
    assert app.record(moved).appended == 0
    # each place read once
    assert app.record([f.RunLocated(run=RUN, path="/a/job/task__1")]).appended == 0
    assert [(where.kind, where.path) for where in app.run(RUN).locations] == [
        ("recorded", "/home/ci/job/task__1"),
        ("read", "/a/job/task__1"),
        ("read", "/b/job/task__1"),
    ]
    # The harness keeps a run in one directory: another one is another run, whichever way it
    # arrives.
    assert "recorded '/home/ci/job/task__1', now '/elsewhere/task__1'" in refused(
        app, ConflictingFact, f.RunRegistered(run=RUN, task="task", run_dir="/elsewhere/task__1")
    )
    refused(app, ConflictingFact, f.RunLocated(run=RUN, path="/elsewhere/task__1", kind="recorded"))
    refused(app, ConflictingFact, f.RunRegistered(run=RUN, task="other"))


def test_a_registration_recorded_with_run_dir_by_an_earlier_version_is_still_known() -> None:
    app = LineageApp(env=MEMORY_ENV, actor="tester@lab", tool_version="test")
    # as it was
    app._record_batch(
        [Entry(f.RunRegistered(run=RUN, task="task", run_dir="/a/job/task__1"))], dry_run=False
    )
    assert app.run(RUN).registration.run_dir == "/a/job/task__1"
    assert (
        app.record([f.RunRegistered(run=RUN, task="task", run_dir="/a/job/task__1")]).appended == 0
    )
    assert app.record([f.RunRegistered(run=RUN, task="task")]).appended == 0
    # Its run_dir is the directory the harness recorded: another one is another run, as in a new
    # store.
    refused(app, ConflictingFact, f.RunRegistered(run=RUN, task="task", run_dir="/b/job/task__1"))


def test_facts_about_an_unregistered_run_are_refused(app: LineageApp) -> None:
    assert "record run.registered" in refused(
        app, UnknownSubject, f.RunScored(run="nobody", reward=1.0)
    )


def test_stages_arrive_in_lifecycle_order(app: LineageApp) -> None:
    app.record([f.StageMarked(run=RUN, stage="pre-verify")])
    assert "lifecycle order" in refused(
        app, InvariantViolated, f.StageMarked(run=RUN, stage="post-research")
    )


def test_stage_layers_must_match_the_refs() -> None:
    with pytest.raises(ValidationError, match="do not match the non-null refs"):
        f.StageMarked(run=RUN, stage="env-ready", sandbox_ref="x", layers=["environment"])


def test_a_fork_needs_children_with_ordered_indices() -> None:
    with pytest.raises(ValidationError, match=r"indices must be 0\.\.1"):
        f.ForkOpened(
            run=RUN,
            fork="x",
            node="root",
            children=(f.ForkChild(index=1, node="n1"), f.ForkChild(index=0, node="n2")),
        )


def test_a_fork_whose_first_child_raised_is_recorded_and_can_only_close_partial(
    app: LineageApp,
) -> None:
    only = f.ForkOpened(
        run=RUN,
        fork="root",
        node="root",
        stage="env-ready",
        children=(f.ForkChild(index=0, node="n1"),),
    )
    app.record(
        [only, f.ChildFailed(run=RUN, fork="root", index=0, error="RuntimeError: the sandbox died")]
    )
    message = refused(
        app, InvariantViolated, f.ForkClosed(run=RUN, fork="root", outcome="completed")
    )
    assert "expected at least 2 children to close it completed" in message and "found 1" in message
    app.record(
        [
            f.ForkClosed(
                run=RUN, fork="root", outcome="partial", error="RuntimeError: the sandbox died"
            )
        ]
    )
    scored_alone = f.ForkOpened(
        run=RUN, fork="second", node="n1", children=(f.ForkChild(index=0, node="n2"),)
    )
    app.record([scored_alone, f.ChildScored(run=RUN, fork="second", index=0, reward=1.0)])
    refused(
        app, InvariantViolated, f.ForkClosed(run=RUN, fork="second", outcome="completed", value=1.0)
    )


def test_forking_at_an_unrecorded_stage_lists_the_recorded_ones(app: LineageApp) -> None:
    message = refused(app, StageNotRecorded, fork(stage="pre-verify"))
    assert "found recorded stages ['env-ready']" in message


def test_fresh_rollout_deltas_only_at_env_ready(app: LineageApp) -> None:
    app.record(
        [
            f.NodeOpened(run=RUN, node="n0", parent="root"),
            f.StageMarked(run=RUN, stage="pre-verify", node="n0", sandbox_ref="snap-b"),
        ]
    )
    message = refused(
        app, InvariantViolated, fork(stage="pre-verify", node="n0", skill_mode="with-skill")
    )
    assert "only at stage env-ready" in message
    app.record([fork(stage="pre-verify", node="n0", injected_prompt_sha256="sha256:" + "a" * 64)])


def test_a_fork_at_an_unknown_node_or_over_existing_nodes_is_refused(app: LineageApp) -> None:
    refused(app, UnknownSubject, fork(stage=None, node="nowhere"))
    app.record([f.NodeOpened(run=RUN, node="n1", parent="root")])
    assert "already exist" in refused(app, InvariantViolated, fork(stage=None))


def test_a_child_has_one_outcome(app: LineageApp) -> None:
    app.record([fork(), f.ChildScored(run=RUN, fork="root", index=0, reward=1.0)])
    assert "already recorded as fork.child_scored" in refused(
        app, ConflictingFact, f.ChildUnscored(run=RUN, fork="root", index=0, reason="no reward")
    )
    assert "reward: recorded 1.0, now 0.0" in refused(
        app, ConflictingFact, f.ChildScored(run=RUN, fork="root", index=0, reward=0.0)
    )
    refused(app, InvariantViolated, f.ChildScored(run=RUN, fork="root", index=5, reward=0.0))


def test_value_is_the_mean_only_when_every_child_was_scored(app: LineageApp) -> None:
    app.record(
        [
            fork(),
            f.ChildScored(run=RUN, fork="root", index=0, reward=1.0),
            f.ChildScored(run=RUN, fork="root", index=1, reward=0.0),
        ]
    )
    assert "expected value 0.5" in refused(
        app, InvariantViolated, f.ForkClosed(run=RUN, fork="root", outcome="completed", value=1.0)
    )
    refused(
        app, InvariantViolated, f.ForkClosed(run=RUN, fork="root", outcome="partial", value=0.5)
    )
    app.record([f.ForkClosed(run=RUN, fork="root", outcome="completed", value=0.5)])
    refused(app, InvariantViolated, f.ChildRestored(run=RUN, fork="root", index=5))


def test_an_unscored_child_leaves_no_value_and_a_partial_fork_cannot_complete(
    app: LineageApp,
) -> None:
    app.record([fork(), f.ChildUnscored(run=RUN, fork="root", index=0, reason="no reward")])
    assert "without such an outcome" in refused(
        app, InvariantViolated, f.ForkClosed(run=RUN, fork="root", outcome="completed")
    )
    app.record(
        [
            f.ChildFailed(run=RUN, fork="root", index=1, error="boom"),
            f.ForkClosed(run=RUN, fork="root", outcome="partial"),
        ]
    )
    assert "already recorded as fork.child_failed" in refused(
        app, ConflictingFact, f.ChildScored(run=RUN, fork="root", index=1, reward=1.0)
    )


def test_custody_is_conserved(app: LineageApp) -> None:
    entry = f.CustodyEntry(path="verifier/ctrf.json", sha256="sha256:" + "1" * 64, size=10)
    app.record([fork()])
    refused(app, InvariantViolated, f.CustodyReleased(run=RUN, fork="root", entries=(entry,)))
    app.record(
        [f.CustodyHeld(run=RUN, fork="root", location="branches/root/parent", entries=(entry,))]
    )
    changed = entry.model_copy(update={"sha256": "sha256:" + "2" * 64})
    assert "digest changed ['verifier/ctrf.json']" in refused(
        app, CustodyBroken, f.CustodyReleased(run=RUN, fork="root", entries=(changed,))
    )
    assert "missing ['verifier/ctrf.json']" in refused(
        app, CustodyBroken, f.CustodyReleased(run=RUN, fork="root", entries=())
    )
    app.record(
        [
            f.CustodyFailed(
                run=RUN,
                fork="root",
                phase="release",
                preserved_location="branches/root/parent",
                error="EBUSY",
            )
        ]
    )
    assert app.run(RUN).forks["root"].custody.conserved


def test_custody_comes_before_the_fork_closes(app: LineageApp) -> None:
    entry = f.CustodyEntry(path="agent/log.txt", sha256="sha256:" + "1" * 64, size=10)
    held = f.CustodyHeld(run=RUN, fork="root", location="branches/root/parent", entries=(entry,))
    app.record(
        [
            fork(),
            held,
            f.ChildFailed(run=RUN, fork="root", index=0, error="raised"),
            f.ForkClosed(run=RUN, fork="root", outcome="partial"),
        ]
    )
    assert app.record([held]).appended == 0  # re-sent: known, not refused
    message = refused(
        app,
        InvariantViolated,
        f.CustodyFailed(run=RUN, fork="root", phase="release", error="EBUSY"),
    )
    assert "is closed (partial); found new custody (custody.failed)" in message


def test_a_child_is_restored_before_its_fork_closes(app: LineageApp) -> None:
    """As with outcomes and custody: an attack review recorded a restore after fork.closed (Fork's
    decide)."""
    restore = f.ChildRestored(
        run=RUN, fork="root", index=1, snapshot=f.SnapshotRefs(sandbox="snap-a")
    )
    app.record(
        [
            f.StageMarked(run=RUN, stage="env-ready", node="root", sandbox_ref="snap-a"),
            fork(),
            f.ChildRestored(
                run=RUN, fork="root", index=0, snapshot=f.SnapshotRefs(sandbox="snap-a")
            ),
            f.ForkClosed(run=RUN, fork="root", outcome="partial"),
        ]
    )
    message = refused(app, InvariantViolated, restore)
    assert "is closed (partial); found a restore of child 1" in message


def test_a_discarded_unexported_snapshot_cannot_be_restored(app: LineageApp) -> None:
    app.record([fork(), f.SnapshotDiscarded(ref="snap-a")])
    message = refused(
        app,
        SnapshotNotRestorable,
        f.ChildRestored(run=RUN, fork="root", index=0, snapshot=f.SnapshotRefs(sandbox="snap-a")),
    )
    assert "discarded at cleanup and never exported" in message
    app.record(
        [f.SnapshotExported(ref="snap-a", path="/t/snap-a.tar", sha256="sha256:" + "3" * 64)]
    )
    app.record(
        [f.ChildRestored(run=RUN, fork="root", index=0, snapshot=f.SnapshotRefs(sandbox="snap-a"))]
    )


def test_snapshot_lifetime_needs_a_capture_and_adoption_needs_an_unknown_ref(
    app: LineageApp,
) -> None:
    refused(
        app,
        UnknownSubject,
        f.SnapshotExported(ref="never-seen", path="/x.tar", sha256="sha256:" + "4" * 64),
    )
    refused(
        app,
        InvariantViolated,
        f.SnapshotAdopted(ref="snap-a", tar_sha256="sha256:" + "4" * 64),
        verified_here=True,
    )
    app.record(
        [f.SnapshotAdopted(ref="stray", tar_sha256="sha256:" + "4" * 64)], verified_here=True
    )
    assert app.snapshot("stray").restorable() == (True, "adopted from a tar of unknown provenance")
    app.record(
        [
            f.SnapshotImportRejected(
                ref="unknown-tag", tar_sha256="sha256:" + "5" * 64, reason="no export matches"
            )
        ],
        verified_here=True,
    )
    assert app.snapshot("unknown-tag").restorable()[0] is False


@pytest.mark.parametrize(
    "claim",
    [
        f.SnapshotImported(
            ref="snap-a",
            engine="forged (x)",
            image_id="sha256:" + "6" * 64,
            tar_sha256="sha256:" + "7" * 64,
        ),
        f.SnapshotAdopted(ref="stray", tar_sha256="sha256:" + "4" * 64),
        f.SnapshotImportRejected(ref="snap-a", reason="forged rejection"),
    ],
    ids=lambda fact: fact.type,
)
def test_verifications_this_tool_performs_cannot_be_claimed_by_others(
    app: LineageApp, claim: f.Fact
) -> None:
    """A discarded snapshot must not become "restorable: imported" because someone said so."""
    app.record(
        [
            f.RunRegistered(run=RUN, task="task"),
            f.StageMarked(run=RUN, stage="env-ready", sandbox_ref="snap-a"),
            f.SnapshotDiscarded(ref="snap-a"),
        ]
    )
    message = refused(app, ClaimRefused, f.RunRegistered(run="other", task="task"), claim)
    assert claim.type in message and "lineage snapshots import" in message
    assert app.snapshot("snap-a").restorable()[0] is False


def test_cut_points_belong_to_continuations_and_never_serve_more_than_configured(
    app: LineageApp,
) -> None:
    cut = {"run": RUN, "source_run": "src", "accounting": "served", "served_k": 5}
    refused(app, InvariantViolated, f.CutPointServed(**cut))
    app.record(
        [
            f.RunRegistered(run="src", task="task"),
            f.RunRegistered(run="cont", task="task", role="continuation", parent_run="src"),
        ]
    )
    cut["run"] = "cont"
    assert "above configured K 4" in refused(
        app, InvariantViolated, f.CutPointServed(**cut, configured_k=4)
    )
    refused(app, InvariantViolated, f.CutPointServed(**{**cut, "source_run": "elsewhere"}))
    app.record([f.CutPointServed(**cut, configured_k=5)])


def test_a_configured_cut_point_is_reconciled_into_a_served_one_once() -> None:
    app = LineageApp(env=MEMORY_ENV, actor="tester@lab", tool_version="test")
    app.record(
        [
            f.RunRegistered(run="src", task="task"),
            f.RunRegistered(run="cont", task="task", role="continuation", parent_run="src"),
        ]
    )
    configured = f.CutPointServed(
        run="cont", source_run="src", accounting="configured", served_k=12
    )
    served = f.CutPointServed(
        run="cont", source_run="src", accounting="served", served_k=9, configured_k=12
    )
    assert app.record([configured]).appended == 1
    # benchflow's reconciliation after the run
    assert app.record([configured, served]).appended == 1
    assert app.record([served]).appended == 0
    assert "served cut point of run 'cont'" in refused(
        app, ConflictingFact, served.model_copy(update={"served_k": 8})
    )


def test_a_served_cut_point_must_reconcile_the_configured_one() -> None:
    app = LineageApp(env=MEMORY_ENV, actor="tester@lab", tool_version="test")
    app.record(
        [
            f.RunRegistered(run="src", task="task"),
            f.RunRegistered(run="cont", task="task", role="continuation", parent_run="src"),
            f.CutPointServed(
                run="cont",
                source_run="src",
                accounting="configured",
                served_k=12,
                stage="post-research",
            ),
        ]
    )
    served = f.CutPointServed(
        run="cont", source_run="src", accounting="served", served_k=9, stage="post-research"
    )
    cases = [
        (served.model_copy(update={"stage": "pre-verify"}), "expected the same stage"),
        (
            served.model_copy(update={"served_k": 13}),
            "expected at most the configured K 12 served, found 13",
        ),
        (
            served.model_copy(update={"configured_k": 10}),
            "expected its configured K 10 to be the configured block's K",
        ),
    ]
    for fact, message in cases:
        assert message in refused(app, InvariantViolated, fact)
    assert app.record([served]).appended == 1


def test_a_run_is_scored_or_unscored_not_both(app: LineageApp) -> None:
    app.record([f.RunScored(run=RUN, reward=1.0)])
    refused(app, InvariantViolated, f.RunUnscored(run=RUN, reason="no reward"))


def test_rewards_must_be_finite() -> None:
    with pytest.raises(ValidationError, match="finite"):
        f.RunScored(run=RUN, reward=float("nan"))


def test_a_batch_is_all_or_nothing(app: LineageApp) -> None:
    refused(
        app,
        UnknownSubject,
        f.RunRegistered(run="new-run", task="t"),
        f.RunScored(run="missing", reward=1.0),
    )
    assert app.run("new-run") is None


def test_the_whole_example_scenario_is_accepted_and_is_idempotent() -> None:
    app = LineageApp(env=MEMORY_ENV)
    first = app.record(ablate_run_facts())
    assert first.appended == len(ablate_run_facts()) + ABLATE_IMPLIED
    assert app.record(ablate_run_facts()).appended == 0


def test_a_lost_race_is_decided_again_from_the_winners_result(app: LineageApp) -> None:
    """Another writer appends the same fact between our decision and our insert: we retry, and
    append nothing."""
    from eventsourcing.persistence import IntegrityError

    insert = app.recorder.insert_events
    raced: list[int] = []

    def losing_once(events, **kwargs):  # type: ignore[no-untyped-def]
        if not raced:
            raced.append(1)
            # the winner, through the same store
            app.record([f.RunRegistered(run="raced/run", task="task")])
            raise IntegrityError("version conflict: the stream moved")
        return insert(events, **kwargs)

    app.recorder.insert_events = losing_once  # type: ignore[method-assign]
    before = app.position()
    recorded = app.record([f.RunRegistered(run="raced/run", task="task")])
    assert (recorded.appended, app.position()) == (0, before + 1) and raced == [1]


class CountingRetry:
    """A retry policy that waits for nothing and writes down what it was asked."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts
        self.calls: list[tuple[str, int]] = []

    def after_lost_race(self, attempt: int) -> None:
        self.calls.append(("lost race", attempt))

    def after_store_away(self, attempt: int) -> None:
        self.calls.append(("store away", attempt))


def test_the_retry_policy_is_the_one_handed_in_and_an_outage_ends_unavailable() -> None:
    from eventsourcing.persistence import OperationalError

    from rollout_lineage.domain.errors import StoreUnavailable

    retry = CountingRetry(attempts=3)
    app = LineageApp(env=MEMORY_ENV, retry=retry)

    def away(events, **kwargs):  # type: ignore[no-untyped-def]
        raise OperationalError("server closed the connection unexpectedly")

    app.recorder.insert_events = away  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable, match="unavailable after 3 attempts"):
        app.record([f.RunRegistered(run=RUN, task="task")])
    assert retry.calls == [("store away", 1), ("store away", 2)]
    assert app.position() == 0


def test_a_lost_race_waits_as_the_policy_says_before_deciding_again() -> None:
    from eventsourcing.persistence import IntegrityError

    retry = CountingRetry(attempts=2)
    app = LineageApp(env=MEMORY_ENV, retry=retry)
    insert = app.recorder.insert_events

    def lost(events, **kwargs):  # type: ignore[no-untyped-def]
        app.recorder.insert_events = insert  # type: ignore[method-assign]
        raise IntegrityError("version conflict: the stream moved")

    app.recorder.insert_events = lost  # type: ignore[method-assign]
    assert app.record([f.RunRegistered(run=RUN, task="task")]).appended == 1
    assert retry.calls == [("lost race", 1)]


def test_stores_opened_by_url_back_off_as_the_store_adapter_says(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rollout_lineage.adapters.store.backoff import StoreBackoff
    from rollout_lineage.adapters.store.event_store import StoreURL, open_application

    app = open_application(
        StoreURL.parse(f"sqlite:///{tmp_path / 'events.sqlite'}"), actor="a", tool_version="t"
    )
    assert isinstance(app.retry, StoreBackoff) and app.retry.attempts == 8
    app.close()


def test_a_trial_folder_read_again_is_observed_again_only_when_it_changed(
    app: LineageApp,
) -> None:
    sample = f.SampleObserved(
        run=RUN, job_dir="/jobs/opus/trial-01/job", trial_number=1, alias="opus", result_mtime=1.5
    )
    assert app.record([sample]).appended == 1
    assert app.record([sample]).appended == 0  # read again unchanged: nothing new, no conflict
    touched = sample.model_copy(update={"result_mtime": 2.5})
    assert app.record([touched]).appended == 1  # result.json rewritten: another observation
    unknown = sample.model_copy(update={"run": "job/other__2"})
    assert "to be registered before run.sample_observed" in refused(app, UnknownSubject, unknown)


def test_a_fork_whose_checkpoint_failed_has_no_child_and_closes_partial(app: LineageApp) -> None:
    """benchflow attaches in-place children one at a time: when the checkpoint fails none started,
    and tree.json lists every child not_started with no node."""
    app.record([f.ForkOpened(run=RUN, fork="x", node="root", children=())])
    refused(app, InvariantViolated, f.ForkClosed(run=RUN, fork="x", outcome="completed"))
    described = f.ChildDescribed(run=RUN, fork="x", index=1, status="not_started")
    app.record([described, f.ForkClosed(run=RUN, fork="x", outcome="partial")])
    message = refused(
        app,
        InvariantViolated,
        f.ChildDescribed(run=RUN, fork="x", index=0, node="n9", status="scored", reward=1.0),
    )
    assert "expected child 0 described with node None" in message


def test_a_retry_is_one_child_that_may_close_completed(app: LineageApp) -> None:
    retry = f.ForkOpened(
        run=RUN,
        fork="r",
        node="root",
        kind="retry",
        reason="failure",
        checkpoint="prompt:1",
        children=(f.ForkChild(index=0, node="n1", arm="retry"),),
    )
    app.record(
        [
            retry,
            f.ChildScored(run=RUN, fork="r", index=0, reward=1.0),
            f.ForkClosed(run=RUN, fork="r", outcome="completed", value=1.0),
        ]
    )
    with pytest.raises(ValidationError, match="a retry runs one child"):
        f.ForkOpened(run=RUN, fork="r2", node="root", kind="retry", children=two_children())
    with pytest.raises(ValidationError, match="only on a retry"):
        f.ForkOpened(run=RUN, fork="r3", node="root", reason="failure", children=two_children())


def test_descriptions_of_a_fork_and_its_children_are_decided_in_the_fork(app: LineageApp) -> None:
    app.record([fork()])
    described = f.ForkDescribed(run=RUN, fork="root", order=0, status="running")
    app.record([described])
    assert app.record([described]).appended == 0
    refused(app, ConflictingFact, described.model_copy(update={"status": "completed"}))
    refused(
        app,
        UnknownSubject,
        f.ForkDescribed(run=RUN, fork="elsewhere", order=1, status="running"),
    )
    with pytest.raises(ValidationError, match="expected a node"):
        f.ChildDescribed(run=RUN, fork="root", index=0, status="scored")
    with pytest.raises(ValidationError, match="a reward only on a scored child"):
        f.ChildDescribed(run=RUN, fork="root", index=0, node="n1", status="failed", reward=0.0)


def test_each_reading_of_a_trial_is_kept(app: LineageApp) -> None:
    before = f.TrialDescribed(run=RUN, folder="task__1", parent="kept")
    after = before.model_copy(update={"retry": {"status": "completed", "reward": 1.0}})
    app.record([before])
    assert app.record([after]).appended == 1
    assert app.record([before, after]).appended == 0

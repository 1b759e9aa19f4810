"""The audit's checks as pure functions on read-model rows, including states the domain refuses to
record."""

from __future__ import annotations

import pytest

from rollout_lineage.projections.reports.audit import checks as audit
from rollout_lineage.projections.reports.audit.checks import BLOCKER, QUARANTINE, WARNING, Finding
from rollout_lineage.projections.reports.cut_point import cut_point_problems


def run_row(**overrides: object) -> dict:
    row = {
        "run": "r",
        "outcome": "scored",
        "reward": 1.0,
        "unscored_reason": None,
        "error": None,
        "error_category": None,
        "request_global": False,
        "verifier_error": None,
        "finish_status": "completed",
        "trajectory": "acp",
    }
    return {**row, **overrides}


@pytest.mark.parametrize(
    ("overrides", "health", "result", "reason"),
    [
        ({}, "healthy", "pass", None),
        ({"reward": 0.0}, "healthy", "fail", None),
        ({"finish_status": "timeout", "reward": 0.0}, "healthy", "normal_timeout", None),
        (
            {
                "error": "agent hit the 30 min limit",
                "error_category": "agent_timeout",
                "reward": 0.0,
            },
            "healthy",
            "normal_timeout",
            None,
        ),
        (
            {"error": "docker daemon went away", "error_category": "sandbox"},
            "unhealthy",
            None,
            "infrastructure error (sandbox)",
        ),
        (
            {"verifier_error": "pytest crashed: segfault", "reward": 0.0},
            "unhealthy",
            None,
            "verifier crash: pytest crashed",
        ),
        (
            {"outcome": "pending", "reward": None, "finish_status": None, "trajectory": None},
            "unhealthy",
            None,
            "missing reward",
        ),
        (
            {"outcome": "unscored", "reward": None, "unscored_reason": "reward.txt missing"},
            "unhealthy",
            None,
            "unscored: reward.txt missing",
        ),
        ({"trajectory": "none"}, "unhealthy", None, "missing trajectory evidence"),
        (
            {
                "error": "unsupported reasoning effort",
                "request_global": True,
                "outcome": "failed",
                "reward": None,
            },
            "unhealthy",
            None,
            "request-global configuration error: unsupported reasoning effort",
        ),
        ({"finish_status": "cancelled"}, "unhealthy", None, "the run finished cancelled"),
    ],
)
def test_run_health_classes(
    overrides: dict, health: str, result: str | None, reason: str | None
) -> None:
    verdict = audit.classify_run(run_row(**overrides))
    assert (verdict["health"], verdict["result"]) == (health, result)
    if reason is None:
        assert verdict["reasons"] == []
    else:
        assert any(reason in text for text in verdict["reasons"]), verdict["reasons"]


def fork(
    value: float | None, outcome: str = "completed", n: int = 2, error: str | None = None
) -> dict:
    return {
        "run": "r",
        "fork": "f",
        "n_children": n,
        "value": value,
        "outcome": outcome,
        "error": error,
    }


def child(
    index: int, outcome: str | None, reward: float | None = None, reason: str | None = None
) -> dict:
    return {
        "run": "r",
        "fork": "f",
        "child_index": index,
        "arm": f"arm{index}",
        "outcome": outcome,
        "reward": reward,
        "reason": reason,
    }


def levels(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.level, f.message) for f in findings]


def test_fork_value_must_be_the_mean_of_every_childs_reward() -> None:
    scored = [child(0, "scored", 1.0), child(1, "scored", 0.0)]
    assert audit.check_forks([fork(0.5)], scored) == []
    [wrong] = audit.check_forks([fork(0.75)], scored)
    assert wrong.level == BLOCKER and "V=0.75 is not the mean 0.5" in wrong.message
    [missing] = audit.check_forks([fork(None)], scored)
    assert missing.level == BLOCKER and "V is missing" in missing.message


def test_fork_value_with_an_unscored_child_is_impossible_and_the_arm_is_quarantined() -> None:
    findings = audit.check_forks(
        [fork(1.0)], [child(0, "scored", 1.0), child(1, "unscored", reason="no reward.txt")]
    )
    assert levels(findings) == [
        (BLOCKER, "V=1 is recorded although only 1 of 2 children were scored"),
        (QUARANTINE, "arm arm1 (child 1) unscored: no reward.txt"),
    ]


def test_partial_and_open_forks_are_quarantined() -> None:
    partial = audit.check_forks(
        [fork(None, "partial", error="boom")],
        [child(0, "scored", 1.0), child(1, "failed", reason="boom")],
    )
    assert levels(partial) == [
        (QUARANTINE, "arm arm1 (child 1) failed: boom"),
        (QUARANTINE, "the fork ended partial: boom"),
    ]
    [open_fork] = audit.check_forks([fork(None, "open")], [child(0, "scored", 1.0), child(1, None)])
    assert open_fork.level == QUARANTINE and "still open" in open_fork.message


def custody(
    kind: str, position: int, entries: list[tuple[str, str]] | None = None, **extra: object
) -> dict:
    rows = [{"path": path, "sha256": digest, "size": 1} for path, digest in entries or []]
    return {
        "run": "r",
        "fork": "f",
        "kind": kind,
        "position": position,
        "entries": rows,
        "location": None,
        "phase": None,
        "error": None,
        **extra,
    }


HELD = [("agent/a", "sha256:1"), ("verifier/v", "sha256:2")]


def test_custody_released_with_the_same_digests_is_conserved() -> None:
    assert (
        audit.check_custody([custody("held", 1, HELD), custody("released", 2, HELD)], {("r", "f")})
        == []
    )


def test_custody_released_with_a_changed_lost_or_new_entry_is_broken() -> None:
    released = [("agent/a", "sha256:9"), ("extra/x", "sha256:3")]
    [broken] = audit.check_custody(
        [custody("held", 1, HELD), custody("released", 2, released)], {("r", "f")}
    )
    assert broken.level == BLOCKER
    assert (
        "missing ['verifier/v'], digest changed ['agent/a'], never held ['extra/x']"
        in broken.message
    )


def test_custody_failure_is_fine_only_when_it_preserved_the_entries() -> None:
    preserved = custody(
        "failed", 2, HELD, phase="release", location="/hold", error="could not move back"
    )
    [quarantined] = audit.check_custody([custody("held", 1, HELD), preserved], {("r", "f")})
    assert quarantined.level == QUARANTINE and "preserved at /hold" in quarantined.message
    lost = custody("failed", 2, HELD, phase="hand-off", error="disk full")
    [blocker] = audit.check_custody([custody("held", 1, HELD), lost], {("r", "f")})
    assert blocker.level == BLOCKER and "unaccounted for" in blocker.message


def test_custody_never_released_blocks_a_closed_fork_and_quarantines_an_open_one() -> None:
    assert audit.check_custody([custody("held", 1, HELD)], {("r", "f")})[0].level == BLOCKER
    assert audit.check_custody([custody("held", 1, HELD)], set())[0].level == QUARANTINE


def lifetime(kind: str, minute: int, ref: str = "snap") -> dict:
    return {
        "ref": ref,
        "kind": kind,
        "position": 100 + minute,
        "occurred_at": minute,
        "tar_path": None,
    }


def use(minute: int, ref: str = "snap", position: int | None = None) -> dict:
    return {
        "run": "r",
        "what": "child 0 of fork f of r (restore)",
        "ref": ref,
        "occurred_at": minute,
        "position": 100 + minute if position is None else position,
    }


def test_restoring_a_snapshot_after_it_was_discarded_unexported_is_a_restorable_lie() -> None:
    discarded = [lifetime("captured", 1), lifetime("discarded", 5)]
    assert audit.check_snapshots([use(3)], discarded) == [], "restored while the image still lived"
    [lie] = audit.check_snapshots([use(7)], discarded)
    assert (
        lie.level == BLOCKER
        and lie.run == "r"
        and "discarded before (#105) and never exported or imported" in lie.message
    )
    [tie] = audit.check_snapshots([use(5, position=106)], discarded)
    assert (
        tie.level == WARNING
        and "log order put its discard before that and the recorded times do not" in tie.message
    )
    [imported] = audit.check_snapshots([use(7, position=104)], discarded)
    assert (
        imported.level == WARNING
        and "the recorded times put its discard before that and log order do not"
        in imported.message
    )
    exported_first = [lifetime("captured", 1), lifetime("exported", 4), lifetime("discarded", 5)]
    assert audit.check_snapshots([use(7)], exported_first) == []
    imported_first = [lifetime("captured", 1), lifetime("discarded", 5), lifetime("imported", 6)]
    assert audit.check_snapshots([use(7)], imported_first) == []


def test_adopted_snapshots_are_flagged_and_quarantine_the_runs_that_use_them() -> None:
    adopted = [lifetime("adopted", 1, "tar-only")]
    assert levels(audit.check_snapshots([], adopted)) == [
        (
            WARNING,
            "snapshot tar-only was adopted from a tar of unknown provenance (path not recorded)",
        )
    ]
    findings = audit.check_snapshots([use(3, "tar-only")], adopted, report_adopted=False)
    assert [(f.level, f.run) for f in findings] == [(QUARANTINE, "r")]
    [unknown] = audit.check_snapshots([use(3, "never-captured")], [])
    assert unknown.level == WARNING and "capture is not recorded" in unknown.message


def cut(**overrides: object) -> dict:
    row = {
        "run": "c",
        "source_run": "s",
        "accounting": "served",
        "configured_k": 12,
        "served_k": 12,
        "divergences": [],
        "stage": None,
        "stage_recorded": False,
        "registry_k": None,
    }
    return {**row, **overrides}


def test_cut_point_consistency() -> None:
    assert cut_point_problems([cut()]) == []
    assert cut_point_problems([cut(served_k=13)]) == [
        (True, "c", "served K 13 is above configured K 12")
    ]
    assert cut_point_problems([cut(divergences=None)])[0][0] is False
    [(severe, run, message)] = cut_point_problems([cut(divergences=[{"exchange_index": 7}])])
    assert (
        not severe
        and run == "c"
        and "diverged from the recording of s at exchange(s) [7]" in message
    )
    assert (
        "registry of s says 10"
        in cut_point_problems([cut(stage="post-research", stage_recorded=True, registry_k=10)])[0][
            2
        ]
    )
    assert "never recorded" in cut_point_problems([cut(stage="pre-verify")])[0][2]
    assert cut_point_problems([cut(accounting="configured", divergences=None, served_k=12)]) == []


SLOT = ("t", "a", "m", "no-skill", "1")


def slot_run(run: str, trial: str = "1", health: str = "healthy") -> dict:
    return {
        "run": run,
        "task": "t",
        "agent": "a",
        "model": "m",
        "skill_mode": "no-skill",
        "trial": trial,
        "health": health,
        "result": "pass" if health == "healthy" else None,
        "reasons": [] if health == "healthy" else ["missing reward"],
    }


@pytest.mark.parametrize(
    ("runs", "superseded", "status"),
    [
        ([slot_run("r1")], {}, "healthy"),
        ([], {}, "missing"),
        ([slot_run("r1"), slot_run("r2")], {}, "duplicate"),
        ([slot_run("r1"), slot_run("r2")], {"r1": "r2"}, "healthy"),
        ([slot_run("r1")], {"r1": "r1-continued-elsewhere"}, "stale"),
        ([slot_run("r1", health="unhealthy")], {}, "unhealthy"),
    ],
)
def test_matrix_slot_statuses(runs: list[dict], superseded: dict, status: str) -> None:
    rows, findings = audit.classify_slots([SLOT], runs, superseded)
    assert rows[0]["status"] == status
    assert [f.level for f in findings if f.check == "matrix"] == (
        [] if status == "healthy" else [QUARANTINE]
    )


def test_runs_outside_the_matrix_are_a_warning() -> None:
    _, findings = audit.classify_slots([SLOT], [slot_run("r1"), slot_run("r9", trial="9")], {})
    assert [(f.level, f.subject) for f in findings] == [(WARNING, "r9")]


def test_verdict_and_exit_codes() -> None:
    warning = Finding("matrix", WARNING, "r9", "outside")
    quarantine = Finding("fork-consistency", QUARANTINE, "r:f", "unscored", "r")
    blocker = Finding("integrity", BLOCKER, "log", "edited")
    assert audit.verdict([warning]) == (audit.PUBLISHABLE, [])
    assert audit.verdict([warning, quarantine]) == (audit.WITH_QUARANTINES, ["r"])
    assert audit.verdict([quarantine, blocker]) == (audit.NOT_PUBLISHABLE, ["r"])
    assert audit.EXIT_CODES == {
        audit.PUBLISHABLE: 0,
        audit.WITH_QUARANTINES: 10,
        audit.NOT_PUBLISHABLE: 11,
    }

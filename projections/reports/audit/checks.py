"""`lineage audit`: a release gate for benchmark data, read from the log, ending in a verdict.

Every check is a pure function over read-model rows, so states the domain refuses to record can
still be tested; `audit_report.py` asks the read models and runs them all. Each finding has a level
(not-publishable, quarantine, warning) and the worst one decides the verdict and its exit code
(`EXIT_CODES`). What each level covers, run health, the `--matrix` file's formats and slot statuses:
docs/review-skill.md, "The verdict".
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from ..history_text import as_json

BLOCKER, QUARANTINE, WARNING = "not-publishable", "quarantine", "warning"
PUBLISHABLE, WITH_QUARANTINES, NOT_PUBLISHABLE = (
    "publishable",
    "publishable with quarantines",
    "not publishable",
)
EXIT_CODES = {PUBLISHABLE: 0, WITH_QUARANTINES: 10, NOT_PUBLISHABLE: 11}
TIMEOUT = re.compile(r"time.?out|timed out", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    check: str
    level: str
    subject: str
    message: str
    run: str | None = None  # the run this finding quarantines or blames, if any
    node: str | None = (
        None  # the node of `run` it is about, if any: `lineage history RUN:NODE` follows it
    )

    @property
    def address(self) -> str | None:
        return f"{self.run}:{self.node}" if self.run and self.node else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "address": self.address}


Slot = tuple[str | None, ...]  # (task, agent, model, skill_mode, trial)
SLOT_FIELDS = ("task", "agent", "model", "skill_mode", "trial")


#: A run's standing in the verdict, from its worst finding: what the run list shows, so it never
#: disagrees.
STANDING = {BLOCKER: "blocked", QUARANTINE: "quarantined", WARNING: "warned"}


def run_standing(findings: list[Finding]) -> dict[str, str]:
    worst: dict[str, str] = {}
    rank = list(STANDING)
    for finding in findings:
        run = finding.run or finding.subject
        if run not in worst or rank.index(finding.level) < rank.index(worst[run]):
            worst[run] = finding.level
    return {run: STANDING[level] for run, level in worst.items()}


def slot_label(slot: Slot) -> str:
    return "slot (" + ", ".join(value or "-" for value in slot) + ")"


def _group(
    rows: list[dict[str, Any]], *columns: str
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[c] for c in columns), []).append(row)
    return groups


# --- run health -----------------------------------------------------------------------------------


def classify_run(row: dict[str, Any]) -> dict[str, Any]:
    """healthy (pass / fail / timeout, with a reward) or unhealthy, with every reason."""
    reasons = []
    timed_out = row.get("finish_status") == "timeout" or bool(
        TIMEOUT.search(row.get("error_category") or "")
    )
    if row.get("request_global"):
        reasons.append(f"request-global configuration error: {row['error']}")
    elif row.get("error") and not timed_out:
        reasons.append(
            f"infrastructure error ({row.get('error_category') or 'uncategorised'}): {row['error']}"
        )
    if row.get("verifier_error"):
        reasons.append(f"verifier crash: {row['verifier_error']}")
    if row["outcome"] == "branch_aggregate":
        reasons.append(
            f"not verified itself: its result reports the "
            f"branch aggregate V={row['branch_value']:g} "
            "(rewards source branch_aggregate), not a score of its own"
        )
    elif row["outcome"] == "unscored":
        reasons.append(f"unscored: {row['unscored_reason']}")
    elif row["outcome"] == "discarded":
        # benchflow's `--parent discard`: the fork left the world in its last child's state and the
        # trial was finalized unverified. Unscored by design, not attempted-and-unscored: its
        # children carry the scores.
        pass
    elif row["outcome"] != "scored":
        reasons.append("missing reward: neither run.scored nor run.unscored is recorded")
    if row.get("finish_status") in ("failed", "cancelled") and not row.get("error"):
        reasons.append(f"the run finished {row['finish_status']}")
    if row.get("trajectory") == "none":
        reasons.append("missing trajectory evidence: run.finished records trajectory none")
    if reasons:
        return {"health": "unhealthy", "result": None, "reasons": reasons}
    if row["outcome"] == "discarded":
        return {"health": "healthy", "result": "discarded", "reasons": []}
    result = "normal_timeout" if timed_out else "pass" if row["reward"] >= 1.0 else "fail"
    return {"health": "healthy", "result": result, "reasons": []}


# --- forks ----------------------------------------------------------------------------------------


def check_forks(forks: list[dict[str, Any]], children: list[dict[str, Any]]) -> list[Finding]:
    """V only when every child was scored, equal to their mean; unscored / failed arms and partial
    or open forks."""
    findings = []
    by_fork = _group(children, "run", "fork")
    for fork in forks:
        run, where = fork["run"], f"{fork['run']}:{fork['fork']}"
        kids = by_fork.get((run, fork["fork"]), [])
        rewards = [c["reward"] for c in kids if c["outcome"] == "scored"]
        every = len(rewards) == fork["n_children"]
        value = fork["value"]
        problem = None
        if value is not None and not every:
            problem = (
                f"V={value:g} is recorded although only "
                f"{len(rewards)} of {fork['n_children']} children were scored"
            )
        elif value is not None and not math.isclose(
            value, math.fsum(rewards) / len(rewards), abs_tol=1e-9
        ):
            problem = (
                f"V={value:g} is not the mean "
                f"{math.fsum(rewards) / len(rewards):g} of the children's rewards"
            )
        elif value is None and every and fork["outcome"] == "completed":
            problem = "every child was scored and the fork completed, but V is missing"
        node = fork.get("node")
        if problem:
            findings.append(Finding("fork-consistency", BLOCKER, where, problem, run, node))
        if fork.get("kind") == "retry":
            findings += _retry_findings(fork, kids, where)
            continue
        for child in kids:
            if child["outcome"] in ("unscored", "failed"):
                findings.append(
                    Finding(
                        "fork-consistency",
                        QUARANTINE,
                        where,
                        f"arm {child['arm']} (child {child['child_index']}) "
                        f"{child['outcome']}: {child['reason']}",
                        run,
                        child.get("node"),
                    )
                )
        if fork["outcome"] == "partial":
            findings.append(
                Finding(
                    "fork-consistency",
                    QUARANTINE,
                    where,
                    "the fork ended partial" + (f": {fork['error']}" if fork["error"] else ""),
                    run,
                    node,
                )
            )
        elif fork["outcome"] == "open":
            findings.append(
                Finding(
                    "fork-consistency",
                    QUARANTINE,
                    where,
                    "the fork is still open: not every arm has an outcome",
                    run,
                    node,
                )
            )
    return findings


def _retry_findings(fork: dict[str, Any], kids: list[dict[str, Any]], where: str) -> list[Finding]:
    """A checkpoint retry is no arm: the trial's own reward stands whatever it got, so a retry that
    failed or was not scored is said, not quarantined."""
    return [
        Finding(
            "fork-consistency",
            WARNING,
            where,
            f"retry ({fork.get('reason') or '-'}) from {fork.get('checkpoint') or '-'} "
            f"{child['outcome']}: {child['reason']}; the trial's own reward stands",
            fork["run"],
            child.get("node"),
        )
        for child in kids
        if child["outcome"] in ("unscored", "failed")
    ]


def check_branch_starts(children: list[dict[str, Any]]) -> list[Finding]:
    """A child whose sandbox started from a snapshot without the pre-agent verifier baseline
    (`snapshot_start.verifier_baseline: recaptured`): tampering before the fork is not undone when
    it is verified, so its reward may count work done before the fork."""
    return [
        Finding(
            "branch-snapshot",
            WARNING,
            f"{child['run']}:{child['fork']}",
            f"child {child['idx']}"
            + (f" ({child['label']})" if child.get("label") else "")
            + " was verified against a recaptured verifier baseline: changes made before the "
            "fork are not undone at verification",
            child["run"],
            child.get("node"),
        )
        for child in children
        if child.get("verifier_baseline") == "recaptured"
    ]


# --- custody --------------------------------------------------------------------------------------


def check_custody(events: list[dict[str, Any]], closed: set[tuple[str, str]]) -> list[Finding]:
    """Every held entry released with the same digest, or a failure that preserved the entries (and
    where)."""
    findings = []
    by_fork = _group(events, "run", "fork")
    for key in sorted(by_fork):
        run, where = key[0], f"{key[0]}:{key[1]}"
        mine = sorted(by_fork[key], key=lambda e: e["position"])
        node = mine[0].get("node")
        failures = [e for e in mine if e["kind"] == "failed"]
        findings += [_custody_failure(failure, where, run, node) for failure in failures]
        problem = _custody_unbalanced(mine, bool(failures), key in closed)
        if problem is not None:
            level, message = problem
            findings.append(Finding("custody", level, where, message, run, node))
    return findings


def _custody_entries(events: list[dict[str, Any]], kind: str) -> dict[str, str] | None:
    """path -> sha256 of the first `kind` (held, released) custody event, or None without one."""
    return next(
        (
            {x["path"]: x["sha256"] for x in as_json(e["entries"]) or ()}
            for e in events
            if e["kind"] == kind
        ),
        None,
    )


def _custody_failure(failure: dict[str, Any], where: str, run: str, node: str | None) -> Finding:
    said = f"custody failed at {failure['phase']}: {failure['error']}; "
    if failure["location"]:
        return Finding(
            "custody",
            QUARANTINE,
            where,
            f"{said}the entries are preserved at {failure['location']}",
            run,
            node,
        )
    return Finding(
        "custody",
        BLOCKER,
        where,
        f"{said}nothing was preserved, so the held entries are unaccounted for",
        run,
        node,
    )


def _custody_unbalanced(
    events: list[dict[str, Any]], failed: bool, closed: bool
) -> tuple[str, str] | None:
    """(level, message) when what was held is not what was released, or was never released."""
    held = _custody_entries(events, "held")
    released = _custody_entries(events, "released")
    if held is None:
        return None
    if released is not None:
        missing = sorted(set(held) - set(released))
        changed = sorted(p for p in set(held) & set(released) if held[p] != released[p])
        extra = sorted(set(released) - set(held))
        if not (missing or changed or extra):
            return None
        return BLOCKER, (
            f"custody broken: released entries differ from the held ones "
            f"(missing {missing}, digest changed {changed}, never held {extra})"
        )
    if failed:
        return None
    level, state = (
        (BLOCKER, "the fork is closed") if closed else (QUARANTINE, "the fork is still open")
    )
    return level, f"{len(held)} held entries were never released and {state}"


# --- snapshots ------------------------------------------------------------------------------------


def _snapshot_use_problem(
    use: dict[str, Any], lifetime: list[dict[str, Any]]
) -> tuple[str, str] | None:
    """(level, message) when a use of a snapshot is not backed by its lifetime as both clocks tell
    it."""
    subject = use["ref"]
    known = {
        e["kind"]
        for e in lifetime
        if e["position"] < use["position"] or e["occurred_at"] <= use["occurred_at"]
    }
    by_log = [e for e in lifetime if e["kind"] == "discarded" and e["position"] < use["position"]]
    by_time = [
        e for e in lifetime if e["kind"] == "discarded" and e["occurred_at"] < use["occurred_at"]
    ]
    if known & {"exported", "imported"}:
        return None
    if "adopted" in known:
        return QUARANTINE, (
            f"{use['what']} uses snapshot {subject}, adopted from a tar of unknown provenance"
        )
    if by_log and by_time:
        return BLOCKER, (
            f"{use['what']} presents snapshot {subject} as restorable, but it "
            f"was discarded before (#{by_log[0]['position']}) and never exported "
            "or imported"
        )
    if by_log or by_time:
        first, second = (
            ("log order", "the recorded times") if by_log else ("the recorded times", "log order")
        )
        return WARNING, (
            f"{use['what']} uses snapshot {subject}; {first} "
            f"put its discard before that and {second} do not, so the facts' order or times are "
            "unreliable (an importer's approximation?)"
        )
    if "captured" not in known:
        return WARNING, f"{use['what']} presents snapshot {subject}, whose capture is not recorded"
    return None


def check_snapshots(
    presented: list[dict[str, Any]], lifetimes: list[dict[str, Any]], *, report_adopted: bool = True
) -> list[Finding]:
    """A ref presented as restorable (run, what, ref, position, occurred_at) must have been
    restorable then.

    "Before" is asked of both clocks, log order and `occurred_at`: a live harness records in the
    order things happen, but importers record a run's snapshot lifetimes and forks in the order they
    read the artifacts, with times derived from them. A lie is claimed only when both clocks put the
    discard strictly first and neither shows an export, import or adoption by then; when the clocks
    disagree it is a warning.
    """
    findings = []
    by_ref = _group(lifetimes, "ref")
    for use in presented:
        problem = _snapshot_use_problem(use, by_ref.get((use["ref"],), []))
        if problem is not None:
            level, message = problem
            findings.append(
                Finding(
                    "snapshot-truthfulness", level, use["ref"], message, use["run"], use.get("node")
                )
            )
    if report_adopted:
        findings += [
            Finding(
                "snapshot-truthfulness",
                WARNING,
                e["ref"],
                f"snapshot {e['ref']} was adopted from a tar of unknown "
                f"provenance ({e.get('tar_path') or 'path not recorded'})",
            )
            for e in lifetimes
            if e["kind"] == "adopted"
        ]
    return findings


# --- matrix ---------------------------------------------------------------------------------------


def run_slot(row: dict[str, Any]) -> Slot:
    return tuple(row.get(name) for name in SLOT_FIELDS)


def classify_slots(
    slots: list[Slot], runs: list[dict[str, Any]], superseded: dict[str, str]
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """Each expected slot healthy, missing, duplicate, stale or unhealthy; runs outside every slot
    are warned about."""
    by_slot: dict[Slot, list[dict[str, Any]]] = {}
    for row in runs:
        by_slot.setdefault(run_slot(row), []).append(row)
    rows, findings = [], []
    for slot in slots:
        label, matched = slot_label(slot), by_slot.get(slot, [])
        current = [r for r in matched if r["run"] not in superseded]
        if not matched:
            status, why = "missing", "no run fills it"
        elif not current:
            status = "stale"
            why = "its runs were superseded: " + ", ".join(
                f"{r['run']} by {superseded[r['run']]}" for r in matched
            )
        elif len(current) > 1:
            status, why = (
                "duplicate",
                f"{len(current)} runs fill it and none supersedes "
                f"another: {[r['run'] for r in current]}",
            )
        elif current[0]["health"] == "unhealthy":
            status, why = (
                "unhealthy",
                f"run {current[0]['run']}: {'; '.join(current[0]['reasons'])}",
            )
        else:
            status, why = "healthy", f"run {current[0]['run']} ({current[0]['result']})"
        rows.append(
            {
                **dict(zip(SLOT_FIELDS, slot, strict=True)),
                "status": status,
                "runs": [r["run"] for r in matched],
                "detail": why,
            }
        )
        if status != "healthy":
            findings.append(Finding("matrix", QUARANTINE, label, f"{status}: {why}"))
    expected = set(slots)
    findings += [
        Finding(
            "matrix",
            WARNING,
            row["run"],
            f"run {row['run']} matches no slot of the matrix ({slot_label(run_slot(row))})",
            row["run"],
            "root",
        )
        for row in runs
        if run_slot(row) not in expected
    ]
    return rows, findings


# --- the verdict ----------------------------------------------------------------------------------


def verdict(findings: list[Finding]) -> tuple[str, list[str]]:
    quarantined = sorted({f.run or f.subject for f in findings if f.level == QUARANTINE})
    if any(f.level == BLOCKER for f in findings):
        return NOT_PUBLISHABLE, quarantined
    return (WITH_QUARANTINES if quarantined else PUBLISHABLE), quarantined

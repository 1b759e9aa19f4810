"""The experiment-review skill's checks on recorded evidence, and terminal preservation receipts;
pure functions over read-model rows, like the rest of `audit`.

- **Trajectory gate** (the skill's hard gate, for benchflow model trials):
  `trajectory/acp_trajectory.jsonl` and `trajectory/llm_trajectory.jsonl` present, non-empty, every
  line parsable, agent-side events in the first, provider request and response bodies with token
  usage in the second; `results.jsonl` present with exactly one row, `info.training_ready` true,
  with positive token usage and tool definitions for any assistant tool calls; `partial_trajectory`
  not set. A file the layout does not write (Harbor writes none of the three) is not required; a run
  with no evidence recorded at all fails closed.
- **Token usage and timing**: positive token usage (a total, or input plus output) and start/end
  times or a duration, for every model run.
- **Skill loading**: a with-skill run or arm must show skills put into its sandbox or invoked; a
  no-skill one must show neither, nor trajectory lines naming skill resources (leakage).
- **Oracle lanes** (agent `oracle`): reward-only evidence, with no model trajectory; their runs are
  checked for reward and timing only, reported as warnings, and never counted, quarantined or
  matched to matrix slots with the model runs.
- **Preservation receipts**: a run whose scorer was sealed after a worker failure is preserved but
  unqualified (the sealed history is evidence for a receiver, not a qualified recovery), so it is
  quarantined as such; a failed attempt is quarantined with its error.
"""

from __future__ import annotations

from typing import Any

ORACLE = "oracle"
ACP, LLM, RESULTS = (
    "trajectory/acp_trajectory.jsonl",
    "trajectory/llm_trajectory.jsonl",
    "results.jsonl",
)
REMEDY = (
    "re-import the run with this version of rollout-lineage, or record run.evidence_observed for it"
)


def is_oracle(agent: str | None) -> bool:
    return (agent or "").strip().lower() == ORACLE


def _file_reasons(
    evidence: dict[str, Any], prefix: str, name: str, records_column: str = "records"
) -> list[str]:
    if not evidence[f"{prefix}_present"]:
        return [f"missing required artifact {name}"]
    records, malformed = (
        evidence[f"{prefix}_{records_column}"] or 0,
        evidence[f"{prefix}_malformed"] or 0,
    )
    if not records and not malformed:
        return [f"empty {name}"]
    return [f"{malformed} unparsable line(s) in {name}"] if malformed else []


def _acp_reasons(evidence: dict[str, Any]) -> list[str]:
    reasons = _file_reasons(evidence, "acp", ACP)
    if evidence["acp_present"] and evidence["acp_records"] and not evidence["acp_agent_events"]:
        reasons.append(f"no agent-side events in {ACP}")
    return reasons


def _llm_reasons(evidence: dict[str, Any]) -> list[str]:
    reasons = _file_reasons(evidence, "llm", LLM)
    if not (evidence["llm_present"] and evidence["llm_records"]):
        return reasons
    requests, responses = evidence["llm_requests"] or 0, evidence["llm_responses"] or 0
    if not requests:
        reasons.append(f"no provider request bodies in {LLM}")
    if not responses:
        reasons.append(f"no provider response bodies in {LLM}")
    elif responses < requests:
        reasons.append(f"{LLM}: provider response count {responses} < request count {requests}")
    if responses and not evidence["llm_responses_with_usage"]:
        reasons.append(f"no provider token usage in the response bodies of {LLM}")
    return reasons


def _results_reasons(evidence: dict[str, Any]) -> list[str]:
    reasons = _file_reasons(evidence, "results", RESULTS, "rows")
    if not (evidence["results_present"] and evidence["results_rows"]):
        return reasons
    if evidence["results_rows"] != 1:
        reasons.append(
            f"{RESULTS}: expected exactly one rollout row, found {evidence['results_rows']}"
        )
    if evidence["training_ready"] is not True:
        reasons.append(
            f"{RESULTS}: the rollout row is not training_ready "
            f"({evidence['training_ready_reason'] or 'no reason given'})"
        )
    if evidence["results_rows_without_usage"]:
        reasons.append(f"{RESULTS}: a training-ready row carries no positive token usage")
    if evidence["results_unlisted_tool_calls"]:
        reasons.append(
            f"{RESULTS}: assistant tool_calls without tool definitions (tool_defs or tools)"
        )
    return reasons


def trajectory_reasons(evidence: dict[str, Any]) -> list[str]:
    """The hard trajectory gate on one node's evidence row; files its layout does not write (NULL)
    are skipped."""
    reasons = []
    for column, check in (
        ("acp_present", _acp_reasons),
        ("llm_present", _llm_reasons),
        ("results_present", _results_reasons),
    ):
        if evidence[column] is not None:
            reasons += check(evidence)
    if evidence["partial_trajectory"]:
        reasons.append("the trajectory is partial (partial_trajectory is true)")
    return reasons


def usage_and_timing_reasons(evidence: dict[str, Any], *, oracle: bool) -> list[str]:
    reasons = []
    total = evidence["total_tokens"] or (evidence["input_tokens"] or 0) + (
        evidence["output_tokens"] or 0
    )
    if not oracle and not total:
        reasons.append("missing or zero token usage")
    if evidence["duration_sec"] is None and not (
        evidence["started_at"] and evidence["finished_at"]
    ):
        reasons.append("missing timing (no start and end, no duration)")
    return reasons


def gate_reasons(evidence: dict[str, Any] | None, *, oracle: bool) -> list[tuple[str, str]]:
    """(check, reason) for each way a run fails the skill's evidence checks (empty when it
    passes)."""
    if evidence is None:
        return [
            (
                "trajectory-gate",
                f"no release-gate evidence is recorded (trajectory "
                f"files, token usage, timing): {REMEDY}",
            )
        ]
    return [
        ("trajectory-gate", reason) for reason in ([] if oracle else trajectory_reasons(evidence))
    ] + [
        ("usage-and-timing", reason) for reason in usage_and_timing_reasons(evidence, oracle=oracle)
    ]


def skill_problem(skill_mode: str | None, evidence: dict[str, Any] | None) -> str | None:
    """What is wrong with skill loading for a run or arm of `skill_mode`, or None."""
    if skill_mode == "with-skill":
        if evidence is None:
            return f"with-skill, but no evidence of skill loading is recorded: {REMEDY}"
        if not evidence["skills_dir"] and not evidence["skill_invocations"]:
            return (
                "with-skill, but the task skills show no loading: "
                "no skills directory in the sandbox, no skill invoked"
            )
    elif skill_mode == "no-skill" and evidence is not None:
        leaks = [
            what
            for what, present in (
                (
                    f"skills directory {evidence['skills_dir']} in the sandbox",
                    evidence["skills_dir"],
                ),
                (
                    f"{evidence['skill_invocations']} skill invocation(s)",
                    evidence["skill_invocations"],
                ),
                (
                    f"{evidence['skill_marker_lines']} trajectory line(s) naming skill resources",
                    evidence["skill_marker_lines"],
                ),
            )
            if present
        ]
        if leaks:
            return "no-skill leakage: " + ", ".join(leaks)
    return None


def preservation_problems(receipts: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(level, run, message) for each receipt: preserved but unqualified, a failed attempt, or a
    digest the domain would have refused (something bypassed the rules)."""
    problems = []
    for row in receipts:
        run = row["run"]
        if row["drained_digest"] != row["history_digest"]:
            problems.append(
                (
                    "blocker",
                    run,
                    f"the preservation receipt seals history {row['history_digest']}, "
                    f"but the run's drained scorer history is {row['drained_digest']}",
                )
            )
        elif row["result"] == "sealed":
            problems.append(
                (
                    "quarantine",
                    run,
                    "preserved but unqualified: after a worker failure its scorer was sealed on "
                    f"its own ({row['checkpoint'] or 'checkpoint not named'}, history "
                    f"{row['history_digest'][:19]}); that is evidence for a receiver, not a "
                    "qualified recovery",
                )
            )
        else:
            problems.append(
                (
                    "quarantine",
                    run,
                    f"the one preservation attempt failed ({row['error']}): the scorer's final "
                    "history has no independent checkpoint",
                )
            )
    return problems


# --- the experiment-review skill's review, as recorded at import ----------------------------------

#: SKILL.md's classes of unhealthy runs, in the order a run's headline class is chosen.
REWARD_HACKING, LEAKAGE, FIDELITY, INFRASTRUCTURE = (
    "reward_hacking",
    "leakage",
    "experiment_fidelity",
    "infrastructure",
)
CLASS_WORDS = {
    REWARD_HACKING: "reward hacking",
    LEAKAGE: "leakage",
    FIDELITY: "experiment fidelity",
    INFRASTRUCTURE: "infrastructure",
}
CLASS_ORDER = tuple(CLASS_WORDS)
Reason = tuple[str, str, str]  # (check, class, reason)


def _where(item: dict[str, Any]) -> str:
    file, line = item.get("file"), item.get("line")
    return f"{file}:{line}" if file and line else file or "the run's files"


#: What an oracle lane is held to: reward-only evidence, so its result and timing, never a model
#: trajectory.
ORACLE_CHECKS = frozenset(("result.parse", "result.timing", "result.reward", "result.infra_error"))


def contract_reasons(review: dict[str, Any], *, oracle: bool = False) -> list[Reason]:
    """The validator's issues: any one makes the rollout unhealthy (its artifacts are not
    trustworthy)."""
    return [
        (
            "trajectory-gate",
            INFRASTRUCTURE,
            f"{_located(issue)} [{issue['check']}]",
        )
        for issue in review.get("issues") or ()
        if not oracle or issue["check"] in ORACLE_CHECKS
    ]


def hack_reasons(review: dict[str, Any]) -> list[Reason]:
    """ "A single confirmed pattern is enough to mark the trial unhealthy"
    (reward-hacking-patterns.md)."""
    return [
        (
            "reward-hacking",
            REWARD_HACKING,
            f"{hack['pattern']} ({hack['kind']}) at {_where(hack)}"
            + (f", tool {hack['tool']}" if hack.get("tool") else "")
            + f": {hack['evidence']}",
        )
        for hack in review.get("hacks") or ()
    ]


#: Blocked by the sandbox, the provider or the network: an infrastructure failure (SKILL.md's
#: "Infrastructure failures are not healthy failures"); the other kinds are the task's inputs
#: missing: experiment fidelity.
INFRASTRUCTURE_KINDS = frozenset(("sandbox", "provider", "network"))


def fidelity_reasons(review: dict[str, Any], *, passed: bool) -> list[Reason]:
    """A failed or timed-out run blocked by a missing key, asset, package or resource is not the
    model's failure (SKILL.md, Capability Attribution); a passing run was not blocked, whatever it
    met on the way."""
    if passed:
        return []
    return [
        (
            "capability-attribution",
            INFRASTRUCTURE if signal["kind"] in INFRASTRUCTURE_KINDS else FIDELITY,
            f"the attempt was blocked ({signal['kind'].replace('_', ' ')}) at {_where(signal)}: "
            f"{signal['evidence']}",
        )
        for signal in review.get("fidelity") or ()
    ]


def _located(issue: dict[str, Any]) -> str:
    """The validator's way: the file (and line) first, unless the words already name the file."""
    file, line, detail = issue.get("file"), issue.get("line"), issue["detail"]
    if file and line:
        return f"{file}:{line}: {detail}"
    return detail if not file or file in detail else f"{file}: {detail}"


def _traces(traces: list[dict[str, Any]]) -> str:
    shown = ", ".join(f"{t['marker']} at {_where(t)}" for t in traces[:3])
    return shown + (f" and {len(traces) - 3} more" if len(traces) > 3 else "")


#: How a finding says where the task's skill names came from (task_skills.py, batch_skills.py).
SOURCE_WORDS = {
    "manifest": "named by",
    "runtime_folder": "read from the runtime skills folder",
    "file_hashes": "named by",
    "skills_folder": "read from the skills folder",
    "catalog": "read from",
}


def _named_by(skills: dict[str, Any]) -> str:
    """`; task skills <how> <where>`, or nothing for a review recorded before sources were."""
    source, origin = skills.get("task_skills_source"), skills.get("task_skills_from")
    if source is None:
        return ""
    if source == "inferred":
        return f"; the task's skill names were {origin or 'inferred'}"
    return f"; task skills {SOURCE_WORDS.get(source, source)} {origin or source}"


def _with_skill_reason(skills: dict[str, Any]) -> Reason | None:
    expected = list(skills.get("expected_task_skills") or ())
    loading = skills.get("task_skills_loading")
    if loading == 1:
        return None
    if loading == 0:
        missing = sorted(set(expected) - set(skills.get("skills") or ()))
        return (
            "skill-loading",
            FIDELITY,
            f"with-skill, but task_skills_loading=0: task skill(s) "
            f"{missing} are not in the startup catalog ({skills['status']}, "
            f"{len(skills.get('skills') or ())} skill(s) recovered)" + _named_by(skills),
        )
    if skills.get("invocations") or skills.get("task_skill_access"):
        return None
    return (
        "skill-loading",
        FIDELITY,
        f"with-skill, but skill loading cannot be shown: catalog {skills['status']}, "
        f"{'no expected task skills named' if not expected else 'expected ' + str(expected)}, "
        "no skill invoked or read; review it by hand (harness-skill-catalog-sop.md)"
        + _named_by(skills),
    )


def skill_reasons(skill_mode: str | None, review: dict[str, Any]) -> list[Reason]:
    """Skill loading per the SOP: a with-skill run must have loaded its task skills; a no-skill run
    may see harness-global skills, never the task's own."""
    skills = review.get("skills")
    if skills is None or skill_mode not in ("with-skill", "no-skill"):
        return []
    if skill_mode == "with-skill":
        reason = _with_skill_reason(skills)
        return [reason] if reason else []
    access = list(skills.get("task_skill_access") or ())
    if skills.get("task_skills_loading") == 1:
        return [
            (
                "skill-loading",
                LEAKAGE,
                "no-skill, but the task's skills are in the startup catalog" + _named_by(skills),
            )
        ]
    if access:
        return [
            (
                "skill-loading",
                LEAKAGE,
                f"no-skill, but the task's skills were used: {_traces(access)}" + _named_by(skills),
            )
        ]
    invoked = list(skills.get("invocations") or ())
    if invoked and not skills.get("expected_task_skills") and not skills.get("task_skills_source"):
        # The SOP scans a no-skill run for skill invocations and `SKILL.md` reads; with the task's
        # skills unnamed, such a skill may be one of them, and a gate does not pass what it cannot
        # tell.
        return [
            (
                "skill-loading",
                LEAKAGE,
                "no-skill, but a skill was invoked or its SKILL.md read, and the task's skills are "
                f"not named, so it may be one of them: {_traces(invoked)}",
            )
        ]
    return []


def review_reasons(
    review: dict[str, Any], skill_mode: str | None, *, oracle: bool, passed: bool
) -> list[Reason]:
    """Every way the recorded review makes a run unhealthy, each with its SKILL.md class.

    An oracle lane has no model trajectory by construction (the validator's
    --allow-oracle-without-llm), so only its result and timing count against it."""
    contract = contract_reasons(review, oracle=oracle)
    if oracle:
        return hack_reasons(review) + contract
    return (
        hack_reasons(review)
        + skill_reasons(skill_mode, review)
        + fidelity_reasons(review, passed=passed)
        + contract
    )


def headline_class(classes: list[str]) -> str | None:
    return next((c for c in CLASS_ORDER if c in classes), None)

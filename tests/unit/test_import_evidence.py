"""Reading release-gate evidence from a rollout directory: streamed, counted, never refused for a
bad line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_lineage.adapters.importers import run_evidence as evidence
from rollout_lineage.adapters.importers.fields import Fields
from rollout_lineage.adapters.rundir import RunFolder
from rollout_lineage.domain.errors import InvalidInput


def folder(tmp_path: Path, files: dict[str, str]) -> RunFolder:
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return RunFolder(tmp_path)


def test_lines_are_counted_as_records_malformed_or_blank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evidence, "MAX_LINE_BYTES", 64)
    acp = (
        "\n".join(
            [
                '{"type": "tool_call", "title": "ls .agents/skills"}',
                "",
                "[1, 2]",
                "{oops",
                '{"type": "x", "phase": "verifier"}',
                '{"type": "agent_message", "text": "' + "y" * 100 + '"}',
                '{"type": "agent_thought"}',
            ]
        )
        + "\n"
    )
    trajectory, markers = evidence.acp_file(folder(tmp_path, {evidence.ACP: acp}))
    assert (
        trajectory.present,
        trajectory.records,
        trajectory.malformed,
        trajectory.agent_events,
        markers,
    ) == (True, 3, 3, 2, 1)


def test_missing_files_are_absent_not_empty(tmp_path: Path) -> None:
    llm, _ = evidence.llm_file(RunFolder(tmp_path))
    assert (llm.present, llm.records, llm.requests) == (False, 0, None)
    assert evidence.results_row(RunFolder(tmp_path)).present is False


def test_llm_records_need_request_and_response_bodies_and_usage(tmp_path: Path) -> None:
    rows = [
        {
            "request": {"body": {"model": "m"}},
            "response": {"body": {"choices": [], "usage": {"total_tokens": 5}}},
        },
        {"request": {"body": {"model": "m"}}, "response": {"body": {"usage": {"total_tokens": 0}}}},
        {"request": {"body": "not an object"}, "error": {"message": "529"}},
    ]
    base = folder(tmp_path, {evidence.LLM: "\n".join(json.dumps(r) for r in rows) + "\n"})
    llm, _ = evidence.llm_file(base)
    assert (llm.records, llm.requests, llm.responses, llm.responses_with_usage) == (3, 2, 2, 1)


def test_a_results_row_is_read_for_readiness_usage_and_tool_definitions(tmp_path: Path) -> None:
    call = {"role": "assistant", "tool_calls": [{"id": "1"}]}
    rows = [
        {
            "info": {"training_ready": True},
            "messages": [call],
            "tool_defs": [{"name": "bash"}],
            "token_usage": {"final_input_tokens": 0, "final_output_tokens": 0},
        }
    ]
    row = evidence.results_row(folder(tmp_path, {evidence.RESULTS: json.dumps(rows[0]) + "\n"}))
    assert (row.rows, row.training_ready, row.rows_without_usage, row.unlisted_tool_calls) == (
        1,
        True,
        1,
        0,
    )


def test_counts_in_result_json_must_be_non_negative_integers() -> None:
    doc = Fields(
        {"n_input_tokens": 12.0, "n_output_tokens": -1}, "/run/result.json", "agent_result"
    )
    assert evidence.count(doc, "n_input_tokens") == 12
    with pytest.raises(
        InvalidInput, match=r"agent_result\.n_output_tokens: expected a non-negative integer"
    ):
        evidence.count(doc, "n_output_tokens")


def test_a_continuation_fills_the_trial_of_the_run_it_continues() -> None:
    result = Fields({"rollout_name": "csv-dedupe__7c1f2a90__continued"}, "/run/result.json")
    assert evidence.benchflow_trial(result, continuation=True) == "csv-dedupe__7c1f2a90"
    assert evidence.benchflow_trial(result, continuation=False) == "csv-dedupe__7c1f2a90__continued"

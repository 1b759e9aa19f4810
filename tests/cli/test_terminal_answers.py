"""Every answer at the terminal right, round four (issue #37): names, outcomes, counts,
continuations, snapshots and docs, each through the CLI on real files. The findings that need a
real process (pipes, terminals, Ctrl-C, a fresh virtual environment) are in
`test_terminal_processes.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.settings import Settings
from tests.conftest import EXAMPLES, Cli

ABLATE = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
SOURCE = "nightly/csv-dedupe__7c1f2a90"
CONTINUED = "nightly/csv-dedupe__7c1f2a90__continued"


def opened(cli: Cli) -> Lineage:
    """The store `cli` writes, opened as `lineage serve` opens it."""
    return Lineage(Settings.from_env({}, home=cli.home, actor="tester@lab"), may_create=False)


@pytest.fixture
def examples(run_cli: Cli) -> Cli:
    run_cli("import", str(EXAMPLES / "pr-layout"))
    return run_cli


# --- names: one resolver, exact names before prefixes -----------------------------------------


def test_an_exact_last_path_part_names_its_run_though_another_starts_with_it(
    examples: Cli,
) -> None:
    """`…__continued` starts with `csv-dedupe__7c1f2a90`, which is still one run's exact last
    path part: it names that run, in every command."""
    tree = examples("tree", "csv-dedupe__7c1f2a90", "--format", "json").stdout
    assert json.loads(tree)["run"] == SOURCE
    cut = examples("cut-point", "csv-dedupe__7c1f2a90", "--format", "json").stdout
    assert json.loads(cut)["run"] == SOURCE
    history = examples("history", "csv-dedupe__7c1f2a90:n1", "--format", "json").stdout
    assert SOURCE in history
    # a prefix of both is still refused, with the runs it could mean
    both = examples("tree", "csv-dedupe__7c1f", ok=False)
    assert both.exit_code == 1 and SOURCE in both.stderr and CONTINUED in both.stderr


def test_bundle_write_and_snapshots_take_the_names_every_command_takes(
    examples: Cli, tmp_path: Path
) -> None:
    written = examples("bundle", "write", "ablate", "--to", str(tmp_path / "b"))
    assert written.exit_code == 0, written.stderr
    assert json.loads((tmp_path / "b").read_text())["runs"] == [ABLATE]
    examples("bundle", "csv-dedupe__7c1f2a90", "--to", str(tmp_path / "c"))
    assert json.loads((tmp_path / "c").read_text())["runs"] == [SOURCE]
    listed = examples("snapshots", "list", "--run", "ablate", "--format", "json").stdout
    assert {row["run"] for row in json.loads(listed)} == {ABLATE}
    unknown = examples("snapshots", "list", "--run", "no-such-run", ok=False)
    assert unknown.exit_code == 1 and "lineage runs" in unknown.stderr


def test_serve_resolves_a_run_as_the_commands_do(examples: Cli) -> None:
    from tests.cli.test_serve import client_for

    with opened(examples) as lineage, client_for(lineage) as client:
        for name in ("csv-dedupe__7c1f2a90", "ablate"):
            answer = client.get(f"/api/runs/{name}")
            assert answer.status_code == 200, answer.text
            assert answer.json()["run"]["run"] == {"ablate": ABLATE}.get(name, SOURCE)
        arms = client.get("/api/arms/csv-dedupe__7c1f2a90")
        assert arms.status_code == 200 and arms.json()["run"] == SOURCE, arms.text


# --- outcomes: one vocabulary for runs, filters and serve --------------------------------------


def test_runs_shows_the_glossary_status_and_runs_status_means_it(examples: Cli) -> None:
    from rollout_lineage.projections.read_models.outcome_words import STATUS_WORDS

    rows = json.loads(examples("runs", "--format", "json").stdout)
    status = {row["run"]: row["status"] for row in rows}
    assert status[ABLATE] == "fail" and status[CONTINUED] == "pass", status
    assert {row["outcome"] for row in rows} == {"scored"}
    words = examples("sql", "SELECT DISTINCT status FROM runs", "--format", "csv").stdout
    assert set(words.split()[1:]) <= set(STATUS_WORDS), words  # never "completed"
    finished = examples("sql", "SELECT finish_status FROM runs", "--format", "csv").stdout
    assert "completed" in finished
    passed = json.loads(examples("runs", "--status", "pass", "--format", "json").stdout)
    assert {row["run"] for row in passed} == {r for r, s in status.items() if s == "pass"}


@pytest.mark.parametrize(
    ("option", "typed", "said"),
    [
        ("--outcome", "scord", "did you mean 'scored'?"),
        ("--status", "passed", "did you mean 'pass'?"),
        ("--outcome", "pass", "filter on status"),
    ],
)
def test_an_unknown_outcome_or_status_is_refused_with_the_valid_ones(
    examples: Cli, option: str, typed: str, said: str
) -> None:
    result = examples("runs", option, typed, ok=False)
    assert result.exit_code == 1, result.output
    assert "scored, branch_aggregate, unscored, failed, pending" in result.stderr or (
        "pass, fail, error, skipped, pending" in result.stderr
    )
    assert said in result.stderr and result.stdout == ""


def test_serve_filters_on_the_same_words_and_refuses_others(examples: Cli) -> None:
    from tests.cli.test_serve import client_for

    with opened(examples) as lineage, client_for(lineage) as client:
        passed = client.get("/api/runs", params={"status": "pass"}).json()["runs"]
        assert {row["run"] for row in passed} == {CONTINUED}
        assert {row["status"] for row in passed} == {"pass"}
        typo = client.get("/api/runs", params={"outcome": "scord"})
        assert typo.status_code == 400 and "scored, branch_aggregate" in typo.text
        assert "status" in client.get("/runs").text


# --- counts: what was appended, merged and already known ---------------------------------------


def test_one_run_copied_under_100_folders_is_counted_as_the_one_run_the_store_holds(
    run_cli: Cli, tmp_path: Path
) -> None:
    import shutil

    source = EXAMPLES / "pr-layout" / "jobs" / "nightly" / "csv-dedupe__7c1f2a90"
    for copy in range(100):
        shutil.copytree(source, tmp_path / "copies" / f"c{copy:03}" / "nightly" / source.name)
    first = run_cli("import", str(tmp_path / "copies"), "--format", "json")
    counts = json.loads(first.stdout)
    held = json.loads(run_cli("runs", "--format", "json").stdout)
    assert len(held) == counts["runs"] == counts["runs_new"] == 1, counts
    assert (counts["folders"], counts["folders_merged"], counts["forks"]) == (100, 99, 1)
    line = first.stderr.strip().splitlines()[-1]
    assert line.startswith("1 runs, 1 forks, 2 children, "), line
    assert "100 run folders read, 99 of them merged into a run another folder holds" in line
    events = len(run_cli("log", "--format", "jsonl").stdout.splitlines())
    assert f"{events} events appended (1 runs new, 0 with new facts, 0 already known;" in line
    again = json.loads(run_cli("import", str(tmp_path / "copies"), "--format", "json").stdout)
    assert (again["runs"], again["runs_skipped_known"], again["events_appended"]) == (1, 1, 0)


def test_ingest_never_says_more_facts_would_be_appended_than_it_read(
    run_cli: Cli, tmp_path: Path
) -> None:
    """A stage mark with a ref implies its snapshot capture: 40 lines are 60 facts, and the
    summary counts both, never "60 of 40"."""
    lines = [{"type": "run.registered", "run": f"j/t__{i}", "task": "t"} for i in range(20)]
    lines += [
        {"type": "stage.marked", "run": f"j/t__{i}", "stage": "env-ready", "sandbox_ref": f"s{i}"}
        for i in range(20)
    ]
    source = tmp_path / "facts.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    dry = run_cli("ingest", "--dry-run", str(source))
    assert len(dry.stdout.splitlines()) == 60
    said = dry.stderr.strip()
    assert said == (
        "dry run: 60 events would be appended from 40 lines (60 facts with the 20 they imply, "
        "such as a stage mark's snapshot captures; 0 already known)"
    ), said
    assert "60 of 40" not in said
    done = run_cli("ingest", str(source)).stderr
    assert done.startswith("appended 60 events from 40 lines (60 facts with the 20 they imply")
    again = run_cli("ingest", str(source)).stderr
    assert "appended 0 events from 40 lines (" in again and "; 60 already known)" in again


# --- continuations: the same answer from either end ---------------------------------------------


def test_the_cut_point_is_answered_for_either_end_of_a_continuation(examples: Cli) -> None:
    source = json.loads(examples("cut-point", SOURCE, "--format", "json").stdout)
    continued = json.loads(examples("cut-point", CONTINUED, "--format", "json").stdout)
    [served] = source["served"]
    assert (served["run"], served["stage"], served["served_k"]) == (CONTINUED, "post-research", 5)
    assert continued["continues"] == SOURCE and continued["served_to_it"] == served
    text = examples("cut-point", CONTINUED).stdout
    assert text.startswith(f"{CONTINUED} continues {SOURCE}, cut at:\n")
    assert "stage post-research, configured K not set, served K 5, 1 divergence(s)" in text
    assert "exchange 3: served sha256:" in text and "(none recorded)" in text
    rows = examples("cut-point", CONTINUED, "--format", "csv").stdout.splitlines()
    assert len(rows) == 2 and rows[1].startswith(f"{CONTINUED},served,post-research,")


def test_the_text_tree_of_a_continuation_says_what_it_continues(examples: Cli) -> None:
    text = examples("tree", CONTINUED).stdout.splitlines()
    assert text[1] == f"continues {SOURCE} at post-research"
    mermaid = examples("tree", CONTINUED, "--format", "mermaid").stdout
    assert f"continues {SOURCE} at post-research" in mermaid


# --- text trees: steps apart from arms, plain words ---------------------------------------------


def test_a_runs_own_steps_are_not_drawn_as_the_arms_of_its_fork(examples: Cli) -> None:
    lines = examples("tree", ABLATE).stdout.splitlines()
    step = next(line for line in lines if "[pre-verify]" in line)
    fork = next(line for line in lines if "fork root at env-ready" in line)
    arms = [line for line in lines if " arm " in line]
    assert step.startswith("├── n1  ") and fork.startswith("└── fork root at env-ready")
    assert lines.index(step) < lines.index(fork) < lines.index(arms[0])
    assert all(arm.startswith(("    ├── n", "    └── n")) for arm in arms), arms
    partial = examples("tree", "nightly/csv-dedupe__d4e5f6a7").stdout
    assert "    ├── n2\n    └── fork n1 at post-research" in partial  # n2 is n1's step
    assert "delta zero delta" not in partial and "n3  zero delta · pass" in partial


# --- snapshots: restorable and its reason from one rule -----------------------------------------


@pytest.mark.parametrize("check", [(), ("--check",)], ids=["list", "list --check"])
def test_a_snapshot_whose_exported_tar_is_gone_is_never_called_restorable(
    examples: Cli, check: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ablation's env-ready snapshot was exported to a tar nobody kept, and was never
    discarded: `list` said `restorable true` with the reason "its exported tar is gone", while
    `--check` (with no engine to ask, here) said false."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    rows = json.loads(examples("snapshots", "list", *check, "--format", "json").stdout)
    for row in rows:
        assert not (row["restorable"] and "is gone" in row["restorable_because"]), row
    [exported] = [row for row in rows if row["lifetime"] == "exported"]
    assert exported["restorable"] is False
    assert exported["restorable_because"].startswith("its exported tar is gone (looked at ")
    because = exported["restorable_because"]
    assert "an engine may still hold the image (`--check` asks one)" in because
    shown = json.loads(
        examples("snapshots", "show", exported["ref"], *check, "--format", "json").stdout
    )["snapshot"]
    assert shown["restorable"] is False


# --- an empty store says so ----------------------------------------------------------------------


def test_head_and_audit_on_an_empty_store_say_it_is_empty(run_cli: Cli) -> None:
    head = run_cli("head")
    assert head.stdout == "0:sha256:" + "0" * 64 + "\n"
    assert "the log is empty" in head.stderr
    audit = run_cli("audit", ok=False).stdout
    assert "head None" not in audit and "log integrity: intact, and empty" in audit


# --- docs against behaviour -----------------------------------------------------------------------


@pytest.mark.parametrize("baseline", [None, "no-skill", 'config:{"agent": {"max_turns": 40}}'])
def test_the_first_arms_row_is_the_baseline_and_the_parent_row_stays(
    examples: Cli, baseline: str | None
) -> None:
    """`arms --help`: "the first row is the baseline". With `--baseline no-skill` the first row was
    `with-skill`, and the parent's row was gone."""
    assert "The first row is the baseline" in examples("arms", "--help").stdout
    given = ("--baseline", baseline) if baseline else ()
    rows = json.loads(examples("arms", ABLATE, *given, "--format", "json").stdout)
    assert rows[0]["arm"] == (baseline or "parent") and rows[0]["flips"] == []
    assert [row["arm"] for row in rows].count("parent") == 1
    assert len(rows) == 5
    if baseline == "no-skill":  # the parent's row, measured against no-skill
        parent = next(row for row in rows if row["arm"] == "parent")
        assert parent["flips"] == [
            "test_dedupe_exact",
            "test_keeps_order",
            "test_streaming_large_input",
        ]


def test_schema_descriptions_name_no_private_function(run_cli: Cli) -> None:
    """`lineage schema` is what a harness author reads: it named benchflow's `_run_parent` and
    `_maybe_classify_api_error`, which mean nothing outside benchflow's code."""
    import re

    schema = json.loads(run_cli("schema").stdout)
    descriptions: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            descriptions.extend(v for k, v in value.items() if k == "description")
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(schema)
    assert len(descriptions) > 20
    private = [
        (name, text[:60])
        for text in descriptions
        for name in re.findall(r"(?<![\w.])_[A-Za-z]\w*|\b\w+\._\w+", text)
    ]
    assert not private, private


def test_the_readmes_prove_check_runs_as_written(examples: Cli, tmp_path: Path) -> None:
    """The tour said `prove --check FILE`, which stops at the missing --checkpoint: the form it
    gives now is run as written, on a proof printed earlier."""
    import re
    import shlex

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    [written] = re.findall(r"`(prove --check FILE[^`]*)`", readme)
    checkpoint, proofs = tmp_path / "cp", tmp_path / "proofs"
    checkpoint.write_text(examples("checkpoint").stdout)
    proofs.write_text(examples("prove", f"{ABLATE}:n2", "--checkpoint", str(checkpoint)).stdout)
    args = [
        {"FILE": str(proofs), "cp": str(checkpoint)}.get(word, word)
        for word in shlex.split(written)
    ]
    checked = examples(*args, ok=False)
    assert checked.exit_code == 0, (written, checked.output, checked.stderr)

"""Fuzzing `lineage import`: a damaged run directory is imported whole or not at all, and never
crashes it.

Each example copies a real run directory (the examples/pr-layout runs, plus one benchflow main-line
and one Harbor run from examples/public) and damages it: a file truncated, a byte flipped, a JSON
value replaced by one of the wrong type or dropped, a file deleted, replaced by a link out of the
run, a FIFO, a directory or a file over the (lowered) size cap, a branch directory linked out or
renamed, a stray file added. Then:

- `lineage import` ends with exit 0 or 1 and no traceback, and a dry run ends the same way;
- exit 1 leaves the log exactly as it was; exit 0 appends exactly the facts the dry run printed, and
  importing again appends nothing;
- a single damage that certainly breaks a file the importer reads (unparseable JSON, over the cap, a
  link out, a FIFO or a directory where a file belongs) is refused;
- next to an intact run, with --keep-going, the intact run is imported in full and the damaged one
  whole or not at all.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_lineage.adapters import rundir
from tests.conftest import EXAMPLES
from tests.fuzz_strategies import (
    NON_FINITE,
    dumps,
    examples,
    head,
    invoke,
    json_lines,
    json_values,
    log_rows,
    note,
)

PUBLIC = EXAMPLES / "public" / "benchflow-ai"
#: name -> (directory to copy, where it goes under the jobs folder: keeps the job/run names, so the
#: run key)
SOURCES: dict[str, tuple[Path, str]] = {
    "pr nightly": (
        EXAMPLES / "pr-layout/jobs/nightly/csv-dedupe__7c1f2a90",
        "nightly/csv-dedupe__7c1f2a90",
    ),
    "pr with custody hold": (
        EXAMPLES / "pr-layout/jobs/nightly/csv-dedupe__d4e5f6a7",
        "nightly/csv-dedupe__d4e5f6a7",
    ),
    "pr ablate": (
        EXAMPLES / "pr-layout/ablate-2026-11-02__10-15-00",
        "ablate-2026-11-02__10-15-00",
    ),
    "main-line": (
        PUBLIC
        / "benchflow/tests/fixtures/branch_tree_claude/claude-continue/hello-world-task__0000abcd",
        "claude-continue/hello-world-task__0000abcd",
    ),
    "harbor": (
        PUBLIC / "skillsbench-trajectories/claude-opus-4-5-0126-wenbo/"
        "claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920",
        "claude-opus-4-5-0126-wenbo/claude-code-claude-opus-4-5-skills-powerlifting-coef-calc-f40920",
    ),
}
FILES = {
    name: sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    for name, (src, _) in SOURCES.items()
}
DIRS = {
    name: sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_dir())
    for name, (src, _) in SOURCES.items()
}
#: JSON files the importers read (the tests in test_import_*.py show each one's effect); a child's
#: config.json is not.
READ_JSON = {
    "config.json",
    "result.json",
    "tree.json",
    "stage_snapshots.json",
    "ablation.json",
    "provenance.json",
    "reward.json",
    "ctrf.json",
    "observation.json",
}
#: The JSON size cap during fuzzing: above every file the sources hold, so "over the cap" costs
#: kilobytes.
CAP = max(p.stat().st_size for src, _ in SOURCES.values() for p in src.rglob("*.json")) + 1024
SEED = {"type": "run.registered", "run": "seed/run__0", "task": "seed"}


def is_read(relative: str) -> bool:
    path = PurePosixPath(relative)
    return path.name in READ_JSON and not (path.name == "config.json" and "branches" in path.parts)


def tolerated(relative: str) -> bool:
    """A branch child's ctrf.json is read as benchflow's artifact_test_outcomes reads it: content
    that is broken, empty or too large is "not observed", never a refusal (docs/benchflow-formats.md
    §8)."""
    path = PurePosixPath(relative)
    return path.name == "ctrf.json" and "branches" in path.parts


def in_custody(relative: str) -> bool:
    """A hold (`parent/`) or hand-off (`mounted/`) lists what it holds; a link there is named, never
    followed, and never refuses the run (benchflow's shutil.move hands links over as links)."""
    return bool({"parent", "mounted"} & set(PurePosixPath(relative).parts))


@contextmanager
def workspace() -> Iterator[Path]:
    """A folder holding `jobs/`, a store under `home/`, `outside/` for links out; the JSON cap
    lowered to CAP."""
    with (
        tempfile.TemporaryDirectory(prefix="fuzz-import-") as folder,
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setattr(rundir, "MAX_JSON_BYTES", CAP)
        root = Path(folder)
        (root / "outside").mkdir()
        yield root


def place(root: Path, source: str) -> Path:
    src, where = SOURCES[source]
    target = root / "jobs" / where
    shutil.copytree(src, target)
    return target


def seed(home: Path) -> None:
    assert invoke(home, "ingest", "-", input=json.dumps(SEED) + "\n").exit_code == 0


# -- damage ----------------------------------------------------------------------------------------

DAMAGE = (
    "truncate",
    "flip",
    "json_value",
    "json_drop",
    "delete",
    "link_out",
    "link_inside",
    "dangling_link",
    "fifo",
    "directory",
    "over_cap",
    "link_dir_out",
    "rename_dir",
    "stray_file",
)
#: Damage that certainly breaks the file it hits (when the importer reads that file): see
#: `certainly_broken`.
BREAKING = {"link_out", "fifo", "directory", "over_cap"}


def paths_into(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    found = []
    for key, child in items:
        found += [(*prefix, key), *paths_into(child, (*prefix, key))]
    return found


def parses(data: bytes) -> bool:
    try:
        json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return False
    return True


@st.composite
def damage(draw: st.DrawFn, root: Path, run: Path, source: str) -> tuple[str, str, bool]:
    """Damage `run` (a copy of `source`) once; returns (kind, path, whether that file is now
    certainly broken)."""
    kind = draw(st.sampled_from(DAMAGE))
    note(f"damage: {kind}")
    if kind in ("link_dir_out", "rename_dir"):
        branch_dirs = [
            d
            for d in DIRS[source]
            if "branches/" in d and (run / d).is_dir() and not (run / d).is_symlink()
        ]
        if not branch_dirs:
            kind = "delete"
        else:
            relative = draw(st.sampled_from(branch_dirs))
            target = run / relative
            if kind == "link_dir_out":
                moved = root / "outside" / f"dir-{len(os.listdir(root / 'outside'))}"
                shutil.move(target, moved)
                target.symlink_to(moved, target_is_directory=True)
            else:
                renamed = target.with_name(
                    draw(st.sampled_from(["n7", "n99", "root", "x y", ".hidden"]))
                )
                while renamed.exists():  # a name an earlier damage took
                    renamed = renamed.with_name(renamed.name + "-2")
                target.rename(renamed)
            return kind, relative, False
    present = [f for f in FILES[source] if (run / f).is_file() and not (run / f).is_symlink()]
    if not present:
        return "none", "", False
    relative = draw(st.sampled_from(present))
    target = run / relative
    data = target.read_bytes()
    if kind == "truncate":
        data = data[: draw(st.integers(0, max(0, len(data) - 1)))]
        target.write_bytes(data)
        return kind, relative, is_read(relative) and not tolerated(relative) and not parses(data)
    if kind == "flip":
        at = draw(st.integers(0, max(0, len(data) - 1)))
        flipped = bytearray(data)
        if flipped:
            flipped[at] ^= draw(st.integers(1, 255))
        target.write_bytes(bytes(flipped))
        return (
            kind,
            relative,
            is_read(relative) and not tolerated(relative) and not parses(bytes(flipped)),
        )
    if kind in ("json_value", "json_drop") and parses(data):
        document = json.loads(data)
        places = paths_into(document)
        if places:
            path = draw(st.sampled_from(places))
            parent = document
            for key in path[:-1]:
                parent = parent[key]
            if kind == "json_drop":
                del parent[path[-1]]
            else:
                parent[path[-1]] = draw(json_values | NON_FINITE)
            target.write_text(dumps(document))
        return kind, relative, False
    if kind == "delete" or kind in ("json_value", "json_drop"):
        target.unlink()
        return "delete", relative, False
    if kind == "link_out":
        outside = root / "outside" / f"copy-{len(os.listdir(root / 'outside'))}-{target.name}"
        outside.write_bytes(data)  # the same bytes: only where they live is wrong
        target.unlink()
        target.symlink_to(outside)
    elif kind == "link_inside":
        others = [f for f in present if f != relative]
        target.unlink()
        target.symlink_to(
            os.path.relpath(run / draw(st.sampled_from(others)), target.parent)
            if others
            else "missing"
        )
        return kind, relative, False
    elif kind == "dangling_link":
        target.unlink()
        target.symlink_to(
            draw(
                st.sampled_from(
                    ["missing.json", "/nonexistent/x.json", "../../../../../../etc/hostname"]
                )
            )
        )
        return kind, relative, False
    elif kind == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif kind == "directory":
        target.unlink()
        target.mkdir()
    elif kind == "over_cap":
        # CTRF reports may be larger
        cap = CAP * (rundir.CTRF_CAP_FACTOR if target.name == "ctrf.json" else 1)
        target.write_bytes(data + b" " * (cap + 1 - len(data) + draw(st.integers(0, 4096))))
    elif kind == "stray_file":
        folder = target.parent / draw(
            st.sampled_from(["", "branches", "branches/n9/children/n10", "verifier"])
        )
        folder.mkdir(parents=True, exist_ok=True)
        name = draw(st.sampled_from([*sorted(READ_JSON), "notes.txt", "tree.json.bak"]))
        if not (folder / name).exists():
            (folder / name).write_bytes(
                draw(st.binary(max_size=64) | st.builds(lambda v: dumps(v).encode(), json_values))
            )
        return kind, str(folder / name), False
    return (
        kind,
        relative,
        kind in BREAKING
        and is_read(relative)
        and not (kind in ("over_cap", "link_out") and tolerated(relative))
        and not (kind == "link_out" and in_custody(relative)),
    )


# -- the property ----------------------------------------------------------------------------------


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def check_import(
    home: Path, jobs: Path, *, refused: bool = False, keep_going: bool = False
) -> tuple[int, list[dict]]:
    """Import `jobs` after a dry run; assert a clean refusal or exactly the announced facts. Returns
    (exit, new rows)."""
    flags = ("--keep-going",) if keep_going else ()
    before_head, before = head(home), log_rows(home)
    dry = invoke(home, "import", "--dry-run", *flags, str(jobs))
    assert dry.exit_code in (0, 1), dry.stderr
    assert head(home) == before_head, "a dry run appended events"
    result = invoke(home, "import", *flags, str(jobs))
    assert result.exit_code in (0, 1), result.stderr
    assert result.exit_code == dry.exit_code, (dry.stderr, result.stderr)
    note(f"exit {result.exit_code}" + (" (certainly broken)" if refused else ""))
    after = log_rows(home)
    assert after[: len(before)] == before, "import changed events already in the log"
    new_rows = after[len(before) :]
    announced = json_lines(dry.stdout)
    assert [{"type": r["type"], **r["fact"]} for r in new_rows] == [
        {k: v for k, v in line.items() if k != "occurred_at"} for line in announced
    ], "appended facts differ from the dry run"
    assert all(
        moment(r["occurred_at"]) == moment(line["occurred_at"])
        for r, line in zip(new_rows, announced, strict=True)
        if "occurred_at" in line
    )
    summary = re.search(
        r"(\d+) runs, \d+ forks, \d+ children, (\d+) events appended", result.stderr
    )
    if result.exit_code == 1:
        assert "Error: " in result.stderr or "rejected: " in result.stderr, result.stderr
        if summary is None:  # refused before any run was looked at
            assert "found no run directories" in result.stderr and new_rows == [], result.stderr
        else:
            assert re.search(r"[1-9]\d* runs rejected", result.stderr), result.stderr
    assert summary is None or int(summary[2]) == len(new_rows), result.stderr
    if result.exit_code == 0:
        # A broken file can also be one the harness is writing this moment: such a run waits,
        # unread, instead.
        assert not refused or (
            "1 runs left out as still running" in result.stderr and new_rows == []
        ), f"a certainly broken run was imported: {result.stderr}"
        assert "0 runs rejected" in result.stderr
    kept = head(home)
    again = invoke(home, "import", *flags, str(jobs))
    assert again.exit_code == result.exit_code and head(home) == kept, (
        f"importing again appended: {again.stderr}"
    )
    return result.exit_code, new_rows


@pytest.mark.slow
@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), source=st.sampled_from(sorted(SOURCES)), count=st.integers(1, 3))
def test_a_damaged_run_is_imported_whole_or_not_at_all(
    data: st.DataObject, source: str, count: int
) -> None:
    with workspace() as root:
        run = place(root, source)
        hits = [data.draw(damage(root, run, source), label=f"damage {n}") for n in range(count)]
        home = root / "home"
        seed(home)
        certainly_broken = count == 1 and hits[0][2]
        # refused: rejected, or left out unread
        check_import(home, root / "jobs", refused=certainly_broken)


PRISTINE = "pr nightly"
_pristine_facts: list[dict[str, Any]] = []


def pristine_facts() -> list[dict[str, Any]]:
    """The facts the intact nightly run imports as (computed once, by a dry run of an untouched
    copy)."""
    if not _pristine_facts:
        with workspace() as root:
            place(root, PRISTINE)
            result = invoke(root / "home", "import", "--dry-run", str(root / "jobs"))
            assert result.exit_code == 0, result.stderr
            _pristine_facts.extend(
                comparable({k: v for k, v in line.items() if k != "occurred_at"})
                for line in json_lines(result.stdout)
            )
    return _pristine_facts


#: The fields of a fact that depend on the workspace: where the run was read, when its files were
#: written there.
WORKSPACE_FIELDS = {"run.located": {"path"}, "run.sample_observed": {"job_dir", "result_mtime"}}


def comparable(fact: dict[str, Any]) -> dict[str, Any]:
    """The fact without what depends on the workspace."""
    local = WORKSPACE_FIELDS.get(fact["type"], set())
    return {k: v for k, v in fact.items() if k not in local}


@pytest.mark.slow
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    source=st.sampled_from(sorted(set(SOURCES) - {PRISTINE})),
    count=st.integers(1, 2),
)
def test_next_to_an_intact_run_keep_going_imports_it_in_full(
    data: st.DataObject, source: str, count: int
) -> None:
    expected = pristine_facts()
    with workspace() as root:
        place(root, PRISTINE)
        run = place(root, source)
        for n in range(count):
            data.draw(damage(root, run, source), label=f"damage {n}")
        home = root / "home"
        seed(home)
        code, new_rows = check_import(home, root / "jobs", keep_going=True)
        facts = [comparable({"type": r["type"], **r["fact"]}) for r in new_rows]
        starts = [
            i
            for i in range(len(facts) - len(expected) + 1)
            if facts[i : i + len(expected)] == expected
        ]
        assert starts, "the intact run was not imported in full, in one piece"
        rest = facts[: starts[0]] + facts[starts[0] + len(expected) :]
        assert all(fact.get("run") != "nightly/csv-dedupe__7c1f2a90" for fact in rest)
        if code == 1:
            assert (
                "1 runs rejected"
                in invoke(home, "import", "--keep-going", str(root / "jobs")).stderr
            )


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_each_intact_source_imports_cleanly(source: str) -> None:
    """The starting points are sound, so what the fuzz tests see is the damage and nothing else."""
    with workspace() as root:
        place(root, source)
        code, new_rows = check_import(root / "home", root / "jobs")
        assert code == 0 and len(new_rows) > 1


# -- known bugs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["agent", "model", "task_path"])
def test_a_lone_surrogate_in_config_json_is_refused(field: str) -> None:
    with workspace() as root:
        run = place(root, PRISTINE)
        config = json.loads((run / "config.json").read_text())
        config[field] = "\udfff" + str(config.get(field) or "x")
        (run / "config.json").write_text(json.dumps(config))
        home = root / "home"
        seed(home)
        code, _ = check_import(home, root / "jobs")
        assert code == 1

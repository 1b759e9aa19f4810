"""Rule 8: custody phases as benchflow's `MountedArtifacts` (branch_artifacts.py, fail-closed
version) leaves them.

`hand_off()` archives each child's mounted output under `children/<child>/mounted/`; a move that
fails is kept in `custody_failures` and raised by `raise_pending()` after the child's outcome is
recorded, ending the fork (later arms skipped), and `bench eval ablate` reports it as the report's
`error`; `release()` keeps the hold directory when an entry did not come back. A hand-off failure
and a release failure are different facts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLES, Cli

NIGHTLY = EXAMPLES / "pr-layout" / "jobs" / "nightly" / "csv-dedupe__7c1f2a90"
ABLATE = EXAMPLES / "pr-layout" / "ablate-2026-11-02__10-15-00"
ABLATE_RUN = "ablate-2026-11-02__10-15-00/ablation/csv-dedupe"
RUN_DIR = "/home/ci/jobs/ablate-2026-11-02__10-15-00/ablation/csv-dedupe"


def custody_events(run_cli: Cli) -> list[dict[str, Any]]:
    return json.loads(
        run_cli(
            "sql",
            "SELECT run, fork, kind, idx, location, phase, error, entries FROM custody_events "
            "ORDER BY position",
            "--format",
            "json",
        ).stdout
    )


def test_each_childs_mounted_archive_is_a_hand_off(run_cli: Cli, tmp_path: Path) -> None:
    run = tmp_path / "jobs" / "nightly" / NIGHTLY.name
    shutil.copytree(NIGHTLY, run)
    run_cli("import", str(run))
    handed = [e for e in custody_events(run_cli) if e["kind"] == "handed_off"]
    assert [(e["idx"], e["location"]) for e in handed] == [
        (0, "branches/n2/children/n3/mounted"),
        (1, "branches/n2/children/n4/mounted"),
    ]
    assert sorted(x["path"] for x in handed[0]["entries"]) == [
        "verifier/ctrf.json",
        "verifier/reward.txt",
    ]
    report = json.loads(run_cli("audit", "--format", "json", ok=False).stdout)
    assert not [f for f in report["findings"] if f["check"] == "custody"]


def handoff_failure_run(tmp_path: Path) -> tuple[Path, str]:
    """The ablation example as benchflow leaves it when the hand-off after arm n3 fails:
    raise_pending() ends the fork after n3's reward is recorded, n4 and n5 never run,
    release(raising=False) puts the parent back."""
    out = tmp_path / ABLATE.name
    shutil.copytree(ABLATE, out)
    run = out / "ablation" / "csv-dedupe"
    tree = json.loads((run / "tree.json").read_text())
    tree["nodes"] = [n for n in tree["nodes"] if n["id"] not in ("n4", "n5")]
    (run / "tree.json").write_text(json.dumps(tree, sort_keys=True, indent=2) + "\n")
    for child in ("n4", "n5"):
        shutil.rmtree(run / "branches" / "root" / "children" / child)
    mounted = run / "branches" / "root" / "children" / "n3" / "mounted" / "agent"
    mounted.mkdir(parents=True)
    (mounted / "claude-code.txt").write_text("what did move before the failure\n")
    message = (
        f"branch could not capture a child's verifier output "
        f"under {RUN_DIR}/branches/root/children/n3/mounted "
        "([Errno 28] No space left on device); files left "
        "in the mounts would leak into the next child. "
        f"The parent's own evidence is preserved at {RUN_DIR}/branches/root/parent"
    )
    report = json.loads((out / "ablation.json").read_text())
    for arm in report["arms"][2:]:
        arm.update(
            node=None,
            reward=None,
            status="skipped",
            error=None,
            artifacts=None,
            tests=None,
            reference=None,
            wall_clock_sec=None,
            verdict="not run — an earlier arm errored",
        )
    report.update(error=message, value=None)
    (out / "ablation.json").write_text(json.dumps(report, sort_keys=True, indent=2) + "\n")
    return out, message


def test_a_reported_hand_off_failure_is_its_own_fact(run_cli: Cli, tmp_path: Path) -> None:
    out, message = handoff_failure_run(tmp_path)
    run_cli("import", str(out))
    events = custody_events(run_cli)
    failed = [e for e in events if e["kind"] == "failed"]
    assert [(e["phase"], e["idx"], e["location"], e["error"]) for e in failed] == [
        ("hand-off", 1, "branches/root/children/n3/mounted", message)
    ]
    # the release succeeded: nothing is left to hold
    assert not [e for e in events if e["kind"] == "held"]
    [fork] = json.loads(
        run_cli("sql", "SELECT outcome, value, error FROM forks", "--format", "json").stdout
    )
    assert fork == {"outcome": "partial", "value": None, "error": message}
    tree = out / "ablation" / "csv-dedupe" / "tree.json"
    # the partial tree, byte for byte
    assert run_cli("export", "tree", ABLATE_RUN).stdout == tree.read_text()
    exported = json.loads(run_cli("export", "ablation", f"{ABLATE_RUN}:root").stdout)
    written = json.loads((out / "ablation.json").read_text())
    # test_attribution is derived from the arms that reported tests (this scenario did not recompute
    # it)
    assert {k: v for k, v in exported.items() if k != "test_attribution"} == {
        k: v for k, v in written.items() if k != "test_attribution"
    }
    assert exported["test_attribution"]["arms_with_tests"] == ["with-skill", "no-skill"]
    findings = json.loads(run_cli("audit", "--format", "json", ok=False).stdout)["findings"]
    assert any(
        f["check"] == "custody" and "custody failed at hand-off" in f["message"] for f in findings
    )


def test_a_hand_off_failure_and_a_failed_release_are_two_facts(
    run_cli: Cli, tmp_path: Path
) -> None:
    out, message = handoff_failure_run(tmp_path)
    run = out / "ablation" / "csv-dedupe"
    hold = run / "branches" / "root" / "parent" / "verifier"
    hold.mkdir(parents=True)
    (hold / "reward.txt").write_text("0\n")
    release = (
        f"branch could not restore the parent's {RUN_DIR}/verifier directory ([Errno 13] "
        f"Permission denied) — the hold directory is preserved at {RUN_DIR}/branches/root/parent"
    )
    report = json.loads((out / "ablation.json").read_text())
    report["error"] = f"{message}; {release}"
    (out / "ablation.json").write_text(json.dumps(report, sort_keys=True, indent=2) + "\n")
    run_cli("import", str(out))
    failed = [
        (e["phase"], e["idx"], e["location"], e["error"])
        for e in custody_events(run_cli)
        if e["kind"] == "failed"
    ]
    assert failed == [
        ("hand-off", 1, "branches/root/children/n3/mounted", message),
        ("release", None, "branches/root/parent", release),
    ]

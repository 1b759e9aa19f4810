"""The trajectory view of `lineage serve` (issue #36 item 1), through the real command: an audit
finding links to its trajectory line, shown in context and highlighted; long trajectories are
paged; every value is text; and a file is shown only while it has the SHA-256 recorded at import
(edited, resized or gone: the page says so and shows the recorded excerpt, never the file)."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.rollout_writer import fixing_run, tool_event, write_rollout
from tests.serve_process import get, serving

pytestmark = pytest.mark.slow
HACK = "sed -i 's/assert dedupe(rows) == expected/assert True/' tests/test_dedupe.py"
HOSTILE = "echo '<script>document.title=1</script>'"


def hacking_run(tmp_path: Path, padding: int = 0) -> Path:
    """A benchflow rollout whose agent mutates the tests (a reward hack the review records at its
    ACP line), after `padding` harmless calls, and with one hostile-looking command."""
    run = fixing_run()
    run.acp.insert(3, tool_event("call_9", HACK, ""))
    for i in range(padding):
        run.acp.insert(3, tool_event(f"call_p{i}", f"ls /app/{i}", f"out {i}"))
    run.acp.insert(3, tool_event("call_h", HOSTILE, "<b>bold</b>"))
    return write_rollout(tmp_path / "jobs", run)


def finding_link(base: str) -> str:
    status, body = get(f"{base}/audit")
    assert status == 200
    links = re.findall(r'href="(/trajectory/[^"]*file=acp[^"]*)"', body.decode())
    assert links, "expected the audit's reward-hacking finding to link to its trajectory line"
    return html.unescape(links[0])


def test_a_finding_links_to_its_line_shown_highlighted_in_context(tmp_path: Path) -> None:
    run_dir = hacking_run(tmp_path)
    home = tmp_path / "home"
    Cli(home)("import", str(run_dir))
    with serving(home) as (_, base):
        link = finding_link(base)
        line = int(re.search(r"line=(\d+)", link).group(1))  # type: ignore[union-attr]
        assert link.endswith(f"#L{line}")
        status, body = get(base + link.split("#")[0])
        page = body.decode()
        assert status == 200
        assert "Shown:" in page and "SHA-256 as recorded at import" in page
        # the line, highlighted, with the lines around it
        assert re.search(rf'<li id="L{line}" class="entry highlighted', page)
        assert f'id="L{line - 1}"' in page and f'id="L{line + 1}"' in page
        assert html.escape(HACK, quote=True) in page or html.escape(HACK) in page
        assert "reward_hacking" in page or "grader_gaming" in page
        # every value is text
        assert "<script>document.title" not in page and "&lt;script&gt;" in page
        assert "<b>bold</b>" not in page
        # the run page links here too
        status, run_page = get(f"{base}/runs/{link.split('/trajectory/')[1].split('?')[0]}")
        assert status == 200 and b"/trajectory/" in run_page


def test_an_edited_file_is_not_shown_the_recorded_excerpt_is(tmp_path: Path) -> None:
    run_dir = hacking_run(tmp_path)
    home = tmp_path / "home"
    Cli(home)("import", str(run_dir))
    acp = run_dir / "trajectory" / "acp_trajectory.jsonl"
    with serving(home) as (_, base):
        link = finding_link(base).split("#")[0]
        assert get(base + link)[0] == 200
        # the same size, other bytes: only the digest tells
        original = acp.read_bytes()
        edited = original.replace(b"test_dedupe.py", b"EDITED_XX_1.py", 1)
        assert len(edited) == len(original) and edited != original
        acp.write_bytes(edited)
        status, body = get(base + link)
        page = body.decode()
        assert status == 200
        assert "Changed since import" in page and "EDITED_XX_1" not in page
        assert 'class="timeline"' not in page
        assert "tests/test_dedupe.py" in page  # the excerpt the review recorded
        # another size
        acp.write_bytes(original + b'{"type": "tool_call", "title": "EDITED_XX_2"}\n')
        page = get(base + link)[1].decode()
        assert "Changed since import" in page and "EDITED_XX_2" not in page
        assert "bytes; the log recorded" in page
        # back as it was: shown again
        acp.write_bytes(original)
        assert "Shown:" in get(base + link)[1].decode()
        # moved away: gone
        shutil.move(str(run_dir), str(tmp_path / "moved"))
        page = get(base + link)[1].decode()
        assert "Gone" in page and "tests/test_dedupe.py" in page and 'class="timeline"' not in page


def test_a_link_out_of_the_run_directory_is_not_followed(tmp_path: Path) -> None:
    run_dir = hacking_run(tmp_path)
    home = tmp_path / "home"
    Cli(home)("import", str(run_dir))
    acp = run_dir / "trajectory" / "acp_trajectory.jsonl"
    outside = tmp_path / "outside.jsonl"
    shutil.copy(acp, outside)
    acp.unlink()
    acp.symlink_to(outside)  # the very bytes, but outside the run's directory
    with serving(home) as (_, base):
        link = finding_link(base).split("#")[0]
        page = get(base + link)[1].decode()
        assert 'class="timeline"' not in page and "Not shown" in page
        assert "outside" in page
        # a FIFO where the file was: refused without opening it (opening would block the server)
        acp.unlink()
        os.mkfifo(acp)
        status, body = get(base + link)
        assert status == 200 and "not a regular file" in body.decode()
        assert get(f"{base}/api/runs")[0] == 200


def test_a_long_trajectory_is_paged_and_a_line_opens_its_page(tmp_path: Path) -> None:
    run_dir = hacking_run(tmp_path, padding=120)
    home = tmp_path / "home"
    Cli(home)("import", str(run_dir))
    with serving(home) as (_, base):
        link = finding_link(base)
        line = int(re.search(r"line=(\d+)", link).group(1))  # type: ignore[union-attr]
        assert line > 100
        page = get(base + link.split("#")[0])[1].decode()
        assert f"page {(line - 1) // 50 + 1} of" in page
        assert f'id="L{line}"' in page and 'id="L1"' not in page
        assert "previous" in page
        first = re.sub(r"line=\d+&?", "", link.split("#")[0]).rstrip("&?")
        page1 = get(base + first + "&page=1")[1].decode()
        assert 'id="L1"' in page1 and f'id="L{line}"' not in page1
        assert get(base + first + "&page=99")[0] == 404
        assert get(base + first + "&page=0")[0] == 400
        assert get(base + first + "&file=nope")[0] == 400


ATIF = {
    "schema_version": "ATIF-v1.2",
    "session_id": "s-1",
    "agent": {"name": "claude-code", "version": "2.0", "model_name": "claude-opus-4-5"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "Compute the coefficient."},
        {
            "step_id": 2,
            "source": "agent",
            "message": "Listing the data first.",
            "tool_calls": [
                {
                    "tool_call_id": "c1",
                    "function_name": "Bash",
                    "arguments": {"command": "ls /root/data"},
                }
            ],
            "observation": {"results": [{"source_call_id": "c1", "content": "lifts.csv"}]},
            "metrics": {"prompt_tokens": 1200, "completion_tokens": 34},
        },
        {"step_id": 3, "source": "agent", "message": "Done: 0.81 <i>x</i>."},
    ],
}


def test_a_harbor_trials_atif_trajectory_is_recorded_and_shown_by_step(tmp_path: Path) -> None:
    from tests.cli.test_writer_times import harbor_trial

    trial = harbor_trial(tmp_path)
    (trial / "agent").mkdir(exist_ok=True)
    atif = trial / "agent" / "trajectory.json"
    atif.write_text(json.dumps(ATIF, indent=2))
    home = tmp_path / "home"
    run_cli = Cli(home)
    run_cli("import", str(trial))
    [row] = json.loads(
        run_cli(
            "sql",
            "SELECT run, atif_present, atif_size, atif_sha256, atif_records, folder FROM evidence",
            "--format",
            "json",
        ).stdout
    )
    digest = "sha256:" + hashlib.sha256(atif.read_bytes()).hexdigest()
    assert (row["atif_present"], row["atif_size"], row["atif_sha256"]) == (
        True,
        atif.stat().st_size,
        digest,
    )
    assert (row["atif_records"], row["folder"]) == (3, ".")
    with serving(home) as (_, base):
        address = f"{base}/trajectory/{row['run']}?node=root&file=atif"
        status, body = get(address + "&line=2")
        page = body.decode()
        assert status == 200 and "Shown:" in page
        assert re.search(r'<li id="L2" class="entry highlighted', page)
        assert "tool call Bash" in page and "ls /root/data" in page and "lifts.csv" in page
        assert "prompt_tokens 1,200" in page and "completion_tokens 34" in page
        assert "&lt;i&gt;x&lt;/i&gt;" in page and "<i>x</i>" not in page
        atif.write_text(json.dumps({**ATIF, "steps": ATIF["steps"][:1]}))
        page = get(address)[1].decode()
        assert "Changed since import" in page and "ls /root/data" not in page

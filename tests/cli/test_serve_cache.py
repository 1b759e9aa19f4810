"""`lineage serve`'s remembered run pages (issue #33, item 8): prefixes of one run id must not fill
the server, and what is remembered is bounded by bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.settings import Settings
from tests.conftest import EXAMPLES, Cli, open_lineage
from tests.serve_attack import (
    fetch,
    pr_layout_store,
    proc_status,
    served,
)
from tests.serve_process import serving

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return pr_layout_store(tmp_path)


# --- 8. the run-page cache ------------------------------------------------------------------------

WIDE_RUN = "wide/run-" + "x" * 120


def wide_run(n_nodes: int, run: str = WIDE_RUN) -> list[f.Fact]:
    """A run whose tree is a complete binary tree of forks: node k forks children 2k+1 and 2k+2."""
    name = lambda k: "root" if k == 0 else f"n{k}"  # noqa: E731
    facts: list[f.Fact] = [f.RunRegistered(run=run, task="wide")]
    for k in range((n_nodes - 1) // 2):
        children = tuple(f.ForkChild(index=i, node=name(2 * k + 1 + i)) for i in range(2))
        facts.append(f.ForkOpened(run=run, fork=name(k), node=name(k), children=children))
    return facts


def test_prefixes_of_one_run_do_not_fill_the_server(home: Path, tmp_path: Path) -> None:
    """Each prefix of a run id was a cache entry of its own holding the whole page (~2.3 MB for a
    3,000-node run): 120 prefixes of one id must cost the server what one page costs."""
    with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as writer:
        writer.record(wide_run(3001))
    with serving(home, env={"TMPDIR": str(tmp_path)}) as (process, base):
        assert fetch(f"{base}/runs/{WIDE_RUN}")[0] == 200
        assert fetch(f"{base}/runs/{WIDE_RUN[:-1]}")[0] == 200
        resident = proc_status(process.pid)["VmRSS"]
        for k in range(10, len(WIDE_RUN) - 1):
            status, body, _ = fetch(f"{base}/runs/{WIDE_RUN[:k]}")
            assert status == 200 and b'data-node="n2999"' in body, WIDE_RUN[:k]
        grown = proc_status(process.pid)["VmRSS"] - resident
        assert grown < 40 * 2**20, f"the server grew by {grown / 2**20:.0f} MiB"


def test_remembered_pages_are_bounded_by_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past its byte budget the cache lets the oldest pages go, however few entries it holds; a
    prefix and the id it names share one entry."""
    from rollout_lineage.projections.reports import served_reads

    monkeypatch.setattr(served_reads, "REMEMBERED_BYTES", 3 * 2**20)
    home = tmp_path / "home"
    Cli(home)("import", str(EXAMPLES / "pr-layout"))
    runs = [f"wide/{i}-" + "r" * 20 for i in range(6)]
    with Lineage(Settings.from_env({}, home=home, actor="tester@lab")) as writer:
        for run in runs:
            writer.record(wide_run(1001, run))
        with served(writer) as (client, reads):
            assert client.get(f"/runs/{runs[0]}").status_code == 200
            first = reads.run(runs[0])[0].nodes
            assert reads.run(runs[0])[0].nodes is first  # remembered
            for run in runs[1:]:
                assert client.get(f"/runs/{run}").status_code == 200
                assert 0 < reads.remembered_bytes() <= 3 * 2**20
            assert reads.run(runs[0])[0].nodes is not first  # let go, read again
            last = reads.run(runs[-1])[0].nodes
            assert reads.run(runs[-1][:12])[0].nodes is last  # a prefix: the same entry
            assert client.get(f"/runs/{runs[-1][:9]}").status_code == 200
            assert reads.run(runs[-1])[0].nodes is last
            assert reads.remembered_bytes() <= 3 * 2**20

"""The composition root takes its parts from outside: an application, a store URL, a read-model
path."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_lineage.adapters.store.event_store import StoreURL
from rollout_lineage.adapters.store.memory_log import MEMORY_ENV, MEMORY_URL
from rollout_lineage.bootstrap import bootstrap, in_memory
from rollout_lineage.domain.application import LineageApp
from rollout_lineage.domain.integrity import Head
from rollout_lineage.settings import Settings
from tests.scenarios import ABLATE_IMPLIED, ABLATE_RUN, ablate_run_facts


def test_an_in_memory_store_records_reads_and_verifies_without_a_store_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with in_memory(home, actor="tester@lab") as lineage:
        recorded = lineage.record(ablate_run_facts())
        assert recorded.appended == len(ablate_run_facts()) + ABLATE_IMPLIED
        with lineage.read_models() as models:
            assert models.position == recorded.position
            assert models.db.scalar("SELECT count(*) FROM runs WHERE run = ?", [ABLATE_RUN]) == 1
        report = lineage.verify()
        assert report.intact and report.events == recorded.position
        assert lineage.location == MEMORY_URL
    assert sorted(p.name for p in home.iterdir()) == ["projections.duckdb"]


def test_injected_parts_replace_the_ones_the_settings_would_build(tmp_path: Path) -> None:
    settings = Settings.from_env({}, home=tmp_path / "home", actor="tester@lab")
    app = LineageApp(env=MEMORY_ENV, actor="tester@lab", tool_version="test")
    read_models_path = tmp_path / "elsewhere" / "models.duckdb"
    read_models_path.parent.mkdir()
    with bootstrap(
        settings,
        app=app,
        store_url=StoreURL("memory", MEMORY_URL),
        read_models_path=read_models_path,
    ) as lineage:
        assert lineage.app is app
        position = lineage.record(ablate_run_facts()).position
        with lineage.read_models() as models:
            assert models.position == position
    assert read_models_path.exists()
    assert not settings.store_exists, "the SQLite file the settings name was never created"
    assert not settings.projections_path.exists()


def test_a_recorder_without_a_hash_chain_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    plain = LineageApp(env={"PERSISTENCE_MODULE": "eventsourcing.popo"})
    lineage = bootstrap(
        Settings.from_env({}, home=tmp_path, actor="tester@lab"),
        app=plain,
        store_url=StoreURL("memory", MEMORY_URL),
    )
    lineage.record(ablate_run_facts())
    with pytest.raises(TypeError, match=r"expected .* ChainedLog\), found POPOApplicationRecorder"):
        lineage.verify()
    with pytest.raises(TypeError, match="ChainedLog"):
        lineage.read_models()
    assert not lineage.read_models_path.exists()


def test_a_kept_head_checks_the_in_memory_log_too(tmp_path: Path) -> None:
    with in_memory(tmp_path / "home") as lineage:
        lineage.record(ablate_run_facts())
        head = lineage.head()
        assert head is not None
        assert lineage.verify(head).intact
        forged = Head(head.position, "sha256:" + "f" * 64)
        assert not lineage.verify(forged).intact

"""Every field a fact carries reaches a read model, or is named here as deliberately left out.

A read model's columns are declared once (`projections/base.Columns`), so a field is projected when
some apply statement parses it from that fact's type. A new field on a fact, or on a model nested in
one, that nobody projects fails `test_every_fact_field_is_projected_or_ignored_with_a_reason` until
a read model reads it or `IGNORED` says why not.
"""

from __future__ import annotations

import hashlib
import json
import re
import typing
from collections.abc import Iterable, Mapping
from typing import Any

import duckdb
import pytest
from pydantic import BaseModel

from rollout_lineage.domain import facts as f
from rollout_lineage.domain.facts.gate_facts import TokenUsage
from rollout_lineage.projections.read_models import event_rows as events_table
from rollout_lineage.projections.read_models import runs
from rollout_lineage.projections.read_models.base import (
    POSITION,
    Columns,
    Projection,
    derived,
    fact,
    facts,
    through,
)
from rollout_lineage.projections.read_models.registry import PROJECTIONS

#: Fact fields (`Fact.field` or `Fact.field.nested`) no read model projects, each with why. Empty
#: today: every field is projected. An entry must name a field no read model reads (checked below).
IGNORED: dict[str, str] = {}

# `facts_of` writes each window subquery so: the fact parsed by a spec, from the events of some
# types.
_WINDOW = re.compile(r"from_json\(fact, '([^']*)'\) AS j FROM events WHERE type IN \(([^)]*)\)")


def specs_by_type(projections: Iterable[Projection]) -> dict[str, list[Any]]:
    """Every from_json spec an apply statement parses a fact with, by the fact types it reads."""
    by_type: dict[str, list[Any]] = {}
    for projection in projections:
        for statement in projection.apply:
            for spec, type_list in _WINDOW.findall(statement):
                for fact_type in re.findall(r"'([^']+)'", type_list):
                    by_type.setdefault(fact_type, []).append(json.loads(spec))
    return by_type


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation holds (`X | None`, `list[X]`, `tuple[X, ...]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _unread(model: type[BaseModel], parts: list[Any], where: str) -> list[str]:
    """The fields of `model` (nested ones too) that none of the spec parts reads."""
    missing = []
    for name, info in model.model_fields.items():
        reads = [part[name] for part in parts if name in part]
        if not reads:
            missing.append(f"{where}.{name}")
            continue
        # read whole: a column, or JSON holding all of it
        if any(isinstance(r, str) for r in reads):
            continue
        elements = [r[0] if isinstance(r, list) else r for r in reads]
        structs = [e for e in elements if isinstance(e, dict)]
        if len(structs) < len(elements):  # a list read as JSON or scalars holds every field
            continue
        for nested in _models_in(info.annotation):
            missing += _unread(nested, structs, f"{where}.{name}")
    return missing


def unprojected(
    fact_types: Iterable[type[f.Fact]],
    projections: Iterable[Projection],
    ignored: Mapping[str, str],
) -> list[str]:
    by_type = specs_by_type(projections)
    missing = []
    for cls in fact_types:
        # `type` is the events row's own column, so every read model has it.
        parts = [{"type": "VARCHAR"}, *by_type.get(f.fact_type(cls), [])]
        missing += _unread(cls, parts, cls.__name__)
    return [path for path in missing if path not in ignored]


def test_every_fact_field_is_projected_or_ignored_with_a_reason() -> None:
    missing = unprojected(f.FACT_TYPES, PROJECTIONS, IGNORED)
    assert not missing, (
        f"expected every fact field in a read model's column list or in IGNORED with a reason, "
        f"found neither for {missing}"
    )


def test_each_ignored_field_exists_is_unprojected_and_says_why() -> None:
    unread = unprojected(f.FACT_TYPES, PROJECTIONS, {})
    for path, reason in IGNORED.items():
        assert path in unread, f"{path} is ignored but a read model projects it (or it is no field)"
        assert len(reason.split()) >= 3, f"{path}: expected a reason, found {reason!r}"


class JudgedScore(f.RunScored):
    """A throw-away fact: a scored run with a field no read model knows of yet."""

    judge: str | None = None


class CachedUsage(TokenUsage):
    cached_tokens: int | None = None


class ObservedWithCache(f.EvidenceObserved):
    token_usage: CachedUsage | None = None


def test_a_new_fact_field_nobody_projects_fails_the_check() -> None:
    assert unprojected([JudgedScore], PROJECTIONS, {}) == ["JudgedScore.judge"]
    assert unprojected([ObservedWithCache], PROJECTIONS, {}) == [
        "ObservedWithCache.token_usage.cached_tokens"
    ]
    # ... until a reason is given,
    assert unprojected([JudgedScore], PROJECTIONS, {"JudgedScore.judge": "not yet shown"}) == []
    # ... or a read model's column list reads it (its DDL, spec and INSERT follow from the list).
    outcomes = Columns.of(
        "run_outcomes", runs.OUTCOMES.facts, *runs.OUTCOMES.columns, fact("judge")
    )
    judged = Projection.of("runs", runs.PROJECTION.version + 1, (outcomes,))
    assert unprojected([JudgedScore], [judged], {}) == []


def test_a_column_added_to_a_list_reaches_the_table_through_ddl_spec_and_insert() -> None:
    """The way ARCHITECTURE says to add a column: one entry in the read model's list."""
    outcomes = Columns.of(
        "run_outcomes", runs.OUTCOMES.facts, *runs.OUTCOMES.columns, fact("judge")
    )
    scored = JudgedScore(run="jobs/a", reward=1.0, judge="gpt")
    db = duckdb.connect()
    for statement in events_table.PROJECTION.create_statements():
        db.execute(statement)
    db.execute(f"CREATE TABLE run_outcomes ({outcomes.ddl()})")
    db.execute(
        "INSERT INTO events (position, type, subject, fact) VALUES (1, 'run.scored', 'jobs/a', ?)",
        [scored.model_dump_json()],
    )
    db.execute(outcomes.insert(), {"lo": 0, "hi": 1})
    row = db.execute("SELECT run, kind, reward, basis, judge FROM run_outcomes").fetchall()
    assert row == [("jobs/a", "scored", 1.0, "verified", "gpt")]
    names = [c[0] for c in db.execute("DESCRIBE run_outcomes").fetchall()]
    assert names == [c.name for c in outcomes.columns] and names[-1] == "judge"


def test_a_column_list_refuses_a_name_twice_and_a_field_read_as_two_types() -> None:
    with pytest.raises(
        ValueError, match=r"table t: expected each column once, found \['run'\] more than once"
    ):
        Columns.of("t", ["run.scored"], POSITION, fact("run"), facts("run"))
    clash = Columns.of(
        "t",
        ["run.scored"],
        fact("reward", "DOUBLE"),
        derived("score", "VARCHAR", "j.reward", reward="VARCHAR"),
    )
    with pytest.raises(
        ValueError, match="table t: fact field 'reward' is read as 'DOUBLE' and as 'VARCHAR'"
    ):
        clash.insert()


def test_a_source_subquery_reads_through_its_own_names() -> None:
    listed = Columns.of(
        "t",
        ["fork.opened"],
        POSITION,
        through("run"),
        source="(SELECT position, j.run AS run FROM {facts})",
        tail="ORDER BY position",
    )
    statement = listed.insert()
    assert statement.startswith("INSERT INTO t SELECT position, run FROM (SELECT position, j.run")
    assert statement.endswith("ORDER BY position") and "{facts}" not in statement
    assert """from_json(fact, '{"run":"VARCHAR"}')""" in statement


#: Each projection's version and a digest of its CREATE TABLE statements. A file built by one shape
#: is rebuilt only when the version changes, so a new shape with an old version would leave stale
#: tables.
SHAPES = {
    "events": (3, "43a5609b09a1b610"),
    "branch_records": (1, "4f94cef3362ab237"),
    "runs": (4, "8143dee761a5f92d"),
    "nodes": (1, "6b99a8b2094975fb"),
    "stages": (1, "12daa9d76eedbb91"),
    "forks": (6, "4da8b391eb77b272"),
    "custody_and_cut_points": (3, "f7c579689d49f071"),
    "evidence": (3, "ab65eb61056c0d6d"),
    "preservation": (1, "02fedf761f40e5bc"),
    "samples": (1, "7e8cfc9f823359ad"),
}


def shape(projection: Projection) -> tuple[int, str]:
    ddl = "\n".join(sorted(projection.create_statements()))
    return projection.version, hashlib.sha256(ddl.encode()).hexdigest()[:16]


def test_a_table_shape_changes_only_with_its_projection_version() -> None:
    for projection in PROJECTIONS:
        version, digest = shape(projection)
        pinned_version, pinned_digest = SHAPES[projection.name]
        if digest != pinned_digest:
            assert version > pinned_version, (
                f"{projection.name}: its tables changed shape; expected its version above "
                f"{pinned_version}, found {version}: bump it, then pin its new digest {digest!r}"
            )
        assert (version, digest) == (pinned_version, pinned_digest), (
            f"{projection.name}: expected SHAPES to pin ({version}, {digest!r}), found "
            f"({pinned_version}, {pinned_digest!r})"
        )
    assert set(SHAPES) == {p.name for p in PROJECTIONS}

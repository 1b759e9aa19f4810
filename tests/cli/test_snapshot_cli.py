"""`lineage snapshots` through the CLI, on tars built here, with no Docker engine.

DOCKER_HOST points at a socket nobody listens on, so any path that reached an engine would end in
exit 4 and "Cannot reach the Docker engine": the refusals below prove they happen before the engine
is asked anything.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from tests.conftest import Cli
from tests.snapshot_tars import legacy_entries, special_entry, tar_bytes

RUN = "jobs/t__1"
REF = "bf-snap-t-1"
UNREACHABLE = "Cannot reach the Docker engine"


@pytest.fixture(autouse=True)
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def snapshot_tar(path: Path, *, tags=(f"{REF}:latest",), extra=()) -> tuple[Path, dict]:
    entries, expected = legacy_entries(tags=tags)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tar_bytes([*entries, *extra]))
    return path, expected


def ingest(run_cli: Cli, tmp_path: Path, facts: list[dict]) -> None:
    source = tmp_path / "facts.jsonl"
    source.write_text("".join(json.dumps(fact) + "\n" for fact in facts))
    run_cli("ingest", str(source))


# recorded for a tar that holds another image: imports are rejected offline
OTHER_IMAGE = "sha256:" + "0" * 64


def record_export(
    run_cli: Cli,
    tmp_path: Path,
    tar: Path,
    image_id: str,
    *,
    run_dir: Path | None = None,
    path: str | None = None,
) -> None:
    registered = {"type": "run.registered", "run": RUN, "task": "t"}
    if run_dir:
        registered["run_dir"] = str(run_dir)
    ingest(
        run_cli,
        tmp_path,
        [
            registered,
            {"type": "stage.marked", "run": RUN, "stage": "env-ready", "sandbox_ref": REF},
            {
                "type": "snapshot.exported",
                "ref": REF,
                "path": path or str(tar),
                "sha256": sha(tar.read_bytes()),
                "image_id": image_id,
            },
        ],
    )


def log_rows(run_cli: Cli, fact_type: str | None = None) -> list[dict]:
    args = ("--type", fact_type) if fact_type else ()
    return [
        json.loads(line) for line in run_cli("log", *args, "--format", "jsonl").stdout.splitlines()
    ]


def flip_byte_in_layer(tar: Path) -> None:
    data = bytearray(tar.read_bytes())
    marker = data.find(b"SECOND-LAYER-MARKER")
    data[marker] ^= 0x01
    tar.write_bytes(bytes(data))


# -- verify ----------------------------------------------------------------------------------------


def test_verify_reports_a_sound_tar_and_records_nothing(run_cli: Cli, tmp_path: Path) -> None:
    tar, expected = snapshot_tar(tmp_path / "snap.tar")
    result = run_cli("snapshots", "verify", str(tar), "--format", "json")
    [report] = json.loads(result.stdout)
    assert report["ok"] is True and report["problems"] == []
    assert report["tar_sha256"] == sha(tar.read_bytes())
    assert (report["layout"], report["image_id"], report["repo_tags"]) == (
        "legacy",
        expected["image_id"],
        [f"{REF}:latest"],
    )
    assert [(layer["expected_diff_id"], layer["ok"]) for layer in report["layers"]] == [
        (d, True) for d in expected["diff_ids"]
    ]
    assert result.stderr == ""
    assert log_rows(run_cli) == []


def test_verify_exits_3_when_any_tar_is_unsound_and_reports_every_tar(
    run_cli: Cli, tmp_path: Path
) -> None:
    good, _ = snapshot_tar(tmp_path / "good.tar")
    bad, expected = snapshot_tar(tmp_path / "bad.tar")
    flip_byte_in_layer(bad)
    result = run_cli("snapshots", "verify", str(good), str(bad), "--format", "jsonl", ok=False)
    assert result.exit_code == 3
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["ok"] for r in reports] == [True, False]
    assert reports[1]["layers"][1]["ok"] is False
    assert f"rootfs.diff_ids[1] is {expected['diff_ids'][1]}" in result.stderr
    assert result.stderr.startswith("Error: ")


def test_verify_table_names_each_problem(run_cli: Cli, tmp_path: Path) -> None:
    tar, _ = snapshot_tar(
        tmp_path / "snap.tar", extra=[special_entry("evil", tarfile.SYMTYPE, "/etc/passwd")]
    )
    result = run_cli("snapshots", "verify", str(tar), "--format", "csv", ok=False)
    assert result.exit_code == 3
    assert "symbolic link (to '/etc/passwd')" in result.stdout
    assert result.stdout.splitlines()[0] == ",".join(
        (
            "path",
            "ok",
            "layout",
            "image_id",
            "repo_tags",
            "tar_sha256",
            "size_bytes",
            "config_member",
            "layers",
            "problems",
        )
    )


def test_verify_of_a_missing_file_is_exit_1(run_cli: Cli, tmp_path: Path) -> None:
    result = run_cli("snapshots", "verify", str(tmp_path / "absent.tar"), ok=False)
    assert result.exit_code == 1
    assert "Cannot open snapshot tar" in result.stderr


# -- import: refusals that never reach an engine ---------------------------------------------------


def test_unknown_tar_is_refused_without_adopt_and_nothing_is_recorded(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, _ = snapshot_tar(tmp_path / "stray.tar", tags=("stray:v1",))
    result = run_cli("snapshots", "import", str(tar), ok=False)
    assert result.exit_code == 1
    assert (
        "matches no recorded export or adopted tar" in result.stderr and "--adopt" in result.stderr
    )
    assert UNREACHABLE not in result.stderr
    assert log_rows(run_cli) == []


def test_tampered_tar_of_a_run_is_rejected_before_the_engine_and_logged(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, expected = snapshot_tar(tmp_path / "run" / "snapshots" / f"{REF}.tar")
    record_export(run_cli, tmp_path, tar, expected["image_id"])
    flip_byte_in_layer(tar)
    result = run_cli("snapshots", "import", "--run", RUN, ok=False)
    assert result.exit_code == 3
    assert f"its sha256 is {sha(tar.read_bytes())}, but its recorded export has" in result.stderr
    assert "rootfs.diff_ids[1]" in result.stderr
    assert UNREACHABLE not in result.stderr
    [rejected] = log_rows(run_cli, "snapshot.import_rejected")
    assert rejected["subject"] == REF
    assert rejected["fact"]["tar_sha256"] == sha(tar.read_bytes()) and rejected["fact"][
        "tar_path"
    ] == str(tar)
    assert "does not match its recorded export" in rejected["fact"]["reason"]
    assert log_rows(run_cli, "snapshot.imported") == []


def test_tampered_bare_tar_is_rejected_under_the_ref_it_claims(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, expected = snapshot_tar(tmp_path / "snap.tar")
    record_export(run_cli, tmp_path, tar, expected["image_id"])
    flip_byte_in_layer(tar)
    result = run_cli("snapshots", "import", str(tar), ok=False)
    assert result.exit_code == 3
    assert f"claims to be recorded snapshot '{REF}'" in result.stderr
    [rejected] = log_rows(run_cli, "snapshot.import_rejected")
    assert (rejected["subject"], rejected["fact"]["tar_sha256"]) == (REF, sha(tar.read_bytes()))


def test_recorded_image_id_that_differs_is_rejected_before_the_engine(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, expected = snapshot_tar(tmp_path / "snap.tar")
    other_world = "sha256:" + "0" * 64
    record_export(run_cli, tmp_path, tar, other_world)
    result = run_cli("snapshots", "import", "--run", RUN, ok=False)
    assert result.exit_code == 3
    assert (
        f"holds image {expected['image_id']}, but its recorded export has image {other_world}"
        in result.stderr
    )
    assert UNREACHABLE not in result.stderr
    assert len(log_rows(run_cli, "snapshot.import_rejected")) == 1


def test_a_sound_tar_with_the_engine_unreachable_exits_4_and_records_nothing(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, expected = snapshot_tar(tmp_path / "snap.tar")
    record_export(run_cli, tmp_path, tar, expected["image_id"])
    result = run_cli("snapshots", "import", "--run", RUN, "--format", "json", ok=False)
    assert result.exit_code == 4
    assert UNREACHABLE in result.stderr
    assert log_rows(run_cli, "snapshot.import_rejected") == [], (
        "an engine that is away says nothing about the tar"
    )


def test_run_import_finds_a_relocated_tar_in_the_run_dir_then_in_search_dirs(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    moved, _expected = snapshot_tar(run_dir / "snapshots" / f"{REF}.tar")
    record_export(
        run_cli,
        tmp_path,
        moved,
        OTHER_IMAGE,
        run_dir=run_dir,  # a rejection names the tar it found
        path=str(tmp_path / "elsewhere" / f"{REF}.tar"),
    )
    run_cli("snapshots", "import", "--run", RUN, ok=False)
    assert log_rows(run_cli, "snapshot.import_rejected")[-1]["fact"]["tar_path"] == str(moved)

    archive = tmp_path / "archive"
    archive.mkdir()
    found = moved.rename(archive / moved.name)
    result = run_cli("snapshots", "import", "--run", RUN, ok=False)
    assert (
        result.exit_code == 1
        and "No tar found for snapshot" in result.stderr
        and "--search" in result.stderr
    )
    run_cli("snapshots", "import", "--run", RUN, "--search", str(archive), ok=False)
    assert log_rows(run_cli, "snapshot.import_rejected")[-1]["fact"]["tar_path"] == str(found)


def test_run_dir_candidate_may_not_link_out_of_the_run_dir(run_cli: Cli, tmp_path: Path) -> None:
    outside, expected = snapshot_tar(tmp_path / "outside" / f"{REF}.tar")
    run_dir = tmp_path / "run"
    (run_dir / "snapshots").mkdir(parents=True)
    (run_dir / "snapshots" / f"{REF}.tar").symlink_to(outside)
    record_export(
        run_cli,
        tmp_path,
        outside,
        expected["image_id"],
        run_dir=run_dir,
        path=str(tmp_path / "gone.tar"),
    )
    result = run_cli("snapshots", "import", "--run", RUN, ok=False)
    assert result.exit_code == 1 and "No tar found" in result.stderr


def test_run_import_looks_in_the_run_dir_where_the_run_was_last_located(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, _expected = snapshot_tar(tmp_path / "archive" / "run" / "snapshots" / f"{REF}.tar")
    record_export(
        run_cli,
        tmp_path,
        tar,
        OTHER_IMAGE,
        run_dir=tmp_path / "scratch" / "run",  # rejected, naming the tar
        path=str(tmp_path / "scratch" / "run" / "snapshots" / f"{REF}.tar"),
    )
    result = run_cli("snapshots", "import", "--run", RUN, ok=False)
    assert "No tar found for snapshot" in result.stderr
    ingest(
        run_cli,
        tmp_path,
        [{"type": "run.located", "run": RUN, "path": str(tmp_path / "archive" / "run")}],
    )
    run_cli("snapshots", "import", "--run", RUN, ok=False)
    assert log_rows(run_cli, "snapshot.import_rejected")[-1]["fact"]["tar_path"] == str(tar)


def test_run_import_refuses_runs_and_stages_without_exports(run_cli: Cli, tmp_path: Path) -> None:
    ingest(
        run_cli,
        tmp_path,
        [
            {"type": "run.registered", "run": RUN, "task": "t"},
            {"type": "stage.marked", "run": RUN, "stage": "env-ready", "sandbox_ref": REF},
        ],
    )
    cases = [
        (("--run", "jobs/nope"), "Run 'jobs/nope' is not recorded"),
        (("--run", RUN), "has no exported snapshots"),
        (
            ("--run", RUN, "--stage", "pre-verify"),
            "has no stage 'pre-verify'; it recorded env-ready",
        ),
        (("--run", RUN, "--stage", "env-ready"), "was never exported"),
    ]
    for args, message in cases:
        result = run_cli("snapshots", "import", *args, ok=False)
        assert (result.exit_code, message in result.stderr) == (1, True), result.stderr
    assert log_rows(run_cli, "snapshot.import_rejected") == []


def test_import_usage_errors(run_cli: Cli, tmp_path: Path) -> None:
    tar, _ = snapshot_tar(tmp_path / "snap.tar")
    for args in (
        (),
        (str(tar), "--run", RUN),
        ("--run", RUN, "--adopt"),
        (str(tar), "--stage", "env-ready"),
    ):
        assert run_cli("snapshots", "import", *args, ok=False).exit_code == 2


def test_adopting_an_unsound_tar_is_rejected_under_its_tag(run_cli: Cli, tmp_path: Path) -> None:
    tar, _ = snapshot_tar(tmp_path / "stray.tar", tags=("stray:latest",))
    flip_byte_in_layer(tar)
    result = run_cli("snapshots", "import", str(tar), "--adopt", ok=False)
    assert result.exit_code == 3
    [rejected] = log_rows(run_cli, "snapshot.import_rejected")
    assert rejected["subject"] == "stray"
    assert log_rows(run_cli, "snapshot.adopted") == []


def test_adopting_with_the_engine_unreachable_records_no_adoption(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, _ = snapshot_tar(tmp_path / "stray.tar", tags=("stray:v2",))
    result = run_cli("snapshots", "import", str(tar), "--adopt", ok=False)
    assert result.exit_code == 4
    assert log_rows(run_cli, "snapshot.") == []


# -- export ----------------------------------------------------------------------------------------


def test_export_of_an_unknown_ref_is_refused_before_docker(run_cli: Cli, tmp_path: Path) -> None:
    result = run_cli(
        "snapshots", "export", "never-captured:v1", "--to", str(tmp_path / "out"), ok=False
    )
    assert result.exit_code == 1
    assert (
        "Snapshot 'never-captured:v1' is not recorded" in result.stderr
        and UNREACHABLE not in result.stderr
    )
    assert not (tmp_path / "out").exists()
    assert log_rows(run_cli) == []


def test_export_with_the_engine_unreachable_records_nothing(run_cli: Cli, tmp_path: Path) -> None:
    ingest(
        run_cli,
        tmp_path,
        [
            {"type": "run.registered", "run": RUN, "task": "t"},
            {"type": "stage.marked", "run": RUN, "stage": "env-ready", "sandbox_ref": REF},
        ],
    )
    result = run_cli("snapshots", "export", REF, "--to", str(tmp_path / "out"), ok=False)
    assert result.exit_code == 4 and UNREACHABLE in result.stderr
    assert log_rows(run_cli, "snapshot.export_failed") == [], (
        "the snapshot may export fine once the engine is back"
    )


def test_export_file_name_follows_benchflow() -> None:
    from rollout_lineage.adapters.snapshots.snapshot_files import export_file_name

    assert export_file_name("bf-snap-x") == "bf-snap-x.tar"
    assert export_file_name("registry:5000/team/bf snap:v1") == "registry-5000-team-bf-snap-v1.tar"
    assert export_file_name("///") == "snapshot.tar"


# -- list and show ---------------------------------------------------------------------------------


def test_list_and_show_give_the_lifetime_and_why_it_is_restorable(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, _ = snapshot_tar(tmp_path / "snap.tar")
    record_export(run_cli, tmp_path, tar, OTHER_IMAGE)
    ingest(
        run_cli,
        tmp_path,
        [
            {
                "type": "stage.marked",
                "run": RUN,
                "stage": "pre-verify",
                "sandbox_ref": "bf-snap-t-2",
            },
            {"type": "snapshot.discarded", "ref": "bf-snap-t-2"},
        ],
    )
    # another image: a rejection
    run_cli("snapshots", "import", "--run", RUN, "--stage", "env-ready", ok=False)

    rows = json.loads(run_cli("snapshots", "list", "--run", RUN, "--format", "json").stdout)
    assert [
        (r["ref"], r["stage"], r["lifetime"], r["restorable"], r["exports"], r["rejected_imports"])
        for r in rows
    ] == [
        (REF, "env-ready", "exported", True, 1, 1),
        ("bf-snap-t-2", "pre-verify", "discarded", False, 0, 0),
    ]
    assert rows[1]["restorable_because"] == "discarded at cleanup and never exported or imported"
    # a run nothing names is refused (an empty list would read as "it captured nothing")
    other = run_cli("snapshots", "list", "--run", "jobs/other", ok=False)
    assert other.exit_code == 1 and "`lineage runs` lists the recorded runs" in other.stderr

    shown = json.loads(run_cli("snapshots", "show", REF, "--format", "json").stdout)
    assert shown["snapshot"]["restorable_because"] == "exported to a tar whose digest is recorded"
    assert [e["kind"] for e in shown["events"]] == ["captured", "exported", "import_rejected"]
    assert [e["position"] for e in shown["events"]] == sorted(
        e["position"] for e in shown["events"]
    )
    table = run_cli("snapshots", "show", REF).stdout
    assert "restorable_because" in table and "import_rejected" in table
    assert run_cli("snapshots", "show", "bf-nothing", ok=False).exit_code == 1


def test_adopted_ref_and_tag_matching() -> None:
    from rollout_lineage.adapters.snapshots.snapshot_files import adopted_ref, tar_names
    from rollout_lineage.adapters.snapshots.snapshot_tar import TarReport

    def report(tags: tuple[str, ...], image_id: str | None = "sha256:" + "a" * 64) -> TarReport:
        return TarReport("x.tar", "sha256:" + "b" * 64, 0, "legacy", image_id, None, tags, (), ())

    assert adopted_ref(report(("bf-snap-x:latest", "other:v1"))) == "bf-snap-x"
    assert adopted_ref(report(("registry:5000/team/snap:v2",))) == "registry:5000/team/snap:v2"
    assert adopted_ref(report(())) == "sha256:" + "a" * 64
    assert adopted_ref(report((), image_id=None)) == "sha256:" + "b" * 64
    assert tar_names("bf-snap-x", report(("bf-snap-x:latest",)))
    assert tar_names("registry:5000/snap", report(("registry:5000/snap:latest",)))
    assert not tar_names("bf-snap-x:v1", report(("bf-snap-x:latest",)))
    assert tar_names("sha256:" + "a" * 64, report(()))


# -- who may claim what ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "claim",
    [
        {
            "type": "snapshot.imported",
            "ref": REF,
            "engine": "forged (x)",
            "image_id": "sha256:" + "6" * 64,
            "tar_sha256": "sha256:" + "7" * 64,
        },
        {"type": "snapshot.adopted", "ref": "stray:v2", "tar_sha256": "sha256:" + "7" * 64},
        {"type": "snapshot.import_rejected", "ref": REF, "reason": "forged"},
    ],
    ids=lambda claim: claim["type"],
)
def test_ingest_refuses_facts_only_a_verification_here_may_produce(
    run_cli: Cli, tmp_path: Path, claim: dict
) -> None:
    ingest(
        run_cli,
        tmp_path,
        [
            {"type": "run.registered", "run": RUN, "task": "t"},
            {"type": "stage.marked", "run": RUN, "stage": "env-ready", "sandbox_ref": REF},
            {"type": "snapshot.discarded", "ref": REF},
        ],
    )
    source = tmp_path / "claim.jsonl"
    source.write_text(json.dumps(claim) + "\n")
    result = run_cli("ingest", str(source), ok=False)
    assert (
        result.exit_code == 1
        and claim["type"] in result.stderr
        and "lineage snapshots import" in result.stderr
    )
    [row] = json.loads(run_cli("snapshots", "list", "--format", "json").stdout)
    assert (row["restorable"], row["lifetime"]) == (False, "discarded")


def test_adopting_a_tar_that_also_tags_another_image_is_refused_before_the_engine(
    run_cli: Cli, tmp_path: Path
) -> None:
    """`docker load` would re-point every tag in the tar: victim:latest must not move because
    bf-snap-x was adopted."""
    tar, _ = snapshot_tar(tmp_path / "stray.tar", tags=("bf-snap-x:latest", "victim:latest"))
    result = run_cli("snapshots", "import", str(tar), "--adopt", ok=False)
    assert (
        result.exit_code == 3
        and "victim:latest" in result.stderr
        and UNREACHABLE not in result.stderr
    )
    assert [row["type"] for row in log_rows(run_cli)] == ["snapshot.import_rejected"]


def test_a_snapshot_whose_exported_tar_is_gone_or_changed_is_not_restorable(
    run_cli: Cli, tmp_path: Path
) -> None:
    tar, expected = snapshot_tar(tmp_path / "snap.tar")
    record_export(run_cli, tmp_path, tar, expected["image_id"])
    ingest(run_cli, tmp_path, [{"type": "snapshot.discarded", "ref": REF}])

    def listed(*args: str) -> tuple[bool, str]:
        [row] = json.loads(run_cli("snapshots", "list", *args, "--format", "json").stdout)
        return row["restorable"], row["restorable_because"]

    restorable, because = listed("--check")  # no engine answers here: the image is not checked
    assert restorable is True and because.startswith("exported to a tar whose digest is recorded")
    tar.write_bytes(tar.read_bytes() + b"\0" * 512)  # still a tar, no longer the exported one
    # without --check only presence counts
    assert listed() == (
        True,
        "exported to a tar whose digest is recorded",
    )
    restorable, because = listed("--check")
    assert restorable is False and "not the recorded" in because
    tar.unlink()
    restorable, because = listed()
    assert restorable is False and "exported tar is gone" in because and str(tar) in because
    shown = json.loads(run_cli("snapshots", "show", REF, "--format", "json").stdout)["snapshot"]
    assert (shown["restorable"], shown["restorable_because"]) == (restorable, because)


def test_without_an_engine_list_and_show_say_the_image_was_not_checked(
    run_cli: Cli, tmp_path: Path
) -> None:
    """`--check` asks the engine for the recorded image id; when none answers (DOCKER_HOST points at
    no socket here), the verdict rests on the tars and every reader is told the image was not
    checked."""
    tar, expected = snapshot_tar(tmp_path / "snap.tar")
    record_export(run_cli, tmp_path, tar, expected["image_id"])
    [row] = json.loads(run_cli("snapshots", "list", "--format", "json").stdout)
    assert row["image_check"] == "not checked (--check asks the Docker engine)"
    for command in (("list",), ("show", REF)):
        out = run_cli("snapshots", *command, "--check", "--format", "json").stdout
        row = json.loads(out)[0] if command == ("list",) else json.loads(out)["snapshot"]
        assert row["restorable"] is True
        assert row["image_check"].startswith(
            "not checked: Cannot reach the Docker engine at unix://"
        )
        assert (
            "; the image was not checked (Cannot reach the Docker engine"
            in row["restorable_because"]
        )
    table = run_cli("snapshots", "list", "--check", "--format", "markdown").stdout
    assert "the image was not checked" in table
    note = run_cli("snapshots", "show", REF, "--check", "--format", "table").stderr
    assert "restorable (exported to a tar" in note and "the image was not checked" in note


def test_export_never_replaces_a_tar_another_ref_maps_to(run_cli: Cli, tmp_path: Path) -> None:
    """'team/snap' and 'team-snap' are both team-snap.tar in benchflow's file names."""
    ingest(
        run_cli,
        tmp_path,
        [
            {"type": "run.registered", "run": RUN, "task": "t"},
            {"type": "stage.marked", "run": RUN, "stage": "env-ready", "sandbox_ref": "team/snap"},
        ],
    )
    out = tmp_path / "out"
    out.mkdir()
    (out / "team-snap.tar").write_bytes(b"another snapshot's evidence")
    result = run_cli("snapshots", "export", "team/snap", "--to", str(out), ok=False)
    assert result.exit_code == 1 and "another ref maps to the same file name" in result.stderr
    assert (
        UNREACHABLE not in result.stderr
        and (out / "team-snap.tar").read_bytes() == b"another snapshot's evidence"
    )
    assert log_rows(run_cli, "snapshot.export") == []


def test_an_engine_answering_5xx_is_unavailable_not_a_refusal() -> None:
    """A failing engine (503) says nothing about a tar or a ref: exit 4, never a recorded
    rejection."""
    import docker.errors
    import requests

    from rollout_lineage.adapters.snapshots.docker_engine import DockerEngine
    from rollout_lineage.domain.errors import StoreUnavailable

    response = requests.Response()
    response.status_code = 503

    class FailingImages:
        def get(self, ref: str) -> None:
            raise docker.errors.APIError("service unavailable", response=response)

    class FailingClient:
        images = FailingImages()

    with pytest.raises(StoreUnavailable, match="failed to"):
        DockerEngine(client=FailingClient()).image_id("bf-snap-x")


def test_check_asks_about_sandbox_captures_and_says_an_environment_layer_is_no_image(
    run_cli: Cli, tmp_path: Path
) -> None:
    ingest(
        run_cli,
        tmp_path,
        [
            {"type": "run.registered", "run": RUN, "task": "t"},
            {
                "type": "stage.marked",
                "run": RUN,
                "stage": "env-ready",
                "sandbox_ref": REF,
                "environment_ref": "env-state-1",
            },
        ],
    )
    rows = {
        row["layer"]: row
        for row in json.loads(run_cli("snapshots", "list", "--check", "--format", "json").stdout)
    }
    assert rows["environment"]["restorable"] is True
    assert rows["environment"]["image_check"] == "not checked: an environment layer is not an image"
    sandbox = rows["sandbox"]
    assert sandbox["restorable"] is True and sandbox["image_check"].startswith("not checked: ")
    assert sandbox["restorable_because"].startswith("captured; the image has not been discarded; ")
    assert (
        "the image was not checked (Cannot reach the Docker engine" in sandbox["restorable_because"]
    )

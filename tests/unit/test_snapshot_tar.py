"""verify_tar against tars built here, in both layouts `docker save` writes, and against hostile
variants."""

from __future__ import annotations

import gzip
import json
import lzma
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rollout_lineage.adapters.snapshots.snapshot_tar import TarReport, verify_tar
from rollout_lineage.domain.errors import InvalidInput
from tests.snapshot_tars import (
    Entry,
    file_entry,
    legacy_entries,
    oci_entries,
    sha,
    special_entry,
    tar_bytes,
    write,
)


def verify_bytes(tmp_path: Path, data: bytes, **caps) -> TarReport:
    report = verify_tar(write(tmp_path, data), **caps)
    # the whole-file digest holds whatever else is wrong
    assert report.tar_sha256 == "sha256:" + sha(data)
    assert report.size_bytes == len(data)
    return report


def assert_problem(report: TarReport, *needles: str) -> str:
    assert not report.ok
    text = " | ".join(report.problems)
    for needle in needles:
        assert needle in text, text
    return text


# -- valid tars ------------------------------------------------------------------------------------


@pytest.mark.parametrize("gzip_layer", [None, 0])
def test_valid_legacy_tar_is_ok(tmp_path, gzip_layer):
    entries, expected = legacy_entries(gzip_layer=gzip_layer)
    report = verify_bytes(tmp_path, tar_bytes(entries))
    assert report.problems == ()
    assert report.ok
    assert report.layout == "legacy"
    assert report.image_id == expected["image_id"]
    assert report.config_member == expected["config"]
    assert report.repo_tags == ("snap-x:latest",)
    assert [
        (c.index, c.member, c.expected_diff_id, c.actual_diff_id, c.ok) for c in report.layers
    ] == [
        (i, name, diff, diff, True)
        for i, (name, diff) in enumerate(
            zip(expected["layers"], expected["diff_ids"], strict=False)
        )
    ]


def test_valid_oci_tar_with_a_gzip_layer_is_ok(tmp_path):
    entries, expected = oci_entries(gzip_layer=1)
    report = verify_bytes(tmp_path, tar_bytes(entries))
    assert report.problems == ()
    assert report.layout == "oci"
    assert report.image_id == expected["image_id"]
    assert report.config_member == expected["config"]
    assert report.repo_tags == ("snap-oci:v1",)
    assert [c.actual_diff_id for c in report.layers] == expected["diff_ids"]
    assert all(c.ok for c in report.layers)


def test_as_dict_is_json_and_carries_the_verdict(tmp_path):
    entries, expected = legacy_entries()
    report = verify_bytes(tmp_path, tar_bytes(entries))
    data = json.loads(json.dumps(report.as_dict()))
    assert data["ok"] is True
    assert data["image_id"] == expected["image_id"]
    assert data["layers"][1]["expected_diff_id"] == expected["diff_ids"][1]
    assert data["repo_tags"] == ["snap-x:latest"]


# -- altered content -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build", [legacy_entries, lambda: oci_entries(gzip_layer=0)], ids=["legacy", "oci"]
)
def test_one_flipped_byte_in_a_layer_is_a_diff_id_mismatch(tmp_path, build):
    entries, expected = build()
    data = bytearray(tar_bytes(entries))
    # inside the uncompressed second layer in both builds
    at = data.index(b"SECOND-LAYER-MARKER") + 3
    data[at] ^= 0x01
    report = verify_bytes(tmp_path, bytes(data))
    assert_problem(report, "Layer 1", "rootfs.diff_ids[1]", expected["diff_ids"][1])
    assert [c.ok for c in report.layers] == [True, False]


def test_flipped_byte_in_a_gzip_layer_is_reported(tmp_path):
    entries, _ = oci_entries(gzip_layer=1)
    for _info, data in entries:
        if data.startswith(b"\x1f\x8b"):
            stored = data
    data = bytearray(tar_bytes(entries))
    data[data.index(stored) + len(stored) // 2] ^= 0xFF
    report = verify_bytes(tmp_path, bytes(data))
    # the blob no longer matches its name, whatever zlib makes of it
    assert_problem(report, "has sha256")
    assert report.layers[1].ok is False


def test_gzip_layer_of_several_members_is_ok(tmp_path):
    def two_members(index, plain):
        return (
            gzip.compress(plain[:3000], mtime=0) + gzip.compress(plain[3000:], mtime=0)
            if index == 1
            else plain
        )

    entries, _ = legacy_entries(store=two_members)
    assert verify_bytes(tmp_path, tar_bytes(entries)).problems == ()


@pytest.mark.parametrize(
    ("store", "needle"),
    [
        (
            lambda index, plain: gzip.compress(plain)[:-100] if index == 1 else plain,
            "ends in the middle",
        ),
        (
            lambda index, plain: gzip.compress(plain) + b"trailing junk" if index == 1 else plain,
            "not a valid gzip",
        ),
        (lambda index, plain: lzma.compress(plain) if index == 1 else plain, "xz-compressed"),
    ],
    ids=["truncated-gzip", "gzip-then-junk", "xz"],
)
def test_layers_whose_diff_id_cannot_be_computed(tmp_path, store, needle):
    entries, _ = legacy_entries(store=store)
    report = verify_bytes(tmp_path, tar_bytes(entries))
    assert_problem(report, needle, "Member")
    assert report.layers[1].actual_diff_id is None and not report.layers[1].ok


def test_gzip_layer_decompressing_past_the_member_cap(tmp_path):
    bomb = gzip.compress(b"\0" * (4 << 20))  # 4 MiB of zeros in a few KiB
    entries, _ = legacy_entries(store=lambda index, plain: bomb if index == 1 else plain)
    report = verify_bytes(tmp_path, tar_bytes(entries), member_cap_bytes=1 << 20)
    assert_problem(report, "decompresses to more than 1048576 bytes")


def test_layer_not_matching_the_configs_diff_ids(tmp_path):
    wrong = ["sha256:" + sha(b"a"), "sha256:" + sha(b"b")]
    entries, expected = legacy_entries(diff_ids=wrong)
    report = verify_bytes(tmp_path, tar_bytes(entries))
    text = assert_problem(report, "Layer 0", "Layer 1", wrong[0], expected["diff_ids"][0])
    assert "Config" not in text  # the config itself is intact and correctly named
    assert [c.expected_diff_id for c in report.layers] == wrong


def test_config_whose_name_is_not_its_digest(tmp_path):
    entries, expected = legacy_entries()
    renamed = [
        (file_entry("f" * 64 + ".json", data) if info.name == expected["config"] else (info, data))
        for info, data in entries
    ]
    manifest = json.loads({i.name: d for i, d in renamed}["manifest.json"])
    manifest[0]["Config"] = "f" * 64 + ".json"
    renamed = [
        (
            file_entry("manifest.json", json.dumps(manifest).encode())
            if i.name == "manifest.json"
            else (i, d)
        )
        for i, d in renamed
    ]
    report = verify_bytes(tmp_path, tar_bytes(renamed))
    assert_problem(report, "Config", "name carries " + "f" * 64)
    # the id is what docker computes: the digest of the bytes
    assert report.image_id == expected["image_id"]


def test_manifest_naming_a_missing_config(tmp_path):
    entries, expected = legacy_entries()
    entries = [(info, data) for info, data in entries if info.name != expected["config"]]
    report = verify_bytes(tmp_path, tar_bytes(entries))
    assert_problem(report, "names config", expected["config"], "does not hold")
    assert report.image_id is None


def test_manifest_naming_a_missing_layer(tmp_path):
    entries, expected = legacy_entries()
    entries = [(info, data) for info, data in entries if info.name != expected["layers"][0]]
    report = verify_bytes(tmp_path, tar_bytes(entries))
    assert_problem(report, "names layer", expected["layers"][0])
    assert report.layers[0].actual_diff_id is None


def test_missing_manifest(tmp_path):
    entries, _ = legacy_entries()
    report = verify_bytes(tmp_path, tar_bytes([e for e in entries if e[0].name != "manifest.json"]))
    assert_problem(report, "no regular file 'manifest.json'")
    assert report.layout == "unknown"


# -- damaged files ---------------------------------------------------------------------------------


def test_truncated_inside_a_layer(tmp_path):
    entries, _ = legacy_entries()
    data = tar_bytes(entries)
    cut = data.index(b"SECOND-LAYER-MARKER") + 1000
    report = verify_bytes(tmp_path, data[:cut])
    assert_problem(report, "ends inside member", "truncated")
    assert len(report.problems) == 1  # no follow-on noise about the members that never arrived


def test_truncated_without_end_of_archive_marker(tmp_path):
    entries, _ = legacy_entries()
    data = tar_bytes(entries).rstrip(b"\0")
    data += b"\0" * (-len(data) % 512)  # whole members, but no end-of-archive blocks
    report = verify_bytes(tmp_path, data)
    assert_problem(report, "without an end-of-archive marker", "truncated")


def test_corrupt_header_in_the_middle(tmp_path):
    entries, _expected = legacy_entries()
    data = bytearray(tar_bytes(entries))
    header = data.index(b"manifest.json")  # the name field at the start of that member's header
    data[header : header + 8] = b"XXXXXXXX"  # breaks the header checksum
    report = verify_bytes(tmp_path, bytes(data))
    assert_problem(report, "unreadable header")


def test_non_tar_bytes(tmp_path):
    report = verify_bytes(tmp_path, b"this is not a tar archive at all\n" * 100)
    assert_problem(report, "not a tar archive")
    assert len(report.problems) == 1
    assert report.layout == "unknown" and report.image_id is None


def test_gzip_compressed_tar_says_to_decompress(tmp_path):
    entries, _ = legacy_entries()
    report = verify_bytes(tmp_path, gzip.compress(tar_bytes(entries)))
    assert_problem(report, "gzip-compressed", "gunzip")


def test_empty_file(tmp_path):
    assert_problem(verify_bytes(tmp_path, b""), "not a tar archive")


def test_oversized_extended_header_is_refused_not_read(tmp_path):
    info = tarfile.TarInfo("padding")
    info.pax_headers = {"comment": "x" * (2 << 20)}  # 2 MiB of pax data ahead of one member
    entries, _ = legacy_entries()
    assert_problem(
        verify_bytes(tmp_path, tar_bytes([*entries[:3], (info, b""), *entries[3:]])),
        "extended (pax or GNU long-name) data",
    )


def test_bytes_appended_after_the_archive(tmp_path):
    entries, _ = legacy_entries()
    report = verify_bytes(tmp_path, tar_bytes(entries) + b"hidden payload")
    assert_problem(report, "after its end-of-archive marker")


# -- hostile members -------------------------------------------------------------------------------


def with_extra(extra: list[Entry]) -> bytes:
    entries, _ = legacy_entries()
    return tar_bytes(extra + entries)


def test_parent_directory_member(tmp_path):
    assert_problem(
        verify_bytes(tmp_path, with_extra([file_entry("../escape.txt", b"x")])),
        "'../escape.txt'",
        "'..'",
    )


def test_absolute_member(tmp_path):
    assert_problem(
        verify_bytes(tmp_path, with_extra([file_entry("/etc/passwd", b"x")])),
        "'/etc/passwd'",
        "absolute",
    )


def test_symlink_member(tmp_path):
    report = verify_bytes(
        tmp_path, with_extra([special_entry("link", tarfile.SYMTYPE, "/etc/shadow")])
    )
    assert_problem(report, "'link'", "symbolic link", "/etc/shadow")


def test_hardlink_member(tmp_path):
    report = verify_bytes(
        tmp_path, with_extra([special_entry("hard", tarfile.LNKTYPE, "repositories")])
    )
    assert_problem(report, "'hard'", "hard link")


@pytest.mark.parametrize("kind", [tarfile.CHRTYPE, tarfile.BLKTYPE, tarfile.FIFOTYPE])
def test_device_and_fifo_members(tmp_path, kind):
    assert_problem(
        verify_bytes(tmp_path, with_extra([special_entry("dev-node", kind)])),
        "'dev-node'",
        "device or FIFO",
    )


def test_duplicate_members(tmp_path):
    entries, expected = legacy_entries()
    data = tar_bytes([*entries, file_entry(expected["layers"][0], b"replacement layer")])
    assert_problem(verify_bytes(tmp_path, data), "appears more than once", expected["layers"][0])


def test_duplicate_after_normalisation(tmp_path):
    entries, _ = legacy_entries()
    assert_problem(
        verify_bytes(tmp_path, tar_bytes([*entries, file_entry("./repositories", b"{}")])),
        "'./repositories'",
        "more than once",
    )


# -- caps and unreadable paths ---------------------------------------------------------------------


def test_json_cap_is_reported_not_exceeded(tmp_path):
    entries, _ = legacy_entries()
    assert_problem(verify_bytes(tmp_path, tar_bytes(entries), json_cap_bytes=100), "JSON cap")


def test_member_cap_is_reported(tmp_path):
    entries, expected = legacy_entries()
    # between the two layers' sizes
    report = verify_bytes(tmp_path, tar_bytes(entries), member_cap_bytes=15_000)
    assert_problem(report, expected["layers"][1], "member cap")
    assert [c.ok for c in report.layers] == [True, False]


def test_missing_path_raises_invalid_input(tmp_path):
    with pytest.raises(InvalidInput, match="Cannot open"):
        verify_tar(tmp_path / "absent.tar")


def test_directory_raises_invalid_input(tmp_path):
    with pytest.raises(InvalidInput):
        verify_tar(tmp_path)


# -- never raises on hostile bytes -----------------------------------------------------------------

_VALID = tar_bytes(oci_entries(gzip_layer=0)[0])


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cut=st.integers(0, len(_VALID)),
    flips=st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(1, 255)), max_size=4),
)
def test_mutated_tars_yield_a_report_never_an_exception(tmp_path, cut, flips):
    data = bytearray(_VALID[:cut])
    for at, mask in flips:
        if at < len(data):
            data[at] ^= mask
    report = verify_bytes(tmp_path, bytes(data))  # asserts the whole-file digest and size as well
    if bytes(data) == _VALID:
        assert report.ok, report.problems
    else:
        assert all(problem.endswith(".") for problem in report.problems)


# -- what the manifest names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "tag",
    [
        "snap-x",
        "Snap-X:latest",
        "snap x:latest",
        "../etc:latest",
        "snap:latest\n",
        "snap:tagé",
        "snap:v\u0661",
    ],
)
def test_a_repo_tag_that_is_not_an_image_reference_is_a_problem(tmp_path, tag):
    entries, _ = legacy_entries(tags=("snap-x:latest", tag))
    report = verify_bytes(tmp_path, tar_bytes(entries))
    assert_problem(report, "are not image references", repr(tag), "expected NAME:TAG")
    assert report.repo_tags == ("snap-x:latest",)  # a malformed tag is never offered to match a ref


@pytest.mark.parametrize(
    "tag",
    [
        "localhost:5000/team/snap-x:v1.2",
        "registry.example.com/a__b/c-d:sha-0f3",
        "bf-snap-1_a:latest",
    ],
)
def test_registry_paths_and_separators_are_valid_tags(tmp_path, tag):
    entries, _ = legacy_entries(tags=(tag,))
    report = verify_bytes(tmp_path, tar_bytes(entries))
    assert report.ok, report.problems
    assert report.repo_tags == (tag,)


def test_a_tar_of_two_images_is_a_problem_even_when_each_verifies(tmp_path):
    entries, expected = legacy_entries()
    manifest = json.loads(next(data for info, data in entries if info.name == "manifest.json"))
    second = {**manifest[0], "RepoTags": ["snap-x:evil"]}
    entries = [
        entry
        if entry[0].name != "manifest.json"
        else file_entry("manifest.json", json.dumps([*manifest, second]).encode())
        for entry in entries
    ]
    report = verify_bytes(tmp_path, tar_bytes(entries))
    assert_problem(report, "manifest.json lists 2 images; expected exactly one")
    assert report.image_id == expected["image_id"] and report.problems == (report.problems[0],)

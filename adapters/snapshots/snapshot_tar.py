"""Offline, streaming verification of `docker save` tars: what the members' digests must match.

A snapshot tar is gigabytes, `manifest.json` usually follows the layers, and an untrusted file may
not hold still between two reads, so it is read once, front to back, never extracted (`tar_stream`,
`tar_members`). Hostile input never raises: each finding is a sentence in `TarReport.problems`.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import stat
from dataclasses import asdict, dataclass
from typing import Any, TypeGuard

from rollout_lineage.domain.errors import InvalidInput

from ..user_files import require_regular
from .tar_members import ALTERED, DAMAGED, INCOMPLETE, UNSAFE, MemberWalk, Seen
from .tar_stream import REEXPORT, TeeReader

_DEFAULT_MEMBER_CAP = 64 << 30
_DEFAULT_JSON_CAP = 64 << 20
_HEX64 = re.compile(r"[0-9a-f]{64}")
# Docker's reference grammar for a tagged name (distribution/reference): optional registry
# host[:port], then lowercase path components, then a tag. `docker save` writes every RepoTag in
# this form.
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"  # noqa: E501
_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_REPO_TAG = re.compile(
    rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*:[\w][\w.-]{{0,127}}", re.ASCII
)


@dataclass(frozen=True)
class LayerCheck:
    index: int
    member: str
    expected_diff_id: str | None
    actual_diff_id: str | None
    ok: bool


@dataclass(frozen=True)
class TarReport:
    """What one pass over a tar found: its one image (a tar listing several is reported as a
    problem, and describes the first)."""

    path: str
    tar_sha256: str
    size_bytes: int
    layout: str
    image_id: str | None
    config_member: str | None
    repo_tags: tuple[str, ...]
    layers: tuple[LayerCheck, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)  # nested LayerChecks become dicts; tuples become lists below
        return {
            **data,
            "repo_tags": list(self.repo_tags),
            "layers": list(data["layers"]),
            "problems": list(self.problems),
            "ok": self.ok,
        }


class _Scan(MemberWalk):
    """The walk over the members (`MemberWalk`), then the cross-checks on what it collected.

    Every regular member is hashed on the way past (a gzip stream also decompressed, because a
    diff_id names the uncompressed layer) and only small JSON-looking members are kept, so the
    cross-checks (config digest, layers against `rootfs.diff_ids`, OCI blob names) run at the end on
    digests."""

    def report(self, path: str, tar_sha256: str, size: int) -> TarReport:
        layout = (
            "oci"
            if {"index.json", "oci-layout"} & self.seen.keys()
            else ("legacy" if "manifest.json" in self.seen else "unknown")
        )
        first: tuple[str | None, str | None, tuple[LayerCheck, ...]] = (None, None, ())
        tags: list[str] = []
        entries = self._manifest_entries()
        if len(entries) > 1:
            # A tag on a second image would make the snapshot's ref resolve to a world nobody
            # verified as it.
            self._flag(
                UNSAFE,
                f"manifest.json lists {len(entries)} images; "
                f"expected exactly one, since a snapshot "
                "tar holds one image and loading it would add the others to the engine too; export "
                "the snapshot alone (`docker save REF`).",
            )
        for number, entry in enumerate(entries):
            checked = self._check_image(number, entry, tags)
            first = checked if number == 0 else first
        self._check_blobs(layout)
        config_member, image_id, layers = first
        return TarReport(
            path,
            tar_sha256,
            size,
            layout,
            image_id,
            config_member,
            tuple(dict.fromkeys(tags)),
            layers,
            # Most important first: what loading would do to the engine, then altered content, then
            # damage; in the order found within each (sorted() is stable).
            tuple(text for _, text in sorted(self.problems, key=lambda problem: problem[0])),
        )

    def _json(self, key: str, what: str) -> Any:
        seen = self.seen.get(key)
        if seen is None or seen.kind != "file":
            if self.complete or seen is not None:
                self._flag(
                    INCOMPLETE, f"The tar has no regular file {key!r}; expected {what}; {REEXPORT}."
                )
            return None
        if key not in self.kept:
            self._flag(
                INCOMPLETE,
                f"{key!r} ({seen.size} bytes) was not kept for parsing: "
                f"it does not start like JSON or would pass the JSON cap "
                f"({self.json_cap} bytes in all); expected {what}; if it "
                "is genuine JSON, raise the JSON cap.",
            )
            return None
        try:
            return json.loads(self.kept[key])
        except (ValueError, RecursionError) as exc:
            self._flag(DAMAGED, f"{key!r} is not valid JSON ({exc}); expected {what}; {REEXPORT}.")
            return None

    def _manifest_entries(self) -> list[dict[str, Any]]:
        entries = self._json("manifest.json", "the image list `docker save` writes")
        if entries is None:
            return []
        if (
            not isinstance(entries, list)
            or not entries
            or not all(isinstance(entry, dict) for entry in entries)
        ):
            self._flag(
                INCOMPLETE,
                "'manifest.json' is not a non-empty JSON array of objects; expected "
                f'[{{"Config": ..., "RepoTags": [...], "Layers": [...]}}]; {REEXPORT}.',
            )
            return []
        return entries

    def _check_image(
        self, number: int, entry: dict[str, Any], tags: list[str]
    ) -> tuple[str | None, str | None, tuple[LayerCheck, ...]]:
        config, layers, repo_tags = (
            entry.get("Config"),
            entry.get("Layers"),
            entry.get("RepoTags") or [],
        )
        if not (isinstance(config, str) and _str_list(layers) and _str_list(repo_tags)):
            self._flag(
                INCOMPLETE,
                f"manifest.json entry {number} lacks a string 'Config', a list of strings 'Layers' "
                f"or a list of strings 'RepoTags'; found keys {sorted(entry)}; {REEXPORT}.",
            )
            return None, None, ()
        malformed = [
            tag for tag in repo_tags if len(tag) > 255 + 129 or not _REPO_TAG.fullmatch(tag)
        ]
        if malformed:
            self._flag(
                ALTERED,
                f"manifest.json entry {number} has RepoTags {malformed}, which "
                f"are not image references; expected NAME:TAG as `docker save` "
                f"writes (e.g. 'bf-snap-abc:latest'); {REEXPORT}.",
            )
        tags.extend(tag for tag in repo_tags if tag not in malformed)
        config_key = posixpath.normpath(config)
        seen = self.seen.get(config_key)
        if seen is None or seen.kind != "file" or seen.sha256 is None:
            self._flag(
                INCOMPLETE,
                f"manifest.json entry {number} names config {config!r}, which the tar does not "
                f"hold as a readable regular file; expected the image's config JSON; {REEXPORT}.",
            )
            return config, None, self._check_layers(number, layers, None)
        named = _digest_in_name(config_key)
        if named != seen.sha256:
            self._flag(
                ALTERED,
                f"Config {config!r} has sha256 {seen.sha256}, but its name carries "
                f"{named or 'no digest'}; expected the name to be the digest of "
                f"the bytes; the config was altered or renamed, so {REEXPORT}.",
            )
        return (
            config,
            "sha256:" + seen.sha256,
            self._check_layers(number, layers, self._diff_ids(config_key)),
        )

    def _diff_ids(self, config_key: str) -> list[str] | None:
        config = self._json(config_key, "an image config JSON")
        rootfs = config.get("rootfs") if isinstance(config, dict) else None
        diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
        if config is not None and not (
            _str_list(diff_ids) and all(_is_digest(d) for d in diff_ids)
        ):
            self._flag(
                INCOMPLETE,
                f"Config {config_key!r} has no 'rootfs.diff_ids' list of 'sha256:<hex>' strings; "
                f"expected one diff_id per layer; {REEXPORT}.",
            )
            return None
        return diff_ids

    def _check_layers(
        self, number: int, layers: list[str], diff_ids: list[str] | None
    ) -> tuple[LayerCheck, ...]:
        checks = []
        for index, layer in enumerate(layers):
            seen = self.seen.get(posixpath.normpath(layer))
            expected = diff_ids[index] if diff_ids is not None and index < len(diff_ids) else None
            actual = (
                "sha256:" + seen.diff_id if seen and seen.kind == "file" and seen.diff_id else None
            )
            if seen is None or seen.kind != "file":
                self._flag(
                    INCOMPLETE,
                    f"manifest.json entry {number} names layer {layer!r}, which the tar does not "
                    f"hold as a regular file; expected every listed layer present; {REEXPORT}.",
                )
            elif actual is None:
                self._flag(
                    INCOMPLETE, seen.note or f"Layer {layer!r} could not be hashed; {REEXPORT}."
                )
            elif expected is not None and actual != expected:
                self._flag(
                    ALTERED,
                    f"Layer {index} ({layer!r}) has diff_id {actual}, but the "
                    f"config's rootfs.diff_ids[{index}] is {expected}; the layer "
                    f"bytes were altered or belong to another image; {REEXPORT}.",
                )
            checks.append(
                LayerCheck(
                    index, layer, expected, actual, expected is not None and actual == expected
                )
            )
        if diff_ids is not None and len(diff_ids) != len(layers):
            self._flag(
                INCOMPLETE,
                f"manifest.json entry {number} lists {len(layers)} layers but its config lists "
                f"{len(diff_ids)} diff_ids; expected one layer per diff_id; {REEXPORT}.",
            )
        return tuple(checks)

    def _check_blobs(self, layout: str) -> None:
        for key, seen in self.seen.items():
            if key.startswith("blobs/") and seen.kind == "file":
                self._check_blob(key, seen)
        if layout == "oci":
            self._check_oci_index()

    def _check_blob(self, key: str, seen: Seen) -> None:
        """A blob's name is its own sha256: the only kind of blob this verifier can check."""
        algorithm, _, hex_digest = key.removeprefix("blobs/").partition("/")
        if algorithm != "sha256" or not _HEX64.fullmatch(hex_digest):
            self._flag(
                INCOMPLETE,
                f"Blob {key!r} is not named blobs/sha256/<64 hex>; expected content-addressed "
                f"sha256 blobs, the only kind this verifier can check; {REEXPORT}.",
            )
        elif seen.sha256 is None:
            self._flag(INCOMPLETE, seen.note or f"Blob {key!r} could not be hashed; {REEXPORT}.")
        elif seen.sha256 != hex_digest:
            self._flag(
                ALTERED,
                f"Blob {key!r} has sha256 {seen.sha256}; expected its name; the blob was "
                f"altered, so {REEXPORT}.",
            )

    def _check_oci_index(self) -> None:
        """An OCI layout has its marker file, and every manifest its index names is a blob in the
        tar."""
        if "oci-layout" not in self.seen:
            self._flag(
                INCOMPLETE,
                f"The tar has index.json but no 'oci-layout' file; expected both in an OCI layout; "
                f"{REEXPORT}.",
            )
        index = self._json("index.json", "the OCI image index")
        manifests = index.get("manifests") if isinstance(index, dict) else None
        if index is not None and not (
            isinstance(manifests, list) and all(isinstance(m, dict) for m in manifests)
        ):
            self._flag(
                INCOMPLETE,
                f"'index.json' has no 'manifests' list of "
                f"objects; expected an OCI index; {REEXPORT}.",
            )
            return
        for descriptor in manifests or ():
            digest = descriptor.get("digest")
            blob = "blobs/" + digest.replace(":", "/", 1) if isinstance(digest, str) else None
            if not _is_digest(digest) or blob not in self.seen:
                self._flag(
                    INCOMPLETE,
                    f"'index.json' names manifest {digest!r}, which the tar does not hold "
                    f"as a blob; expected every indexed manifest present; {REEXPORT}.",
                )


def _digest_in_name(config_key: str) -> str | None:
    """The digest a config's member name promises: OCI `blobs/sha256/<hex>`, legacy `<hex>.json`."""
    name = (
        config_key.removeprefix("blobs/sha256/")
        if config_key.startswith("blobs/sha256/")
        else (config_key.removesuffix(".json") if "/" not in config_key else "")
    )
    return name if _HEX64.fullmatch(name) else None


def _str_list(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _is_digest(value: Any) -> bool:
    return (
        isinstance(value, str) and value.startswith("sha256:") and bool(_HEX64.fullmatch(value[7:]))
    )


def verify_tar(
    path: str | os.PathLike[str],
    *,
    member_cap_bytes: int = _DEFAULT_MEMBER_CAP,
    json_cap_bytes: int = _DEFAULT_JSON_CAP,
) -> TarReport:
    """Verify a `docker save` tar in one streaming pass; problems are reported, never raised.

    `member_cap_bytes` bounds the size of any member (and of a decompressed gzip layer) that is
    hashed; `json_cap_bytes` bounds the total bytes of JSON members (manifest, index, configs) held
    in memory. Each chunk feeds both the whole-file digest (the `sha256` benchflow records for an
    export) and the member's, so verification costs about one plain `sha256sum` of the file. Raises
    `InvalidInput` only when `path` cannot be opened or read as a regular file.
    """
    shown = os.fspath(path)
    try:
        require_regular(shown, "a snapshot tar")
        # unbuffered: each chunk is copied from the kernel exactly once
        raw = open(shown, "rb", buffering=0)  # noqa: SIM115 (the caller's with-block owns it)
    except OSError as exc:
        raise InvalidInput(
            f"Cannot open snapshot tar {shown!r}: {exc.strerror or exc}; expected a readable file.",
            hint="check the path and its permissions",
        ) from exc
    with raw:
        if not stat.S_ISREG(os.fstat(raw.fileno()).st_mode):
            raise InvalidInput(
                f"Snapshot tar {shown!r} is not a regular "
                f"file; expected the file `docker save` wrote.",
                hint="pass the path of the .tar file itself",
            )
        reader = TeeReader(raw, os.fstat(raw.fileno()).st_size)
        scan = _Scan(member_cap_bytes, json_cap_bytes)
        try:
            scan.walk(reader)
            tar_sha256, size = reader.finish()
        except OSError as exc:
            raise InvalidInput(
                f"Reading snapshot tar {shown!r} failed: {exc}; expected a readable file.",
                hint="check the disk or copy the file again",
            ) from exc
        finally:
            reader.stop()
    return scan.report(shown, tar_sha256, size)

"""Checkpoints and the keys that sign them, in the C2SP text formats (c2sp.org/signed-note,
tlog-checkpoint) that Go's checksum database, Sigstore and the transparency-dev witnesses use, so
their tools can check what this tool prints. Only text here: the Ed25519 arithmetic lives in
`adapters/evidence/ed25519.py`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import InvalidInput

ED25519 = 0x01
MAX_NOTE_BYTES = 64 * 1024
MAX_SIGNATURES = 64
DASH = "\u2014"
#: A tree size is a uint64 (C2SP tlog-checkpoint): 20 decimal digits at most.
MAX_SIZE_DIGITS = 20


def key_id(name: str, public_key: bytes) -> bytes:
    """The first 4 bytes of SHA-256(NAME || 0x0A || 0x01 || public key)."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public_key).digest()[:4]


def check_key_name(name: str) -> str:
    if not name or any(c.isspace() or c == "+" or ord(c) < 0x20 for c in name):
        raise InvalidInput(
            f"expected a key name without spaces or '+', found {name!r}",
            hint="e.g. lab.example/lineage-writer",
        )
    return name


def _b64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"expected base64 for {what}, found {text[:60]!r}") from None
    if base64.b64encode(raw).decode() != text:  # the last character's unused bits must be zero
        raise InvalidInput(f"expected canonical base64 for {what}, found {text[:60]!r}")
    return raw


def _typed_key(text: str, what: str) -> bytes:
    raw = _b64(text, what)
    if len(raw) != 33 or raw[0] != ED25519:
        raise InvalidInput(
            f"expected {what} to be an Ed25519 key (0x01 and 32 bytes), found {len(raw)} bytes "
            f"starting {raw[:1].hex() or 'with nothing'}"
        )
    return raw[1:]


@dataclass(frozen=True)
class VerifierKey:
    """`NAME+KEYID+BASE64(0x01 || 32-byte public key)`, KEYID 8 hex digits."""

    name: str
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        return key_id(self.name, self.public_key)

    @property
    def label(self) -> str:
        """`NAME+KEYID`: how every message names a signer. The name alone never does: anyone can
        make a key of any name."""
        return f"{self.name}+{self.key_id.hex()}"

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([ED25519]) + self.public_key).decode()
        return f"{self.label}+{encoded}"

    @classmethod
    def parse(cls, text: str) -> VerifierKey:
        parts = text.strip().split("+", 2)  # base64 may hold '+'; a name may not
        if len(parts) != 3 or parts[0] == "PRIVATE":
            raise InvalidInput(
                "expected a verifier key NAME+KEYID+BASE64 (the .pub file `lineage keys generate` "
                f"writes), found {'a private key' if parts[0] == 'PRIVATE' else repr(text[:60])}",
                hint="give the .pub file; the .key file stays with the signer",
            )
        return cls._checked(*parts, what="the verifier key")

    @classmethod
    def _checked(cls, name: str, hex_id: str, encoded: str, *, what: str) -> VerifierKey:
        key = cls(check_key_name(name), _typed_key(encoded, what))
        if hex_id != key.key_id.hex():
            raise InvalidInput(
                f"{what} {name!r} names key ID {hex_id}, but its key hashes to {key.key_id.hex()}",
                hint="the key was altered or copied incompletely; take it again from its owner",
            )
        return key


#: What a signer's key is to the keys a reader trusts (`TrustedKeys.judge`).
TRUSTED, FORGED, NAMESAKE, STRANGER = "trusted", "forged", "namesake", "stranger"


@dataclass(frozen=True)
class TrustedKeys:
    """The verifier keys a reader gave (`--key`, `--trusted-keys`), and the one rule by which every
    command decides whether something was signed by one of them.

    A signer is its key, never its name. As in C2SP signed-note, a key is named by its name *and*
    key ID together (the ID hashes the name with the key bytes), and a signature only counts when it
    verifies with the bytes of the trusted key, never with bytes a file carries beside it:

    * TRUSTED: name, key ID and key bytes are a trusted key's.
    * FORGED: name and key ID are a trusted key's, the bytes are not. The ID is 4 bytes, so such a
      key takes a few billion tries to make, and it can only be meant to pass for the trusted one
      (signed-note: a signature by a known name and ID that does not verify rejects the note).
    * NAMESAKE: the name is a trusted key's, the ID is not: another key that took the name (anyone
      can run `lineage keys generate writer`). Never credited to the trusted key.
    * STRANGER: neither; a key sharing only the ID is one too (signed-note: such signatures are
      ignored). The same bytes under another name are another key here, as in signed-note: the name
      is part of what the ID hashes.
    """

    keys: tuple[VerifierKey, ...] = ()

    @classmethod
    def of(cls, keys: TrustedKeys | Iterable[VerifierKey]) -> TrustedKeys:
        return keys if isinstance(keys, TrustedKeys) else cls(tuple(keys))

    def __bool__(self) -> bool:
        return bool(self.keys)

    def known(self, name: str, key_id: bytes) -> list[VerifierKey]:
        """The trusted keys a signature line `— NAME BASE64(KEYID || ...)` may be by: both must
        match. More than one only when two trusted keys collide in name and ID; the signature then
        counts for the one whose bytes verify it."""
        return [k for k in self.keys if k.name == name and k.key_id == key_id]

    def judge(self, signer: VerifierKey) -> tuple[str, VerifierKey | None]:
        """(TRUSTED, FORGED, NAMESAKE or STRANGER, the trusted key it is or passes for)."""
        if signer in self.keys:
            return TRUSTED, signer
        same = self.known(signer.name, signer.key_id)
        if same:
            return FORGED, same[0]
        named = [k for k in self.keys if k.name == signer.name]
        if named:
            return NAMESAKE, named[0]
        return STRANGER, None

    def labels(self) -> str:
        return ", ".join(k.label for k in self.keys)


def passing_for(signer: VerifierKey, verdict: str, trusted: VerifierKey | None) -> str:
    """Why a FORGED or NAMESAKE signer is not the trusted key whose name it carries."""
    assert trusted is not None
    if verdict == FORGED:
        return (
            f"{signer.label} has the name and key ID of your key {trusted.label} but other key "
            "bytes: made to pass for it"
        )
    return f"{signer.label} is another key under the name of your key {trusted.label}"


@dataclass(frozen=True)
class SignerKey:
    """`PRIVATE+KEY+NAME+KEYID+BASE64(0x01 || 32-byte seed)`."""

    name: str
    seed: bytes
    public_key: bytes

    def __str__(self) -> str:
        encoded = base64.b64encode(bytes([ED25519]) + self.seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.verifier.key_id.hex()}+{encoded}"

    @property
    def verifier(self) -> VerifierKey:
        return VerifierKey(self.name, self.public_key)

    @staticmethod
    def parse_parts(text: str) -> tuple[str, str, bytes]:
        """(name, key ID hex, seed) of PRIVATE+KEY+NAME+KEYID+BASE64; the caller derives the public
        key."""
        parts = text.strip().split("+", 4)
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"]:
            raise InvalidInput(
                "expected a signer key PRIVATE+KEY+NAME+KEYID+BASE64 (the .key file `lineage keys "
                "generate` writes), found something else",
                hint="give the .key file to sign; the .pub file is for verifying",
            )
        return check_key_name(parts[2]), parts[3], _typed_key(parts[4], "the signer key")


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        return f"{DASH} {self.name} {base64.b64encode(self.key_id + self.signature).decode()}\n"


@dataclass(frozen=True)
class Note:
    """Text ending in a newline, then, if signed, a blank line and lines
    `— NAME BASE64(key ID || signature)`."""

    text: str
    signatures: tuple[Signature, ...] = ()

    def __str__(self) -> str:
        if not self.signatures:
            return self.text
        return self.text + "\n" + "".join(s.line() for s in self.signatures)

    @classmethod
    def parse(cls, data: bytes, where: str) -> Note:
        if len(data) > MAX_NOTE_BYTES:
            raise InvalidInput(f"{where}: expected a note of at most {MAX_NOTE_BYTES} bytes")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"{where}: expected UTF-8, found a bad byte at {exc.start}"
            ) from None
        bad = next((i for i, c in enumerate(text) if ord(c) < 0x20 and c != "\n"), None)
        if bad is not None:
            raise InvalidInput(f"{where}: a control character at byte offset {bad}")
        if not text.endswith("\n"):
            raise InvalidInput(f"{where}: expected the note to end with a newline")
        split = text.rfind("\n\n")
        if split < 0:
            return cls(text)
        body, lines = text[: split + 1], text[split + 2 :].splitlines()
        if len(lines) > MAX_SIGNATURES:
            raise InvalidInput(f"{where}: {len(lines)} signatures, more than {MAX_SIGNATURES}")
        return cls(body, tuple(_signature(line, where) for line in lines))


def _signature(line: str, where: str) -> Signature:
    dash, _, rest = line.partition(" ")
    name, _, encoded = rest.partition(" ")
    if dash != DASH or not name or not encoded or " " in encoded:
        raise InvalidInput(
            f"{where}: expected a signature line '{DASH} NAME BASE64', found {line!r}"
        )
    raw = _b64(encoded, f"the signature of {name!r}")
    if len(raw) < 5:
        raise InvalidInput(f"{where}: the signature of {name!r} is {len(raw)} bytes, too short")
    return Signature(name, raw[:4], raw[4:])


@dataclass(frozen=True)
class Checkpoint:
    """Origin, tree size and base64 root hash, one per line; lines after them (C2SP's extension
    lines) are not read."""

    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"

    @classmethod
    def parse(cls, text: str, where: str) -> Checkpoint:
        lines = text.split("\n")
        if len(lines) < 4 or not lines[0] or any(not line for line in lines[1:-1]):
            raise InvalidInput(
                f"{where}: expected a checkpoint (origin, tree size and root hash, one per line), "
                f"found {len(lines) - 1} lines",
                hint="give a file `lineage checkpoint` printed",
            )
        size_text = lines[1]
        if (
            not size_text.isascii()
            or not size_text.isdigit()
            or len(size_text) > MAX_SIZE_DIGITS  # before int(): 5,000 digits raised a ValueError
            or size_text != str(int(size_text))
            or int(size_text) >= 2**64
        ):
            raise InvalidInput(
                f"{where}: expected a tree size (a whole number below 2**64, without leading "
                f"zeros), found {size_text[:40]!r}{'...' if len(size_text) > 40 else ''}"
            )
        root = _b64(lines[2], "the root hash")
        if len(root) != 32:
            raise InvalidInput(f"{where}: expected a 32-byte root hash, found {len(root)} bytes")
        return cls(lines[0], int(size_text), root)


def batch_message(
    first: int, last: int, leaves: list[bytes], recorded_by: str | None = None
) -> bytes:
    """What a writer's key signs for one appended batch: its positions and its events' leaf hashes
    (each leaf commits to one event's stored bytes and position, so the signature covers exactly
    those events), and where the store authenticated the writer (PostgreSQL) the role every event of
    the batch shows as `recorded_by`, which no leaf holds: a role re-linked into the chain then
    fails the signature too."""
    if recorded_by is None:
        return f"rollout-lineage/batch\n{first}\n{last}\n{len(leaves)}\n".encode() + b"".join(
            leaves
        )
    role = recorded_by.encode()  # length first: a role may hold a newline
    head = f"rollout-lineage/batch-by\n{len(role)}\n".encode() + role
    return head + f"\n{first}\n{last}\n{len(leaves)}\n".encode() + b"".join(leaves)

"""Ed25519 keys and signatures (the `cryptography` package) for signed notes and signed batches.

The text formats are `domain/signed_note.py`'s; this module only does the arithmetic, reads key
files, and applies the signed-note rules for verifying: a signature from a key the verifier does not
know is ignored, one from a known key must verify, and at least one known key must have signed.
Which key is which is `TrustedKeys`'s one rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ...domain.errors import IntegrityFailure, InvalidInput
from ...domain.signed_note import Note, Signature, SignerKey, TrustedKeys, VerifierKey
from ..user_files import read_capped

MAX_KEY_FILE = 4096
MAX_TRUSTED_KEYS_FILE = 1 << 20  # thousands of keys; a file past this is not a keys file


def generate(name: str) -> SignerKey:
    seed = Ed25519PrivateKey.generate().private_bytes_raw()
    return signer_from_seed(name, seed)


def signer_from_seed(name: str, seed: bytes) -> SignerKey:
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    return SignerKey(name, seed, public.public_bytes(Encoding.Raw, PublicFormat.Raw))


def parse_signer(text: str) -> SignerKey:
    name, hex_id, seed = SignerKey.parse_parts(text)
    key = signer_from_seed(name, seed)
    if key.verifier.key_id.hex() != hex_id:
        raise InvalidInput(
            f"the signer key {name!r} names key ID {hex_id}, but its key hashes to "
            f"{key.verifier.key_id.hex()}",
            hint="the key file was altered or copied incompletely",
        )
    return key


def _read_key_text(where: str) -> str:
    data = read_capped(where, MAX_KEY_FILE, "a key file of one line")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise InvalidInput(f"{where}: expected a key in ASCII, found other bytes") from None


def load_signer(path: str | Path) -> SignerKey:
    return parse_signer(_read_key_text(str(path)))


def load_verifier(value: str) -> VerifierKey:
    """A verifier key given as its file or as the key text itself."""
    return VerifierKey.parse(_read_key_text(value) if Path(value).is_file() else value)


def load_verifiers(path: str) -> list[VerifierKey]:
    """A trusted-keys file: one verifier key per line; blank lines and lines starting with # are
    skipped."""
    try:
        text = read_capped(path, MAX_TRUSTED_KEYS_FILE, "trusted keys").decode("ascii")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{path}: expected trusted keys in ASCII, found other bytes ({exc})"
        ) from None
    keys = [
        VerifierKey.parse(line)
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not keys:
        raise InvalidInput(f"{path}: expected one verifier key per line, found none")
    return keys


def sign(key: SignerKey, message: bytes) -> bytes:
    return Ed25519PrivateKey.from_private_bytes(key.seed).sign(message)


def signature_valid(key: VerifierKey, message: bytes, signature: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(key.public_key).verify(signature, message)
    except InvalidSignature:
        return False
    return True


def sign_note(note: Note, key: SignerKey) -> Note:
    signature = Signature(key.name, key.verifier.key_id, sign(key, note.text.encode()))
    return Note(note.text, (*note.signatures, signature))


def verify_note(
    note: Note, keys: TrustedKeys | Sequence[VerifierKey], where: str
) -> list[VerifierKey]:
    """The trusted keys whose signatures verify (signed-note's rules, by `TrustedKeys.known`: name
    and key ID name the key, its own bytes verify); raises when a known key's signature fails or no
    known key signed."""
    trusted = TrustedKeys.of(keys)
    verified: list[VerifierKey] = []
    for signature in note.signatures:
        known = trusted.known(signature.name, signature.key_id)
        if not known:
            # the signed-note rule: unknown keys are ignored, so co-signers can be added freely
            continue
        key = next(
            (k for k in known if signature_valid(k, note.text.encode(), signature.signature)), None
        )
        if key is None:
            raise IntegrityFailure(
                f"{where}: the signature by {known[0].label} does not verify with your key; the "
                "note was changed after it was signed, or signed by another key made to carry "
                "that name and key ID",
                hint="ask the signer for the original",
            )
        if key not in verified:
            verified.append(key)
    if not verified:
        found = ", ".join(f"{s.name}+{s.key_id.hex()}" for s in note.signatures) or "nobody"
        raise IntegrityFailure(
            f"{where}: expected a signature by {trusted.labels()}, found signatures by {found}",
            hint="a signer is its key, not its name: check that you were given the right key "
            "and the right file",
        )
    return verified

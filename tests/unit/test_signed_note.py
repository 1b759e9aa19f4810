"""The signed-note and key formats against Go's golang.org/x/mod/sumdb/note vector, and the
verifying rules."""

from __future__ import annotations

import pytest

from rollout_lineage.adapters.evidence import ed25519
from rollout_lineage.domain.errors import IntegrityFailure, InvalidInput
from rollout_lineage.domain.signed_note import Checkpoint, Note, VerifierKey

GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
GO_NOTE = (
    GO_TEXT + "\n\u2014 PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)


def test_the_go_signer_key_signs_the_go_note_byte_for_byte() -> None:
    signer = ed25519.parse_signer(GO_SIGNER)
    assert str(signer) == GO_SIGNER and str(signer.verifier) == GO_VERIFIER
    assert str(ed25519.sign_note(Note(GO_TEXT), signer)) == GO_NOTE


def test_the_go_note_verifies_with_its_key_and_fails_when_changed() -> None:
    key = VerifierKey.parse(GO_VERIFIER)
    assert ed25519.verify_note(Note.parse(GO_NOTE.encode(), "go"), [key], "go") == ["PeterNeumann"]
    changed = Note.parse(GO_NOTE.replace("problem,", "problem;").encode(), "go")
    with pytest.raises(IntegrityFailure, match="does not verify"):
        ed25519.verify_note(changed, [key], "go")


def test_signatures_by_unknown_keys_are_ignored_but_one_known_key_must_sign() -> None:
    other = ed25519.generate("other")
    note = ed25519.sign_note(Note.parse(GO_NOTE.encode(), "go"), other)
    assert ed25519.verify_note(note, [VerifierKey.parse(GO_VERIFIER)], "n") == ["PeterNeumann"]
    with pytest.raises(IntegrityFailure, match="expected a signature by stranger"):
        ed25519.verify_note(note, [ed25519.generate("stranger").verifier], "n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
            "hashes to c74f20a3",
        ),
        ("PeterNeumann+c74f20a3+Ahpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "Ed25519 key"),
        ("PeterNeumann+c74f20a3", r"NAME\+KEYID\+BASE64"),
        (GO_SIGNER, "a private key"),
        ("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "without spaces"),
    ],
)
def test_a_mangled_verifier_key_is_refused_saying_why(text: str, expected: str) -> None:
    with pytest.raises(InvalidInput, match=expected):
        VerifierKey.parse(text)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"origin\n12\n", "origin, tree size and root hash"),
        (b"origin\n012\nAAAA\n", "leading zeros"),
        (b"origin\n12\nAAAA\n", "32-byte root"),
        (b"origin\n12\n" + b"A" * 44 + b"\n", "32-byte root"),
        (b"origin\n12\r\nAAAA\n", "control character"),
        (b"origin\n12\nAAAA", "end with a newline"),
        (b"o\n1\nx\n\n- name AAAA\n", "signature line"),
    ],
)
def test_a_malformed_checkpoint_is_refused_saying_why(data: bytes, expected: str) -> None:
    with pytest.raises(InvalidInput, match=expected):
        Checkpoint.parse(Note.parse(data, "cp").text, "cp")


def test_a_checkpoint_round_trips() -> None:
    made = Checkpoint("rollout-lineage/0123456789abcdef", 20852163, bytes(range(32)))
    assert Checkpoint.parse(made.text(), "cp") == made
    assert made.text().splitlines()[2] == "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

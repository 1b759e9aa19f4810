"""The signed-note and key formats against Go's golang.org/x/mod/sumdb/note vector, and the
verifying rules."""

from __future__ import annotations

import re

import pytest

from rollout_lineage.adapters.evidence import ed25519
from rollout_lineage.domain.errors import IntegrityFailure, InvalidInput
from rollout_lineage.domain.signed_note import (
    FORGED,
    NAMESAKE,
    STRANGER,
    TRUSTED,
    Checkpoint,
    Note,
    TrustedKeys,
    VerifierKey,
)

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
    assert ed25519.verify_note(Note.parse(GO_NOTE.encode(), "go"), [key], "go") == [key]
    changed = Note.parse(GO_NOTE.replace("problem,", "problem;").encode(), "go")
    with pytest.raises(IntegrityFailure, match="does not verify"):
        ed25519.verify_note(changed, [key], "go")


def test_signatures_by_unknown_keys_are_ignored_but_one_known_key_must_sign() -> None:
    other = ed25519.generate("other")
    note = ed25519.sign_note(Note.parse(GO_NOTE.encode(), "go"), other)
    go = VerifierKey.parse(GO_VERIFIER)
    assert [k.label for k in ed25519.verify_note(note, [go], "n")] == ["PeterNeumann+c74f20a3"]
    with pytest.raises(IntegrityFailure, match=r"expected a signature by stranger\+"):
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


# --- which key is which: `TrustedKeys.judge`, the one rule every command uses (issue #33) ---------

#: One Ed25519 key whose key IDs under these two names are both 239fe665, and two keys whose IDs
#: under the name `writer` are both 11d3925e (birthday searches, seconds each).
ONE_SEED, ONE_KEY_NAMES = bytes(range(32)), ("writer-27269", "writer-70137")
TWO_SEEDS = (
    bytes.fromhex("ee5cbe924934cae86f9c79577b20254ef7809fc1fb20988c98ea2777339b18f9"),
    bytes.fromhex("a9e431a4242bf8989e85c8dcc0da7533fc222cddc2bd16fa8f54a3b5c9af4960"),
)


def test_a_signer_is_judged_by_name_key_id_and_bytes_never_by_name() -> None:
    yours = ed25519.generate("writer").verifier
    rotated = ed25519.generate("writer").verifier  # a second key of yours with the same name
    trusted = TrustedKeys((yours, ed25519.generate("ci").verifier))
    assert trusted.judge(yours) == (TRUSTED, yours)
    assert trusted.judge(ed25519.generate("writer").verifier) == (NAMESAKE, yours)
    assert trusted.judge(ed25519.generate("auditor").verifier) == (STRANGER, None)
    assert TrustedKeys((yours, rotated)).judge(rotated) == (TRUSTED, rotated)

    forged_name_and_id = ed25519.signer_from_seed("writer", TWO_SEEDS[1]).verifier
    yours_by_seed = ed25519.signer_from_seed("writer", TWO_SEEDS[0]).verifier
    assert forged_name_and_id.label == yours_by_seed.label
    assert TrustedKeys((yours_by_seed,)).judge(forged_name_and_id) == (FORGED, yours_by_seed)

    same_bytes_and_id = [ed25519.signer_from_seed(n, ONE_SEED).verifier for n in ONE_KEY_NAMES]
    assert same_bytes_and_id[0].key_id == same_bytes_and_id[1].key_id
    assert TrustedKeys((same_bytes_and_id[0],)).judge(same_bytes_and_id[1]) == (STRANGER, None)


def test_a_note_signature_counts_only_with_the_trusted_keys_own_bytes() -> None:
    """signed-note: a signature by a known name and key ID that does not verify rejects the note;
    one that shares only the name, or only the ID, is ignored."""
    yours = ed25519.signer_from_seed("writer", TWO_SEEDS[0])
    forged = ed25519.signer_from_seed("writer", TWO_SEEDS[1])
    text = Note("rollout-lineage/0000000000000000\n1\n" + "A" * 43 + "=\n")
    with pytest.raises(IntegrityFailure, match="does not verify with your key"):
        ed25519.verify_note(ed25519.sign_note(text, forged), [yours.verifier], "n")
    namesake = ed25519.generate("writer")
    both = ed25519.sign_note(ed25519.sign_note(text, namesake), yours)
    assert ed25519.verify_note(both, [yours.verifier], "n") == [yours.verifier]
    only_theirs = re.escape(f"found signatures by {namesake.verifier.label}")
    with pytest.raises(IntegrityFailure, match=only_theirs):
        ed25519.verify_note(ed25519.sign_note(text, namesake), [yours.verifier], "n")
    other_name = ed25519.signer_from_seed(ONE_KEY_NAMES[1], ONE_SEED)
    mine = ed25519.signer_from_seed(ONE_KEY_NAMES[0], ONE_SEED)
    with pytest.raises(IntegrityFailure, match="expected a signature by writer-27269"):
        ed25519.verify_note(ed25519.sign_note(text, other_name), [mine.verifier], "n")

"""Issue #33, item 3: a signer is its key, never its name. Two keys named `writer` (anyone can run
`lineage keys generate writer`), and keys made to share a key ID, through every command that says
"signed by": `verify --trusted-keys`, `verify --checkpoint`, `prove`, `bundle verify`, `import
--bundle`. They must agree, and none may credit one key's signature to another.

The rule is `TrustedKeys.judge` (domain/signed_note.py), after C2SP signed-note: a key is its name
and key ID together, and a signature counts only when it verifies with the trusted key's own bytes.
A key ID is 4 bytes, so the collisions below were found offline in seconds (a birthday search over
names for one key, and over keys for one name); an attacker aiming at one given key needs about
2**32 tries, which is hours, not years.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollout_lineage.adapters.evidence.ed25519 import signer_from_seed
from rollout_lineage.bootstrap import open_store
from rollout_lineage.domain.facts import RunRegistered, RunScored
from rollout_lineage.domain.signed_note import SignerKey, VerifierKey
from tests.conftest import Cli

#: One Ed25519 key whose IDs under these two names are both 239fe665.
ONE_KEY_SEED = bytes(range(32))
ONE_KEY_NAMES = ("writer-27269", "writer-70137")
#: Two Ed25519 keys whose IDs under the name `writer` are both 11d3925e.
TWO_KEY_SEEDS = (
    bytes.fromhex("ee5cbe924934cae86f9c79577b20254ef7809fc1fb20988c98ea2777339b18f9"),
    bytes.fromhex("a9e431a4242bf8989e85c8dcc0da7533fc222cddc2bd16fa8f54a3b5c9af4960"),
)


def key_files(folder: Path, name: str, seed: bytes | None = None) -> SignerKey:
    """NAME.key and NAME.pub in `folder`, as `lineage keys generate` writes them (a given seed: a
    key found by a collision search)."""
    folder.mkdir(parents=True, exist_ok=True)
    if seed is None:
        Cli(folder / "unused")("keys", "generate", name, "--dir", str(folder))
        return _load(folder / f"{name}.key")
    key = signer_from_seed(name, seed)
    (folder / f"{name}.key").write_text(f"{key}\n")
    (folder / f"{name}.pub").write_text(f"{key.verifier}\n")
    return key


def _load(path: Path) -> SignerKey:
    from rollout_lineage.adapters.evidence.ed25519 import load_signer

    return load_signer(path)


def label(key: SignerKey | VerifierKey) -> str:
    verifier = key.verifier if isinstance(key, SignerKey) else key
    return f"{verifier.name}+{verifier.key_id.hex()}"


def write(store: str, home: Path, key: Path, *facts: object) -> None:
    """Each fact its own batch, signed with `key`."""
    with open_store(store, home=str(home), signing_key=str(key)) as lineage:
        for fact in facts:
            lineage.record([fact])  # type: ignore[list-item]


def two_signers(store: str, home: Path, yours: Path, theirs: Path) -> Cli:
    """jobs/a and jobs/b registered with your key (positions 1, 2), jobs/a's score appended with
    theirs (position 3)."""
    write(store, home, yours, RunRegistered(run="jobs/a", task="t"))
    write(store, home, yours, RunRegistered(run="jobs/b", task="t"))
    write(store, home, theirs, RunScored(run="jobs/a", reward=1.0, tests={}))
    return Cli(home, store)


def store_verify(cli: Cli, trusted: Path) -> tuple[int, dict]:
    result = cli("verify", "--trusted-keys", str(trusted), "--format", "json", ok=False)
    return result.exit_code, json.loads(result.stdout)


def bundle_of_jobs_a(cli: Cli, tmp_path: Path, signer: Path) -> Path:
    bundle = tmp_path / f"jobs-a-{signer.parent.name}.bundle"
    cli("bundle", "jobs/a", "--to", str(bundle), "--sign", str(signer))
    return bundle


def offline(tmp_path: Path, *args: str) -> object:
    """A command run with no store of its own worth anything (bundle verify)."""
    return Cli(tmp_path / "nowhere")(*args, ok=False)


def imported(tmp_path: Path, bundle: Path, key: Path) -> tuple[object, int]:
    """`import --bundle` into a new store: the result and the events that store then holds."""
    target = Cli(tmp_path / "target")
    target("init")
    result = target("import", "--bundle", str(bundle), "--key", str(key), ok=False)
    return result, json.loads(target("head", "--json").stdout)["tree_size"]


# --- two keys named writer ------------------------------------------------------------------------


@pytest.fixture
def namesakes(tmp_path: Path) -> tuple[SignerKey, SignerKey]:
    """Your `writer` key, and someone else's `writer` key: same name, another key and key ID."""
    yours = key_files(tmp_path / "yours", "writer")
    theirs = key_files(tmp_path / "theirs", "writer")
    assert yours.name == theirs.name and label(yours) != label(theirs)
    return yours, theirs


def test_events_signed_by_a_namesake_key_are_refused_by_every_command(
    store_url: str, tmp_path: Path, namesakes: tuple[SignerKey, SignerKey]
) -> None:
    yours, theirs = namesakes
    pub, key = tmp_path / "yours" / "writer.pub", tmp_path / "yours" / "writer.key"
    cli = two_signers(store_url, tmp_path / "home", key, tmp_path / "theirs" / "writer.key")
    why = f"{label(theirs)} is another key under the name of your key {label(yours)}"

    code, report = store_verify(cli, pub)
    assert code == 3 and report["first_bad_position"] == 3, report
    assert f"position 3: signed by {label(theirs)}, not a trusted key ({why})" in report["problem"]
    assert report["signatures"] == f"2 events signed by {label(yours)}"

    # Your key signed the checkpoint over the whole log (you did not look): the bundle of jobs/a
    # holds your batch (position 1) and theirs (position 3).
    bundle = bundle_of_jobs_a(cli, tmp_path, key)
    checked = offline(tmp_path, "bundle", "verify", str(bundle), "--key", str(pub))
    assert checked.exit_code == 3, checked.stdout  # type: ignore[attr-defined]
    assert f"positions 3-3 are signed by {label(theirs)}, not by your key: {why}" in (
        checked.stderr  # type: ignore[attr-defined]
    )
    shown = offline(tmp_path, "bundle", "show", str(bundle), "--key", str(pub))
    assert shown.exit_code == 3  # type: ignore[attr-defined]
    result, events = imported(tmp_path, bundle, pub)
    assert result.exit_code == 3 and events == 0, result.stderr  # type: ignore[attr-defined]
    assert why in result.stderr  # type: ignore[attr-defined]

    # Without your key nothing is trusted, and both keys are named apart.
    unkeyed = json.loads(
        Cli(tmp_path / "nowhere")("bundle", "verify", str(bundle), "--format", "json").stdout
    )[0]
    first, second = sorted([label(yours), label(theirs)])
    assert unkeyed["signed_events"] == f"2: 1 by {first}, 1 by {second}"


def test_a_checkpoint_signed_by_a_namesake_key_is_refused_saying_which_key(
    store_url: str, tmp_path: Path, namesakes: tuple[SignerKey, SignerKey]
) -> None:
    yours, theirs = namesakes
    pub, key = tmp_path / "yours" / "writer.pub", tmp_path / "yours" / "writer.key"
    their_key = tmp_path / "theirs" / "writer.key"
    cli = two_signers(store_url, tmp_path / "home", key, key)
    checkpoint = tmp_path / "theirs.checkpoint"
    checkpoint.write_text(cli("checkpoint", "--sign", str(their_key)).stdout)
    expected = f"expected a signature by {label(yours)}, found signatures by {label(theirs)}"
    for command in (
        ("verify", "--checkpoint", str(checkpoint), "--key", str(pub)),
        ("prove", "1", "--checkpoint", str(checkpoint), "--key", str(pub)),
    ):
        refused = cli(*command, ok=False)
        assert refused.exit_code == 3 and expected in refused.stderr, (command, refused.stderr)
    bundle = bundle_of_jobs_a(cli, tmp_path, their_key)
    checked = offline(tmp_path, "bundle", "verify", str(bundle), "--key", str(pub))
    assert checked.exit_code == 3 and expected in checked.stderr  # type: ignore[attr-defined]
    result, events = imported(tmp_path, bundle, pub)
    assert result.exit_code == 3 and events == 0  # type: ignore[attr-defined]
    # Your own signature on the same log is what all of them accept.
    mine = tmp_path / "mine.checkpoint"
    mine.write_text(cli("checkpoint", "--sign", str(key)).stdout)
    report = json.loads(
        cli("verify", "--checkpoint", str(mine), "--key", str(pub), "--format", "json").stdout
    )
    assert report["checkpoint"] == f"3 events, signed by {label(yours)}: extended by this log"


def test_a_bundle_names_each_signer_by_key_and_trusts_only_yours(
    tmp_path: Path, namesakes: tuple[SignerKey, SignerKey]
) -> None:
    """A signer that is not yours and does not pass for yours (another name) is reported, not
    trusted, and the bundle verifies: `--key` asks that the checkpoint be yours, and says which
    batches are. The store's `verify --trusted-keys` says the same of the same events."""
    yours, _ = namesakes
    pub, key = tmp_path / "yours" / "writer.pub", tmp_path / "yours" / "writer.key"
    auditor = key_files(tmp_path / "auditor", "auditor")
    store = f"sqlite:///{tmp_path / 'home' / 'events.sqlite'}"
    cli = two_signers(store, tmp_path / "home", key, tmp_path / "auditor" / "auditor.key")
    bundle = bundle_of_jobs_a(cli, tmp_path, key)
    checked = json.loads(
        Cli(tmp_path / "nowhere")(
            "bundle", "verify", str(bundle), "--key", str(pub), "--format", "json"
        ).stdout
    )[0]
    assert checked["signed_events"] == f"2: 1 by {label(auditor)}, 1 by {label(yours)} (trusted)"
    assert checked["checkpoint"].endswith(f"signed by {label(yours)}")
    code, report = store_verify(cli, pub)
    assert (
        code == 3
        and f"position 3: signed by {label(auditor)}, not a trusted key" in (report["problem"])
    )


# --- keys made to share a key ID ------------------------------------------------------------------


def test_a_key_made_to_share_your_keys_name_and_id_is_refused_by_every_command(
    store_url: str, tmp_path: Path
) -> None:
    """Same name, same key ID, other key bytes: signed-note's "known key whose signature does not
    verify", which rejects the note; here every command refuses, naming both keys."""
    yours = key_files(tmp_path / "yours", "writer", TWO_KEY_SEEDS[0])
    forged = key_files(tmp_path / "forged", "writer", TWO_KEY_SEEDS[1])
    assert label(yours) == label(forged) and yours.public_key != forged.public_key
    pub, key = tmp_path / "yours" / "writer.pub", tmp_path / "yours" / "writer.key"
    forged_key = tmp_path / "forged" / "writer.key"
    why = f"has the name and key ID of your key {label(yours)} but other key bytes"
    cli = two_signers(store_url, tmp_path / "home", key, forged_key)

    code, report = store_verify(cli, pub)
    assert code == 3 and report["first_bad_position"] == 3
    assert "positions 3-3 does not verify" in report["problem"] and why in report["problem"]

    bundle = bundle_of_jobs_a(cli, tmp_path, key)
    checked = offline(tmp_path, "bundle", "verify", str(bundle), "--key", str(pub))
    assert checked.exit_code == 3 and why in checked.stderr  # type: ignore[attr-defined]
    result, events = imported(tmp_path, bundle, pub)
    assert result.exit_code == 3 and events == 0  # type: ignore[attr-defined]

    checkpoint = tmp_path / "forged.checkpoint"
    checkpoint.write_text(cli("checkpoint", "--sign", str(forged_key)).stdout)
    refused = cli("verify", "--checkpoint", str(checkpoint), "--key", str(pub), ok=False)
    assert refused.exit_code == 3
    assert f"the signature by {label(yours)} does not verify with your key" in refused.stderr
    forged_bundle = bundle_of_jobs_a(cli, tmp_path, forged_key)
    refused = offline(tmp_path, "bundle", "verify", str(forged_bundle), "--key", str(pub))
    assert refused.exit_code == 3, refused.stdout  # type: ignore[attr-defined]


def test_your_key_under_another_name_with_the_same_id_is_another_key(
    store_url: str, tmp_path: Path
) -> None:
    """The same key bytes and key ID under another name: signed-note names a key by name and ID
    together, and ignores a signature that shares only one of them; so does every command here.
    Nothing is gained by it: its signatures are ignored, never credited to your key, and a forger
    without your private key could only have copied signatures you made (the name is not in what a
    batch signature covers)."""
    yours = key_files(tmp_path / "yours", ONE_KEY_NAMES[0], ONE_KEY_SEED)
    other = key_files(tmp_path / "other", ONE_KEY_NAMES[1], ONE_KEY_SEED)
    assert yours.public_key == other.public_key
    assert yours.verifier.key_id == other.verifier.key_id and yours.name != other.name
    pub = tmp_path / "yours" / f"{yours.name}.pub"
    key, other_key = (
        tmp_path / "yours" / f"{yours.name}.key",
        tmp_path / "other" / f"{other.name}.key",
    )
    cli = two_signers(store_url, tmp_path / "home", key, other_key)

    code, report = store_verify(cli, pub)
    assert code == 3 and report["first_bad_position"] == 3
    assert f"position 3: signed by {label(other)}, not a trusted key" in report["problem"]

    bundle = bundle_of_jobs_a(cli, tmp_path, key)
    checked = json.loads(
        Cli(tmp_path / "nowhere")(
            "bundle", "verify", str(bundle), "--key", str(pub), "--format", "json"
        ).stdout
    )[0]
    assert sorted([label(yours), label(other)]) == [label(yours), label(other)]
    assert checked["signed_events"] == f"2: 1 by {label(yours)} (trusted), 1 by {label(other)}"

    checkpoint = tmp_path / "other.checkpoint"
    checkpoint.write_text(cli("checkpoint", "--sign", str(other_key)).stdout)
    refused = cli("verify", "--checkpoint", str(checkpoint), "--key", str(pub), ok=False)
    assert refused.exit_code == 3 and (
        f"expected a signature by {label(yours)}, found signatures by {label(other)}"
        in refused.stderr
    )

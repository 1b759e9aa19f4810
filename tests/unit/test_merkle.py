"""The tree math against the RFC 6962/9162 test vectors (those of transparency-dev/merkle and Go's
sumdb), plus the mutations their test suites apply to a good proof: each must fail."""

from __future__ import annotations

import pytest

from rollout_lineage.domain import merkle
from rollout_lineage.domain.merkle import MemoryTree, ProofFailed

LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
ROOTS = [
    bytes.fromhex(h)
    for h in (
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    )
]
H = bytes.fromhex
# (leaf index, tree size, proof): the vectors' 1-based leaf numbers minus one.
INCLUSION = [
    (
        0,
        8,
        [
            H("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        5,
        8,
        [
            H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            H("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (2, 3, [H("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
    (
        1,
        5,
        [
            H("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
]
CONSISTENCY = [
    (
        1,
        8,
        [
            H("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        6,
        8,
        [
            H("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            H("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (
        2,
        5,
        [
            H("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            H("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (
        6,
        7,
        [
            H("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            H("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
            H("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
]


def vector_tree() -> MemoryTree:
    tree = MemoryTree()
    tree.append([merkle.leaf_hash(leaf) for leaf in LEAVES])
    return tree


def test_roots_of_every_prefix_match_the_vectors() -> None:
    tree = vector_tree()
    assert [tree.root(size) for size in range(1, 9)] == ROOTS
    assert tree.root(0) == H("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")


def test_a_tree_grown_in_uneven_batches_has_the_same_nodes() -> None:
    grown = MemoryTree()
    hashes = [merkle.leaf_hash(leaf) for leaf in LEAVES]
    for batch in (hashes[:1], hashes[1:4], hashes[4:5], hashes[5:]):
        grown.append(batch)
    assert grown.nodes == vector_tree().nodes


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_inclusion_proofs_match_the_vectors_and_verify(
    index: int, size: int, proof: list[bytes]
) -> None:
    tree = vector_tree()
    assert merkle.inclusion_proof(tree.node, index, size) == proof
    leaf = merkle.leaf_hash(LEAVES[index])
    merkle.verify_inclusion(index, size, leaf, proof, ROOTS[size - 1])


def _inclusion_mutations(index: int, size: int, proof: list[bytes]) -> list[tuple]:
    root, leaf = ROOTS[size - 1], merkle.leaf_hash(LEAVES[index])
    bad = [
        (index + 1, size, leaf, proof, root),
        (index, size * 2, leaf, proof, root),
        (index, size, merkle.leaf_hash(b"WrongLeaf"), proof, root),
        (index, size, leaf, proof, merkle.EMPTY_ROOT),
        (index, size, leaf, [*proof, root], root),
        (index, size, leaf, [root, *proof], root),
        (index, size, leaf, proof[:-1], root),
        (index, size, leaf, [*proof, b""], root),
    ]
    if index:
        bad.append((index - 1, size, leaf, proof, root))
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([proof[i][0] ^ 8]) + proof[i][1:]
        bad.append((index, size, leaf, flipped, root))
    return bad


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_every_mutation_of_a_good_inclusion_proof_fails(
    index: int, size: int, proof: list[bytes]
) -> None:
    for case in _inclusion_mutations(index, size, proof):
        with pytest.raises(ProofFailed):
            merkle.verify_inclusion(*case)


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_consistency_proofs_match_the_vectors_and_verify(
    old: int, new: int, proof: list[bytes]
) -> None:
    tree = vector_tree()
    assert merkle.consistency_proof(tree.node, old, new) == proof
    merkle.verify_consistency(old, new, ROOTS[old - 1], ROOTS[new - 1], proof)


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_every_mutation_of_a_good_consistency_proof_fails(
    old: int, new: int, proof: list[bytes]
) -> None:
    r1, r2 = ROOTS[old - 1], ROOTS[new - 1]
    bad = [
        (old + 1, new, r1, r2, proof),
        (old, new * 2, r1, r2, proof),
        (old, new, r2, r1, proof),
        (old, new, merkle.EMPTY_ROOT, r2, proof),
        (old, new, r1, merkle.EMPTY_ROOT, proof),
        (old, new, r1, r2, []),
        (old, new, r1, r2, [*proof, r1]),
        (old, new, r1, r2, [r2, *proof]),
        (old, new, r1, r2, proof[:-1]),
        (old - 1, new, r1, r2, proof),
    ]
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([proof[i][0] ^ 16]) + proof[i][1:]
        bad.append((old, new, r1, r2, flipped))
    for case in bad:
        with pytest.raises(ProofFailed):
            merkle.verify_consistency(*case)


def test_every_proof_of_a_larger_tree_verifies() -> None:
    """All pairs up to 70 leaves: generation and verification agree (RFC 9162 defines both)."""
    tree = MemoryTree()
    tree.append([merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(70)])
    for size in range(1, 71):
        for index in range(size):
            proof = merkle.inclusion_proof(tree.node, index, size)
            merkle.verify_inclusion(index, size, tree.nodes[(0, index)], proof, tree.root(size))
        for old in range(0, size + 1):
            proof = merkle.consistency_proof(tree.node, old, size)
            merkle.verify_consistency(old, size, tree.root(old), tree.root(size), proof)


def test_trivial_consistency_cases() -> None:
    merkle.verify_consistency(0, 5, merkle.EMPTY_ROOT, ROOTS[4], [])
    merkle.verify_consistency(3, 3, ROOTS[2], ROOTS[2], [])
    with pytest.raises(ProofFailed, match="roots differ"):
        merkle.verify_consistency(3, 3, ROOTS[2], ROOTS[3], [])
    with pytest.raises(ProofFailed, match="at least"):
        merkle.verify_consistency(4, 3, ROOTS[3], ROOTS[2], [])


def test_the_frontier_is_all_a_tree_needs_to_grow() -> None:
    whole = MemoryTree()
    whole.append([merkle.leaf_hash(i.to_bytes(2, "big")) for i in range(37)])
    for size in range(37):
        edge = {c: whole.nodes[c] for c in merkle.frontier(size)}
        assert sum(1 << level for level, _ in edge) == size
        added = merkle.new_nodes(size, [whole.nodes[(0, size)]], merkle.from_mapping(edge))
        assert all(whole.nodes[(lv, i)] == h for lv, i, h in added)


def test_the_root_builder_agrees_with_the_tree_at_every_size() -> None:
    tree, builder = MemoryTree(), merkle.RootBuilder()
    assert builder.root() == merkle.EMPTY_ROOT
    for i in range(70):
        leaf = merkle.leaf_hash(i.to_bytes(2, "big"))
        tree.append([leaf])
        builder.add(leaf)
        assert builder.root() == tree.root()

"""The Merkle tree over the log (RFC 9162 §2.1): hashes, roots of prefixes, inclusion and
consistency proofs. Pure tree math, no storage: the same code proves from the store's node table
(`adapters/evidence/merkle_store.py`), from a bundle's leaves held in memory, or from test vectors.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

#: RFC 9162 §2.1.1: the hash of an empty tree is the hash of the empty string.
EMPTY_ROOT = hashlib.sha256(b"").digest()
HASH_SIZE = 32

# Every function reads complete subtrees through a NodeSource. A complete subtree is named (level,
# index): it covers leaves [index·2^level, (index+1)·2^level). Every node an RFC proof needs is
# either such a subtree or the tree's ragged right edge, which folds from at most log2(n) complete
# subtrees (`frontier`), so a proof at a million events reads a few dozen stored hashes.
NodeSource = Callable[[int, int], bytes]
"""(level, index) -> the hash of that complete subtree."""


class ProofFailed(ValueError):
    """A proof does not verify; the message says which check failed."""


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def event_entry(
    position: int, originator_id: str, originator_version: int, topic: str, state: bytes
) -> bytes:
    """The bytes a leaf commits to: one stored event and where it stands in the log. A proof of a
    leaf therefore proves the exact bytes of one event at one place in the log, not merely that
    some fact was recorded somewhere."""
    header = f"rollout-lineage/event\n{position}\n{originator_id}\n{originator_version}\n{topic}\n"
    return header.encode() + state


def entry_position(entry: bytes) -> int | None:
    """The position an `event_entry` names in its header; None for bytes that are not one."""
    kind, _, rest = entry.partition(b"\n")
    position, _, _ = rest.partition(b"\n")
    if kind != b"rollout-lineage/event" or not (position.isdigit() and len(position) <= 19):
        return None
    return int(position)


def _split(size: int) -> int:
    """The largest power of two smaller than size (size >= 2): RFC 9162's k."""
    return 1 << ((size - 1).bit_length() - 1)


def subtree_root(source: NodeSource, start: int, end: int) -> bytes:
    """MTH of leaves [start, end), where start is aligned as every RFC split leaves it."""
    size = end - start
    if size <= 0:
        raise ValueError(f"expected a non-empty range of leaves, found [{start}, {end})")
    if size & (size - 1) == 0:
        level = size.bit_length() - 1
        return source(level, start >> level)
    k = _split(size)
    return node_hash(subtree_root(source, start, start + k), subtree_root(source, start + k, end))


def root(source: NodeSource, size: int) -> bytes:
    return EMPTY_ROOT if size == 0 else subtree_root(source, 0, size)


def inclusion_proof(source: NodeSource, index: int, size: int) -> list[bytes]:
    """RFC 9162 §2.1.3.1 PATH(index, D[0:size]), leaf-side first."""
    if not 0 <= index < size:
        raise ValueError(f"expected a leaf index below the tree size {size}, found {index}")
    path: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(subtree_root(source, start + k, end))
            end = start + k
        else:
            path.append(subtree_root(source, start, start + k))
            start += k
    return path[::-1]


def consistency_proof(source: NodeSource, old_size: int, new_size: int) -> list[bytes]:
    """RFC 9162 §2.1.4.1 PROOF(old_size, D[0:new_size])."""
    if not 0 <= old_size <= new_size:
        raise ValueError(f"expected 0 <= old size <= new size, found {old_size} and {new_size}")
    if old_size in (0, new_size):
        return []
    path: list[bytes] = []
    start, end, whole = 0, new_size, True
    m = old_size
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            path.append(subtree_root(source, start + k, end))
            end = start + k
        else:
            path.append(subtree_root(source, start, start + k))
            start, m, whole = start + k, m - k, False
    if not whole:
        path.append(subtree_root(source, start, end))
    return path[::-1]


def _check_hashes(what: str, hashes: Iterable[bytes]) -> None:
    for h in hashes:
        if len(h) != HASH_SIZE:
            raise ProofFailed(f"expected {what} of {HASH_SIZE} bytes, found one of {len(h)}")


def verify_inclusion(
    index: int, size: int, leaf: bytes, proof: Sequence[bytes], expected_root: bytes
) -> None:
    """RFC 9162 §2.1.3.2; raises ProofFailed saying which check failed."""
    _check_hashes("hashes", [leaf, expected_root, *proof])
    if not 0 <= index < size:
        raise ProofFailed(f"expected a leaf index below the tree size {size}, found {index}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofFailed(f"the proof has {len(proof)} hashes, more than the tree needs")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofFailed(f"the proof has {len(proof)} hashes, fewer than the tree needs")
    if r != expected_root:
        raise ProofFailed(
            f"the proof leads to root {r.hex()}, not the expected {expected_root.hex()}"
        )


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """RFC 9162 §2.1.4.2 (with the trivial cases: equal sizes, an empty old tree)."""
    _check_hashes("hashes", [old_root, new_root, *proof])
    if not 0 <= old_size <= new_size:
        raise ProofFailed(
            f"expected the new tree ({new_size}) to be at least the old one ({old_size})"
        )
    if old_size == new_size or old_size == 0:
        if proof:
            raise ProofFailed(f"expected an empty proof between sizes {old_size} and {new_size}")
        if old_size == new_size and old_root != new_root:
            raise ProofFailed(
                f"at the same size {old_size} the roots "
                f"differ: {old_root.hex()} and {new_root.hex()}"
            )
        return
    if not proof:
        raise ProofFailed(f"expected a proof between sizes {old_size} and {new_size}, found none")
    path = [old_root, *proof] if old_size & (old_size - 1) == 0 else list(proof)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofFailed(f"the proof has {len(proof)} hashes, more than the trees need")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofFailed(f"the proof has {len(proof)} hashes, fewer than the trees need")
    if fr != old_root:
        raise ProofFailed(
            f"the first {old_size} leaves of the new tree hash to {fr.hex()}, "
            f"not to the old root {old_root.hex()}"
        )
    if sr != new_root:
        raise ProofFailed(f"the proof leads to root {sr.hex()}, not the new root {new_root.hex()}")


def from_mapping(nodes: dict[tuple[int, int], bytes]) -> NodeSource:
    """A NodeSource over hashes already in hand (a right edge, a batch's new nodes)."""

    def node(level: int, index: int) -> bytes:
        try:
            return nodes[(level, index)]
        except KeyError:
            raise LookupError(f"no complete subtree at level {level}, index {index}") from None

    return node


def frontier(size: int) -> list[tuple[int, int]]:
    """The complete subtrees (level, index) a tree of `size` leaves folds from, largest first: its
    right edge."""
    return [
        (level, (size >> level) - 1)
        for level in range(size.bit_length() - 1, -1, -1)
        if size >> level & 1
    ]


def new_nodes(
    size: int, leaves: Sequence[bytes], source: NodeSource
) -> list[tuple[int, int, bytes]]:
    """The complete subtrees (level, index, hash) that appending `leaves` to a tree of `size`
    completes.

    `source` needs to answer only for the complete subtrees of the current right edge.
    """
    made: dict[tuple[int, int], bytes] = {}

    def get(level: int, index: int) -> bytes:
        return made.get((level, index)) or source(level, index)

    for offset, leaf in enumerate(leaves):
        level, index, h = 0, size + offset, leaf
        made[(0, index)] = h
        while index & 1:
            h = node_hash(get(level, index - 1), h)
            level, index = level + 1, index >> 1
            made[(level, index)] = h
    return [(level, index, h) for (level, index), h in made.items()]


class RootBuilder:
    """The root of leaves given one at a time, keeping only the right edge (at most log2(n)
    hashes)."""

    def __init__(self) -> None:
        self.size = 0
        self._edge: list[bytes] = []  # complete subtrees, largest first

    def add(self, leaf: bytes) -> list[tuple[int, int, bytes]]:
        """Append a leaf; returns the complete subtrees (level, index, hash) above level 0 it
        completes."""
        h, below, level, completed = leaf, self.size, 0, []
        while below & 1:  # each trailing 1 bit of the old size is a subtree this leaf completes
            h = node_hash(self._edge.pop(), h)
            below >>= 1
            level += 1
            completed.append((level, self.size >> level, h))
        self._edge.append(h)
        self.size += 1
        return completed

    def root(self) -> bytes:
        if not self._edge:
            return EMPTY_ROOT
        r = self._edge[-1]
        for h in reversed(self._edge[:-1]):
            r = node_hash(h, r)
        return r


@dataclass
class MemoryTree:
    """A whole tree held in memory (a bundle's leaves, test vectors): every complete subtree
    kept."""

    nodes: dict[tuple[int, int], bytes] = field(default_factory=dict)
    size: int = 0

    def append(self, leaves: Sequence[bytes]) -> None:
        for level, index, h in new_nodes(self.size, leaves, self.node):
            self.nodes[(level, index)] = h
        self.size += len(leaves)

    def node(self, level: int, index: int) -> bytes:
        return from_mapping(self.nodes)(level, index)

    def root(self, size: int | None = None) -> bytes:
        return root(self.node, self.size if size is None else size)

"""The Merkle tree over the log, stored beside the events (SQLite or PostgreSQL), caught up on
demand. Derived from the events, like the chain's links, and checked against the chain as it is
extended, so nothing past a break in the chain is ever put into the tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...domain import merkle
from ...domain.errors import IntegrityFailure
from ...domain.integrity import ChainRow, Head, check_window
from ..chained_log import merge_chain
from ..store_port import evidence_tables

#: Level 0, the leaves, each with the position of its event; every other complete subtree is a row
#: of NODES, so a root, an inclusion or a consistency proof at any size reads a few dozen rows
#: however long the log is (`domain/merkle.py` says which).
LEAVES = "lineage_merkle_leaves"
NODES = "lineage_merkle_nodes"
#: Events read at a time (catching up, and the evidence code's other walks over the log) ...
PAGE = 5000
#: ... and no more than this in states at a time, wherever a page need not match another read row
#: for row: five thousand test reports of a few MB each would otherwise be read at once.
PAGE_BYTES = 64 * 2**20


def sqlite_ddl() -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {LEAVES} (idx INTEGER PRIMARY KEY, "
        "position INTEGER NOT NULL UNIQUE, leaf_hash BLOB NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {NODES} (level INTEGER NOT NULL, idx INTEGER NOT NULL, "
        "hash BLOB NOT NULL, PRIMARY KEY (level, idx)) WITHOUT ROWID",
    ]


def postgres_ddl(schema: str) -> list[str]:
    return [
        f'CREATE TABLE IF NOT EXISTS "{schema}".{LEAVES} (idx bigint PRIMARY KEY, '
        "position bigint NOT NULL UNIQUE, leaf_hash bytea NOT NULL)",
        f'CREATE TABLE IF NOT EXISTS "{schema}".{NODES} '
        f"(level smallint NOT NULL, idx bigint NOT NULL, "
        "hash bytea NOT NULL, PRIMARY KEY (level, idx))",
    ]


def leaf_of(row: tuple[Any, ...]) -> bytes:
    """The leaf hash of a log row (position, originator id hex, version, topic, state, ...)."""
    return merkle.leaf_hash(event_entry_of(row))


def event_entry_of(row: tuple[Any, ...]) -> bytes:
    position, originator_id, version, topic, state = row[:5]
    return merkle.event_entry(position, originator_id, version, topic, bytes(state))


class MerkleStore:
    """The stored tree of one recorder (either backend), read in one transaction per question."""

    def __init__(self, recorder: object) -> None:
        self.recorder = evidence_tables(recorder)
        self.leaves, self.nodes = self.recorder.table(LEAVES), self.recorder.table(NODES)

    def _rows(self, cursor: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.recorder.fetch(cursor, sql, params)

    def _read(self) -> Any:
        return self.recorder.transaction(commit=False)

    # --- reading ----------------------------------------------------------------------------------

    def size(self) -> int:
        with self._read() as c:
            return self._size(c)

    def _size(self, cursor: Any) -> int:
        # Leaves are numbered from 0 without gaps (each page is written whole), so the last index
        # says the size from the primary key alone, where count(*) would scan a million rows.
        found = self._rows(cursor, f"SELECT max(idx) FROM {self.leaves}")[0][0]
        return 0 if found is None else int(found) + 1

    def reader(self, cursor: Any) -> merkle.NodeSource:
        """A NodeSource over one open transaction; a missing node is a store that lost part of its
        tree."""

        def node(level: int, index: int) -> bytes:
            if level == 0:
                rows = self._rows(
                    cursor, f"SELECT leaf_hash FROM {self.leaves} WHERE idx = ?", (index,)
                )
            else:
                rows = self._rows(
                    cursor,
                    f"SELECT hash FROM {self.nodes} WHERE level = ? AND idx = ?",
                    (level, index),
                )
            if not rows:
                raise IntegrityFailure(
                    f"the stored Merkle tree has no node at "
                    f"level {level}, index {index}: part of it "
                    "was deleted",
                    hint="run `lineage verify`; if the log is intact, delete the "
                    "lineage_merkle_* rows and the tree is rebuilt from the events",
                )
            return bytes(rows[0][0])

        return node

    def root(self, size: int) -> bytes:
        with self._read() as c:
            return merkle.root(self.reader(c), size)

    def inclusion(self, index: int, size: int) -> tuple[bytes, list[bytes]]:
        """The leaf hash at index and its proof in the tree of `size`."""
        with self._read() as c:
            source = self.reader(c)
            return source(0, index), merkle.inclusion_proof(source, index, size)

    def consistency(self, old_size: int, new_size: int) -> list[bytes]:
        with self._read() as c:
            return merkle.consistency_proof(self.reader(c), old_size, new_size)

    def position_of(self, index: int) -> int | None:
        with self._read() as c:
            rows = self._rows(c, f"SELECT position FROM {self.leaves} WHERE idx = ?", (index,))
        return int(rows[0][0]) if rows else None

    def index_of(self, position: int) -> int | None:
        with self._read() as c:
            rows = self._rows(c, f"SELECT idx FROM {self.leaves} WHERE position = ?", (position,))
        return int(rows[0][0]) if rows else None

    def stored_nodes(self, wanted: list[tuple[int, int, bytes]]) -> dict[tuple[int, int], bytes]:
        """The stored hashes of these complete subtrees (level, index): one range query per
        level."""
        with self._read() as c:
            return self._stored_nodes(c, wanted)

    def _stored_nodes(
        self, cursor: Any, wanted: list[tuple[int, int, bytes]]
    ) -> dict[tuple[int, int], bytes]:
        ranges: dict[int, tuple[int, int]] = {}
        for level, index, _ in wanted:
            low, high = ranges.get(level, (index, index))
            ranges[level] = (min(low, index), max(high, index))
        found: dict[tuple[int, int], bytes] = {}
        for level, (low, high) in ranges.items():
            for idx, h in self._rows(
                cursor,
                f"SELECT idx, hash FROM {self.nodes} WHERE level = ? AND idx BETWEEN ? AND ?",
                (level, low, high),
            ):
                found[(level, int(idx))] = bytes(h)
        return found

    def leaf_rows(self, after_index: int, limit: int) -> list[tuple[int, int, bytes]]:
        """(index, position, leaf hash) after `after_index` in order: what `verify` compares with
        the events."""
        sql = (
            f"SELECT idx, position, leaf_hash FROM {self.leaves} WHERE idx > ? ORDER BY idx LIMIT ?"
        )
        return self.recorder.read(sql, (after_index, limit))

    # --- catching up ------------------------------------------------------------------------------

    def catch_up(self) -> int:
        """Extend the tree to the end of the log (checking each page against the chain); returns its
        size.

        Run whenever someone asks for the tree, from its last leaf, so a store written before the
        tree existed gains one on first use. Writers do not wait for it; two readers catching up at
        once write the same rows (inserts that find a row keep it)."""
        size, last_position, edge = self._edge()
        start = None
        # a last leaf whose link was deleted: no link hashes from "", so the page is a break
        if size:
            start = Head(last_position, self.recorder.chain_hash_at(last_position) or "")
            self._check_last_leaf(size - 1, last_position)
        while True:
            rows = self.recorder.log_rows(last_position, None, PAGE, PAGE_BYTES)
            if not rows:
                return size
            links = self.recorder.chain_links(last_position, rows[-1][0])
            start = check_window(start, self._chain_rows(rows, links))
            leaves = [leaf_of(row) for row in rows]
            made = merkle.new_nodes(size, leaves, merkle.from_mapping(edge))
            self._write(size, rows, leaves, made)
            size += len(rows)
            last_position = rows[-1][0]
            known = {(level, index): h for level, index, h in made} | edge
            edge = {c: known[c] for c in merkle.frontier(size)}

    def _check_last_leaf(self, index: int, position: int) -> None:
        """The tree grows from its last leaf: one for an event not yet in the log (planted ahead of
        it) would keep the real event's leaf out for good, and every later root would be over it.
        Two rows read."""
        with self._read() as c:
            stored = self.reader(c)(0, index)
        rows = self.recorder.log_rows(position - 1, position, 1)
        if not rows or rows[0][0] != position:
            # a removed tail (or a hole): the chain check of the next page and `verify` name it
            return
        if rows[0][4] is None or leaf_of(rows[0]) != stored:
            raise IntegrityFailure(
                f"leaf {index} of the stored Merkle tree, its "
                f"last, is for position {position}, but the "
                "log holds another event there: the tree was edited",
                hint="run `lineage verify`; if the log is intact, delete the "
                "lineage_merkle_* rows and the tree is rebuilt from the events",
            )

    @staticmethod
    def _chain_rows(
        rows: list[tuple[Any, ...]], links: list[tuple[Any, ...]]
    ) -> Iterator[ChainRow]:
        return merge_chain(iter(rows), iter(links))

    def _edge(self) -> tuple[int, int, dict[tuple[int, int], bytes]]:
        """(tree size, position of its last leaf, the complete subtrees of its right edge)."""
        with self._read() as c:
            size = self._size(c)
            if not size:
                return 0, 0, {}
            last = self._rows(c, f"SELECT position FROM {self.leaves} WHERE idx = ?", (size - 1,))
            source = self.reader(c)
            return size, int(last[0][0]), {xy: source(*xy) for xy in merkle.frontier(size)}

    def _write(
        self,
        size: int,
        rows: list[tuple[Any, ...]],
        leaves: list[bytes],
        made: list[tuple[int, int, bytes]],
    ) -> None:
        with self.recorder.transaction(commit=True) as c:
            self.recorder.insert(
                c,
                LEAVES,
                [
                    (size + i, row[0], leaf)
                    for i, (row, leaf) in enumerate(zip(rows, leaves, strict=True))
                ],
                keep_existing=True,
            )
            self.recorder.insert(
                c,
                NODES,
                [(level, index, h) for level, index, h in made if level > 0],
                keep_existing=True,
            )
            self._check_kept(c, size, rows, leaves, made)

    def _check_kept(
        self,
        cursor: Any,
        size: int,
        rows: list[tuple[Any, ...]],
        leaves: list[bytes],
        made: list[tuple[int, int, bytes]],
    ) -> None:
        """An insert that finds a row keeps it (another reader wrote the same one), so a row planted
        ahead of the tree (a node for a subtree not complete yet) would be kept over the one made,
        and signed into the next checkpoint: every row kept must be the one made. One range query
        per level."""
        stored_leaves = self._rows(
            cursor,
            f"SELECT idx, position, leaf_hash FROM {self.leaves} WHERE idx BETWEEN ? AND ?",
            (size, size + len(rows) - 1),
        )
        wanted = {
            (size + i, row[0], leaf) for i, (row, leaf) in enumerate(zip(rows, leaves, strict=True))
        }
        found = {(int(i), int(p), bytes(h)) for i, p, h in stored_leaves}
        different = sorted(i for i, _, _ in found - wanted)
        if different:
            raise _planted(0, different[0])
        inner = [node for node in made if node[0] > 0]
        stored = self._stored_nodes(cursor, inner)
        for level, index, h in inner:
            if stored.get((level, index)) != h:
                raise _planted(level, index)


def _planted(level: int, index: int) -> IntegrityFailure:
    return IntegrityFailure(
        f"the stored Merkle tree already held a node at "
        f"level {level}, index {index} before the events it "
        "hashes were added, and not their hash: it was planted, "
        "and proofs drawn through it would not be the log's",
        hint="run `lineage verify`; if the log is intact, delete the "
        "lineage_merkle_* rows and the tree is rebuilt from the events",
    )


def check_against_log(tree: MerkleStore) -> tuple[int, str] | None:
    """Recompute every leaf from the events and the root from the leaves, and compare them with the
    stored tree: (first bad position, what is wrong), or None when the tree is exactly the log's.

    The chain walk proves the events are linked; this proves the tree proofs are drawn from is
    theirs.
    """
    recorder, after_index, after_position = tree.recorder, -1, 0
    rebuilt = merkle.RootBuilder()
    while True:
        leaves = tree.leaf_rows(after_index, PAGE)
        if not leaves:
            break
        events = recorder.log_rows(after_position, leaves[-1][1], PAGE)
        padded = [*events, *[None] * (len(leaves) - len(events))]
        for (index, position, stored), event in zip(leaves, padded[: len(leaves)], strict=True):
            if event is None or event[0] != position:
                found = f"the event at position {event[0]}" if event else "no event"
                return position, (
                    f"leaf {index} of the Merkle tree is for position {position}, but the "
                    f"log holds {found} there; events were deleted, inserted or reordered"
                )
            if event[4] is None or leaf_of(event) != stored:
                return position, (
                    f"position {position}: the stored event does not match its leaf in the Merkle "
                    "tree; it was edited after the tree was built"
                )
        made = [node for _, _, stored in leaves for node in rebuilt.add(stored)]
        different = _first_different_node(tree, made)
        if different is not None:
            return leaves[-1][1], different
        after_index, after_position = leaves[-1][0], leaves[-1][1]
    if rebuilt.size and rebuilt.root() != tree.root(rebuilt.size):
        return after_position, (
            "the stored Merkle tree's inner nodes do not hash to its leaves; the tree was edited"
        )
    return _node_ahead(tree, rebuilt.size, after_position)


def _node_ahead(tree: MerkleStore, size: int, last_position: int) -> tuple[int, str] | None:
    """A stored node for a subtree the tree does not complete yet was planted: the next catch-up
    would keep it over the one it makes. One query (the highest index per level)."""
    with tree._read() as c:
        highest = tree._rows(c, f"SELECT level, max(idx) FROM {tree.nodes} GROUP BY level")
    for level, index in sorted((int(a), int(b)) for a, b in highest):
        if index >= size >> level:
            return last_position + 1, (
                f"the stored Merkle tree holds a node at level {level}, index {index}, for "
                f"leaves the log does not hold yet (it has {size}): it was planted there"
            )
    return None


def _first_different_node(tree: MerkleStore, made: list[tuple[int, int, bytes]]) -> str | None:
    """Every stored inner node, not only those on the right edge: a proof is drawn from any of
    them."""
    stored = tree.stored_nodes(made)
    for level, index, h in made:
        if stored.get((level, index)) != h:
            what = "missing" if (level, index) not in stored else "not the hash of its two children"
            return (
                f"the stored Merkle tree's node at level "
                f"{level}, index {index} is {what}; the tree was "
                "edited, and proofs drawn through that node would not verify"
            )
    return None

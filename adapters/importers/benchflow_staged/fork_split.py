"""Repeated forks at one node told apart (docs/benchflow-formats.md §13.5).

Children of several `branch()` calls at one node sit one after another in tree.json with the same
fork point; the split is the cut into forks that agrees with what the files still say (child counts,
raised children, ablation.json's arms, the node's V). Counting is capped and linear.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tree.py imports this module when it splits forks
    from .tree import TreeNode

Split = tuple[tuple[int, int], ...]  # half-open index ranges into the node's children
_NO_SPLIT: Split = ()
_MANY = 2


@dataclass
class NodeForks:
    """The children under one node that carry a delta, in attachment order, cut into runs that
    cannot share a fork (a different fork point, or a linear sibling between them)."""

    node: TreeNode
    children: list[TreeNode]
    run_of: list[int]  # index of the run each child belongs to
    known: frozenset[str]  # the children of the fork ablation.json describes, if at this node
    # the last fork may have failed after its children: a hold is left at the node, the report says
    # the branch raised, or the node has no V
    release_may_fail: bool

    def __post_init__(self) -> None:
        total = len(self.children)
        self._raised = [c.reward is None and c.unscored is None for c in self.children]
        self._next_raised = [total] * (total + 1)  # the first raised child at or after i
        for i in range(total - 1, -1, -1):
            self._next_raised[i] = i if self._raised[i] else self._next_raised[i + 1]
        self._sums, self._unscored = [0.0], [0]
        for child in self.children:
            self._sums.append(self._sums[-1] + (child.reward or 0.0))
            self._unscored.append(self._unscored[-1] + (child.unscored is not None))
        self._run_length = {run: self.run_of.count(run) for run in set(self.run_of)}
        known = [i for i, c in enumerate(self.children) if c.id in self.known]
        self._known = (known[0], known[-1] + 1) if known else None

    def raised(self, index: int) -> bool:
        return self._raised[index]

    def fork(self, start: int, end: int) -> bool:
        """Whether children[start:end] can be one fork's children: each `branch()` attaches `n >= 2`
        children, but a child that raised (neither `reward` nor `unscored`) ends its fork at once
        (the arms after it have no node), so it is the last of its fork, and a fork of one is a
        child that raised (or the only child in its run); ablation.json's arms name the children of
        the one fork `bench eval ablate` made, so a fork holds all of them or none."""
        if self.run_of[start] != self.run_of[end - 1] or self._next_raised[start] < end - 1:
            return False
        if (
            end - start < 2
            and not self._raised[end - 1]
            and self._run_length[self.run_of[start]] > 1
        ):
            return False
        if self._known is None:
            return True
        low, high = self._known
        return end <= low or start >= high or (start, end) == (low, high)

    def effect(self, start: int, end: int) -> tuple[str, float | None]:
        """What the fork leaves on the node: ('keep', None), ('pop', None) or ('set', V).

        A fork whose children all scored sets V to their mean, one with an unscored child pops it,
        one whose child raised leaves it as it was."""
        if self._next_raised[start] < end:  # a child raised: benchflow left before aggregating
            return "keep", None
        if self._unscored[end] - self._unscored[start]:
            return "pop", None
        if end - start <= 64:  # benchflow's aggregate is a plain sum, so the last digit agrees
            # No child here raised or is unscored (both returned above), so every reward is a
            # number.
            rewards = [c.reward or 0.0 for c in self.children[start:end]]
            return "set", sum(rewards) / len(rewards)
        return "set", (self._sums[end] - self._sums[start]) / (end - start)


def _prefixes(forks: NodeForks) -> list[tuple[int, Split]]:
    """For each i, how many ways (capped) children[:i] cut into forks, and one of them.

    Counts stop at `_MANY` (two is enough to tell one from many), so counting is linear per
    candidate final fork: a fork of a thousand children costs milliseconds, not an enumeration."""
    total = len(forks.children)
    ways: list[tuple[int, Split]] = [(1, _NO_SPLIT)] + [(0, _NO_SPLIT)] * total
    for end in range(1, total + 1):
        count, example = 0, _NO_SPLIT
        for start in range(end - 1, -1, -1):
            if forks.run_of[start] != forks.run_of[end - 1]:
                break
            if ways[start][0] and forks.fork(start, end):
                count += ways[start][0]
                example = example or (*ways[start][1], (start, end))
                if count >= _MANY:
                    break
        ways[end] = (min(count, _MANY), example)
    return ways


def _kept_suffixes(forks: NodeForks) -> list[tuple[int, Split]]:
    """For each j, how many ways (capped) children[j:] cut into forks that all leave V as it was.

    The last fork at the node counts as leaving V too when `release_may_fail`: its custody release
    failed (a hold left behind, or the report's error) or every child scored and the node has no V,
    a failure after the children, before V was set (the partial fork of docs/benchflow-formats.md
    §13.4)."""
    total = len(forks.children)
    ways: list[tuple[int, Split]] = [(0, _NO_SPLIT)] * total + [(1, _NO_SPLIT)]
    for start in range(total - 1, -1, -1):
        count, example = 0, _NO_SPLIT
        for end in range(start + 1, total + 1):
            if forks.run_of[start] != forks.run_of[end - 1]:
                break
            if not ways[end][0] or not forks.fork(start, end):
                continue
            if forks.effect(start, end)[0] == "keep" or (end == total and forks.release_may_fail):
                count += ways[end][0]
                example = example or ((start, end), *ways[end][1])
                if count >= _MANY:
                    break
        ways[start] = (min(count, _MANY), example)
    return ways


def _matches(node: TreeNode, effect: tuple[str, float | None]) -> bool:
    kind, value = effect
    if kind == "set":
        # has_value means tree.json holds a number there, so node.value is one as well
        return (
            node.value is not None
            and value is not None
            and math.isclose(node.value, value, abs_tol=1e-9)
        )
    return not node.has_value


def agreeing_splits(forks: NodeForks) -> list[Split]:
    """Up to two cuts of the children into forks that leave the node's V as tree.json shows it: the
    last fork that changed V matches it (a mean equal to V, or a pop where the node has none), every
    fork after it leaves V as it was, or no fork changed V and the node has none."""
    prefixes, suffixes = _prefixes(forks), _kept_suffixes(forks)
    found: dict[Split, None] = {}
    if suffixes[0][0] and not forks.node.has_value:  # no fork ever changed V
        found[suffixes[0][1]] = None
        if suffixes[0][0] >= _MANY:
            return [suffixes[0][1], ()]
    total = len(forks.children)
    for end in range(total, 0, -1):
        if not suffixes[end][0]:
            continue
        for start in range(end - 1, -1, -1):
            if forks.run_of[start] != forks.run_of[end - 1]:
                break
            if not prefixes[start][0] or not forks.fork(start, end):
                continue
            effect = forks.effect(start, end)
            if effect[0] == "keep" or not _matches(forks.node, effect):
                continue
            split = (*prefixes[start][1], (start, end), *suffixes[end][1])
            found[split] = None
            if prefixes[start][0] * suffixes[end][0] >= _MANY or len(found) >= _MANY:
                return [*found, ()][:_MANY]
    return list(found)


def split_forks(
    forks: NodeForks, runs: Sequence[list[TreeNode]], file: str
) -> list[list[TreeNode]]:
    """The node's forks, each a list of its children: the one split that agrees with the files.

    No agreeing split (a V no fork explains) falls back to one fork per run of children, whose
    closing then names the V that does not fit; several agreeing splits (two forks of two whose
    second pair has the mean of all four look exactly like one fork of four) also give one fork per
    run of siblings."""
    # nothing to split: a fork has two children unless one raised
    short = all(len(run) < 3 for run in runs)
    if short and not any(forks.raised(i) for i in range(len(forks.children))):
        return [list(run) for run in runs]
    splits = agreeing_splits(forks)
    if not splits:
        return [list(run) for run in runs]
    if len(splits) > 1:
        # The files cannot say which branch() call forked which child. One fork per run of siblings
        # is what a single branch() leaves, by far the common case (four children that all pass),
        # and what earlier versions recorded; the exports equal the files either way.
        return [list(run) for run in runs]
    return [forks.children[a:b] for a, b in splits[0]]

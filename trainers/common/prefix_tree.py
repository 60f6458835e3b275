"""The token prefix tree of a step's turns, and the order in which to run its pieces.

A GRPO step's turns repeat each other's prompts: every prompt starts with the same system
message, a group's G episodes see the same first page, and a later turn's prompt continues the
earlier one (the history grows at the end). Run as rows, each turn forwards its whole sequence;
run as a tree, each distinct prefix goes through the model once. :class:`PrefixTree` is the
radix tree (edges are maximal token runs, *segments*) of the turns' sequences, and
:func:`forward_order` groups its segments into forward passes: a segment runs after its parent,
on top of its ancestors' keys and values (:mod:`trainers.common.tree_forward`).

Only ``prompt + completion[:-1]`` enters the tree: the hidden state of the last generated token
predicts nothing the loss reads.

Why level by level with length buckets: one pass per segment would pay the fixed cost of a
pass (every weight read, and for training every weight gradient written) for segments of a few
tokens; one pass per depth pads every segment to the longest of its depth. Splitting each depth
into runs of similar length, each run paying :data:`PASS_COST` positions, sits between the two
(:func:`_cheapest_runs`, an exact partition of the sorted lengths). Before that,
:func:`fold_short` copies each shared segment too short to pay for a pass into its children
(the few tokens where a group's outputs agree before they part, say), which removes its pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

PASS_COST = 32
"""The fixed cost of one forward pass, in positions: a pass reads every weight (and in training
writes every weight gradient) however few its tokens. Measured for SmolLM2-135M on 2 CPU cores
(forward and backward of a 1-token pass against a 256-token one): about 37 positions with LoRA,
about 53 with full fine-tuning. Its exact value only moves where runs are cut and which
segments :func:`fold_short` folds."""


@dataclass
class Segment:
    """A maximal run of tokens that the same turns share, after its parent's tokens."""

    tokens: list[int]
    parent: int
    """Index of the parent segment in :attr:`PrefixTree.segments`; -1 for a root."""
    start: int
    """Position (in every turn through it) of the segment's first token."""
    children: dict[int, int] = field(default_factory=dict)
    """First token -> child segment index: :meth:`PrefixTree.build`'s index, empty in a
    folded tree (:func:`fold_short`), where siblings may start with the same token."""

    @property
    def end(self) -> int:
        """Position after the segment's last token."""
        return self.start + len(self.tokens)


@dataclass
class PrefixTree:
    """The radix tree of some turns' ``prompt + completion[:-1]`` token sequences."""

    segments: list[Segment]
    paths: list[list[int]]
    """Per turn, the segments its sequence runs through, root first."""
    lengths: list[int]
    """Per turn, the length of its sequence in the tree (prompt + completion - 1)."""

    @classmethod
    def build(cls, sequences: Sequence[Sequence[int]]) -> PrefixTree:
        """Insert each token sequence (a turn's ``prompt + completion[:-1]``)."""
        tree = cls(segments=[], paths=[], lengths=[])
        roots: dict[int, int] = {}
        for sequence in sequences:
            if not sequence:
                raise ValueError("a turn in the prefix tree needs at least one token")
            tree._insert(list(sequence), roots)
        # Paths are read off the finished tree: later inserts split segments of earlier paths.
        for sequence in sequences:
            tree.paths.append(tree._walk(list(sequence), roots))
            tree.lengths.append(len(sequence))
        return tree

    def _insert(self, tokens: list[int], roots: dict[int, int]) -> None:
        children, parent, at = roots, -1, 0
        while at < len(tokens):
            index = children.get(tokens[at])
            if index is None:
                children[tokens[at]] = len(self.segments)
                self.segments.append(Segment(tokens[at:], parent, at))
                return
            segment = self.segments[index]
            same = _common_length(segment.tokens, tokens, at)
            if same < len(segment.tokens) and at + same < len(tokens):
                self._split(index, same)  # the sequence leaves the segment inside it
            children, parent, at = segment.children, index, at + same

    def _walk(self, tokens: list[int], roots: dict[int, int]) -> list[int]:
        path: list[int] = []
        children, at = roots, 0
        while at < len(tokens):
            index = children[tokens[at]]
            path.append(index)
            segment = self.segments[index]
            at += len(segment.tokens)
            children = segment.children
        return path

    def _split(self, index: int, keep: int) -> None:
        """Cut segment ``index`` after ``keep`` tokens; the rest becomes its only child."""
        segment = self.segments[index]
        tail = Segment(segment.tokens[keep:], index, segment.start + keep, segment.children)
        tail_index = len(self.segments)
        self.segments.append(tail)
        for child in tail.children.values():
            self.segments[child].parent = tail_index
        segment.tokens = segment.tokens[:keep]
        segment.children = {tail.tokens[0]: tail_index}

    @property
    def num_positions(self) -> int:
        """Distinct positions: what the tree forwards without padding."""
        return sum(len(s.tokens) for s in self.segments)

    def ancestors(self, index: int) -> list[int]:
        """Segments above ``index``, root first."""
        chain = []
        parent = self.segments[index].parent
        while parent >= 0:
            chain.append(parent)
            parent = self.segments[parent].parent
        return chain[::-1]

    def locate(self, turn: int, position: int) -> tuple[int, int]:
        """(segment, offset) holding position ``position`` of turn ``turn``'s sequence."""
        for index in self.paths[turn]:
            segment = self.segments[index]
            if segment.start <= position < segment.end:
                return index, position - segment.start
        raise IndexError(f"position {position} is not in turn {turn} (length {self.lengths[turn]})")


def _common_length(segment: list[int], tokens: list[int], at: int) -> int:
    same = 0
    while same < len(segment) and at + same < len(tokens) and segment[same] == tokens[at + same]:
        same += 1
    return same


def fold_short(tree: PrefixTree, pass_cost: int = PASS_COST) -> PrefixTree:
    """Return ``tree`` with each shared segment too short for a pass of its own run in its children.

    A segment that k children branch from costs a pass (every weight read, and in training
    written back as gradients) for its few tokens; copied into each child it costs (k - 1) x its
    length positions more and no pass. Fold where the copies are cheaper, (k - 1) x length <
    ``pass_cost``, deepest segments first (a fold moves children up, so their parents' counts
    are current when their turn comes). A segment where a turn ends stays: that turn reads it.
    Every turn keeps its tokens at the same positions, on a path without the folded segments;
    ``tree`` itself is left as it is. ``pass_cost`` 0 folds nothing.
    """
    segments = [Segment(list(s.tokens), s.parent, s.start) for s in tree.segments]
    kids: dict[int, list[int]] = {}
    for index, segment in enumerate(segments):
        kids.setdefault(segment.parent, []).append(index)
    ends = {path[-1] for path in tree.paths}
    folded: set[int] = set()
    deepest_first = sorted(range(len(segments)), key=lambda i: -len(tree.ancestors(i)))
    for index in deepest_first:
        segment, below = segments[index], kids.get(index, [])
        if index in ends or not below or (len(below) - 1) * len(segment.tokens) >= pass_cost:
            continue
        for child in below:
            moved = segments[child]
            moved.tokens = segment.tokens + moved.tokens
            moved.start, moved.parent = segment.start, segment.parent
        siblings = kids[segment.parent]
        at = siblings.index(index)
        siblings[at : at + 1] = below
        folded.add(index)
    kept = [i for i in range(len(segments)) if i not in folded]
    renumber = {old: new for new, old in enumerate(kept)}
    renumber[-1] = -1
    for index in kept:
        segments[index].parent = renumber[segments[index].parent]
    return PrefixTree(
        segments=[segments[i] for i in kept],
        paths=[[renumber[i] for i in path if i not in folded] for path in tree.paths],
        lengths=list(tree.lengths),
    )


def forward_order(tree: PrefixTree, pass_cost: int = PASS_COST) -> list[list[int]]:
    """Group the segments into forward passes, each after the passes of its parents.

    Depth by depth (a segment's depth is its number of ancestors); inside a depth, segments
    sorted by length are cut into the runs that minimise padded positions plus ``pass_cost``
    per pass.
    """
    depths: dict[int, list[int]] = {}
    for index in range(len(tree.segments)):
        depths.setdefault(len(tree.ancestors(index)), []).append(index)
    order: list[list[int]] = []
    for depth in sorted(depths):
        ranked = sorted(depths[depth], key=lambda i: -len(tree.segments[i].tokens))
        lengths = [len(tree.segments[i].tokens) for i in ranked]
        order.extend([ranked[i] for i in run] for run in _cheapest_runs(lengths, pass_cost))
    return order


def padded_positions(tree: PrefixTree, pass_cost: int = PASS_COST) -> int:
    """Count the positions the passes of ``tree`` forward, padding included.

    The tree runs folded (:func:`fold_short`) in :func:`forward_order`, as
    :func:`trainers.common.tree_forward.tree_logits` runs it.
    """
    tree = fold_short(tree, pass_cost)
    total = 0
    for run in forward_order(tree, pass_cost):
        total += len(run) * max(len(tree.segments[i].tokens) for i in run)
    return total


def _cheapest_runs(lengths: list[int], pass_cost: int) -> list[range]:
    """Cut descending ``lengths`` into consecutive runs minimising sum(size x first) + cost each.

    Dynamic programming over cut points: best[i] is the cheapest cut of the first i lengths;
    a run lengths[j:i] costs (i - j) * lengths[j] + pass_cost (its first is its longest).
    """
    best = [0] * (len(lengths) + 1)
    cut = [0] * (len(lengths) + 1)
    for i in range(1, len(lengths) + 1):
        best[i], cut[i] = min((best[j] + (i - j) * lengths[j] + pass_cost, j) for j in range(i))
    runs: list[range] = []
    i = len(lengths)
    while i > 0:
        runs.append(range(cut[i], i))
        i = cut[i]
    return runs[::-1]

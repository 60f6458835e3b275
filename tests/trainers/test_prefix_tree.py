"""The prefix tree of a micro-batch's turns: every distinct prefix once (short shared ones copied
into their children when that saves a pass), passes in a valid order."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainers.common.prefix_tree import (
    PrefixTree,
    _cheapest_runs,
    fold_short,
    forward_order,
    padded_positions,
)

token_lists = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(token_lists)
def test_the_tree_holds_each_distinct_prefix_once_and_every_turn_reads_back(sequences):
    tree = PrefixTree.build(sequences)
    distinct = {tuple(s[: i + 1]) for s in sequences for i in range(len(s))}
    assert tree.num_positions == len(distinct)
    assert_reads_back(tree, sequences)


def assert_reads_back(tree: PrefixTree, sequences: list[list[int]]) -> None:
    for turn, sequence in enumerate(sequences):
        assert tree.lengths[turn] == len(sequence)
        for position, token in enumerate(sequence):
            segment, offset = tree.locate(turn, position)
            assert tree.segments[segment].tokens[offset] == token
            assert tree.segments[segment].start + offset == position
        path = tree.paths[turn]
        assert tree.ancestors(path[-1]) == path[:-1]


@settings(max_examples=200, deadline=None)
@given(token_lists, st.integers(0, 64))
def test_a_folded_tree_reads_every_turn_back_and_leaves_nothing_worth_folding(sequences, pass_cost):
    tree = PrefixTree.build(sequences)
    folded = fold_short(tree, pass_cost)
    assert_reads_back(folded, sequences)
    assert folded.num_positions >= tree.num_positions
    assert max(map(len, folded.paths)) <= max(map(len, tree.paths))
    ends = {path[-1] for path in folded.paths}
    for index, segment in enumerate(folded.segments):
        below = sum(s.parent == index for s in folded.segments)
        assert index in ends or not below or (below - 1) * len(segment.tokens) >= pass_cost
    if pass_cost == 0:
        assert [s.tokens for s in folded.segments] == [s.tokens for s in tree.segments]


def test_outputs_that_agree_on_a_few_tokens_do_not_cost_a_pass():
    page = [1, 2, 3, 4, 5, 6]
    turns = [page + [7, 8, 9], page + [7, 8, 10, 11], page + [12]]
    tree = PrefixTree.build(turns)  # page, then [7, 8] | [12], then [9] | [10, 11]
    folded = fold_short(tree, pass_cost=4)  # copying [7, 8] once costs 2 positions < 4
    assert folded.num_positions == tree.num_positions + 2
    assert len(forward_order(folded, 4)) == len(forward_order(tree, 4)) - 1 == 2
    assert padded_positions(tree, 4) == padded_positions(folded, 4)
    assert fold_short(tree, pass_cost=2).num_positions == tree.num_positions  # 2 is not < 2
    ended = PrefixTree.build([*turns, page + [7, 8]])  # a turn that ends after [7, 8] reads it
    assert fold_short(ended, pass_cost=4).num_positions == ended.num_positions


@settings(max_examples=200, deadline=None)
@given(token_lists, st.integers(0, 64))
def test_passes_run_every_segment_once_after_its_parent(sequences, pass_cost):
    tree = fold_short(PrefixTree.build(sequences), pass_cost)
    order = forward_order(tree, pass_cost)
    ran = [i for run in order for i in run]
    assert sorted(ran) == list(range(len(tree.segments)))
    done: set[int] = set()
    for run in order:
        assert all(tree.segments[i].parent in done | {-1} for i in run)
        done |= set(run)
    assert padded_positions(tree, pass_cost) >= tree.num_positions


def test_a_group_and_a_continued_prompt_share_their_prefixes():
    system, page = [1, 2, 3, 4], [5, 6, 7]
    first = system + page + [8, 9]  # a group's first turn: same page, different outputs
    other = system + page + [10]
    later = first + [11, 12]  # the next turn's prompt continues the first turn
    tree = PrefixTree.build([first, other, later, system + [13]])
    assert tree.num_positions == len(later) + 1 + 1
    assert tree.locate(2, 3) == tree.locate(3, 3)  # the system message is one segment
    assert tree.locate(0, 8) == tree.locate(2, 8)
    with pytest.raises(IndexError):
        tree.locate(1, 8)
    with pytest.raises(ValueError, match="at least one token"):
        PrefixTree.build([[1], []])


@pytest.mark.parametrize("lengths", [[9, 5, 5, 1], [300, 280, 6, 5, 2], [7], [4, 4, 4]])
@pytest.mark.parametrize("cost", [0, 3, 32])
def test_runs_are_the_cheapest_cut_of_the_sorted_lengths(lengths, cost):
    def price(runs):
        return sum(len(r) * lengths[r.start] + cost for r in runs)

    best = None
    for cuts in itertools.product([False, True], repeat=len(lengths) - 1):
        starts = [0] + [i + 1 for i, c in enumerate(cuts) if c]
        runs = [range(a, b) for a, b in zip(starts, starts[1:] + [len(lengths)], strict=True)]
        best = price(runs) if best is None else min(best, price(runs))
    runs = _cheapest_runs(lengths, cost)
    assert [i for r in runs for i in r] == list(range(len(lengths)))
    assert price(runs) == best

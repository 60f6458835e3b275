"""Optimizer steps of whole groups: a goal's turns stay together, so one step's prefix tree
encodes the group's shared prompt once (``GRPOConfig.whole_group_steps``)."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from skillrl_core.records import EpisodeRecord, TurnRecord
from trainers.update.batching import (
    TurnSample,
    build_samples,
    forwarded_positions,
    group_order,
    step_batches,
)


def turn(group: str, prompt: list[int], completion: list[int]) -> TurnSample:
    return TurnSample(prompt, completion, old_logprobs=None, advantage=1.0, group=group)


def runs_of(groups: list[str | None]) -> list[str | None]:
    """The distinct groups in the order they come, each run of equal names counted once."""
    return [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=8),
    size=st.integers(1, 4),
    window=st.integers(1, 3),
    count=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_each_group_comes_whole_and_every_turn_once(sizes, size, window, count, seed):
    samples = [
        turn(f"g{g}", [1, g, t % 3, t], [5 + t]) for g, n in enumerate(sizes) for t in range(n)
    ]
    shuffled = torch.Generator().manual_seed(1)
    mixed = [samples[i] for i in torch.randperm(len(samples), generator=shuffled).tolist()]
    cuts = [
        step_batches(
            mixed,
            size,
            window,
            torch.Generator().manual_seed(seed),
            index=i,
            count=count,
            whole_groups=True,
        )
        for i in range(count)
    ]
    steps = [step for step, _ in cuts[0]]
    assert all(len(step) <= size * window * count for step in steps)
    assert all([step for step, _ in cut] == steps for cut in cuts)  # every process alike
    ordered = [s for step in steps for s in step]
    assert sorted(map(id, ordered)) == sorted(map(id, samples))
    names = [s.group for s in ordered]
    assert sorted(runs_of(names)) == sorted(set(names))  # no group comes back after another
    for name in set(names):  # inside a group, prompt order
        prompts = [s.prompt_ids for s in ordered if s.group == name]
        assert prompts == sorted(prompts)
    for number, step in enumerate(steps):
        shares = [s for cut in cuts for batch in cut[number][1] for s in batch]
        assert sorted(map(id, shares)) == sorted(map(id, step))


def test_the_group_order_is_the_generators_and_changes_with_its_seed():
    samples = [turn(f"g{g}", [g, t], [9]) for g in range(8) for t in range(2)]
    first = [s.group for s in group_order(samples, torch.Generator().manual_seed(0))]
    again = [s.group for s in group_order(samples, torch.Generator().manual_seed(0))]
    other = [s.group for s in group_order(samples, torch.Generator().manual_seed(1))]
    assert first == again
    assert runs_of(first) != runs_of(other)


def test_turns_without_a_group_are_groups_of_their_own():
    samples = [turn(None, [1, 2], [3]), turn(None, [1, 2], [4]), turn("a", [1], [2])]
    ordered = group_order(samples, torch.Generator().manual_seed(0))
    assert sorted(map(id, ordered)) == sorted(map(id, samples))


def test_whole_groups_forward_fewer_positions_than_turns_shuffled_across_groups():
    # Four goals, four episodes each, two turns: every episode's first prompt is its goal's
    # page (64 tokens: a shared 32-token system part and 32 goal tokens); the second turn
    # continues it with the episode's own action and next page.
    samples = []
    for goal in range(4):
        page = list(range(1, 33)) + [100 + goal] * 32
        for episode in range(4):
            action = [200 + episode] * 4
            samples.append(turn(f"g{goal}", page, action))
            samples.append(turn(f"g{goal}", page + action + [300 + goal] * 40, [7, 8]))

    def positions(whole_groups: bool) -> int:
        cut = step_batches(
            samples,
            4,
            2,
            torch.Generator().manual_seed(3),
            share_prefix=True,
            whole_groups=whole_groups,
        )
        return sum(forwarded_positions(sum(share, []), share_prefix=True) for _, share in cut)

    whole, mixed = positions(True), positions(False)
    assert whole < 0.75 * mixed, (whole, mixed)


def test_samples_carry_their_episodes_group_or_the_episode_itself():
    def episode(group: str | None) -> EpisodeRecord:
        record = EpisodeRecord(
            env_id="webshop", goal_id="0", instruction="buy", category="c", group_id=group
        )
        record.turns.append(
            TurnRecord(
                turn=0,
                observation="page",
                available_actions=[],
                action="search[x]",
                action_valid=True,
                reward=0.0,
                prompt_token_ids=[1, 2],
                completion_token_ids=[3],
            )
        )
        return record

    grouped, alone = episode("c0-g3"), episode(None)
    samples = build_samples([grouped, alone], [[1.0], [-1.0]])
    assert [s.group for s in samples] == ["c0-g3", alone.episode_id]

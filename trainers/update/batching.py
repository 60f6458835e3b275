"""Turn samples and their tensors: which tokens a GRPO update sees, and how they are padded.

Each trainable turn becomes a :class:`TurnSample` (prompt ids, generated ids, the rollout's
log-probs, the turn's advantage). :func:`collate` left-pads ``prompt + completion`` so that every
completion ends at the last position; the model then only needs logits for the last
``max_completion + 1`` positions (``logits_to_keep``), which saves most of the vocabulary
projection on long skill-augmented prompts.

With ``share_prefix`` a step's samples are cut into micro-batches in prompt order (equal and
continuing prompts side by side) and the update forwards them as one prefix tree
(:mod:`trainers.update.tree_logprobs`), each distinct prefix once; :func:`tree_runs` says which
micro-batches of a step share one tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from skillrl_core.records import EpisodeRecord, TurnRecord
from trainers.common.prefix_tree import PrefixTree, fold_short


@dataclass
class TurnSample:
    """One generated turn to train on."""

    prompt_ids: list[int]
    completion_ids: list[int]
    old_logprobs: list[float] | None
    """The rollout policy's log-probs of ``completion_ids`` (None: recompute, ratio starts at 1)."""
    advantage: float
    group: str | None = None
    """The GRPO group (one goal's G episodes) the turn came from; None: a group of its own.
    :func:`step_batches` with ``whole_groups`` keeps a group's turns together."""

    @property
    def num_tokens(self) -> int:
        """Prompt plus completion length."""
        return len(self.prompt_ids) + len(self.completion_ids)


@dataclass
class TurnBatch:
    """Left-padded tensors of a micro-batch; completion tensors are right-aligned, width C."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    completion_ids: torch.Tensor
    """[B, C]: the generated tokens, right-aligned (pad where ``completion_mask`` is 0)."""
    completion_mask: torch.Tensor
    """[B, C]: 1 on generated tokens, 0 elsewhere (the loss mask)."""
    old_logprobs: torch.Tensor
    """[B, C]: rollout log-probs (0 where missing)."""
    has_old_logprobs: torch.Tensor
    """[B]: whether the rollout recorded log-probs for this sample."""
    advantages: torch.Tensor
    """[B]."""

    @property
    def num_completion_tokens(self) -> int:
        """Generated tokens in the batch."""
        return int(self.completion_mask.sum())

    @property
    def num_tokens(self) -> int:
        """Real tokens of the rows: the work a plain batch forwards (padding not counted)."""
        return int(self.attention_mask.sum())

    def to(self, device: torch.device | str) -> TurnBatch:
        """Move every tensor to ``device``."""
        return TurnBatch(**{k: v.to(device) for k, v in vars(self).items()})


def turn_left_out(turn: TurnRecord, advantage: float, *, keep_zero_advantage: bool) -> str:
    """Return why the update leaves ``turn`` out of the loss ("" when it trains on it)."""
    if not turn.prompt_token_ids or not turn.completion_token_ids:
        return "no recorded tokens (a scripted turn)"
    if turn.action_substituted:
        return "action substituted: its tokens did not earn its reward"
    if advantage == 0.0 and not keep_zero_advantage:
        return "zero advantage: no policy gradient"
    return ""


def build_samples(
    episodes: Sequence[EpisodeRecord],
    advantages: Sequence[Sequence[float]],
    *,
    keep_zero_advantage: bool = False,
) -> list[TurnSample]:
    """Turn every generated turn with token ids into a sample.

    Turns without recorded token ids (scripted agents) are skipped; so are turns whose executed
    action was substituted (their tokens did not produce the action that earned the reward) and
    turns with zero advantage unless ``keep_zero_advantage`` (they add no policy gradient, only KL).
    """
    samples: list[TurnSample] = []
    for episode, row in zip(episodes, advantages, strict=True):
        for turn, advantage in zip(episode.turns, row, strict=True):
            if turn_left_out(turn, advantage, keep_zero_advantage=keep_zero_advantage):
                continue
            old = turn.completion_logprobs
            if old is not None and len(old) != len(turn.completion_token_ids):
                old = None  # a mismatched record cannot serve as pi_old: recompute instead
            samples.append(
                TurnSample(
                    prompt_ids=list(turn.prompt_token_ids),
                    completion_ids=list(turn.completion_token_ids),
                    old_logprobs=list(old) if old is not None else None,
                    advantage=float(advantage),
                    group=episode.group,
                )
            )
    return samples


def collate(samples: Sequence[TurnSample], pad_token_id: int) -> TurnBatch:
    """Left-pad ``prompt + completion`` rows; right-align completions in a [B, C] block."""
    if not samples:
        raise ValueError("cannot collate an empty list of samples")
    length = max(s.num_tokens for s in samples)
    width = max(len(s.completion_ids) for s in samples)
    size = len(samples)
    input_ids = torch.full((size, length), pad_token_id, dtype=torch.long)
    attention = torch.zeros((size, length), dtype=torch.long)
    completion = torch.full((size, width), pad_token_id, dtype=torch.long)
    completion_mask = torch.zeros((size, width), dtype=torch.long)
    old = torch.zeros((size, width), dtype=torch.float32)
    has_old = torch.zeros(size, dtype=torch.bool)
    for row, sample in enumerate(samples):
        tokens = sample.prompt_ids + sample.completion_ids
        input_ids[row, length - len(tokens) :] = torch.tensor(tokens)
        attention[row, length - len(tokens) :] = 1
        n = len(sample.completion_ids)
        completion[row, width - n :] = torch.tensor(sample.completion_ids)
        completion_mask[row, width - n :] = 1
        if sample.old_logprobs is not None:
            old[row, width - n :] = torch.tensor(sample.old_logprobs)
            has_old[row] = True
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
    return TurnBatch(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        completion_ids=completion,
        completion_mask=completion_mask,
        old_logprobs=old,
        has_old_logprobs=has_old,
        advantages=torch.tensor([s.advantage for s in samples], dtype=torch.float32),
    )


def micro_batches(
    samples: Sequence[TurnSample],
    size: int,
    generator: torch.Generator | None = None,
    *,
    sort_window: int = 1,
) -> list[list[TurnSample]]:
    """Shuffle (with ``generator``) and cut into micro-batches of ``size`` samples.

    With ``sort_window`` = k > 1, each run of k micro-batches (one optimizer step under gradient
    accumulation of k) is sorted by length before it is cut, so rows of similar length share a
    micro-batch and padding shrinks. Which samples land in which optimizer step is still the
    shuffle's, so a step's summed gradient is unchanged for losses that sum over tokens or
    sequences (``dapo``, and ``grpo``/``dr_grpo`` with full micro-batches); only the order
    inside a step and the padding change. Equal prompts sort next to each other; a short
    micro-batch (``size`` not dividing the count) goes where it saves the most padding.
    """
    if sort_window < 1:
        raise ValueError(f"sort_window ({sort_window}) must be at least 1")
    shuffled = _shuffled(samples, generator)
    if sort_window == 1:
        return _chunks(shuffled, size)
    batches: list[list[TurnSample]] = []
    for step in _chunks(shuffled, size * sort_window):
        batches.extend(_sorted_cut(sorted(step, key=_length_key), size))
    return batches


def _shuffled(samples: Sequence[TurnSample], generator: torch.Generator | None) -> list[TurnSample]:
    return [samples[i] for i in torch.randperm(len(samples), generator=generator).tolist()]


def _chunks(items: list[TurnSample], size: int) -> list[list[TurnSample]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def step_batches(
    samples: Sequence[TurnSample],
    size: int,
    window: int,
    generator: torch.Generator | None = None,
    *,
    index: int = 0,
    count: int = 1,
    sort: bool = True,
    share_prefix: bool = False,
    whole_groups: bool = False,
) -> list[tuple[list[TurnSample], list[list[TurnSample]]]]:
    """Cut one pass over ``samples`` into optimizer steps; return (step, this process's share).

    Each optimizer step takes ``size * window * count`` samples of one shuffle (``generator``
    must be seeded alike in every process, so every process cuts the same steps). With
    ``whole_groups`` the shuffle orders groups, not turns (:func:`group_order`): a step holds
    whole groups, and a group larger than a step fills consecutive steps. Process
    ``index`` of ``count`` trains on every ``count``-th of them, cut into micro-batches of
    ``size`` (sorted by length first when ``sort``, as :func:`micro_batches` does). Every process
    gets the same number of steps, each with the whole step beside the share (the loss
    normaliser counts the step's tokens over all processes); a share may be empty when a step
    has fewer samples than processes. With ``count`` 1 the micro-batches are exactly
    :func:`micro_batches` ``(samples, size, generator, sort_window=window if sort else 1)``
    cut into runs of ``window``. With ``share_prefix`` (and ``sort``) a share is cut either by
    length or by prompt (equal and continuing prompts side by side), whichever forwards fewer
    positions when each micro-batch runs as a prefix tree (:func:`forwarded_positions`).
    """
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"process index ({index}) must be in [0, count={count})")
    span = size * window * count
    # One shuffle (of groups or of turns), cut into whole steps.
    ordered = group_order(samples, generator) if whole_groups else _shuffled(samples, generator)
    cut: list[tuple[list[TurnSample], list[list[TurnSample]]]] = []
    for step in _chunks(ordered, span):
        share = step[index::count]
        if sort and window > 1:
            batches = _cheapest_cut(share, size, share_prefix) if share else []
        else:
            batches = _chunks(share, size)
        cut.append((step, batches))
    return cut


def group_order(
    samples: Sequence[TurnSample], generator: torch.Generator | None = None
) -> list[TurnSample]:
    """Return ``samples`` group by group: the groups shuffled, each group's turns in prompt order.

    A group's turns side by side is what lets one step's prefix tree encode the group's shared
    prompt (its first page, the turns its episodes have in common) once, where a shuffle across
    groups leaves a step a turn or two of each group. verl's actor does the same: it cuts
    mini-batches from the batch in rollout order, a prompt's n responses next to each other.
    Inside a group, prompt order (continuing prompts after the prompt they continue) decides
    which turns share a step when the group is larger than one.
    """
    groups: dict[object, list[TurnSample]] = {}
    for number, sample in enumerate(samples):
        key = sample.group if sample.group is not None else ("ungrouped", number)
        groups.setdefault(key, []).append(sample)
    members = list(groups.values())
    order = torch.randperm(len(members), generator=generator).tolist()
    return [s for i in order for s in sorted(members[i], key=_prompt_key)]


def _length_key(sample: TurnSample) -> tuple[int, int, list[int]]:
    return (sample.num_tokens, len(sample.completion_ids), sample.prompt_ids)


def _prompt_key(sample: TurnSample) -> tuple[list[int], int]:
    return (sample.prompt_ids, sample.num_tokens)


def forwarded_positions(run: Sequence[TurnSample], share_prefix: bool = False) -> int:
    """Count the positions a micro-batch of ``run`` forwards.

    Rows x longest row (padding included); with ``share_prefix``, the positions of its prefix
    tree as it runs: each shared prefix once, except the short ones copied into their children
    (:func:`~trainers.common.prefix_tree.fold_short`).
    """
    if share_prefix:
        return fold_short(PrefixTree.build([tree_tokens(s) for s in run])).num_positions
    return len(run) * max(s.num_tokens for s in run)


def tree_tokens(sample: TurnSample) -> list[int]:
    """Return what a turn puts in the prefix tree: ``prompt + completion[:-1]``.

    The hidden state of the last generated token predicts nothing the loss reads.
    """
    return sample.prompt_ids + sample.completion_ids[:-1]


def tree_runs(batches: Sequence[Sequence[TurnSample]], budget: int) -> list[range]:
    """Cut a step's micro-batches into consecutive runs that each go through one prefix tree.

    A run grows while its tree's distinct positions stay within ``budget`` (the update passes
    what one plain micro-batch of the step's longest turns would forward, so a tree never holds
    more activations than the plain path's largest micro-batch); every run has at least one
    micro-batch.
    """
    runs: list[range] = []
    start = 0
    for end in range(1, len(batches) + 1):
        merged = [s for batch in batches[start:end] for s in batch]
        if end - start > 1 and forwarded_positions(merged, share_prefix=True) > budget:
            runs.append(range(start, end - 1))
            start = end - 1
    if batches:
        runs.append(range(start, len(batches)))
    return runs


def _cheapest_cut(share: list[TurnSample], size: int, share_prefix: bool) -> list[list[TurnSample]]:
    """Cut ``share`` sorted by length, or (``share_prefix``) by prompt if that forwards less."""
    by_length = _sorted_cut(sorted(share, key=_length_key), size)
    if not share_prefix:
        return by_length
    by_prompt = _sorted_cut(sorted(share, key=_prompt_key), size, share_prefix=True)

    def cost(runs: list[list[TurnSample]]) -> int:
        return sum(forwarded_positions(run, share_prefix) for run in runs)

    return by_prompt if cost(by_prompt) < cost(by_length) else by_length


def _sorted_cut(
    ordered: list[TurnSample], size: int, *, share_prefix: bool = False
) -> list[list[TurnSample]]:
    """Cut sorted samples into runs of ``size`` that forward the fewest positions.

    Runs of sorted samples are kept; only a short run (when ``size`` does not divide the
    count) has a choice of place: try each and keep the cheapest (:func:`forwarded_positions`).
    """
    short = len(ordered) % size
    places = range(len(ordered) // size + 1) if short else [0]
    best: list[list[TurnSample]] = []
    best_cost = None
    for place in places:
        sizes = [size] * (len(ordered) // size)
        if short:
            sizes.insert(place, short)
        runs, start = [], 0
        for n in sizes:
            runs.append(ordered[start : start + n])
            start += n
        cost = sum(forwarded_positions(run, share_prefix) for run in runs)
        if best_cost is None or cost < best_cost:
            best, best_cost = runs, cost
    return best


def padding_fraction(batches: Sequence[Sequence[TurnSample]]) -> float:
    """Share of the forwarded positions that are padding, over micro-batches ``batches``."""
    real = sum(s.num_tokens for batch in batches for s in batch)
    total = sum(len(batch) * max(s.num_tokens for s in batch) for batch in batches if batch)
    return 1.0 - real / total if total else 0.0

"""A GRPO step's log-probs from prefix trees: :class:`PrefixTreeForward`, a ``StepForward``.

:func:`tree_logprobs` runs consecutive micro-batches of a step as one prefix tree
(:func:`trainers.common.tree_forward.tree_logits`) and reads the log-prob of every generated
token: the same numbers as :func:`trainers.update.microbatch_loss.compute_logprobs` on each
batch, to float rounding. :class:`PrefixTreeForward` is the trainer's default way to forward a
step (:class:`~trainers.update.microbatch_loss.RowForward` runs plain rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from trl.trainer.utils import selective_log_softmax

from trainers.common.prefix_tree import PrefixTree
from trainers.common.tree_forward import tree_logits
from trainers.update.batching import TurnBatch, TurnSample, tree_runs, tree_tokens


def tree_logprobs(
    model: Any,
    batches: Sequence[TurnBatch],
    turns: Sequence[Sequence[TurnSample]],
    temperature: float = 1.0,
) -> list[torch.Tensor]:
    """Per-token log-probs [B, C] of each batch's completions, all batches in one tree.

    ``turns[i]`` are the samples ``batches[i]`` was collated from (the tree is built from their
    token lists, not read back from the batch's device tensors). The same numbers as
    :func:`trainers.update.microbatch_loss.compute_logprobs` on each batch (to float rounding);
    entries where ``completion_mask`` is 0 are 0.
    """
    sequences: list[list[int]] = []
    wanted: list[tuple[int, int]] = []
    for sample in (s for batch_turns in turns for s in batch_turns):
        turn = len(sequences)
        sequences.append(tree_tokens(sample))
        first = len(sample.prompt_ids) - 1  # the last prompt token predicts the first output
        wanted.extend((turn, first + j) for j in range(len(sample.completion_ids)))
    logits = tree_logits(model, PrefixTree.build(sequences), wanted)
    # Row-major over each batch's right-aligned completions: the order of ``wanted``.
    targets = [batch.completion_ids[batch.completion_mask.bool()] for batch in batches]
    # One [1, n, V] row: selective_log_softmax loops over the leading dimension on CPU.
    picked = selective_log_softmax(
        logits.float().unsqueeze(0), torch.cat(targets).unsqueeze(0), temperature
    )[0]
    out, done = [], 0
    for batch, target in zip(batches, targets, strict=True):
        mask = batch.completion_mask.bool()
        mine = picked[done : done + len(target)]
        done += len(target)
        out.append(mine.new_zeros(mask.shape).masked_scatter(mask, mine))
    return out


class PrefixTreeForward:
    """A step's micro-batches as prefix trees (:func:`tree_logprobs`), a ``StepForward``.

    Runs of consecutive micro-batches share one tree, each within the positions of the step's
    largest plain micro-batch (:func:`~trainers.update.batching.tree_runs`), so a tree needs no more
    activation memory than the plain rows.
    """

    share_prefix = True

    def runs(self, shares: Sequence[Sequence[TurnSample]], budget: int) -> list[range]:
        """Return consecutive runs of micro-batches, each within ``budget`` positions."""
        return tree_runs(shares, budget)

    def logprobs(
        self,
        model: Any,
        batches: Sequence[TurnBatch],
        shares: Sequence[Sequence[TurnSample]],
        temperature: float,
    ) -> list[torch.Tensor]:
        """Return the log-probs of every batch from one tree."""
        return tree_logprobs(model, batches, shares, temperature)

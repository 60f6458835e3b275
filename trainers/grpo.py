"""The GRPO update over recorded multi-turn episodes, on a Hugging Face causal LM.

Phases: :mod:`trainers.microbatch_loss` (per-token log-probs of the generated tokens and the
clipped objective of ``trainers.loss`` on one micro-batch), :meth:`GRPOTrainer.train_step`
(micro-batches, prefix trees, gradient accumulation, optimizer steps under ``accelerate``).

Why not TRL's ``GRPOTrainer``: it generates the completions itself and gives each completion one
scalar reward, and its multi-turn path needs a tool-calling chat template (SmolLM2 has none). Our
samples are *turns* of episodes that the rollout engine already played with per-turn skill
retrieval, each with its own advantage (episode + step level). So we keep TRL's vocabulary
(``GRPOConfig`` field names, loss types, the k3 KL) and its ``selective_log_softmax``, and write
the update loop ourselves. It runs under ``accelerate.Accelerator``: on CPU as is; with
``accelerate launch`` / ``torchrun`` every process cuts the same optimizer steps (of
``per_device_train_batch_size * gradient_accumulation_steps * processes`` turns), trains on its
share of each, and DDP averages the gradients. The ``dapo`` normaliser is the step's token count
over all processes, so with the same global step the update is the single-process one (up to
float summation order); ``grpo`` / ``dr_grpo`` average per process's micro-batches first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from accelerate import Accelerator

from skillrl_core.records import EpisodeRecord
from trainers.batching import (
    TurnBatch,
    TurnSample,
    build_samples,
    collate,
    step_batches,
    tree_runs,
)
from trainers.config import GRPOConfig
from trainers.loss import LossOutput
from trainers.microbatch_loss import compute_loss, reference_policy
from trainers.tree_forward import tree_logprobs

logger = logging.getLogger(__name__)


@dataclass
class StepMetrics:
    """What one :meth:`GRPOTrainer.train_step` did (means over micro-batches)."""

    samples: int = 0
    """Turns trained on (zero-advantage turns are skipped when beta is 0)."""
    substituted_turns: int = 0
    """Generated turns left out because their executed action was not what their tokens wrote
    (``TurnRecord.action_substituted``)."""
    completion_tokens: int = 0
    total_tokens: int = 0
    """Prompt + completion tokens forwarded, over all iterations."""
    optimizer_steps: int = 0
    loss: float = 0.0
    policy_loss: float = 0.0
    kl: float = 0.0
    clip_low_fraction: float = 0.0
    clip_high_fraction: float = 0.0
    ratio_mean: float = 1.0
    grad_norm: float = 0.0
    logprob_gap_mean: float = 0.0
    """Mean |rollout log-prob - recomputed log-prob| on generated tokens, before any step."""
    logprob_gap_max: float = 0.0
    seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        """Forwarded (prompt + completion) tokens per second of update time."""
        return self.total_tokens / self.seconds if self.seconds > 0 else 0.0


class GRPOTrainer:
    """Owns the trainable model, its optimizer and the optional reference model."""

    def __init__(
        self,
        model: Any,
        config: GRPOConfig,
        *,
        pad_token_id: int,
        accelerator: Accelerator | None = None,
        seed: int = 0,
    ) -> None:
        self.config = config
        self.pad_token_id = pad_token_id
        self.accelerator = accelerator or Accelerator(cpu=not torch.cuda.is_available())
        if config.use_peft:
            model = apply_lora(model, config)
        self.ref_model = None
        if config.beta > 0 and not config.use_peft:
            self.ref_model = _frozen_copy(model)
        params = [p for p in model.parameters() if p.requires_grad]
        # The fused kernel (what HF Trainer picks by default since torch 2.8): one pass over all
        # parameters instead of a loop of small ops. On CPU, 135M parameters (full fine-tuning)
        # take about a fifth of the looped step; updates agree to float rounding (1 ulp).
        optimizer = torch.optim.AdamW(
            params, lr=config.learning_rate, weight_decay=config.weight_decay, fused=True
        )
        self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        self._prepared = self.model
        if config.torch_compile:
            # dynamic: every micro-batch has its own length; one graph serves them all.
            # unwrapped_model (checkpoints, weight sync, rollouts) is the module without it.
            self.model = torch.compile(self.model, dynamic=True)
        self.generator = torch.Generator().manual_seed(seed)
        self.sort_by_length = True
        """Order each optimizer step's samples before cutting micro-batches: by length, or with
        ``share_prefix`` by prompt when that forwards fewer positions (``step_batches``). Less
        padding, same step gradient for ``dapo``; False (shuffled) is the benchmarks' baseline."""
        self.share_prefix = (
            config.share_prompt_prefix
            and self.accelerator.num_processes == 1
            and not config.torch_compile
        )
        """Run each step's turns as prefix trees (``GRPOConfig.share_prompt_prefix``; off under
        DDP, which expects one forward per backward, and under ``torch_compile``)."""
        self.head_only = True
        """Run the LM head only where a generated token is predicted (``compute_logprobs``;
        False, the last C + 1 positions of every row, is the benchmarks' baseline)."""
        self.on_progress: Callable[[int, int], None] | None = None
        """Called as ``on_progress(done, total)`` after every optimizer step (progress bars)."""

    @property
    def unwrapped_model(self) -> Any:
        """The model without accelerate's wrappers (a PeftModel when training LoRA)."""
        return self.accelerator.unwrap_model(self._prepared)

    def train_step(
        self, episodes: Sequence[EpisodeRecord], advantages: Sequence[Sequence[float]]
    ) -> StepMetrics:
        """Run ``num_iterations`` passes of clipped policy-gradient steps over the turns.

        Under a launcher every process gets the same ``episodes`` and trains on its share of
        each optimizer step (:func:`~trainers.batching.step_batches`); DDP averages the
        gradients. ``samples`` counts every process's turns; tokens, losses and the log-prob
        gap are this process's share.
        """
        samples = build_samples(
            episodes, advantages, keep_zero_advantage=self.config.trains_zero_advantage_turns
        )
        substituted = sum(
            bool(t.action_substituted and t.completion_token_ids)
            for episode in episodes
            for t in episode.turns
        )
        metrics = StepMetrics(samples=len(samples), substituted_turns=substituted)
        if not samples:
            logger.info("no turn with a non-zero advantage: skipping the update")
            return metrics
        acc = self.accelerator
        started = time.perf_counter()
        self.model.train()
        outs: list[LossOutput] = []
        gaps: list[torch.Tensor] = []
        size = self.config.per_device_train_batch_size
        window = self.config.gradient_accumulation_steps
        per_pass = math.ceil(len(samples) / (size * window * acc.num_processes))
        total_steps = per_pass * self.config.num_iterations
        for iteration in range(self.config.num_iterations):
            steps = step_batches(
                samples,
                size,
                window,
                self.generator,
                index=acc.process_index,
                count=acc.num_processes,
                sort=self.sort_by_length,
                share_prefix=self.share_prefix,
                whole_groups=self.config.whole_group_steps,
            )
            for number, (step, batches) in enumerate(steps):
                group = [collate(b, self.pad_token_id).to(acc.device) for b in batches]
                # The gap is measured before the first optimizer step, against pi_old itself.
                first = iteration == 0 and number == 0
                outs.extend(self._accumulate(group, batches, step, gaps if first else None))
                metrics.grad_norm = self._optimizer_step()
                metrics.optimizer_steps += 1
                if self.on_progress is not None:
                    self.on_progress(metrics.optimizer_steps, total_steps)
                metrics.completion_tokens += sum(b.num_completion_tokens for b in group)
                metrics.total_tokens += sum(b.num_tokens for b in group)
        _average_into(metrics, outs)
        _report_gap(metrics, gaps, self.config.logprob_gap_warn)
        metrics.seconds = time.perf_counter() - started
        return metrics

    def forward_runs(self, batches: list[list[TurnSample]]) -> list[range]:
        """Which micro-batches of a step go through one forward: a prefix tree each, or alone.

        A tree holds at most the positions that one plain micro-batch of the step's longest
        turns forwards (:func:`~trainers.batching.tree_runs`), so it needs no more activation
        memory than the plain path.
        """
        if not self.share_prefix or not batches:
            return [range(i, i + 1) for i in range(len(batches))]
        longest = max(s.num_tokens for batch in batches for s in batch)
        return tree_runs(batches, self.config.per_device_train_batch_size * longest)

    def _accumulate(
        self,
        group: list[TurnBatch],
        shares: list[list[TurnSample]],
        step: Sequence[TurnSample],
        gaps: list[torch.Tensor] | None,
    ) -> list[LossOutput]:
        """Backward every micro-batch of one optimizer step; collect rollout/recompute gaps.

        ``group[i]`` is collated from ``shares[i]``. Micro-batches that share one forward
        (:meth:`forward_runs`) have their losses summed into one backward; a micro-batch's loss
        is the same either way.

        ``step`` is the whole optimizer step over all processes (``group`` is this process's
        share of it): every process holds it, so the ``dapo`` normaliser (the step's completion
        tokens over all processes) needs no communication. DDP averages gradients over the P
        processes; scaling the normaliser by 1/P keeps the step's loss "sum over all its tokens
        / all its tokens", the single-process loss. Only the last backward of a step
        synchronises (``no_sync`` before it), so processes whose shares have different numbers
        of micro-batches still meet once per step; a process with an empty share joins that
        meeting with a zero-weighted backward.
        """
        acc = self.accelerator
        num_tokens = sum(len(s.completion_ids) for s in step) / acc.num_processes
        if not group:  # fewer samples in this step than processes: contribute zero gradient
            return self._zero_backward(step, num_tokens)
        outs = []
        runs = self.forward_runs(shares)
        for number, run in enumerate(runs):
            last = number == len(runs) - 1
            batches = [group[i] for i in run]
            with self._autocast():
                logprobs, refs = self._run_logprobs(batches, [shares[i] for i in run])
            # no_sync is DDP's (the prepared module), also when a compiled wrapper sits on it
            with contextlib.nullcontext() if last else acc.no_sync(self._prepared):
                total = None
                for batch, logprob, ref in zip(batches, logprobs, refs, strict=True):
                    with self._autocast():
                        out, fresh = compute_loss(
                            self.model,
                            batch,
                            self.config,
                            num_tokens=num_tokens,
                            ref_model=self.ref_model,
                            head_only=self.head_only,
                            logprobs=logprob,
                            ref_logprobs=ref,
                        )
                    loss = out.loss if self.config.loss_type == "dapo" else out.loss / len(group)
                    total = loss if total is None else total + loss
                    outs.append(dataclasses.replace(out, loss=out.loss.detach()))
                    if gaps is not None:
                        _collect_gap(gaps, batch, fresh)
                acc.backward(total)
        return outs

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast over a forward pass when ``GRPOConfig.bf16`` (backward runs outside).

        torch's own context, not accelerate's ``mixed_precision``: that one is process-wide
        state (every trainer in a process would share it) and wraps only the model's
        ``forward``, which the prefix-tree pass goes around.
        """
        if not self.config.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.accelerator.device.type, dtype=torch.bfloat16)

    def _run_logprobs(
        self, batches: list[TurnBatch], turns: list[list[TurnSample]]
    ) -> tuple[list[torch.Tensor | None], list[torch.Tensor | None]]:
        """Log-probs (and reference log-probs when beta > 0) of ``batches``, or Nones.

        With ``share_prefix`` they come from one prefix tree over all ``batches`` (collated from
        ``turns``); otherwise None, and :func:`compute_loss` runs each batch as plain rows.
        """
        nothing: list[torch.Tensor | None] = [None] * len(batches)
        if not self.share_prefix:
            return nothing, nothing

        def run(model: Any) -> list[torch.Tensor]:
            return tree_logprobs(model, batches, turns, self.config.temperature)

        logprobs: list[torch.Tensor | None] = list(run(self.model))
        if self.config.beta <= 0:
            return logprobs, nothing
        with torch.no_grad():
            refs = reference_policy(self.model, self.ref_model, run)
        return logprobs, list(refs)

    def _zero_backward(self, step: Sequence[TurnSample], num_tokens: float) -> list[LossOutput]:
        """Take part in the step's gradient averaging with a zero gradient (an empty share)."""
        batch = collate(step[:1], self.pad_token_id).to(self.accelerator.device)
        with self._autocast():
            out, _ = compute_loss(
                self.model, batch, self.config, num_tokens=num_tokens, ref_model=self.ref_model
            )
        self.accelerator.backward(out.loss * 0.0)
        return []

    def _optimizer_step(self) -> float:
        norm = 0.0
        if self.config.max_grad_norm > 0:
            params = [p for p in self.model.parameters() if p.requires_grad]
            total = self.accelerator.clip_grad_norm_(params, self.config.max_grad_norm)
            norm = float(total) if total is not None else 0.0
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm if math.isfinite(norm) else float("nan")


def _collect_gap(gaps: list[torch.Tensor], batch: TurnBatch, fresh: torch.Tensor) -> None:
    """Add |rollout - recomputed| log-prob of the batch's tokens that have rollout log-probs."""
    chosen = batch.completion_mask.bool() & batch.has_old_logprobs.unsqueeze(1)
    if chosen.any():
        gaps.append((batch.old_logprobs - fresh)[chosen].abs().cpu())


def _average_into(metrics: StepMetrics, outs: list[LossOutput]) -> None:
    if not outs:
        return
    metrics.loss = sum(float(o.loss.detach()) for o in outs) / len(outs)
    for key in ("policy_loss", "kl", "clip_low_fraction", "clip_high_fraction", "ratio_mean"):
        setattr(metrics, key, sum(getattr(o, key) for o in outs) / len(outs))


def _report_gap(metrics: StepMetrics, gaps: list[torch.Tensor], warn_above: float) -> None:
    if not gaps:
        return
    every = torch.cat(gaps)
    metrics.logprob_gap_mean = float(every.mean())
    metrics.logprob_gap_max = float(every.max())
    if metrics.logprob_gap_mean > warn_above:
        logger.warning(
            "rollout and training log-probs differ by %.3f nats per token on average "
            "(max %.3f): check the sampling temperature and chat template",
            metrics.logprob_gap_mean,
            metrics.logprob_gap_max,
        )


def apply_lora(model: Any, config: GRPOConfig) -> Any:
    """Wrap ``model`` in a peft LoRA adapter (base weights frozen, adapters injected in place)."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(config.lora_target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def _frozen_copy(model: Any) -> Any:
    import copy

    ref = copy.deepcopy(model)
    ref.eval()
    for param in ref.parameters():
        param.requires_grad_(False)
    return ref

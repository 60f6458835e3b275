"""The GRPO update over recorded multi-turn episodes, on a Hugging Face causal LM.

:meth:`GRPOTrainer.train_step` reads top to bottom: the rollout batch becomes turn samples with
their advantages (``trainers.update.batching.build_samples``), :meth:`~GRPOTrainer.optimizer_steps`
cuts them into optimizer steps of micro-batches, :meth:`~GRPOTrainer.accumulate_gradients`
gets each micro-batch's log-probs from the trainer's
:class:`~trainers.update.microbatch_loss.StepForward` (prefix trees by default,
:class:`~trainers.update.tree_logprobs.PrefixTreeForward`; plain rows under DDP and
``torch.compile``), applies the clipped loss (``trainers.update.microbatch_loss``,
``trainers.update.loss``) and backpropagates, and :meth:`~GRPOTrainer.optimizer_step` clips and
steps.

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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from accelerate import Accelerator
from trl.trainer.utils import disable_dropout_in_model

from skillrl_core.records import EpisodeRecord
from trainers.common.lora import top_layers
from trainers.update.batching import (
    TurnBatch,
    TurnSample,
    build_samples,
    collate,
    forwarded_positions,
    step_batches,
)
from trainers.update.config import GRPOConfig
from trainers.update.loss import LossOutput
from trainers.update.microbatch_loss import (
    RowForward,
    StepForward,
    microbatch_loss,
    reference_policy,
)
from trainers.update.tree_logprobs import PrefixTreeForward

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
    forwarded_positions: int = 0
    """Positions the update's forward passes computed, over all iterations: each prefix a
    tree shares counted once, plain rows with their padding
    (:func:`~trainers.update.batching.forwarded_positions`). Its compute is about
    (2 forward + 2 backward) x the linear weights the passes cross, per position."""
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


@contextlib.contextmanager
def float32_matmul_precision(device: torch.device, tf32: bool) -> Iterator[None]:
    """Let float32 products on ``device`` use TF32 while the block runs (``GRPOConfig.tf32``).

    torch's setting is process-wide, so it is set for the update and put back after: a policy
    that generates or scores in the same process keeps its own precision. Only on CUDA: a CPU
    has no TF32 and its products stay full float32.
    """
    if not (tf32 and device.type == "cuda"):
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@contextlib.contextmanager
def frozen_weights_in(model: torch.nn.Module, dtype: torch.dtype | None) -> Iterator[None]:
    """Give the frozen float32 weights of ``model``'s linear layers a ``dtype`` copy meanwhile.

    Why: bf16 autocast casts a float32 weight to bf16 at every use, and caches the cast only for
    a leaf that requires grad. A LoRA update's base weights are frozen, so every forward pass
    (a prefix tree runs many) cast all of them again: on a 2-core CPU the casts cost about what
    the bf16 products saved. Cast once here, the products read the copies; the float32 weights
    are put back after, untouched (the evaluation and the checkpoints use them). ``None``, or a
    model with no frozen float32 linear weight (full fine-tuning), changes nothing.
    """
    if dtype is None:
        yield
        return
    swapped: list[tuple[torch.nn.Linear, torch.nn.Parameter]] = []
    for module in model.modules():
        weight = getattr(module, "weight", None)
        frozen = isinstance(weight, torch.nn.Parameter) and not weight.requires_grad
        if isinstance(module, torch.nn.Linear) and frozen and weight.dtype == torch.float32:
            swapped.append((module, weight))
            module.weight = torch.nn.Parameter(weight.detach().to(dtype), requires_grad=False)
    try:
        yield
    finally:
        for module, weight in swapped:
            module.weight = weight


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
        forward: StepForward | None = None,
    ) -> None:
        self.config = config
        self.pad_token_id = pad_token_id
        self.accelerator = accelerator or Accelerator(cpu=not torch.cuda.is_available())
        # The model's own dropout (GPT-2's 0.1, where a config has it) is turned off, as TRL's
        # disable_dropout does: the ratio compares the trained policy with the one that sampled,
        # which ran in eval mode. LoRA's dropout, added below, stays as configured.
        disable_dropout_in_model(model)
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
        self.forward: StepForward = forward or default_forward(
            config, self.accelerator.num_processes
        )
        """How each step's micro-batches go through the model (``forward=`` replaces it)."""
        self.on_progress: Callable[[int, int], None] | None = None
        """Called as ``on_progress(done, total)`` after every optimizer step (progress bars)."""
        self.on_turns: Callable[[int, int], None] | None = None
        """Called as ``on_turns(done, total)`` after every backward: this process's turns
        trained so far in the update, over all its passes (a counter inside a long step)."""
        self._turns_done = self._turns_total = 0
        self._positions = 0
        """Positions forwarded since the current ``train_step`` began (``StepMetrics``)."""

    @property
    def unwrapped_model(self) -> Any:
        """The model without accelerate's wrappers (a PeftModel when training LoRA)."""
        return self.accelerator.unwrap_model(self._prepared)

    def train_step(
        self, episodes: Sequence[EpisodeRecord], advantages: Sequence[Sequence[float]]
    ) -> StepMetrics:
        """Run ``num_iterations`` passes of clipped policy-gradient steps over the turns.

        Under a launcher every process gets the same ``episodes`` and trains on its share of
        each optimizer step (:func:`~trainers.update.batching.step_batches`); DDP averages the
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
        started = time.perf_counter()
        self.model.train()
        outs: list[LossOutput] = []
        gaps: list[torch.Tensor] = []
        total_steps = self.steps_per_pass(len(samples)) * self.config.num_iterations
        # Every pass cut up front (the generator is drawn in the same order), so the turn
        # counter knows its total from the start.
        passes = [self.optimizer_steps(samples) for _ in range(self.config.num_iterations)]
        self._turns_total = sum(len(s) for steps in passes for _, shares in steps for s in shares)
        self._turns_done = 0
        self._positions = 0
        frozen_dtype = torch.bfloat16 if self.config.bf16 else None
        with (
            float32_matmul_precision(self.device, self.config.tf32),
            frozen_weights_in(self.model, frozen_dtype),
        ):
            for iteration, steps in enumerate(passes):
                for number, (step, shares) in enumerate(steps):
                    batches = [collate(s, self.pad_token_id).to(self.device) for s in shares]
                    # The gap is measured before the first optimizer step, against pi_old.
                    first = iteration == 0 and number == 0
                    outs += self.accumulate_gradients(
                        batches, shares, step, gaps if first else None
                    )
                    metrics.grad_norm = self.optimizer_step()
                    metrics.optimizer_steps += 1
                    if self.on_progress is not None:
                        self.on_progress(metrics.optimizer_steps, total_steps)
                    metrics.completion_tokens += sum(b.num_completion_tokens for b in batches)
                    metrics.total_tokens += sum(b.num_tokens for b in batches)
        metrics.forwarded_positions = self._positions
        _average_into(metrics, outs)
        _report_gap(metrics, gaps, self.config.logprob_gap_warn)
        metrics.seconds = time.perf_counter() - started
        return metrics

    @property
    def device(self) -> torch.device:
        """Where the trained model runs."""
        return self.accelerator.device

    def steps_per_pass(self, samples: int) -> int:
        """Optimizer steps one pass over ``samples`` turns takes (over all processes)."""
        size = self.config.per_device_train_batch_size * self.config.gradient_accumulation_steps
        return math.ceil(samples / (size * self.accelerator.num_processes))

    def optimizer_steps(
        self, samples: Sequence[TurnSample]
    ) -> list[tuple[list[TurnSample], list[list[TurnSample]]]]:
        """Cut one pass over ``samples`` into optimizer steps.

        Each is (the whole step, this process's micro-batches of it), the micro-batches cut from
        turns sorted by length or, for prefix trees, by prompt when that forwards less
        (:func:`~trainers.update.batching.step_batches`).
        """
        acc = self.accelerator
        return step_batches(
            samples,
            self.config.per_device_train_batch_size,
            self.config.gradient_accumulation_steps,
            self.generator,
            index=acc.process_index,
            count=acc.num_processes,
            share_prefix=self.forward.share_prefix,
            whole_groups=self.config.whole_group_steps,
        )

    def accumulate_gradients(
        self,
        batches: list[TurnBatch],
        shares: list[list[TurnSample]],
        step: Sequence[TurnSample],
        gaps: list[torch.Tensor] | None,
    ) -> list[LossOutput]:
        """Backward every micro-batch of one optimizer step; collect rollout/recompute gaps.

        ``batches[i]`` is collated from ``shares[i]``. Micro-batches that share one forward
        (the strategy's runs) have their losses summed into one backward; a micro-batch's loss
        is the same either way.

        ``step`` is the whole optimizer step over all processes (``batches`` is this process's
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
        if not batches:  # fewer samples in this step than processes: contribute zero gradient
            return self._zero_backward(step, num_tokens)
        longest = max(s.num_tokens for share in shares for s in share)
        runs = self.forward.runs(shares, self.config.per_device_train_batch_size * longest)
        outs = []
        for number, run in enumerate(runs):
            last = number == len(runs) - 1
            run_batches, run_shares = [batches[i] for i in run], [shares[i] for i in run]
            self._positions += forwarded_positions(
                [s for share in run_shares for s in share], share_prefix=self.forward.share_prefix
            )
            # no_sync is DDP's (the prepared module), also when a compiled wrapper sits on it;
            # it holds the forward too, as DDP asks.
            with contextlib.nullcontext() if last else acc.no_sync(self._prepared):
                with self._autocast():
                    logprobs = self._logprobs(self.model, run_batches, run_shares)
                    refs = self._reference_logprobs(run_batches, run_shares)
                total = None
                for batch, logprob, ref in zip(run_batches, logprobs, refs, strict=True):
                    with self._autocast():
                        out, fresh = microbatch_loss(
                            batch, self.config, logprob, ref_logprobs=ref, num_tokens=num_tokens
                        )
                    loss = out.loss if self.config.loss_type == "dapo" else out.loss / len(batches)
                    total = loss if total is None else total + loss
                    outs.append(dataclasses.replace(out, loss=out.loss.detach()))
                    if gaps is not None:
                        _collect_gap(gaps, batch, fresh)
                acc.backward(total)
                self._turns_done += sum(len(share) for share in run_shares)
                if self.on_turns is not None:
                    self.on_turns(self._turns_done, self._turns_total)
        return outs

    def optimizer_step(self) -> float:
        """Clip the accumulated gradients, step the optimizer, zero them; return their norm."""
        norm = 0.0
        if self.config.max_grad_norm > 0:
            params = [p for p in self.model.parameters() if p.requires_grad]
            total = self.accelerator.clip_grad_norm_(params, self.config.max_grad_norm)
            norm = float(total) if total is not None else 0.0
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm if math.isfinite(norm) else float("nan")

    def _logprobs(
        self, model: Any, batches: list[TurnBatch], shares: list[list[TurnSample]]
    ) -> list[torch.Tensor]:
        return self.forward.logprobs(model, batches, shares, self.config.temperature)

    def _reference_logprobs(
        self, batches: list[TurnBatch], shares: list[list[TurnSample]]
    ) -> list[torch.Tensor | None]:
        """Return the reference policy's log-probs of ``batches`` when ``beta`` > 0, else Nones."""
        if self.config.beta <= 0:
            return [None] * len(batches)
        with torch.no_grad():
            refs = reference_policy(
                self.model, self.ref_model, lambda m: self._logprobs(m, batches, shares)
            )
        return list(refs)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast over a forward pass when ``GRPOConfig.bf16`` (backward runs outside).

        torch's own context, not accelerate's ``mixed_precision``: that one is process-wide
        state (every trainer in a process would share it) and wraps only the model's
        ``forward``, which the prefix-tree pass goes around.
        """
        if not self.config.bf16:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.accelerator.device.type, dtype=torch.bfloat16)

    def _zero_backward(self, step: Sequence[TurnSample], num_tokens: float) -> list[LossOutput]:
        """Take part in the step's gradient averaging with a zero gradient (an empty share)."""
        share = list(step[:1])
        batch = collate(share, self.pad_token_id).to(self.device)
        with self._autocast():
            (logprobs,) = self._logprobs(self.model, [batch], [share])
        self.accelerator.backward(logprobs.sum() * 0.0)
        return []


def default_forward(config: GRPOConfig, processes: int) -> StepForward:
    """Return how a step's micro-batches go through the model by default.

    Prefix trees (``GRPOConfig.share_prompt_prefix``), or plain rows under DDP, which expects
    one forward per backward, and under ``torch_compile``, whose graphs cannot follow a tree's
    changing shapes.
    """
    if config.share_prompt_prefix and processes == 1 and not config.torch_compile:
        return PrefixTreeForward()
    return RowForward()


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
        layers_to_transform=top_layers(model, config.lora_layers),
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

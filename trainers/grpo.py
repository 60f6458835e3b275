"""The GRPO update over recorded multi-turn episodes, on a Hugging Face causal LM.

Phases, top to bottom: :func:`compute_logprobs` (per-token log-probs of the generated tokens),
:func:`compute_loss` (the clipped objective of ``trainers.loss``), :meth:`GRPOTrainer.train_step`
(micro-batches, gradient accumulation, optimizer steps under ``accelerate``).

Why not TRL's ``GRPOTrainer``: it generates the completions itself and gives each completion one
scalar reward, and its multi-turn path needs a tool-calling chat template (SmolLM2 has none). Our
samples are *turns* of episodes that the rollout engine already played with per-turn skill
retrieval, each with its own advantage (episode + step level). So we keep TRL's vocabulary
(``GRPOConfig`` field names, loss types, the k3 KL) and its ``selective_log_softmax``, and write
the update loop ourselves. It runs under ``accelerate.Accelerator``: on CPU as is; with
``accelerate launch`` each process trains on its shard of the turns and DDP averages gradients
(the ``dapo`` normaliser is the global token count, so sharding does not change the loss).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from accelerate import Accelerator
from transformers import modeling_utils
from trl.trainer.utils import selective_log_softmax

from skillrl_core.records import EpisodeRecord
from trainers.batching import TurnBatch, build_samples, collate, micro_batches
from trainers.config import GRPOConfig
from trainers.loss import LossOutput, policy_loss

logger = logging.getLogger(__name__)

_MASKED_KEEP = hasattr(modeling_utils, "slice_logits_to_keep")
"""Whether ``logits_to_keep`` takes a [B, L] boolean mask (logits of the True positions only)."""


def completion_positions(batch: TurnBatch) -> torch.Tensor:
    """[B, L] bool: the positions whose next token is a generated token (they need logits).

    Completions are right-aligned: column c of the [B, C] block is position L - C + c, predicted
    by the hidden state at position L - C - 1 + c.
    """
    length, width = batch.input_ids.shape[1], batch.completion_ids.shape[1]
    keep = torch.zeros(batch.input_ids.shape, dtype=torch.bool, device=batch.input_ids.device)
    keep[:, length - width - 1 : length - 1] = batch.completion_mask.bool()
    return keep


def compute_logprobs(
    model: Any, batch: TurnBatch, temperature: float = 1.0, *, head_only: bool = True
) -> torch.Tensor:
    """Per-token log pi(o_t | prompt, o_<t) of the right-aligned completions, shape [B, C].

    The LM head (49,152 x 576 for SmolLM2) runs only on the positions that predict a generated
    token (``logits_to_keep`` as a boolean mask): not on the prompt, and not on the padding of
    the completion block of a row shorter than the batch's longest completion. Entries where
    ``completion_mask`` is 0 are 0. With ``head_only`` False (the benchmarks' baseline), and on
    transformers without mask support (before ``slice_logits_to_keep``), the head runs on the
    last C + 1 positions of every row and the same rows are picked after.
    """
    mask = batch.completion_mask.bool()
    masked = head_only and _MASKED_KEEP
    keep = completion_positions(batch) if masked else batch.completion_ids.shape[1] + 1
    output = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        logits_to_keep=keep,
        use_cache=False,
    )
    logits = output.logits if masked else output.logits[:, :-1][mask]
    # One [1, n, V] row: selective_log_softmax loops over the leading dimension on CPU.
    picked = selective_log_softmax(
        logits.float().unsqueeze(0), batch.completion_ids[mask].unsqueeze(0), temperature
    )[0]
    return picked.new_zeros(mask.shape).masked_scatter(mask, picked)


def compute_loss(
    model: Any,
    batch: TurnBatch,
    config: GRPOConfig,
    *,
    num_tokens: float | None = None,
    ref_model: Any | None = None,
    head_only: bool = True,
) -> tuple[LossOutput, torch.Tensor]:
    """Compute the GRPO loss of one micro-batch; also return the fresh log-probs (detached)."""
    logprobs = compute_logprobs(model, batch, config.temperature, head_only=head_only)
    fresh = logprobs.detach()
    # Samples without rollout log-probs start on-policy: pi_old := the current policy.
    old = torch.where(batch.has_old_logprobs.unsqueeze(1), batch.old_logprobs, fresh)
    ref = None
    if config.beta > 0:
        with torch.no_grad():
            ref = _reference_logprobs(model, ref_model, batch, config.temperature, head_only)
    out = policy_loss(
        logprobs,
        old,
        batch.advantages,
        batch.completion_mask,
        epsilon_low=config.epsilon,
        epsilon_high=config.clip_high,
        loss_type=config.loss_type,
        beta=config.beta,
        ref_logprobs=ref,
        num_tokens=num_tokens,
        max_completion_length=config.max_completion_length,
    )
    return out, fresh


def _reference_logprobs(
    model: Any, ref_model: Any | None, batch: TurnBatch, temperature: float, head_only: bool
) -> torch.Tensor:
    if ref_model is not None:
        return compute_logprobs(ref_model, batch, temperature, head_only=head_only)
    # LoRA: the reference is the base model, i.e. the same model with its adapter switched off.
    with model.disable_adapter():
        return compute_logprobs(model, batch, temperature, head_only=head_only)


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
        """Sort each optimizer step's samples by length before cutting micro-batches (less
        padding, same step gradient for ``dapo``; False is the benchmarks' baseline)."""
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
        """Run ``num_iterations`` passes of clipped policy-gradient steps over the turns."""
        samples = build_samples(episodes, advantages, keep_zero_advantage=self.config.beta > 0)
        acc = self.accelerator
        samples = samples[acc.process_index :: acc.num_processes]
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
        window = self.config.gradient_accumulation_steps
        per_pass = math.ceil(
            math.ceil(len(samples) / self.config.per_device_train_batch_size) / window
        )
        total_steps = per_pass * self.config.num_iterations
        for iteration in range(self.config.num_iterations):
            batches = micro_batches(
                samples,
                self.config.per_device_train_batch_size,
                self.generator,
                sort_window=window if self.sort_by_length else 1,
            )
            for start in range(0, len(batches), window):
                group = [
                    collate(b, self.pad_token_id).to(acc.device)
                    for b in batches[start : start + window]
                ]
                # The gap is measured before the first optimizer step, against pi_old itself.
                first = iteration == 0 and start == 0
                outs.extend(self._accumulate(group, gaps if first else None))
                metrics.grad_norm = self._optimizer_step()
                metrics.optimizer_steps += 1
                if self.on_progress is not None:
                    self.on_progress(metrics.optimizer_steps, total_steps)
                metrics.completion_tokens += sum(b.num_completion_tokens for b in group)
                metrics.total_tokens += sum(int(b.attention_mask.sum()) for b in group)
        _average_into(metrics, outs)
        _report_gap(metrics, gaps, self.config.logprob_gap_warn)
        metrics.seconds = time.perf_counter() - started
        return metrics

    def _accumulate(
        self, group: list[TurnBatch], gaps: list[torch.Tensor] | None
    ) -> list[LossOutput]:
        """Backward every micro-batch of one optimizer step; collect rollout/recompute gaps."""
        local_tokens = torch.tensor(float(sum(b.num_completion_tokens for b in group)))
        global_tokens = float(
            self.accelerator.gather(local_tokens.to(self.accelerator.device)).sum()
        )
        # DDP averages gradients over processes; scaling by P keeps dapo's sum / global tokens.
        num_tokens = global_tokens / self.accelerator.num_processes
        outs = []
        for batch in group:
            out, fresh = compute_loss(
                self.model,
                batch,
                self.config,
                num_tokens=num_tokens,
                ref_model=self.ref_model,
                head_only=self.head_only,
            )
            loss = out.loss if self.config.loss_type == "dapo" else out.loss / len(group)
            self.accelerator.backward(loss)
            outs.append(dataclasses.replace(out, loss=out.loss.detach()))  # keep no graph alive
            if gaps is not None:
                chosen = batch.completion_mask.bool() & batch.has_old_logprobs.unsqueeze(1)
                if chosen.any():
                    gaps.append((batch.old_logprobs - fresh)[chosen].abs().cpu())
        return outs

    def _optimizer_step(self) -> float:
        norm = 0.0
        if self.config.max_grad_norm > 0:
            params = [p for p in self.model.parameters() if p.requires_grad]
            total = self.accelerator.clip_grad_norm_(params, self.config.max_grad_norm)
            norm = float(total) if total is not None else 0.0
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm if math.isfinite(norm) else float("nan")


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

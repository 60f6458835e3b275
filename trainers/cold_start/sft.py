"""Supervised fine-tuning of the policy on turn examples, with TRL's ``SFTTrainer``.

One call of :func:`train_round` fine-tunes the in-process model on a list of
:class:`~trainers.cold_start.sft_data.TurnExample`:

- loss on the target tokens only: examples are tokenized here by
  :func:`trainers.cold_start.sft_data.tokenize_example` (the policy's own chat rendering, the
  constrained agent's pre-filled prefix kept in the prompt) into ``input_ids`` +
  ``completion_mask``, and ``SFTTrainer(completion_only_loss=True)`` turns the mask into ``-100``
  labels. TRL's own tokenization of conversational prompt/completion pairs is not used because it
  cannot express the constrained agent's pre-filled assistant prefix, and the prompt tokens must be
  the run-time tokens exactly;
- LoRA through peft (default; the adapter is merged after the round, so the model stays a plain
  ``from_pretrained`` model for rollouts, GRPO and checkpoints). Measured on the 2-core dev
  machine (SmolLM2-135M, 4 expert turns, 2 steps): LoRA 44.8 CPU-seconds, full fine-tuning
  49.0. The forward and backward pass over the prompt dominates either way (one plain
  forward + backward of 2 x 360 tokens took about 25 s on the shared cores), so the prompt
  budget (``--max-prompt-tokens``) is the lever that matters for speed;
- the LM head runs only on target positions (``config.head_only_loss``,
  :mod:`trainers.cold_start.head_loss`): TRL's own fused head scores every position on devices
  without Triton, i.e. every prompt token on CPU; the loss and gradients are the same;
- each micro-batch runs as the prefix tree of its rows (``config.prefix_tree``, in the same
  forward): turns share the system message, and a later turn of an episode repeats its earlier
  turns' prompt, so shared prefixes go through the model once;
- no packing by default: TRL packs without cross-example attention only through padding-free
  batches, which need flash-attention (not on CPU); and turn prompts are of similar length (the
  prompt budget caps them), so padding wastes little. ``packing=True`` is passed through;
- resumable inside a round: HF Trainer checkpoints every ``save_steps`` optimizer steps into the
  round's folder and ``resume=True`` continues from the last one (same data order and step
  count). These run-internal checkpoints are HF Trainer's format (adapter / weights as
  safetensors, optimizer state as a torch file, loaded by torch's weights-only unpickler); what a
  user keeps is the merged safetensors checkpoint of ``trainers.common.checkpoint.save_checkpoint``.
  HF Trainer also writes a checkpoint after the last step; that one is skipped
  (:func:`_no_final_save`): the caller saves the round's model itself right after, and for full
  fine-tuning the skipped write (weights + AdamW state, about 1.6 GB for SmolLM2-135M) took
  13-16 s of a 45 s round on the dev machine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.cold_start.head_loss import (
    add_head_only_lm_head,
    remove_head_only_lm_head,
    supports_head_only,
)
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.cold_start.sft_data import TurnExample, tokenize_example
from trainers.common.lora import top_layers

logger = logging.getLogger(__name__)


@dataclass
class RoundResult:
    """What one round of fine-tuning did."""

    global_step: int
    """Optimizer steps of the round (the same after a kill and ``--resume``)."""
    train_loss: float
    """Mean training loss over the round's steps (NaN when resumed after the last step)."""
    examples: int
    target_tokens: int
    """Tokens that carried loss."""
    seconds: float


def _no_final_save() -> Any:
    """Return a Trainer callback that drops the checkpoint after the last step (unless due).

    ``DefaultFlowCallback`` saves at the end of training whatever ``save_steps`` says. A round's
    trainer folder is deleted once :func:`train_round`'s caller has saved the merged model, so
    that checkpoint would only cover a kill in the seconds between the two writes, at the price
    of writing the weights and optimizer state every round. A kill there redoes the steps since
    the last periodic checkpoint, as a kill anywhere else in the round does.
    """
    from transformers import TrainerCallback

    class NoFinalSave(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if state.global_step >= state.max_steps and state.global_step % args.save_steps:
                control.should_save = False
            return control

    return NoFinalSave()


def to_dataset(tokenizer: Any, examples: list[TurnExample]) -> Any:
    """Tokenize ``examples`` into a ``datasets.Dataset`` (``input_ids``, ``completion_mask``)."""
    from datasets import Dataset

    return Dataset.from_list([tokenize_example(tokenizer, e) for e in examples])


def build_trainer(
    model: Any,
    tokenizer: Any,
    examples: list[TurnExample],
    config: ColdStartConfig,
    output_dir: Path,
    *,
    callbacks: list[Any] | None = None,
    use_cpu: bool = False,
) -> Any:
    """Return a ready ``trl.SFTTrainer`` for one round (LoRA applied when configured).

    ``use_cpu`` trains on the CPU where a GPU is visible too (HF Trainer's ``use_cpu``; without
    it the trainer takes CUDA whenever there is one).
    """
    from trl import SFTConfig, SFTTrainer

    from trainers.common.seeding import seed_everything

    seed_everything(config.seed)  # the LoRA initialisation and data order repeat on resume
    args = SFTConfig(
        output_dir=str(output_dir),
        num_train_epochs=config.num_train_epochs,
        learning_rate=config.learning_rate,
        per_device_train_batch_size=config.per_device_train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        completion_only_loss=True,
        packing=config.packing,
        max_length=None if not config.packing else _longest(tokenizer, examples),
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=1,
        report_to="none",
        seed=config.seed,
        data_seed=config.seed,
        disable_tqdm=True,
        use_cpu=use_cpu,
        dataloader_num_workers=0,
        dataset_num_proc=None,
        bf16=False,
        # TRL turns activation checkpointing on by default; at 135M parameters memory is not the
        # limit on CPU, compute is, and recomputing the forward pass costs about a third more.
        gradient_checkpointing=False,
    )
    peft_config = None
    if config.use_peft:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.lora_target_modules),
            layers_to_transform=top_layers(model, config.lora_layers),
            task_type="CAUSAL_LM",
        )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=to_dataset(tokenizer, examples),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks,
    )
    trainer.add_callback(_no_final_save())  # after DefaultFlowCallback, so it has the last word
    # After the trainer: TRL patches the (peft-unwrapped) model in __init__; this patch goes
    # over it and replaces only the fused_lm_head=True path.
    causal_lm = getattr(trainer.model, "get_base_model", lambda: trainer.model)()
    if config.head_only_loss:
        if supports_head_only(causal_lm):
            add_head_only_lm_head(causal_lm, tree=config.prefix_tree)
        else:
            logger.info("the model transforms its logits after the head: TRL's head is kept")
    return trainer


def _longest(tokenizer: Any, examples: list[TurnExample]) -> int:
    return max(len(tokenize_example(tokenizer, e)["input_ids"]) for e in examples)


def train_round(
    model: Any,
    tokenizer: Any,
    examples: list[TurnExample],
    config: ColdStartConfig,
    output_dir: Path,
    *,
    resume: bool = False,
    on_log: Callable[[int, dict[str, float]], None] | None = None,
    on_save: Callable[[int], None] | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> tuple[Any, RoundResult]:
    """Fine-tune ``model`` on ``examples``; return the (merged, plain) model and what happened.

    ``on_log(step, logs)`` sees the trainer's per-step logs (loss, learning rate);
    ``on_save(step)`` is called after each resumable checkpoint is written;
    ``on_step(done, total)`` after every optimizer step (progress bars: the library prints
    nothing, so HF Trainer's own printing callbacks are removed).
    """
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from transformers.trainer_utils import get_last_checkpoint

    started = time.perf_counter()

    class _Observe(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if on_log is not None and logs:
                numbers = {k: float(v) for k, v in logs.items() if isinstance(v, int | float)}
                on_log(int(state.global_step), numbers)

        def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if on_save is not None:
                on_save(int(state.global_step))

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if on_step is not None:
                on_step(int(state.global_step), int(state.max_steps))

    tokenizer_side = getattr(tokenizer, "padding_side", None)
    trainer = build_trainer(model, tokenizer, examples, config, output_dir, callbacks=[_Observe()])
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    last = get_last_checkpoint(str(output_dir)) if resume and output_dir.exists() else None
    if last is not None:
        logger.info("resuming fine-tuning from %s", last)
    output = trainer.train(resume_from_checkpoint=last)
    trained = trainer.model
    if hasattr(trained, "merge_and_unload"):
        trained = trained.merge_and_unload()
    remove_head_only_lm_head(trained)  # and TRL's patch: rounds would stack wrappers
    trained.eval()
    if tokenizer_side is not None:  # generation pads on the left (TransformersPolicy)
        tokenizer.padding_side = tokenizer_side
    target_tokens = sum(sum(tokenize_example(tokenizer, e)["completion_mask"]) for e in examples)
    result = RoundResult(
        global_step=int(trainer.state.global_step),
        train_loss=float(output.training_loss),
        examples=len(examples),
        target_tokens=target_tokens,
        seconds=time.perf_counter() - started,
    )
    return trained, result

"""Configuration of one GRPO/RFT update: :class:`GRPOConfig`.

Field names follow TRL's ``GRPOConfig`` where the meaning is the same (``learning_rate``,
``beta``, ``epsilon``, ``epsilon_high``, ``loss_type``, ``num_iterations``, ``scale_rewards``,
``gradient_accumulation_steps``, ``per_device_train_batch_size``, ``max_grad_norm``, ``use_peft``
and the LoRA fields); the turn-level fields (``step_weight``, ``gamma``) follow GiGPO.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import option
from skillrl_core.validation import check_number
from trainers.common.lora import LoraSettings
from trainers.update.advantages import (
    ESTIMATORS,
    AdvantageEstimator,
    GroupRelative,
    RejectionSampling,
)

LOSS_TYPES: tuple[str, ...] = ("dapo", "bnpo", "grpo", "dr_grpo")
SCALE_REWARDS: tuple[str, ...] = ("group", "none")


@dataclass
class GRPOConfig(LoraSettings):
    """How one GRPO update is computed and applied (its LoRA fields: :class:`LoraSettings`)."""

    learning_rate: float = option(
        1e-5, help="AdamW learning rate.", low=0, low_open=True, aliases=("--lr",)
    )
    weight_decay: float = 0.0
    """AdamW weight decay."""
    beta: float = option(
        0.0,
        help="KL coefficient to the reference model (k3 estimator); 0 loads no reference model.",
        low=0,
    )
    epsilon: float = option(
        0.2,
        help="Lower clip: the ratio is clipped below at 1 - epsilon.",
        low=0,
        high=1,
        high_open=True,
    )
    # None, which only a library caller can pass, clips above at 1 + epsilon, as TRL does.
    epsilon_high: float | None = option(
        0.28,
        help="Upper clip (DAPO's clip-higher): the ratio is clipped above at 1 + epsilon_high.",
        low=0,
    )
    loss_type: str = option(
        "dapo",
        help="Token aggregation of the loss: dapo (tokens of the accumulated batch), bnpo "
        "(tokens of the micro-batch), grpo (mean per sequence, then over sequences), dr_grpo "
        "(a constant max_completion_length per sequence).",
        choices=LOSS_TYPES,
    )
    max_completion_length: int = 64
    """Normaliser of ``dr_grpo`` (tokens per completion; ``skillrl train`` sets it to the
    cycle's ``max_new_tokens``)."""
    num_iterations: int = option(
        1, help="Passes over each cycle's turns (TRL's mu); >1 makes the clip matter.", low=1
    )
    per_device_train_batch_size: int = option(
        4,
        help="Turns (prompt + completion sequences) per forward pass.",
        low=1,
        aliases=("--batch-size",),
    )
    gradient_accumulation_steps: int = option(
        4,
        help="Micro-batches accumulated into one optimizer step.",
        low=1,
        aliases=("--grad-accum",),
    )
    whole_group_steps: bool = option(
        True,
        help="Fill each optimizer step with whole groups (a goal's G episodes, all their turns), "
        "the groups in shuffled order, as verl's mini-batches hold whole prompts' groups, so "
        "the step encodes their shared prompt once (a group larger than a step fills "
        "consecutive steps); --shuffled-turns mixes turns of all groups in every step (as TRL "
        "does).",
        negative="--shuffled-turns",
        aliases=("--whole-groups",),
    )
    max_grad_norm: float = 1.0
    """Gradient clipping norm (0 disables clipping)."""
    estimator: str = option(
        "grpo",
        help="How turns get their advantage (trainers.update.advantages): grpo (group-relative: "
        "episode level plus --step-weight times step level) or rft (rejection-sampling "
        "fine-tuning on the policy's own samples: every turn of an episode that succeeded is "
        "trained on, with the tokens it produced, and failures are not; --step-weight and "
        "--rft-weight are not used, and refused with it; pair it with --no-dynamic-sampling, "
        "which would drop groups that all succeeded).",
        choices=ESTIMATORS,
    )
    rft_weight: float = option(
        0.0,
        help="With --estimator grpo: added to the advantage of every turn of a successful "
        "episode (RFT mixed into GRPO); 0 is plain GRPO.",
        low=0,
    )
    step_weight: float = option(
        1.0,
        help="w in A = A_episode + w * A_step (GiGPO Eq. 8); 0 gives plain (episode-level) GRPO.",
        low=0,
        aliases=("-w",),
    )
    gamma: float = option(
        0.95, help="Discount of the step-level returns (GiGPO Eq. 6).", low=0, high=1
    )
    scale_rewards: str = "group"
    """``group``: divide advantages by the group's std (GRPO); ``none``: only centre (Dr. GRPO)."""
    temperature: float = option(
        1.0,
        help="Sampling temperature of the training rollouts, and the update's: logits are "
        "divided by it before log-probs (as TRL), so pi_old and pi_theta are the policy that "
        "sampled. One setting for both, so the two cannot differ.",
        low=0,
        low_open=True,
    )
    use_peft: bool = option(
        False,
        help="Train a LoRA adapter (peft) instead of every weight (--full).",
        negative="--full",
        aliases=("--lora",),
    )
    lora_layers: int | None = option(
        None,
        help="With --lora: adapt only the top N decoder layers (default: all). No gradient "
        "flows below the lowest adapted layer, so the update's backward pass shrinks in "
        "proportion (as `skillrl sft --lora-layers`); the forward pass does not.",
        low=1,
    )
    logprob_gap_warn: float = 0.5
    """Warn when the mean |old - recomputed| log-prob gap on generated tokens exceeds this."""
    share_prompt_prefix: bool = True
    """Run each optimizer step's turns as prefix trees (:mod:`trainers.update.tree_logprobs`): every
    distinct prefix (the system message, a group's shared first page, an episode's earlier
    prompt that a later turn continues) goes through the model once, gradients included. Same
    loss and gradients as plain rows, to float rounding (with ``lora_dropout`` > 0, turns that
    share a prefix also share its dropout mask). A tree holds no more positions than the step's
    largest plain micro-batch. Off under ``torchrun`` / ``accelerate launch`` (DDP expects
    one forward per backward) and with ``torch_compile`` (see there)."""
    bf16: bool = option(
        False,
        help="Run the update's forward passes under bf16 autocast (mixed precision, TRL's "
        "bf16): matrix products in bf16; weights, gradients, log-softmax and optimizer state in "
        "float32. The products run faster on GPUs and on CPUs with native bf16 (AVX512-BF16, "
        "AMX), but on a 2-core AMX CPU the recipe's update took as long as in float32, "
        "frozen LoRA weights cast once or not (docs/results.md, Training speed); slower where "
        "bf16 is emulated. The log-probs the "
        "ratio compares then carry bf16 rounding, as bf16 rollouts do.",
    )
    tf32: bool = option(
        True,
        help="On CUDA, run the update's float32 matrix products on TF32 tensor cores "
        "(torch.set_float32_matmul_precision('high') while the update runs, restored after): "
        "inputs rounded to a 10-bit mantissa, accumulation in float32, as PyTorch Lightning "
        "and HF Trainer's tf32 offer. No effect on CPU, or on products bf16 autocast already "
        "runs in bf16; --no-tf32 keeps full float32 products on a GPU.",
    )
    torch_compile: bool = option(
        False,
        help="Compile the update's forward and backward with torch.compile (inductor, dynamic "
        "shapes), as plain rows instead of prefix trees (whose passes change shape too often "
        "to compile: not done after 15 minutes). On SmolLM2-135M, 2 CPU cores, 4 x ~380 "
        "tokens: full fine-tuning 1.86x faster after 115-250 s of compiling, LoRA 1.49x after "
        "350 s, once per process, but on the recipe's batches the trees were faster (LoRA: 434 "
        "vs 328 tokens/s after 237 s; docs/results.md, Speed). Gradients agree to float "
        "rounding, not bit for bit.",
    )

    def __post_init__(self) -> None:
        super().__post_init__()  # every field's declaration, then the LoRA fields
        if self.lora_layers is not None and not self.use_peft:
            raise ConfigError(
                f"lora_layers ({self.lora_layers}) applies to a LoRA update (--lora); "
                "--full trains every layer"
            )
        if self.scale_rewards not in SCALE_REWARDS:
            raise ConfigError(
                f"scale_rewards ({self.scale_rewards!r}) must be one of {SCALE_REWARDS}"
            )
        self._check_estimator_weights()
        if self.max_completion_length < 1:
            raise ConfigError(f"max_completion_length ({self.max_completion_length}) must be >= 1")
        if self.max_grad_norm < 0:
            raise ConfigError(f"max_grad_norm ({self.max_grad_norm}) must be >= 0")
        check_number("weight_decay", self.weight_decay, low=0.0)
        check_number("logprob_gap_warn", self.logprob_gap_warn, low=0.0)

    def _check_estimator_weights(self) -> None:
        """Refuse a weight the chosen estimator does not read (it would be silently unused)."""
        if self.estimator != "rft":
            return
        if self.rft_weight != 0:
            raise ConfigError(
                f"rft_weight ({self.rft_weight}) mixes RFT into estimator 'grpo'; estimator "
                "'rft' does not use it: leave it at 0, or use estimator 'grpo'"
            )
        default = next(f.default for f in fields(self) if f.name == "step_weight")
        if self.step_weight != default:
            raise ConfigError(
                f"step_weight ({self.step_weight}) is not used by estimator 'rft' (it has no "
                f"step part): leave it at its default ({default}), or use estimator 'grpo'"
            )

    @property
    def clip_high(self) -> float:
        """The upper clip epsilon actually used."""
        return self.epsilon if self.epsilon_high is None else self.epsilon_high

    def advantage_estimator(self) -> AdvantageEstimator:
        """Return the estimator ``estimator`` names, with this config's weights."""
        if self.estimator == "rft":
            return RejectionSampling(gamma=self.gamma, scale=self.scale_rewards)
        return GroupRelative(self.step_weight, self.rft_weight, self.gamma, self.scale_rewards)

    @property
    def trains_zero_advantage_turns(self) -> bool:
        """Whether zero-advantage turns stay in the loss: only with a KL term (beta > 0)."""
        return self.beta > 0

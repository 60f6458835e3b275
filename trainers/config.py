"""Configuration of the trainer: the update (GRPOConfig) and the cycle (CycleConfig).

:class:`CycleConfig` drives the recursive improvement cycle behind ``skillrl train``.

Field names follow TRL's ``GRPOConfig`` where the meaning is the same (``learning_rate``,
``beta``, ``epsilon``, ``epsilon_high``, ``loss_type``, ``num_iterations``, ``scale_rewards``,
``gradient_accumulation_steps``, ``per_device_train_batch_size``, ``max_grad_norm``, ``use_peft``
and the LoRA fields); the turn-level fields (``step_weight``, ``gamma``) follow GiGPO.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from envs.registry import DEFAULT_ENV, ENV_HELP
from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import SEED_MAX, option
from skillrl_core.splits import TEST_SPLIT, TRAIN_SPLIT
from skillrl_core.validation import check_finite_fields, check_number
from trainers.advantages import (
    ESTIMATORS,
    AdvantageEstimator,
    GroupRelative,
    RejectionSampling,
)
from trainers.trackers import REPORT_TO

LOSS_TYPES: tuple[str, ...] = ("dapo", "bnpo", "grpo", "dr_grpo")
SCALE_REWARDS: tuple[str, ...] = ("group", "none")


@dataclass
class LoraSettings:
    """The shape of a LoRA adapter (peft's ``LoraConfig``): one declaration for every trainer.

    :class:`GRPOConfig` and :class:`trainers.sft_config.ColdStartConfig` both train adapters, so
    both take these fields from here; a field keeps its name in their options and saved
    ``config.json`` files. (As a base dataclass, its fields come first in theirs.)
    """

    lora_r: int = option(16, help="LoRA rank.", low=1)
    lora_alpha: int = 32
    """LoRA scaling alpha (``skillrl train`` and ``skillrl sft`` set twice the rank)."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    """Module names that get LoRA adapters."""

    def __post_init__(self) -> None:
        # A subclass's __post_init__ calls this first: every field of the subclass gets checked.
        check_finite_fields(self)  # and the bounds and choices each option declares
        check_number("lora_dropout", self.lora_dropout, low=0.0, high=1.0, high_open=True)


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
        help="How turns get their advantage (trainers.advantages): grpo (group-relative: "
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
    logprob_gap_warn: float = 0.5
    """Warn when the mean |old - recomputed| log-prob gap on generated tokens exceeds this."""
    share_prompt_prefix: bool = True
    """Run each optimizer step's turns as prefix trees (:mod:`trainers.tree_forward`): every
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
        "AMX), but on a 2-core AMX CPU the recipe's update took as long as in float32 "
        "(docs/results.md, Training speed); slower where bf16 is emulated. The log-probs the "
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


class EvolveGoals(NamedTuple):
    """The goals whose episodes' failures evolve the bank."""

    name: str
    """The run's name for those episodes (``cycles/<c>/<name>.json``)."""
    split: str
    goals: int
    """How many goals of ``split``, from ``first`` on."""
    first: int = 0
    """Index of the first goal: past the evaluation goals when both come from one split, so the
    goals a checkpoint is chosen on never evolve the bank."""


ROLLOUT_DTYPES: tuple[str, ...] = ("float32", "bfloat16")
"""Number formats training rollouts can play in (``CycleConfig.rollout_dtype``)."""


@dataclass
class CycleConfig:
    """One ``skillrl train`` run: how many cycles, on which goals, with what.

    Fields made with ``option`` are ``skillrl train``'s options of the same name.
    """

    env_id: str = option(DEFAULT_ENV, help=ENV_HELP, aliases=("--env",))
    cycles: int = option(
        3,
        help="Improvement cycles after the cycle-0 evaluation (of the starting point).",
        low=1,
    )
    goals_per_cycle: int = option(
        4, help="Training goals (groups with signal) wanted per cycle.", low=1
    )
    group_size: int = option(
        4, help="Episodes rolled out per training goal (GRPO group size G).", low=2
    )
    eval_goals: int = option(
        10,
        help="Fixed evaluation goals (the first N of --eval-split), the same every cycle.",
        low=0,
    )
    eval_split: str = option(TEST_SPLIT, help="Split the evaluation goals come from.")
    eval_every: int = option(
        1,
        help="Evaluate every N-th cycle; cycle 0 and the last cycle are always evaluated. Cycles "
        "in between record no eval.* metrics: on a CPU a 100-goal evaluation costs about as "
        "much as a training cycle, so a long run can spend its time on updates and still be "
        "measured at both ends on the same goals.",
        low=1,
    )
    train_split: str = TRAIN_SPLIT
    """Split the training goals come from."""
    validation_goals: int = option(
        4,
        help="Goals of the 'eval' split whose failures evolve the bank. 0: the evaluation "
        "goals' failures, unless those are test goals (learning from the held-out goals would "
        "inflate the next evaluation, so the bank is then not evolved).",
        low=0,
    )
    validation_split: str = "eval"
    """Split of the validation goals."""
    patience: int = option(
        0,
        help="With evaluation goals that are not test goals (--eval-split eval): stop the run "
        "once this many evaluations in a row have not beaten the best one so far, and say so "
        "in the log. 0: run every cycle.",
        low=0,
    )
    test_goals: int = option(
        0,
        help="With evaluation goals that are not test goals (--eval-split eval): play the "
        "first N test goals at cycle 0 and, at the end, with the best cycle's weights (the "
        "checkpoint the run chose on its evaluation goals), paired goal by goal; test goals "
        "are played at no other time. 0: none.",
        low=0,
    )
    max_turns: int = option(15, help="Turn limit per episode.", low=1)
    skills: bool = option(
        True, help="Retrieve skills every turn and grow the bank (distill, evolve)."
    )
    distill: bool = True
    """Distill finished training episodes into the bank each cycle (needs ``skills``)."""
    evolve: bool = True
    """Evolve the bank from validation failures each cycle (needs ``skills``)."""
    sensitivity: bool = option(
        True,
        help="On evaluated cycles with skills, score every open evaluation turn again with "
        "placebo entries (retrieved for another training goal) and record the share of greedy "
        "actions that change and the mean KL (sensitivity.* in metrics.jsonl): 0 means the "
        "policy ignores what its entries say. Costs up to one more scoring pass per turn.",
    )
    compare_starting_bank: bool = option(
        False,
        help="On evaluated cycles after cycle 0, with skills: play the evaluation goals once "
        "more with the bank as it was at cycle 0 (a copy of its snapshot in the run folder) "
        "and pair the two goal by goal (bank_worth.* in metrics.jsonl: won, lost, exact "
        "McNemar p): what distilling and evolving the bank has been worth to the policy being "
        "trained. Doubles the cost of each later evaluation.",
        show_default=False,
    )
    dynamic_sampling: bool = option(
        True,
        help="Drop groups whose episodes all got the same return and top up from further goals.",
    )
    max_topup_rounds: int = option(
        3, help="Extra rollout rounds per cycle to replace dropped groups.", low=0
    )
    seed: int = option(0, help="Seed of goal order, sampling and the update.", low=0, high=SEED_MAX)
    eval_temperature: float = 0.0
    """Temperature of evaluation episodes (0: greedy)."""
    max_new_tokens: int = option(48, help="Tokens the policy may generate per turn.", low=1)
    rollout_dtype: str = option(
        "float32",
        help="Number format of the training rollouts. float32 plays the trained weights; "
        "bfloat16 plays a copy the trainer refreshes after every update "
        "(skillrl.policies.weight_sync), faster on CPUs with native bf16 (AVX512-BF16, AMX) and "
        "on GPUs, and the update's clipped ratio corrects for the rounding; auto picks bfloat16 "
        "where the machine computes it natively, else float32, and the run saves what it "
        "picked. Evaluation always plays float32. In-process backend only.",
        choices=(*ROLLOUT_DTYPES, "auto"),
    )
    checkpoint_every: int = 1
    """Save a model checkpoint every this many cycles (the last one is always saved)."""
    merged_checkpoints: bool = option(
        False,
        help="With --lora: save each checkpoint as a whole model, the adapter merged into the "
        "weights (about 540 MB for SmolLM2-135M in float32), instead of the adapter alone over "
        "the starting model (a few MB; run, eval and --init load it onto that model).",
        show_default=False,
    )
    invalid_action_penalty: float = option(
        0.1,
        help="Reward subtracted for each invalid action.",
        low=0,
        aliases=("--invalid-penalty",),
    )
    turn_cost: float = option(
        0.01, help="Reward subtracted for each turn (shorter successes earn more).", low=0
    )
    upkeep: bool = True
    """Retire low-utility bank entries after each distillation (needs ``skills``)."""
    env_config: dict[str, Any] = field(default_factory=dict)
    """Extra ``envs.make`` keyword arguments (``max_turns`` is set from this config)."""
    report_to: str = option(
        "tensorboard",
        help="Experiment tracker that gets each cycle's metrics besides "
        "runs/<name>/metrics.jsonl, as TrainingArguments.report_to: tensorboard (event files in "
        "runs/<name>/tensorboard), wandb or trackio (extras: pip install 'skillrl[wandb]' or "
        "'skillrl[trackio]'; WANDB_PROJECT / TRACKIO_PROJECT name the project, default "
        "skillrl). May change on --resume.",
        choices=REPORT_TO,
    )

    def __post_init__(self) -> None:
        check_finite_fields(self)  # and the bounds and choices each option declares
        if self.checkpoint_every < 1:
            raise ConfigError(f"checkpoint_every ({self.checkpoint_every}) must be >= 1")
        if self.eval_temperature < 0:
            raise ConfigError(f"eval_temperature ({self.eval_temperature}) must be >= 0")
        if (self.test_goals or self.patience) and not self.chooses_checkpoint:
            given = "test_goals" if self.test_goals else "patience"
            raise ConfigError(
                f"{given} ({getattr(self, given)}) needs evaluation goals that are not test "
                f"goals to choose a checkpoint on (eval_split is {self.eval_split!r}, eval_goals "
                f"{self.eval_goals}): pass --eval-split eval and --eval-goals N"
            )
        if self.compare_starting_bank and not (self.skills and self.eval_goals):
            raise ConfigError(
                "compare_starting_bank replays the evaluation goals with the cycle-0 bank: it "
                f"needs skills (skills is {self.skills}) and evaluation goals (eval_goals "
                f"{self.eval_goals})"
            )
        if self.rollout_dtype not in ROLLOUT_DTYPES:  # the command resolves "auto" before
            raise ConfigError(
                f"rollout_dtype ({self.rollout_dtype!r}) must be one of {', '.join(ROLLOUT_DTYPES)}"
            )

    @property
    def chooses_checkpoint(self) -> bool:
        """Whether the run chooses its best cycle on its evaluation goals.

        Only when those are not test goals: a checkpoint chosen by its test score would make
        that score optimistic.
        """
        return self.eval_goals > 0 and self.eval_split != TEST_SPLIT

    def evaluates(self, cycle: int) -> bool:
        """Whether ``cycle`` evaluates the fixed goals (0, every ``eval_every``-th, the last)."""
        return cycle == 0 or cycle == self.cycles or cycle % self.eval_every == 0

    @property
    def evolve_goals(self) -> EvolveGoals | None:
        """The episodes whose failures evolve the bank, or None.

        The validation goals when there are any; else the evaluation goals, unless those are
        held-out test goals: evolving from them would leak the goals into the bank, and the next
        cycle's evaluation would measure that leak, not learning.
        """
        if self.validation_goals > 0:
            first = self.eval_goals if self.validation_split == self.eval_split else 0
            return EvolveGoals("validation", self.validation_split, self.validation_goals, first)
        if self.eval_split == TEST_SPLIT:
            return None
        return EvolveGoals("eval", self.eval_split, self.eval_goals)

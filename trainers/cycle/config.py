"""Configuration of the improvement cycle behind ``skillrl train``: :class:`CycleConfig`.

How many cycles on which goals, the shaped rewards, evaluation, bank evolution and the checkpoint
choice; the update's own settings are :class:`trainers.update.config.GRPOConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from envs.registry import DEFAULT_ENV, ENV_HELP
from skillrl_core.episode_limits import max_new_tokens_option, max_turns_option
from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import SEED_MAX, option
from skillrl_core.splits import TEST_SPLIT, TRAIN_SPLIT
from skillrl_core.validation import check_finite_fields
from trainers.cycle.rewards import EPISODE_REWARDS
from trainers.cycle.trackers import REPORT_TO


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
    max_turns: int = max_turns_option()
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
    max_new_tokens: int = max_new_tokens_option()
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
    rollout_parallel: int = option(
        16,
        help="Episodes played at once in training rollouts and the run's evaluations (one "
        "batched generation per turn covers them all). More makes larger matrix products, "
        "faster per episode until the device is saturated (a GPU takes hundreds), at the cost "
        "of memory. Float32 play does not depend on it; bf16 rounding does, slightly.",
        low=1,
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
    reward: str = option(
        "env",
        help="What an episode earns before the two shaping terms: env (the environment's own "
        "reward, which may pay a near miss most of a success, as a purchase score in [0, 1] "
        "does) or success (1 on the last turn of an episode that succeeded, else 0: "
        "group-relative advantages then rank a near miss with a failure, as the success rate "
        "does). RFT trains on successes either way.",
        choices=tuple(EPISODE_REWARDS),
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

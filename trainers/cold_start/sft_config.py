"""Configuration of the cold-start phase (SFT + DAgger): :class:`ColdStartConfig`.

Field names follow TRL's ``SFTConfig`` where the meaning is the same (``learning_rate``,
``num_train_epochs``, ``per_device_train_batch_size``, ``gradient_accumulation_steps``,
``packing``, ``save_steps``); the LoRA fields are :class:`trainers.cycle.config.LoraSettings`, as in
:class:`trainers.update.config.GRPOConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envs.registry import DEFAULT_ENV, ENV_HELP
from skillrl_core.episode_limits import max_new_tokens_option, max_turns_option
from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import SEED_MAX, option
from skillrl_core.splits import TRAIN_SPLIT
from trainers.common.lora import LoraSettings

SOURCES: tuple[str, ...] = ("expert", "bank", "teacher")
"""Where behaviour-cloning turns come from: the scripted expert on training goals, successful
training episodes stored in the bank, a teacher model through any policy backend."""

LORA_MODULES: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
"""Linear layers a LoRA adapter may cover (the decoder's attention and MLP projections)."""

DAGGER_KEEP: tuple[str, ...] = ("all", "mistakes")
"""Which labelled learner states a DAgger round keeps (:attr:`ColdStartConfig.dagger_keep`)."""


@dataclass
class ColdStartConfig(LoraSettings):
    """One cold-start run: which examples, how many DAgger rounds, how to fine-tune.

    Its LoRA fields are :class:`trainers.cycle.config.LoraSettings`; it adapts the MLP projections
    too.
    """

    env_id: str = option(
        DEFAULT_ENV,
        help=f"{ENV_HELP} Expert sources and DAgger need an environment with an expert.",
        aliases=("--env",),
    )
    sources: tuple[str, ...] = option(
        ("expert",),
        help="Where demonstrations come from (repeat to combine): the scripted expert on training "
        "goals, successful training episodes stored in the bank, or a teacher model.",
        choices=SOURCES,
        aliases=("--source",),
    )
    split: str = option(
        TRAIN_SPLIT,
        help="Split of the goals; only 'train' is accepted (test and eval goals are never trained "
        "on).",
    )
    goals: int = option(
        64, help="Training goals the expert (and teacher) play for behaviour cloning.", low=0
    )
    bank_episodes: int = option(
        200, help="Most successful training episodes taken from the bank (--source bank).", low=0
    )
    dagger_rounds: int = option(
        0,
        help="DAgger rounds after behaviour cloning: roll out the policy, label every visited "
        "state with the expert's action, add the examples, train again.",
        low=0,
    )
    dagger_goals: int = option(
        32, help="Fresh training goals the policy plays in each DAgger round.", low=1
    )
    dagger_temperature: float = option(
        0.0,
        help="Sampling temperature of DAgger rollouts (0: greedy, the states evaluation visits).",
        low=0,
    )
    dagger_keep: str = option(
        "all",
        help="Labelled learner states a DAgger round keeps: all of them (Ross et al.), or only "
        "those where the learner's action differs from the expert's (the states it already gets "
        "right cost as much to train on). Measured, the kept states were mostly corrective "
        "actions, and two such rounds with replay 1 made the policy loop (docs/results.md), so "
        "all stays the default.",
        choices=DAGGER_KEEP,
    )
    dagger_replay: float | None = option(
        None,
        help="Train each DAgger round on its new examples plus this many times as many drawn at "
        "random from earlier rounds (the weights carry over, so the replay only guards against "
        "forgetting, and a round's cost stays flat); default: the whole aggregated dataset, as "
        "in the paper.",
        low=0,
    )
    skills: bool = option(
        True,
        help="Put the skills retrieved at each turn into the examples (run the policy likewise).",
    )
    skill_withhold: float = option(
        0.0,
        help="With --skills: the fraction of examples whose prompt is built with no entries, as "
        "the agent builds it when retrieval is off (drawn per turn from --seed), so the policy "
        "learns to play with and without retrieved skills.",
        low=0,
        high=1,
        high_open=True,
    )
    skill_placebo: float = option(
        0.0,
        help="With --skills: the fraction of episodes played for examples whose prompts hold "
        "entries retrieved for another training goal (placebo: same count, nothing about this "
        "goal), drawn per episode from --seed; the expert labels what those prompts show, so "
        "the policy learns to act on an entry only when it applies.",
        low=0,
        high=1,
        high_open=True,
    )
    skill_withhold_episodes: float = option(
        0.0,
        help="With --skills: the fraction of episodes played for examples with no entries at "
        "all, drawn per episode from --seed and labelled as played (unlike --skill-withhold, "
        "which drops a turn's entries after the expert labelled it with them).",
        low=0,
        high=1,
        high_open=True,
    )
    constrained: bool = option(
        True,
        help="Targets in the constrained agent's format (query / click) or thought + action "
        "(free decoding); train for the mode you will run.",
        negative="--free",
    )
    max_turns: int = max_turns_option("Turn limit of every episode played for examples.")
    max_new_tokens: int = max_new_tokens_option(
        "Tokens the policy may generate per turn (DAgger and teacher rollouts)."
    )
    max_parallel: int = 16
    """Episodes played at once (one batched agent call per turn)."""
    num_train_epochs: float = option(
        2.0,
        help="Passes over the dataset in every round.",
        low=0,
        low_open=True,
        aliases=("--epochs",),
    )
    learning_rate: float = option(
        2e-4,
        help="AdamW learning rate (LoRA; use about 1e-5 with --full).",
        low=0,
        low_open=True,
        aliases=("--lr",),
    )
    per_device_train_batch_size: int = option(
        4, help="Examples per forward pass.", low=1, aliases=("--batch-size",)
    )
    gradient_accumulation_steps: int = option(
        2, help="Forward passes per optimizer step.", low=1, aliases=("--grad-accum",)
    )
    packing: bool = option(
        False,
        help="Pack examples into full rows (TRL); rarely pays for turn prompts of similar length.",
    )
    use_peft: bool = option(
        True,
        help="Train a LoRA adapter (merged into the checkpoints) instead of every weight (--full).",
        negative="--full",
        aliases=("--lora",),
    )
    lora_layers: int | None = option(
        None,
        help="Adapt only the top N decoder layers (default: all): no gradient flows below the "
        "lowest adapted layer, so the backward pass shrinks in proportion, and the adapter too.",
        low=1,
    )
    lora_target_modules: list[str] = field(default_factory=lambda: list(LORA_MODULES))
    """Module names that get LoRA adapters: attention and MLP (the GRPO update's default is
    attention only); redeclared from :class:`trainers.cycle.config.LoraSettings` for this
    default."""
    head_only_loss: bool = True
    """Run the LM head only on target positions (``trainers.cold_start.head_loss``); False keeps
    TRL's head, which on CPU projects every prompt position too. Same loss and gradients."""
    prefix_tree: bool = True
    """Run each micro-batch as the prefix tree of its rows (``trainers.common.tree_forward``): what
    rows share (the system message; an episode's earlier turns, which a later turn's prompt repeats)
    goes through the model once. Same loss and gradients; needs ``head_only_loss``. (With
    ``lora_dropout`` > 0, rows that share a prefix also share its dropout mask.)"""
    save_steps: int = option(
        25, help="Optimizer steps between resumable checkpoints inside a round.", low=1
    )
    seed: int = option(
        0, help="Seed of the goal order, LoRA init and data order.", low=0, high=SEED_MAX
    )

    def __post_init__(self) -> None:
        super().__post_init__()  # every field's declaration, then the LoRA fields
        if self.split != TRAIN_SPLIT:
            raise ConfigError(
                f"split ({self.split!r}) must be {TRAIN_SPLIT!r}: only training goals may become "
                "fine-tuning examples (test and eval goals measure the policy)"
            )
        if not self.sources:
            raise ConfigError(f"sources ({self.sources!r}) must be a non-empty subset of {SOURCES}")
        if self.max_parallel < 1:
            raise ConfigError(f"max_parallel ({self.max_parallel}) must be >= 1")
        if self.skill_withhold and not self.skills:
            raise ConfigError("skill_withhold needs skills: without them no entry is withheld")
        if (self.skill_placebo or self.skill_withhold_episodes) and not self.skills:
            raise ConfigError(
                "skill_placebo and skill_withhold_episodes need skills: without them no prompt "
                "holds an entry"
            )
        if self.skill_placebo + self.skill_withhold_episodes >= 1.0:
            raise ConfigError(
                f"skill_placebo ({self.skill_placebo}) + skill_withhold_episodes "
                f"({self.skill_withhold_episodes}) must be below 1"
            )
        playing = [s for s in self.sources if s in ("expert", "teacher")]
        if playing and self.goals < 1:
            raise ConfigError(
                f"goals ({self.goals}) must be >= 1: source {playing[0]!r} plays training goals"
            )

    @property
    def rounds(self) -> int:
        """Training rounds in all: behaviour cloning plus the DAgger rounds."""
        return 1 + self.dagger_rounds

"""Configuration of the cold-start phase (SFT + DAgger): :class:`ColdStartConfig`.

Field names follow TRL's ``SFTConfig`` where the meaning is the same (``learning_rate``,
``num_train_epochs``, ``per_device_train_batch_size``, ``gradient_accumulation_steps``,
``packing``, ``save_steps``) and :class:`trainers.config.GRPOConfig` for LoRA.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envs.registry import DEFAULT_ENV
from skillrl_core.errors import ConfigError
from skillrl_core.splits import TRAIN_SPLIT
from skillrl_core.validation import check_finite_fields

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
class ColdStartConfig:
    """One cold-start run: which examples, how many DAgger rounds, how to fine-tune."""

    env_id: str = DEFAULT_ENV
    """Environment id (``envs.make``); expert sources and DAgger need an adapter with an expert."""
    sources: tuple[str, ...] = ("expert",)
    """Behaviour-cloning sources of round 0, any of :data:`SOURCES`."""
    split: str = TRAIN_SPLIT
    """Split the goals come from; anything but ``train`` is refused."""
    goals: int = 64
    """Training goals played by the expert (and the teacher) for round 0."""
    bank_episodes: int = 200
    """Most successful training episodes taken from the bank (source ``bank``)."""
    dagger_rounds: int = 0
    """Rounds after behaviour cloning: roll out the policy, label its states, train again."""
    dagger_goals: int = 32
    """Training goals the policy plays in each DAgger round (fresh goals every round)."""
    dagger_temperature: float = 0.0
    """Sampling temperature of the DAgger rollouts (0: greedy, the states evaluation visits)."""
    dagger_keep: str = "all"
    """Which labelled learner states a DAgger round keeps: ``all`` (Ross et al.) or ``mistakes``,
    the states where the learner's action differs from the expert's label (the states it
    already gets right cost as much to train on). Measured on WebShop (docs/results.md): the
    kept states are mostly corrective actions (back out, click an option again), and two such
    rounds with replay 1 made the policy loop, so ``all`` stays the default."""
    dagger_replay: float | None = None
    """What a DAgger round trains on. None: the whole aggregated dataset (every round so far, as
    in the paper; a round's cost grows with the rounds). A number k: the round's new examples
    plus k times as many drawn at random from earlier rounds (the weights carry over from round
    to round, so the replay only guards against forgetting; a round's cost stays flat)."""
    skills: bool = True
    """Examples carry the skills retrieved at their turn (the policy is then run with skills)."""
    skill_withhold: float = 0.0
    """With ``skills``: the fraction of examples whose prompt is built with no entries, as the
    agent builds it when retrieval is off (drawn per turn from ``seed``, so a resumed run draws
    the same). Trained on both, the policy can neither ignore the entries nor depend on them to
    act at all."""
    constrained: bool = True
    """Targets in the constrained agent's format (query / click); else thought + action."""
    max_turns: int = 15
    """Turn limit of every episode played for examples."""
    max_new_tokens: int = 48
    """Generation budget per turn of the DAgger and teacher rollouts."""
    max_parallel: int = 16
    """Episodes played at once (one batched agent call per turn)."""
    num_train_epochs: float = 2.0
    """Passes over the dataset in each round's training."""
    learning_rate: float = 2e-4
    """AdamW learning rate (LoRA adapters take a larger one than full fine-tuning)."""
    per_device_train_batch_size: int = 4
    """Examples per forward pass."""
    gradient_accumulation_steps: int = 2
    """Forward passes per optimizer step."""
    packing: bool = False
    """Pack examples into full-length rows (see ``trainers.sft``: rarely pays here)."""
    use_peft: bool = True
    """Train a LoRA adapter (merged into the saved checkpoints) instead of every weight."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling alpha."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    lora_layers: int | None = None
    """Put LoRA adapters on the top this-many decoder layers only (None: every layer). No
    gradient flows below the lowest adapted layer, so the backward pass shrinks in proportion,
    and the adapter file too."""
    lora_target_modules: list[str] = field(default_factory=lambda: list(LORA_MODULES))
    """Module names that get LoRA adapters."""
    head_only_loss: bool = True
    """Run the LM head only on target positions (``trainers.head_loss``); False keeps TRL's
    head, which on CPU projects every prompt position too. Same loss and gradients."""
    prefix_tree: bool = True
    """Run each micro-batch as the prefix tree of its rows (``trainers.tree_forward``): what rows
    share (the system message; an episode's earlier turns, which a later turn's prompt repeats)
    goes through the model once. Same loss and gradients; needs ``head_only_loss``. (With
    ``lora_dropout`` > 0, rows that share a prefix also share its dropout mask.)"""
    save_steps: int = 25
    """Optimizer steps between resumable trainer checkpoints inside a round."""
    seed: int = 0
    """Seed of the goal order, LoRA init and data order."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.split != TRAIN_SPLIT:
            raise ConfigError(
                f"split ({self.split!r}) must be {TRAIN_SPLIT!r}: only training goals may become "
                "fine-tuning examples (test and eval goals measure the policy)"
            )
        unknown = [s for s in self.sources if s not in SOURCES]
        if unknown or not self.sources:
            raise ConfigError(f"sources ({self.sources!r}) must be a non-empty subset of {SOURCES}")
        for name in (
            "max_turns",
            "max_new_tokens",
            "max_parallel",
            "per_device_train_batch_size",
            "gradient_accumulation_steps",
            "lora_r",
            "save_steps",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} ({getattr(self, name)}) must be >= 1")
        for name in ("goals", "bank_episodes", "dagger_rounds", "dagger_goals"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} ({getattr(self, name)}) must be >= 0")
        if self.num_train_epochs <= 0 or self.learning_rate <= 0:
            raise ConfigError(
                f"num_train_epochs ({self.num_train_epochs}) and learning_rate "
                f"({self.learning_rate}) must be > 0"
            )
        if self.dagger_keep not in DAGGER_KEEP:
            raise ConfigError(f"dagger_keep ({self.dagger_keep!r}) must be one of {DAGGER_KEEP}")
        if self.dagger_replay is not None and not self.dagger_replay >= 0:
            raise ConfigError(f"dagger_replay ({self.dagger_replay}) must be >= 0 or None")
        if self.lora_layers is not None and self.lora_layers < 1:
            raise ConfigError(f"lora_layers ({self.lora_layers}) must be >= 1 or None")
        if not 0.0 <= self.skill_withhold < 1.0:
            raise ConfigError(f"skill_withhold ({self.skill_withhold}) must be in [0, 1)")
        if self.skill_withhold and not self.skills:
            raise ConfigError("skill_withhold needs skills: without them no entry is withheld")
        if self.dagger_temperature < 0:
            raise ConfigError(f"dagger_temperature ({self.dagger_temperature}) must be >= 0")
        if not 0 <= self.lora_dropout < 1:
            raise ConfigError(f"lora_dropout ({self.lora_dropout}) must be in [0, 1)")
        playing = [s for s in self.sources if s in ("expert", "teacher")]
        if playing and self.goals < 1:
            raise ConfigError(
                f"goals ({self.goals}) must be >= 1: source {playing[0]!r} plays training goals"
            )
        if self.dagger_rounds and self.dagger_goals < 1:
            raise ConfigError(
                f"dagger_goals ({self.dagger_goals}) must be >= 1 with dagger_rounds "
                f"({self.dagger_rounds})"
            )

    @property
    def rounds(self) -> int:
        """Training rounds in all: behaviour cloning plus the DAgger rounds."""
        return 1 + self.dagger_rounds

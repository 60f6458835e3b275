"""Bootstrap a skill bank: play training goals with the expert, distill, keep the bank tidy.

SkillRL seeds its bank from teacher trajectories; here the scripted expert (or any agent given)
plays ``episodes`` training goals, a fraction ``probe_fraction`` of them with one deliberate
mistake (:mod:`skillrl.distill.probes`) so the bank also starts with counterfactual notes, the
episodes are recorded in the bank, distilled, and upkeep enforces the caps. The active entries can
then be exported as the starting bank that new workspaces are seeded with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envs import DEFAULT_ENV, distill_adapter_for
from memory.types import SKILL_KINDS, EntryDraft
from skillrl.distill.base import Distiller, DistillReport
from skillrl.distill.pipeline import PipelineConfig, distill_pending
from skillrl.distill.probes import FaultyExpertAgent
from skillrl.distill.upkeep import UpkeepConfig, upkeep
from skillrl_core.episode_limits import MAX_TURNS
from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

if TYPE_CHECKING:
    from memory.bank import SkillBank
    from skillrl.agents.base import Agent
    from skillrl.rollout import EpisodeStart


@dataclass
class BootstrapConfig:
    """What ``skillrl bootstrap`` plays and distills."""

    env: str = DEFAULT_ENV
    """Environment id (any registered environment whose adapter has an expert)."""
    episodes: int = 120
    """Training goals to play (goal indices ``first_goal`` onwards of the train split)."""
    first_goal: int = 0
    """Index (within the train split) of the first goal played."""
    probe_fraction: float = 0.3
    """Fraction of the goals played by an expert with one deliberate mistake."""
    max_turns: int = MAX_TURNS
    """Turn limit per episode."""
    env_config: dict[str, Any] = field(default_factory=dict)
    """Environment settings (``envs.make`` keyword arguments, e.g. ``data_dir``)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.episodes < 1:
            raise ConfigError(f"episodes ({self.episodes}) must be >= 1")
        if self.first_goal < 0:
            raise ConfigError(f"first_goal ({self.first_goal}) must be >= 0")
        if not 0.0 <= self.probe_fraction < 1.0:
            raise ConfigError(f"probe_fraction ({self.probe_fraction}) must be in [0, 1)")
        if self.max_turns < 1:
            raise ConfigError(f"max_turns ({self.max_turns}) must be >= 1")

    @property
    def probes(self) -> int:
        """How many of the goals are played with a mistake."""
        return round(self.episodes * self.probe_fraction)


@dataclass
class BootstrapReport:
    """What bootstrapping played and what the bank got."""

    episodes: int = 0
    successes: int = 0
    probes: int = 0
    rollout_seconds: float = 0.0
    distill: DistillReport | None = None
    retired: dict[str, str] = field(default_factory=dict)


def _bootstrap_starts(config: BootstrapConfig, indices: range) -> list[EpisodeStart]:
    from skillrl.rollout import EpisodeStart

    return [
        EpisodeStart(
            config.env,
            split="train",
            goal_index=config.first_goal + i,
            seed=i,
            env_config=dict(config.env_config),
        )
        for i in indices
    ]


def play(bank: SkillBank, config: BootstrapConfig, agent: Agent | None = None) -> BootstrapReport:
    """Play the goals (expert, then faulty experts) and record every episode in the bank."""
    from skillrl.rollout import RolloutConfig, RolloutEngine

    if agent is None:
        from skillrl.agents.expert import ExpertAgent

        agent = ExpertAgent(max_turns=config.max_turns)
    rollout = RolloutConfig(max_turns=config.max_turns, record=True)
    faults = distill_adapter_for(config.env).faults
    probes = config.probes if faults else 0  # an environment without faults plays honestly
    honest = config.episodes - probes
    plan = [(agent, range(honest))]
    per_fault = -(-probes // len(faults)) if faults else 0  # ceil: every fault gets its share
    for n, fault in enumerate(faults):
        share = range(honest + n * per_fault, min(honest + (n + 1) * per_fault, config.episodes))
        player = FaultyExpertAgent(fault, max_turns=config.max_turns, env_id=config.env)
        plan.append((player, share))
    report = BootstrapReport(probes=probes)
    started = time.perf_counter()
    for player, indices in plan:
        if len(indices):
            records = RolloutEngine(player, bank=bank, config=rollout).run(
                _bootstrap_starts(config, indices)
            )
            report.episodes += len(records)
            report.successes += sum(r.success for r in records)
    report.rollout_seconds = time.perf_counter() - started
    return report


def bootstrap_bank(
    bank: SkillBank,
    distiller: Distiller,
    config: BootstrapConfig | None = None,
    *,
    agent: Agent | None = None,
    upkeep_config: UpkeepConfig | None = None,
) -> BootstrapReport:
    """Play, record, distill (this env's training episodes) and enforce the caps."""
    config = config or BootstrapConfig()
    report = play(bank, config, agent)
    report.distill = distill_pending(bank, distiller, PipelineConfig(env=config.env))
    report.retired = upkeep(bank, upkeep_config).retired
    return report


def active_drafts(
    bank: SkillBank, env: str, kinds: tuple[str, ...] = SKILL_KINDS
) -> list[EntryDraft]:
    """Return the active entries of ``env`` (and general ones) of ``kinds`` as drafts, for export.

    The starting bank holds the skills and notes; the cases ship in a file of their own
    (``skillrl.distill.seeding``).
    """
    entries = bank.list(env=env) + bank.list(kind="general")
    seen: dict[str, EntryDraft] = {}
    for entry in entries:
        if entry.kind not in kinds:
            continue
        fields = {name: getattr(entry, name) for name in EntryDraft.__dataclass_fields__}
        seen.setdefault(entry.id, EntryDraft(**fields))
    return list(seen.values())

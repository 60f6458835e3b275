"""Where cold-start examples come from: demonstrations in round 0, labelled learner states after.

Round 0 gathers from each configured source on training goals only: the scripted expert playing
(``expert``), successful training episodes stored in the bank, replayed so that each state gets
the prompt of today's runtime (``bank``), or a teacher model through any policy backend
(``teacher``). A DAgger round lets the current policy play (sampled at ``dagger_temperature``)
and the expert labels every state the learner reached (:mod:`trainers.cold_start.dagger`). Every
prompt is built by the agent the trainer's rollouts play with
(:class:`trainers.common.policy_rollouts. PolicyRollouts`), so an example's prompt is the prompt the
policy sees at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memory.placebo import MixedRetrieval, PlaceboRetrieval
from skillrl.rollout import EpisodeStart
from skillrl.skill_arms import donor_tasks
from skillrl_core.records import EpisodeRecord
from skillrl_core.splits import TRAIN_SPLIT
from trainers.cold_start.dagger import (
    ExpertLabeller,
    Labelled,
    LabellingAgent,
    ReplayAgent,
    collect_examples,
    succeeded,
)
from trainers.cold_start.round_metrics import DaggerFigures, SourceFigures
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.cold_start.sft_data import TurnExample
from trainers.common.policy_rollouts import PolicyRollouts

if TYPE_CHECKING:
    from memory.bank import SkillBank
    from skillrl.agents.base import Agent
    from skillrl.agents.llm import LLMAgent
    from skillrl.policies.base import ChatPolicy
    from skillrl.prompts import PromptConfig


@dataclass
class GatheredExamples:
    """One round's turn examples and the figures of the episodes they came from."""

    examples: list[TurnExample]
    sources: dict[str, SourceFigures] = field(default_factory=dict)
    """Round 0: the episodes each configured source played."""
    dagger: DaggerFigures | None = None
    """A DAgger round: the learner's episodes and the states the expert labelled."""


class ExampleGatherer:
    """Gathers a cold-start round's examples with the policy being trained."""

    def __init__(
        self,
        config: ColdStartConfig,
        *,
        policy: ChatPolicy,
        bank: SkillBank | None,
        teacher: ChatPolicy | None,
        env_config: dict[str, Any],
        prompt_config: PromptConfig,
        on_episode: Callable[[int, int], None] | None = None,
    ) -> None:
        self.config, self.policy, self.bank, self.teacher = config, policy, bank, teacher
        self.env_config, self.prompt_config, self.on_episode = env_config, prompt_config, on_episode
        self._mixed: MixedRetrieval | None = None

    def gather(self, round_index: int, goals: list[int]) -> GatheredExamples:
        """Return round ``round_index``'s examples on training ``goals``, with the round's figures.

        Round 0 gathers from every configured source (the bank's source replays stored episodes
        and ignores ``goals``); a later round rolls the learner out and the expert labels every
        state it reached.
        """
        if round_index == 0:
            examples: list[TurnExample] = []
            figures: dict[str, SourceFigures] = {}
            sources = {
                "expert": self._from_expert,
                "teacher": self._from_teacher,
                "bank": self._from_bank,
            }
            for source in self.config.sources:
                found, episodes = sources[source](goals)
                examples.extend(found)
                figures[source] = SourceFigures(len(episodes), _success_rate(episodes))
            return GatheredExamples(examples, sources=figures)
        labelled = self._collect(
            self._learner_agent(round_index),
            ExpertLabeller(self.config.max_turns),
            self._training_starts(goals),
            "dagger",
            round_index,
            keep=lambda record: True,
        )
        kept = labelled.examples
        if self.config.dagger_keep == "mistakes":
            kept = [e for e in kept if e.learner_action != e.action]
        return GatheredExamples(
            kept,
            dagger=DaggerFigures(
                episodes=len(labelled.episodes),
                success_rate=_success_rate(labelled.episodes),
                mean_turns=sum(len(e.turns) for e in labelled.episodes)
                / max(len(labelled.episodes), 1),
                states=len(labelled.examples),
                mistakes=sum(e.learner_action != e.action for e in labelled.examples),
                declined=labelled.declined,
            ),
        )

    def _from_expert(self, goals: list[int]) -> tuple[list[TurnExample], list[EpisodeRecord]]:
        labelled = self._collect(
            None, ExpertLabeller(self.config.max_turns), self._training_starts(goals), "expert", 0
        )
        return labelled.examples, labelled.episodes

    def _from_teacher(self, goals: list[int]) -> tuple[list[TurnExample], list[EpisodeRecord]]:
        actor = self._llm_agent(self.teacher, temperature=0.0, seed=None)
        labelled = self._collect(actor, None, self._training_starts(goals), "teacher", 0)
        return labelled.examples, labelled.episodes

    def _from_bank(self, goals: list[int]) -> tuple[list[TurnExample], list[EpisodeRecord]]:
        stored = self.bank.trajectories.episodes(
            env=self.config.env_id,
            split=TRAIN_SPLIT,
            success=True,
            limit=self.config.bank_episodes,
        )
        stored = sorted(stored, key=lambda e: (e.goal_id, e.episode_id))  # a stable order
        starts = [
            EpisodeStart(
                env_id=self.config.env_id,
                split=TRAIN_SPLIT,
                goal_id=e.goal_id,
                seed=e.seed,
                env_config=dict(self.env_config),
            )
            for e in stored
        ]
        replay = ReplayAgent([[t.action for t in e.turns] for e in stored])
        labelled = self._collect(replay, None, starts, "bank", 0)
        return labelled.examples, labelled.episodes

    def _collect(
        self,
        actor: Agent | None,
        labeller: ExpertLabeller | None,
        starts: list[EpisodeStart],
        source: str,
        round_index: int,
        keep: Callable[[EpisodeRecord], bool] = succeeded,
    ) -> Labelled:
        agent = LabellingAgent(
            self._llm_agent(self.policy, temperature=0.0, seed=None),
            actor=actor,
            labeller=labeller,
            skills=self.config.skills,
            constrained=self.config.constrained,
        )
        return collect_examples(
            agent,
            starts,
            bank=self._retrieval(),
            source=source,
            round_index=round_index,
            max_turns=self.config.max_turns,
            max_parallel=self.config.max_parallel,
            keep=keep,
            on_episode=self.on_episode,
            skill_withhold=self.config.skill_withhold,
            seed=self.config.seed,
        )

    def _retrieval(self) -> SkillBank | MixedRetrieval | None:
        """Return where the episodes played for examples retrieve from.

        The bank, or its mix with placebo draws and withheld episodes (``skill_placebo``,
        ``skill_withhold_episodes``).
        """
        config = self.config
        if not config.skills or self.bank is None:
            return None
        if not (config.skill_placebo or config.skill_withhold_episodes):
            return self.bank
        if self._mixed is None:
            placebo = None
            if config.skill_placebo:
                placebo = PlaceboRetrieval(
                    self.bank, donor_tasks(config.env_id, dict(self.env_config))
                )
            self._mixed = MixedRetrieval(
                self.bank,
                placebo,
                withhold=config.skill_withhold_episodes,
                placebo_fraction=config.skill_placebo,
                seed=config.seed,
            )
        return self._mixed

    def _training_starts(self, goals: list[int]) -> list[EpisodeStart]:
        return [
            EpisodeStart(
                env_id=self.config.env_id,
                split=TRAIN_SPLIT,
                goal_index=goal,
                seed=self.config.seed + goal,
                env_config=dict(self.env_config),
            )
            for goal in goals
        ]

    def _learner_agent(self, round_index: int) -> LLMAgent:
        t = self.config.dagger_temperature
        return self._llm_agent(self.policy, temperature=t, seed=self.config.seed + round_index)

    def _llm_agent(self, policy: ChatPolicy, *, temperature: float, seed: int | None) -> LLMAgent:
        """Return the agent the trainer's runner plays ``policy`` with (same prompts)."""
        runner = PolicyRollouts(
            policy,
            env_id=self.config.env_id,
            bank=self.bank if self.config.skills else None,
            max_turns=self.config.max_turns,
            max_new_tokens=self.config.max_new_tokens,
            constrained=self.config.constrained,
            prompt_config=self.prompt_config,
        )
        return runner.make_agent(temperature, seed)


def _success_rate(episodes: list[EpisodeRecord]) -> float:
    return sum(bool(e.success) for e in episodes) / len(episodes) if episodes else 0.0

"""How the trainer plays episodes: one policy as the runtime's LLM agent in its rollout engine.

:class:`PolicyRollouts` is the one place the trainer touches the agent runtime
(``skillrl.agents.llm.LLMAgent``, ``skillrl.rollout.RolloutEngine``): it holds the policy and the
settings of play (bank or none, turn limit, decoding), builds the agent and runs the engine on
``EpisodeStart``s of its environment (:meth:`PolicyRollouts.start` makes them). It also
accumulates where the time goes: the engines' :class:`~skillrl.rollout.RolloutStats`, summed
(model / environment / retrieval seconds, per batched turn and per episode turn).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import envs
from envs.registry import DEFAULT_ENV
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine, RolloutStats, TurnEvent
from skillrl_core.episode_limits import MAX_NEW_TOKENS, MAX_TURNS
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord

if TYPE_CHECKING:
    from memory.bank import SkillBank
    from memory.types import RetrievalEvent
    from skillrl.agents.base import Agent
    from skillrl.agents.llm import LLMAgent
    from skillrl.policies.base import ChatPolicy
    from skillrl.prompts import PromptConfig


@dataclass(frozen=True)
class RolloutProgress:
    """Where one batched rollout stands, after an episode turn (``PolicyRollouts.on_progress``).

    Episodes run side by side and mostly end together, so finished episodes alone say little
    until the end; turns say how far the rollout is. The turn budget (every episode at its turn
    limit) bounds what is left: an episode that ends early frees the turns it did not need.
    """

    episodes_done: int
    episodes: int
    turns: int
    """Episode turns played so far."""
    turn_budget: int
    """Turns the rollout plays at most: ``episodes`` times the turn limit."""
    budget_spent: int
    """Turns played plus the turns finished episodes left unused (reaches ``turn_budget``)."""
    seconds: float
    """Wall time since the rollout started."""

    @property
    def turns_per_second(self) -> float:
        """Episode turns per second so far (0 before the first turn)."""
        return self.turns / self.seconds if self.seconds > 0 else 0.0

    @property
    def seconds_left(self) -> float | None:
        """At most this many seconds remain at the rate so far (None before a rate exists)."""
        rate = self.turns_per_second
        if rate <= 0:
            return None
        return (self.turn_budget - self.budget_spent) / rate


@dataclass
class PolicyRollouts:
    """Plays batches of episodes with one policy, with or without the skill bank."""

    policy: ChatPolicy
    env_id: str = DEFAULT_ENV
    bank: SkillBank | None = None
    """The skill bank to retrieve from every turn (None: no skills)."""
    max_turns: int = MAX_TURNS
    max_new_tokens: int = MAX_NEW_TOKENS
    constrained: bool = False
    """Constrained decoding (every action admissible) instead of free generation."""
    env_config: dict[str, Any] = field(default_factory=dict)
    prompt_config: PromptConfig | None = None
    max_parallel: int = 16
    """Episodes active at once (one batched generation covers them all)."""
    count_retrievals: bool = True
    """Let retrieval count towards entries' statistics (off for evaluation)."""
    repair_queries: bool | None = None
    """Constrained decoding: replace a query that shares no word with the task (marked
    ``action_substituted``). None: only when greedy, so sampled training rollouts never do;
    ``skillrl eval`` sets True, since nothing trains on its turns."""
    sampling_scores: str = "sequence"
    """Constrained decoding, sampled turns: what candidates are drawn by
    (``skillrl.agents.llm.LLMAgentConfig.sampling_scores``)."""
    length_normalize: bool = True
    """Constrained decoding, greedy turns: rank candidates by mean log-prob per token (True) or
    by the summed log-prob (``skillrl.agents.llm.LLMAgentConfig.length_normalize``)."""
    skip_no_op_repeats: bool = True
    """Constrained decoding: leave out an action already taken at the same observation that
    changed nothing (``skillrl.agents.llm.LLMAgentConfig.skip_no_op_repeats``)."""
    timings: RolloutStats = field(default_factory=RolloutStats)
    """Every ``run``'s engine figures, summed (a caller may swap in a fresh one to start over)."""
    on_episode: Callable[[int, int], None] | None = None
    """Called as ``on_episode(finished, total)`` whenever an episode of a ``run`` ends."""
    on_progress: Callable[[RolloutProgress], None] | None = None
    """Called after every episode turn of a ``run`` with where the rollout stands."""

    def start(
        self, split: str, goal_index: int, *, seed: int | None = None, group_id: str | None = None
    ) -> EpisodeStart:
        """Return the start of one episode of this runner's environment: goal, env seed, group."""
        return EpisodeStart(self.env_id, split, goal_index, seed=seed, group_id=group_id)

    def split_size(self, split: str) -> int:
        """Return the number of goals in ``split`` of the environment (its adapter knows)."""
        return envs.adapter_for(self.env_id).split_size(split, self.env_config)

    def run(
        self,
        starts: list[EpisodeStart],
        *,
        temperature: float,
        sampling_seed: int | None = None,
        count_retrievals: bool | None = None,
        held_retrievals: list[RetrievalEvent] | None = None,
        wrap: Callable[[LLMAgent], Agent] | None = None,
    ) -> list[EpisodeRecord]:
        """Play every start to its end, in one batched rollout; records are not stored.

        ``count_retrievals`` overrides :attr:`count_retrievals` for this call (evaluation passes
        False so that measuring the bank does not change its usage statistics).
        ``held_retrievals``: when given, counted retrievals are not written to the bank but
        appended to this list as :class:`memory.types.RetrievalEvent` (the trainer
        records them when its rollout phase commits, so a killed rollout counts nothing).
        ``wrap``: plays through ``wrap(agent)`` instead (a probe that watches each turn, as
        :class:`skillrl.sensitivity.SensitivityProbe` does).
        """
        starts = [self._own(s) for s in starts]
        agent = self.make_agent(temperature, sampling_seed)
        if wrap is not None:
            agent = wrap(agent)
        config = RolloutConfig(
            max_turns=self.max_turns,
            max_parallel=self.max_parallel,
            record=False,
            count_retrievals=(
                self.count_retrievals if count_retrievals is None else count_retrievals
            ),
        )
        finished, turns, unused = [0], [0], [0]
        started = time.monotonic()

        def on_turn(event: TurnEvent) -> None:
            turns[0] += 1
            if event.done:
                finished[0] += 1
                unused[0] += max(self.max_turns - event.record.num_turns, 0)
                if self.on_episode is not None:
                    self.on_episode(finished[0], len(starts))
            if self.on_progress is not None:
                self.on_progress(
                    RolloutProgress(
                        episodes_done=finished[0],
                        episodes=len(starts),
                        turns=turns[0],
                        turn_budget=len(starts) * self.max_turns,
                        budget_spent=turns[0] + unused[0],
                        seconds=time.monotonic() - started,
                    )
                )

        engine = RolloutEngine(
            agent,
            bank=self.bank,
            config=config,
            on_turn=on_turn,
            held_retrievals=held_retrievals,
        )
        episodes = engine.run(starts)
        self.timings.add(engine.stats)
        return episodes

    def make_agent(self, temperature: float, sampling_seed: int | None = None) -> LLMAgent:
        """Return the ``LLMAgent`` this runner plays with (also what cold-start examples use).

        The cold start builds its examples' prompts with this same agent, so the prompts it
        trains on are the prompts these rollouts send.
        """
        from skillrl.agents.llm import LLMAgent, LLMAgentConfig
        from skillrl.policies.base import SamplingConfig

        sampling = SamplingConfig(
            max_new_tokens=self.max_new_tokens,
            temperature=temperature,
            seed=None if temperature == 0 else sampling_seed,
            stop=["</action>"],  # nothing after the action is parsed, so stop generating there
        )
        return LLMAgent(
            self.policy,
            self.prompt_config,
            constrained=self.constrained,
            config=LLMAgentConfig(
                sampling=sampling,
                repair_queries=self.repair_queries,
                sampling_scores=self.sampling_scores,
                length_normalize=self.length_normalize,
                skip_no_op_repeats=self.skip_no_op_repeats,
            ),
            uses_skills=self.bank is not None,
        )

    def _own(self, start: EpisodeStart) -> EpisodeStart:
        """``start`` with this runner's env settings (its own ``env_config`` keys win)."""
        if start.env_id != self.env_id:
            raise ConfigError(
                f"episode start is for env {start.env_id!r}, but this runner plays {self.env_id!r}"
            )
        return replace(start, env_config={**self.env_config, **start.env_config})

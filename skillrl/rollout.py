"""``RolloutEngine``: many episodes at once, one batched retrieval and one batched act per turn.

Each turn the engine (1) retrieves skills for every active episode in one ``bank.retrieve`` call,
(2) asks the agent for all their actions in one ``agent.act`` call (one batched generation),
(3) steps every environment and records a :class:`TurnRecord`. Finished episodes drop out and
waiting ones take their slots (at most :attr:`RolloutConfig.max_parallel` active). Finished
episodes are saved with ``bank.trajectories.save_episodes`` as they finish when ``record`` is on,
except test-split episodes: a held-out goal never changes the bank (no trajectory, no counter,
no retrieval event), so nothing it did can decide what the bank holds.

An exception from one episode's environment (or from recording its turn) ends that episode
only: it is logged, kept in :attr:`EpisodeRecord.error`, its last turn is marked truncated, and
the other episodes go on. Such episodes are not saved to the bank (their end says nothing about
the agent). Configuration errors (:class:`SkillRLError` from ``envs.make``/``reset``) and errors
of the batched ``agent.act`` still raise: they are not one episode's.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import envs
from memory.types import RetrievalEvent, RetrievalQuery, RetrievedSkills, retrieval_events
from skillrl.agents.base import Agent, AgentDecision, AgentState
from skillrl.episode_records import describe_error, fail_episode, finish_episode, turn_record
from skillrl_core.episode_limits import MAX_TURNS
from skillrl_core.errors import ConfigError, SkillRLError
from skillrl_core.records import EpisodeRecord, TurnRecord
from skillrl_core.splits import TEST_SPLIT, TRAIN_SPLIT
from skillrl_core.validation import check_finite_fields

if TYPE_CHECKING:
    from envs.base import TextEnv
    from memory.bank import SkillBank
    from memory.config import RetrievalConfig

logger = logging.getLogger(__name__)


@dataclass
class EpisodeStart:
    """Which episode to play: environment, goal and seed."""

    env_id: str
    split: str = "test"
    goal_index: int | None = None
    """Goal of ``split`` by index; None with no ``goal_id``: the environment draws one by seed."""
    seed: int | None = None
    group_id: str | None = None
    """Episodes that GRPO compares with each other share a group id."""
    env_config: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``envs.make``."""
    goal_id: str | None = None
    """Pick the goal by its stable id instead of by index."""
    withheld_ids: frozenset[str] = frozenset()
    """Entries kept out of every turn's retrieved skills (``RetrievalQuery.withheld_ids``): the
    paired-utility rollouts play a goal with an entry and again with it withheld."""

    def reset_options(self) -> dict[str, Any] | None:
        """Return the ``options`` passed to ``env.reset``."""
        if self.goal_id is not None:
            return {"goal_id": self.goal_id}
        if self.goal_index is not None:
            return {"split": self.split, "goal_index": self.goal_index}
        return None


@dataclass
class RolloutConfig:
    """How the engine runs episodes."""

    max_turns: int = MAX_TURNS
    """The turn limit, set in this one place: the engine truncates an episode here, and hands
    the same limit to an environment that keeps one of its own (a ``max_turns`` config field)
    unless the episode's ``env_config`` names another."""
    max_parallel: int = 16
    """Episodes active at once (one batched generation covers all of them)."""
    record: bool = False
    """Save finished episodes with ``bank.trajectories.save_episodes`` (needs a bank)."""
    retrieval: RetrievalConfig | None = None
    """``memory.RetrievalConfig`` for per-turn retrieval (None: the bank's defaults)."""
    count_retrievals: bool = True
    """Let retrieval update entries' ``times_retrieved`` (off for evaluation-only runs). Only
    episodes on ``counted_splits`` ever count: playing a test goal must not change what bank
    upkeep and ``skills list`` measure."""
    counted_splits: tuple[str, ...] = (TRAIN_SPLIT,)
    """Splits whose episodes are training rollouts (their retrievals count when
    ``count_retrievals`` is on)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.max_turns < 1:
            raise ConfigError(f"max_turns ({self.max_turns}) must be at least 1")
        if self.max_parallel < 1:
            raise ConfigError(f"max_parallel ({self.max_parallel}) must be at least 1")


@dataclass
class RolloutStats:
    """Where the time of a run went, and how much was generated.

    The one timing record: an engine fills it for one run, and a caller that plays many runs
    sums them with :meth:`add` (``trainers.common.policy_rollouts.PolicyRollouts.timings``).
    """

    episodes: int = 0
    turns: int = 0
    agent_calls: int = 0
    """Batched ``agent.act`` calls (one per turn of the run)."""
    model_seconds: float = 0.0
    env_seconds: float = 0.0
    retrieval_seconds: float = 0.0
    wall_seconds: float = 0.0
    prompt_tokens: int = 0
    generated_tokens: int = 0

    @property
    def episodes_per_minute(self) -> float:
        """Finished episodes per minute of wall time."""
        return 60.0 * self.episodes / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per second of wall time."""
        return self.generated_tokens / self.wall_seconds if self.wall_seconds else 0.0

    def to_dict(self) -> dict[str, float]:
        """Plain numbers, including the derived rates."""
        data = {k: float(v) for k, v in self.__dict__.items()}
        data.update(episodes_per_minute=self.episodes_per_minute)
        data.update(tokens_per_second=self.tokens_per_second)
        return data

    def add(self, other: RolloutStats) -> None:
        """Add another run's figures to these (every field is a sum)."""
        for name, value in vars(other).items():
            setattr(self, name, getattr(self, name) + value)

    def per_batch(self) -> dict[str, float]:
        """Mean seconds per batched agent call, by cause (``model``, ``env``, ``retrieval``)."""
        return self._per(max(self.agent_calls, 1))

    def per_turn(self) -> dict[str, float]:
        """Mean seconds per episode turn, by cause (``model``, ``env``, ``retrieval``)."""
        return self._per(max(self.turns, 1))

    def _per(self, n: int) -> dict[str, float]:
        return {
            "model": self.model_seconds / n,
            "env": self.env_seconds / n,
            "retrieval": self.retrieval_seconds / n,
        }


@dataclass
class TurnEvent:
    """What happened in one episode at one turn (passed to ``on_turn`` observers)."""

    slot: int
    """Index of the episode in the ``starts`` list."""
    record: EpisodeRecord
    turn: TurnRecord
    skills: RetrievedSkills | None
    decision: AgentDecision
    next_observation: str
    done: bool


Review = Callable[[AgentState, AgentDecision], AgentDecision]
"""Called before each action is sent (``--step``): may return a changed decision."""


@dataclass
class _Live:
    slot: int
    start: EpisodeStart
    env: TextEnv
    record: EpisodeRecord
    observation: str
    info: dict[str, Any]
    began: bool = True
    """Whether the agent was told the episode began (not when the reset failed)."""


class RolloutEngine:
    """Runs episodes for an agent, batched across episodes, with per-turn skill retrieval."""

    def __init__(
        self,
        agent: Agent,
        *,
        bank: SkillBank | None = None,
        config: RolloutConfig | None = None,
        on_turn: Callable[[TurnEvent], None] | None = None,
        review: Review | None = None,
        held_retrievals: list[RetrievalEvent] | None = None,
    ) -> None:
        self.agent = agent
        self.bank = bank
        self.held_retrievals = held_retrievals
        """When a list: retrievals that count are not written to the bank; their events are
        appended here, for the caller to record with ``bank.record`` (a trainer does so when
        its rollout phase commits, so a killed rollout counts nothing)."""
        self.config = config or RolloutConfig()
        if self.config.record and bank is None:
            raise ConfigError("record=True needs a bank to save episodes into")
        self.on_turn = on_turn
        self.review = review
        self.stats = RolloutStats()
        """Statistics of the latest :meth:`run`."""

    @property
    def skills_enabled(self) -> bool:
        """Whether skills are retrieved each turn (the agent uses them and a bank is open)."""
        return self.bank is not None and bool(getattr(self.agent, "uses_skills", False))

    def run(self, starts: list[EpisodeStart]) -> list[EpisodeRecord]:
        """Play every start to the end; records come back in the order of ``starts``."""
        self.stats = RolloutStats()
        began = time.perf_counter()
        pending = deque(enumerate(starts))
        active: list[_Live] = []
        results: dict[int, EpisodeRecord] = {}
        while pending or active:
            while pending and len(active) < self.config.max_parallel:
                slot, start = pending.popleft()
                active.append(self._begin(slot, start))
            finished = self._turn(active)
            for live in finished:
                active.remove(live)
                results[live.slot] = live.record
                if live.began:
                    self.agent.end_episode(live.record.episode_id)
            saved = [
                live.record
                for live in finished
                if not live.record.error and live.record.split != TEST_SPLIT
            ]
            if saved and self.config.record:
                self.bank.trajectories.save_episodes(saved)
        self.stats.episodes = len(results)
        self.stats.wall_seconds = time.perf_counter() - began
        return [results[i] for i in range(len(starts))]

    def _env_settings(self, start: EpisodeStart) -> dict[str, Any]:
        """Return the episode's ``envs.make`` settings, with the engine's turn limit."""
        from envs.registry import takes_turn_limit

        if "max_turns" in start.env_config or not takes_turn_limit(start.env_id):
            return start.env_config
        return {**start.env_config, "max_turns": self.config.max_turns}

    def _begin(self, slot: int, start: EpisodeStart) -> _Live:
        tick = time.perf_counter()
        env = envs.make(start.env_id, **self._env_settings(start))
        error = ""
        try:
            observation, info = env.reset(seed=start.seed, options=start.reset_options())
        except SkillRLError:
            raise  # a bad goal or option: the user's to fix, not one episode's bad luck
        except Exception as exc:  # one broken episode must not end the others
            observation, info = "", {}
            error = describe_error(exc)
            logger.warning("episode %d failed at reset: %s", slot, error, exc_info=True)
        self.stats.env_seconds += time.perf_counter() - tick
        record = EpisodeRecord(
            env_id=start.env_id,
            goal_id=str(info.get("goal_id", "")),
            instruction=str(info.get("instruction", "")),
            category=str(info.get("category", "")),
            split=str(info.get("split", start.split)),
            seed=start.seed,
            group_id=start.group_id,
            agent=getattr(self.agent, "name", type(self.agent).__name__),
            skills_enabled=self.skills_enabled,
            error=error,
        )
        if not error:
            self.agent.begin_episode(record.episode_id, info)
        return _Live(slot, start, env, record, observation, info, began=not error)

    def _turn(self, active: list[_Live]) -> list[_Live]:
        """Retrieve, act and step once for every active episode; return those that finished."""
        failed = [live for live in active if live.record.error]
        active = [live for live in active if not live.record.error]
        if not active:
            return failed
        skills = self._retrieve(active)
        states = [self._state(live, s) for live, s in zip(active, skills, strict=True)]
        tick = time.perf_counter()
        decisions = self.agent.act(states)
        self.stats.model_seconds += time.perf_counter() - tick
        self.stats.agent_calls += 1
        if len(decisions) != len(states):
            raise RuntimeError(
                f"agent returned {len(decisions)} decisions for {len(states)} states"
            )
        finished = failed
        for live, state, decision, retrieved in zip(active, states, decisions, skills, strict=True):
            if self.review is not None:
                decision = self.review(state, decision)
            try:
                event = self._step(live, state, decision, retrieved)
            except Exception as exc:  # one broken episode must not end the others
                fail_episode(live.record, exc, live.slot)
                finished.append(live)
                continue
            if self.on_turn is not None:
                self.on_turn(event)
            if event.done:
                finished.append(live)
        return finished

    def _retrieve(self, active: list[_Live]) -> list[RetrievedSkills | None]:
        if not self.skills_enabled:
            return [None] * len(active)
        queries = [
            RetrievalQuery(
                instruction=live.record.instruction,
                observation=live.observation,
                env=live.record.env_id,
                category=live.record.category or None,
                withheld_ids=live.start.withheld_ids,
                wants=envs.adapter_for(live.record.env_id).wanted_values(live.record.instruction),
            )
            for live in active
        ]
        counted = [
            self.config.count_retrievals and live.record.split in self.config.counted_splits
            for live in active
        ]
        results: list[RetrievedSkills | None] = [None] * len(active)
        tick = time.perf_counter()
        # One batched call per counting mode (a batch mixing splits, rare, costs two).
        for mode in (True, False):
            positions = [i for i, c in enumerate(counted) if c is mode]
            if not positions:
                continue
            asked = [queries[i] for i in positions]
            hold = mode and self.held_retrievals is not None
            retrieved = self.bank.retrieve(asked, self.config.retrieval, record=mode and not hold)
            if hold:
                self.held_retrievals.extend(retrieval_events(asked, retrieved))
            for i, skills in zip(positions, retrieved, strict=True):
                results[i] = skills
        self.stats.retrieval_seconds += time.perf_counter() - tick
        return results

    @staticmethod
    def _state(live: _Live, skills: RetrievedSkills | None) -> AgentState:
        return AgentState(
            episode_id=live.record.episode_id,
            env_id=live.record.env_id,
            instruction=live.record.instruction,
            category=live.record.category,
            observation=live.observation,
            available_actions=list(live.info.get("available_actions", [])),
            turn=len(live.record.turns),
            history=list(live.record.turns),
            skills=skills,
            info=dict(live.info),
        )

    def _step(
        self,
        live: _Live,
        state: AgentState,
        decision: AgentDecision,
        skills: RetrievedSkills | None,
    ) -> TurnEvent:
        tick = time.perf_counter()
        observation, reward, terminated, truncated, info = live.env.step(decision.action)
        self.stats.env_seconds += time.perf_counter() - tick
        truncated = truncated or (not terminated and state.turn + 1 >= self.config.max_turns)
        turn = turn_record(state, decision, skills, reward, terminated, truncated, info)
        live.record.turns.append(turn)
        self.stats.turns += 1
        self.stats.prompt_tokens += turn.prompt_tokens
        self.stats.generated_tokens += turn.completion_tokens
        done = terminated or truncated
        if done:
            finish_episode(
                live.record, info, reward, terminated, envs.adapter_for(live.record.env_id)
            )
        live.observation, live.info = observation, info
        return TurnEvent(live.slot, live.record, turn, skills, decision, observation, done)

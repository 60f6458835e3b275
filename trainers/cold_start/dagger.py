"""Turn examples from played episodes: demonstrations and DAgger labels, through the rollout engine.

Every example is recorded inside a :class:`~skillrl.rollout.RolloutEngine` run by
:class:`LabellingAgent`, which wraps whoever acts (the scripted expert, a teacher model, a replay
of a stored episode, or the policy being trained) and, for every state the engine hands it,
builds the example from that very state: the skills retrieved for that turn, the engine's
history, the observation. Nothing about a turn is reconstructed afterwards.

DAgger (Ross et al., 2011): the policy acts, the expert labels. :class:`ExpertLabeller` asks
the environment's expert (its adapter's ``make_expert``) to ``decide`` the expert's action at the
learner's state and then tells it the action the learner took (``observe``); an expert without
those two (Sokoban's re-plans from any grid) labels with ``label``, which declines a state it has
no move to teach at (a deadlocked room: no example), else ``act``. So the label is the expert's
move *from where the learner is* (back from a wrong product, the option the learner skipped), not
a replay of the expert's own path. Departure from the paper: no beta-mixture of expert and
learner actions; round 0 is pure behaviour cloning and every later round rolls out the current
policy only.
"""

from __future__ import annotations

import logging
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from skillrl.agents.base import Agent, AgentDecision, AgentState
from skillrl.agents.expert import EpisodeExperts, expert_info
from skillrl.parsing import split_thinking
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine, TurnEvent
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord
from skillrl_core.splits import TRAIN_SPLIT
from trainers.cold_start.sft_data import TurnExample, build_example

if TYPE_CHECKING:
    from memory.bank import SkillBank
    from skillrl.agents.llm import LLMAgent

logger = logging.getLogger(__name__)


class ExpertLabeller:
    """The scripted expert's action for any state of an episode, whoever takes the actions."""

    def __init__(self, max_turns: int = 15) -> None:
        self.experts = EpisodeExperts(max_turns)

    def begin(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Start labelling an episode (the expert is made at its first state: its env is known)."""
        self.experts.begin(episode_id, reset_info)

    def label(self, state: AgentState) -> str | None:
        """Return the expert's action at ``state``, or None where the expert has none to teach.

        An expert with a ``label`` method may decline a state (Sokoban's, once a box is
        deadlocked: any move it plays there only keeps the episode going); such a state becomes
        no example.
        """
        expert = self.experts.expert_for(state)
        info = expert_info(state)
        decide = getattr(expert, "decide", None)
        if decide is not None:
            return decide(state.observation, info)
        label = getattr(expert, "label", None)
        if label is not None:
            return label(state.observation, info)
        return expert.act(state.observation, info)

    def act(self, state: AgentState) -> str:
        """Return the action the expert plays at ``state`` (demonstrations: it always acts)."""
        expert = self.experts.expert_for(state)
        return expert.act(state.observation, expert_info(state))

    def observe(self, episode_id: str, action: str) -> None:
        """Tell the episode's expert which action was actually taken at the last labelled state."""
        observe = getattr(self.experts.started(episode_id), "observe", None)
        if observe is not None:
            observe(action)

    def end(self, episode_id: str) -> None:
        """Forget an episode."""
        self.experts.end(episode_id)


class ReplayAgent:
    """Replays stored action sequences, one per episode, in the order episodes begin."""

    name = "replay"
    uses_skills = False

    def __init__(self, actions: list[list[str]]) -> None:
        self._queue = deque(actions)
        self._actions: dict[str, list[str]] = {}

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Take the next stored sequence (the engine begins episodes in ``starts`` order)."""
        self._actions[episode_id] = list(self._queue.popleft())

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Return each episode's stored action for its turn (the first admissible past the end)."""
        decisions = []
        for state in states:
            actions = self._actions[state.episode_id]
            fallback = state.available_actions[0] if state.available_actions else ""
            action = actions[state.turn] if state.turn < len(actions) else fallback
            decisions.append(AgentDecision(action=action, model_output=action))
        return decisions

    def end_episode(self, episode_id: str) -> None:
        """Forget the episode."""
        self._actions.pop(episode_id, None)


@dataclass
class Labelled:
    """Examples of one rollout and the episodes they came from (``starts`` order)."""

    examples: list[TurnExample]
    episodes: list[EpisodeRecord]
    declined: int = 0
    """States the expert had no action to teach at (:meth:`ExpertLabeller.label`): no example."""


class LabellingAgent:
    """Acts through ``actor`` (or the labeller) and records one example per state it is shown.

    The example's prompt is ``prompt_agent.prompt_for(state)``: the learner's own prompt builder
    and token budget. Its target is the labeller's action when there is a labeller (expert
    demonstrations, DAgger), else the actor's action (teacher, replay).
    """

    def __init__(
        self,
        prompt_agent: LLMAgent,
        *,
        actor: Agent | None,
        labeller: ExpertLabeller | None,
        skills: bool,
        constrained: bool,
    ) -> None:
        if actor is None and labeller is None:
            raise ConfigError("a labelling agent needs an actor, a labeller or both")
        self.prompt_agent, self.actor, self.labeller = prompt_agent, actor, labeller
        self.uses_skills = skills
        self.constrained = constrained
        self.name = getattr(actor, "name", "expert")
        self.turns: dict[str, list[tuple[AgentState, str | None, str, str]]] = {}
        """Per episode: (state, label, thought, action taken); label None: the expert declined."""

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Refuse goals outside the training split; start the actor and the labeller."""
        split = reset_info.get("split")
        if split is not None and split != TRAIN_SPLIT:
            raise ConfigError(
                f"goal {reset_info.get('goal_id')!r} is from the {split!r} split: only training "
                "goals may become fine-tuning examples"
            )
        self.turns[episode_id] = []
        if self.actor is not None:
            self.actor.begin_episode(episode_id, reset_info)
        if self.labeller is not None:
            self.labeller.begin(episode_id, reset_info)

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Label every state, let the actor act, and remember both."""
        labels = [self.labeller.label(s) for s in states] if self.labeller is not None else None
        if self.actor is not None:
            decisions = self.actor.act(states)
        else:
            played = [
                label if label is not None else self.labeller.act(state)
                for state, label in zip(states, labels or [], strict=True)
            ]
            decisions = [AgentDecision(action=a, model_output=a) for a in played]
        for i, (state, decision) in enumerate(zip(states, decisions, strict=True)):
            label = labels[i] if labels is not None else decision.action
            thought = "" if labels is not None else _thought(decision, state)
            self.turns[state.episode_id].append((state, label, thought, decision.action))
            if self.labeller is not None:
                self.labeller.observe(state.episode_id, decision.action)
        return decisions

    def end_episode(self, episode_id: str) -> None:
        """End the episode for the actor and the labeller (its turns are kept)."""
        if self.actor is not None:
            self.actor.end_episode(episode_id)
        if self.labeller is not None:
            self.labeller.end(episode_id)


def _thought(decision: AgentDecision, state: AgentState) -> str:
    """Return a teacher's own thought, when it wrote one (free decoding)."""
    return split_thinking(decision.model_output)[0][:300]


def collect_examples(
    agent: LabellingAgent,
    starts: list[EpisodeStart],
    *,
    bank: SkillBank | None,
    source: str,
    round_index: int,
    max_turns: int,
    max_parallel: int = 16,
    keep: Callable[[EpisodeRecord], bool] = lambda record: True,
    on_episode: Callable[[int, int], None] | None = None,
    skill_withhold: float = 0.0,
    seed: int = 0,
) -> Labelled:
    """Play ``starts`` through ``agent`` and return the examples of the episodes ``keep`` accepts.

    Demonstration sources pass ``keep=succeeded`` and drop turns whose action was invalid;
    DAgger keeps every state (``source == "dagger"``), failures included: those are the states
    behaviour cloning never shows. ``skill_withhold``: the fraction of examples whose prompt is
    built from the same state with no entries (:func:`withholds_skills` draws which).
    """
    config = RolloutConfig(
        max_turns=max_turns, max_parallel=max_parallel, record=False, count_retrievals=False
    )
    finished = [0]

    def on_turn(event: TurnEvent) -> None:
        if event.done and on_episode is not None:
            finished[0] += 1
            on_episode(finished[0], len(starts))

    engine = RolloutEngine(agent, bank=bank, config=config, on_turn=on_turn)
    episodes = engine.run(starts)
    examples: list[TurnExample] = []
    declined = 0
    for index, (start, record) in enumerate(zip(starts, episodes, strict=True)):
        if record.split != TRAIN_SPLIT:  # reset info without a split: checked here instead
            raise ConfigError(f"episode of split {record.split!r} cannot become examples")
        if not keep(record):
            continue
        for (state, label, thought, _), turn in zip(
            agent.turns.get(record.episode_id, []), record.turns, strict=False
        ):
            if source != "dagger" and not turn.action_valid:
                continue
            if label is None:
                declined += 1
                continue
            goal_index = start.goal_index if start.goal_index is not None else -1
            if state.skills is not None and withholds_skills(
                skill_withhold, seed, source, round_index, goal_index, state.turn
            ):
                state = replace(state, skills=None)
            examples.append(
                build_example(
                    agent.prompt_agent,
                    state,
                    label,
                    constrained=agent.constrained,
                    source=source,
                    round_index=round_index,
                    episode=index,
                    goal_index=goal_index,
                    split=record.split,
                    thought=thought,
                    learner_action=turn.action if source == "dagger" else "",
                )
            )
        agent.turns.pop(record.episode_id, None)
    return Labelled(examples, episodes, declined)


def withholds_skills(
    fraction: float, seed: int, source: str, round_index: int, goal_index: int, turn: int
) -> bool:
    """Whether this turn's example is built with its entries withheld.

    A hash of the turn's coordinates, not a shared random stream: the draw does not depend on
    the order in which the batched engine finishes episodes, so a rerun or a resumed round
    withholds the same turns.
    """
    if fraction <= 0.0:
        return False
    key = f"{seed}:{source}:{round_index}:{goal_index}:{turn}".encode()
    return zlib.crc32(key) / 2**32 < fraction


def succeeded(record: EpisodeRecord) -> bool:
    """Keep an episode's turns only when it bought the right product."""
    return bool(record.success)

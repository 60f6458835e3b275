"""Skill sensitivity: whether the policy's choice depends on what its entries say.

A 300-goal placebo arm (``skillrl eval --skills on,placebo``) is the verdict on whether a bank
carries information; this is the fast signal to watch while training. On every turn whose choice
is open (constrained decoding scores two or more admissible actions), the same state is scored
again with the entries swapped for a placebo draw (as many entries, retrieved for another goal:
``memory.placebo``), and two figures are kept per turn: whether the greedy action changed, and the
KL divergence between the two distributions over the candidates (each a softmax of the scores
the policy ranks them by). A policy that ignores its entries scores 0 on both ("template
collapse", RAGEN-2's name for outputs that do not depend on their input); one that acts on them
does not. Turns are grouped by the page type the environment names (``info["page"]``). With a
reference agent watching (the scripted expert), a changed turn is a win for the entries when only
their action is the reference's, and a loss when only the placebo's is. A reference that can be
asked about a state without moving on (:class:`Peeks`, as the expert can) is also asked with the
placebo entries: the share of open turns whose *reference* action the swap changes is how often
the entries change the right action at all, the most a policy that reads them well would change.

:class:`SensitivityProbe` wraps the agent that plays: the episode goes on with the agent's own
decisions (the probe never changes what is played), so the figures come from the states the
policy actually reaches.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import envs
from memory.types import RetrievalQuery

if TYPE_CHECKING:
    from memory.placebo import PlaceboRetrieval
    from skillrl.agents.base import Agent, AgentDecision, AgentState
    from skillrl.agents.llm import LLMAgent


@dataclass(frozen=True)
class TurnSensitivity:
    """One open turn scored with its own entries and with a placebo draw."""

    page: str
    changed: bool
    """Whether the greedy action differs."""
    kl: float
    """KL(own || placebo) between the softmax distributions over the same candidates."""
    own_action: str
    placebo_action: str
    reference_action: str | None = None
    """What a reference agent (the environment's scripted expert) does in the same state; None:
    no reference watched."""
    reference_placebo_action: str | None = None
    """What the reference does in the same state with the placebo entries; None: not asked (no
    reference, or one that cannot be asked without moving on)."""

    @property
    def reference_changed(self) -> bool:
        """Whether the swap changes the reference's action (False when it was not asked)."""
        return (
            self.reference_placebo_action is not None
            and self.reference_action != self.reference_placebo_action
        )

    @property
    def verdict(self) -> int:
        """Return +1 for a win, -1 for a loss, 0 for neither, no change or no reference.

        A win: only the own-entries action is the reference's; a loss: only the placebo's is.
        """
        if not self.changed or self.reference_action is None:
            return 0
        return (self.own_action == self.reference_action) - (
            self.placebo_action == self.reference_action
        )


@dataclass(frozen=True)
class SensitivityFigures:
    """The share of open turns whose greedy action a placebo swap changes, and the mean KL."""

    turns: int
    changed_share: float
    mean_kl: float
    changes_won: int = 0
    """Changed turns where the own entries' action is the reference's and the placebo's is not."""
    changes_lost: int = 0
    """Changed turns where the placebo's action is the reference's and the own entries' is not."""
    reference_asked: int = 0
    """Turns whose reference was also asked with the placebo entries."""
    reference_changes: int = 0
    """Of those, turns where the swap changes the reference's action: the turns whose right
    action the entries decide."""
    reference_changes_followed: int = 0
    """Of those, turns where the swap changes the policy's action too."""


@dataclass
class SensitivityReport:
    """Every probed turn, and the figures overall and per page type."""

    turns: list[TurnSensitivity] = field(default_factory=list)

    @property
    def overall(self) -> SensitivityFigures:
        """The figures over every probed turn."""
        return _figures(self.turns)

    @property
    def by_page(self) -> dict[str, SensitivityFigures]:
        """The figures per page type, in order of first appearance."""
        groups: dict[str, list[TurnSensitivity]] = defaultdict(list)
        for turn in self.turns:
            groups[turn.page].append(turn)
        return {page: _figures(turns) for page, turns in groups.items()}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures (overall and per page; the turns themselves are left out)."""
        return {
            "overall": vars(self.overall),
            "by_page": {page: vars(f) for page, f in self.by_page.items()},
        }


def _figures(turns: list[TurnSensitivity]) -> SensitivityFigures:
    n = len(turns)
    if not n:
        return SensitivityFigures(0, 0.0, 0.0)
    return SensitivityFigures(
        n,
        sum(t.changed for t in turns) / n,
        sum(t.kl for t in turns) / n,
        changes_won=sum(t.verdict > 0 for t in turns),
        changes_lost=sum(t.verdict < 0 for t in turns),
        reference_asked=sum(t.reference_placebo_action is not None for t in turns),
        reference_changes=sum(t.reference_changed for t in turns),
        reference_changes_followed=sum(t.reference_changed and t.changed for t in turns),
    )


def softmax(scores: dict[str, float]) -> dict[str, float]:
    """Return the distribution a softmax of ``scores`` gives (over the same keys)."""
    top = max(scores.values())
    weights = {a: math.exp(s - top) for a, s in scores.items()}
    total = sum(weights.values())
    return {a: w / total for a, w in weights.items()}


def kl_divergence(p: dict[str, float], q: dict[str, float]) -> float:
    """KL(p || q) = sum_a p(a) log(p(a) / q(a)) over the actions both score."""
    shared = [a for a in p if a in q]
    return max(0.0, sum(p[a] * math.log(p[a] / q[a]) for a in shared if p[a] > 0 and q[a] > 0))


def compare_turn(page: str, own: AgentDecision, placebo: AgentDecision) -> TurnSensitivity | None:
    """Compare one state's two decisions.

    None when the choice was not open (fewer than two scored candidates).
    """
    if not own.candidate_scores or not placebo.candidate_scores:
        return None
    if len(own.candidate_scores) < 2:
        return None
    p, q = softmax(own.candidate_scores), softmax(placebo.candidate_scores)
    return TurnSensitivity(
        page, own.action != placebo.action, kl_divergence(p, q), own.action, placebo.action
    )


@runtime_checkable
class Peeks(Protocol):
    """A reference that says what it would do in states without moving on.

    :meth:`skillrl.agents.expert.ExpertAgent.peek` is one.
    """

    def peek(self, states: list[AgentState]) -> list[AgentDecision]:
        """Return the decision for each state; the reference's memory stays as it was."""
        ...


class SensitivityProbe:
    """Plays with ``agent`` and scores every open turn again with placebo entries.

    ``placebo``: where the swapped entries come from. ``reference``: an agent asked what it
    would do in every state (the environment's scripted expert), so that a changed turn can be
    called a win or a loss for the own entries; it only watches. One that :class:`Peeks` is also
    asked what it would do with the placebo entries. The probe records into
    :attr:`report`; the decisions returned are the agent's own.
    """

    def __init__(
        self, agent: LLMAgent, placebo: PlaceboRetrieval, reference: Agent | None = None
    ) -> None:
        self.agent, self.placebo, self.reference = agent, placebo, reference
        self.name = getattr(agent, "name", "llm")
        self.uses_skills = True
        self.report = SensitivityReport()

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Begin the episode for the wrapped agent (and the reference)."""
        self.agent.begin_episode(episode_id, reset_info)
        if self.reference is not None:
            self.reference.begin_episode(episode_id, reset_info)

    def end_episode(self, episode_id: str) -> None:
        """End the episode for the wrapped agent (and the reference)."""
        self.agent.end_episode(episode_id)
        if self.reference is not None:
            self.reference.end_episode(episode_id)

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Return the agent's decisions; score the states that held entries again with placebo."""
        decisions = self.agent.act(states)
        # Only open choices are compared: a free-text turn (a search) is not played again.
        probed = [
            i
            for i, s in enumerate(states)
            if s.skills is not None
            and s.skills.all
            and len(decisions[i].candidate_scores or {}) >= 2
        ]
        placebo_states = self._placebo_states([states[i] for i in probed])
        # Asked before it acts: acting moves the reference's memory past the state.
        reference_placebo: list[str | None] = [None] * len(probed)
        if probed and isinstance(self.reference, Peeks):
            reference_placebo = [d.action for d in self.reference.peek(placebo_states)]
        # The reference sees every state the policy reaches (an expert may keep track of them).
        references = (
            [d.action for d in self.reference.act(states)] if self.reference is not None else None
        )
        if not probed:
            return decisions
        again = self.agent.act(placebo_states)
        for i, placebo_decision, reference_swapped in zip(
            probed, again, reference_placebo, strict=True
        ):
            page = str(states[i].info.get("page") or "any")
            turn = compare_turn(page, decisions[i], placebo_decision)
            if turn is not None:
                if references is not None:
                    turn = replace(
                        turn,
                        reference_action=references[i],
                        reference_placebo_action=reference_swapped,
                    )
                self.report.turns.append(turn)
        return decisions

    def _placebo_states(self, states: list[AgentState]) -> list[AgentState]:
        """Return the same states with their entries swapped for a placebo draw."""
        if not states:
            return []
        queries = [
            RetrievalQuery(
                s.instruction,
                s.observation,
                s.env_id,
                s.category or None,
                wants=envs.adapter_for(s.env_id).wanted_values(s.instruction),
            )
            for s in states
        ]
        swapped = self.placebo.retrieve(queries)
        return [replace(s, skills=skills) for s, skills in zip(states, swapped, strict=True)]

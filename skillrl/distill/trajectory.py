"""Read the structure of a trajectory: what kinds of step it took, and render it as text.

WebShop actions are ``search[...]`` and ``click[...]``; a click is navigation (``back to search``,
``next >``, ``description``...), a product (an ASIN), ``buy now``, or otherwise an option value
(``large``, ``navy blue``). Other environments fall back to the verb before ``[``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from skillrl_core.records import EpisodeRecord

_ACTION = re.compile(r"^\s*([a-z_ ]+?)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
_ASIN = re.compile(r"^b0[0-9a-z]{8}$", re.IGNORECASE)
PAGING = frozenset({"next >", "< prev"})
DETAILS = frozenset({"description", "features", "reviews", "attributes"})
NAVIGATION = PAGING | DETAILS | {"back to search"}
BUY = "buy now"


def split_action(action: str) -> tuple[str, str]:
    """Return ``(verb, argument)`` of ``verb[argument]`` (lowercased); ``(action, "")`` if bare."""
    match = _ACTION.match(action)
    if not match:
        return action.strip().lower(), ""
    return match.group(1).strip().lower(), match.group(2).strip().lower()


@dataclass
class TrajectoryFacts:
    """Counts and choices that describe how an episode went, without its specifics."""

    turns: int = 0
    searches: int = 0
    pages_turned: int = 0
    back_to_search: int = 0
    products_opened: int = 0
    details_viewed: int = 0
    option_clicks: list[str] = field(default_factory=list)
    """Option values clicked on product pages, in order."""
    bought: bool = False
    invalid_actions: int = 0
    most_repeated: tuple[str, int] = ("", 0)
    """The action repeated most often (only valid actions count) and how many times."""
    truncated: bool = False
    verbs: list[str] = field(default_factory=list)

    @property
    def refined_search(self) -> bool:
        """Whether the agent searched more than once."""
        return self.searches > 1


def trajectory_facts(episode: EpisodeRecord) -> TrajectoryFacts:
    """Summarise the structure of ``episode``'s actions."""
    facts = TrajectoryFacts(turns=len(episode.turns), invalid_actions=episode.invalid_actions)
    repeats: Counter[str] = Counter()
    for turn in episode.turns:
        verb, argument = split_action(turn.action)
        facts.verbs.append(verb)
        if not turn.action_valid:
            continue
        repeats[turn.action.strip().lower()] += 1
        if verb == "search":
            facts.searches += 1
        elif verb == "click":
            _count_click(facts, argument)
    if repeats:
        facts.most_repeated = repeats.most_common(1)[0]
    facts.truncated = bool(episode.turns) and episode.turns[-1].truncated
    return facts


def _count_click(facts: TrajectoryFacts, target: str) -> None:
    if target in PAGING:
        facts.pages_turned += 1
    elif target == "back to search":
        facts.back_to_search += 1
    elif target in DETAILS:
        facts.details_viewed += 1
    elif target == BUY:
        facts.bought = True
    elif _ASIN.match(target):
        facts.products_opened += 1
    else:
        facts.option_clicks.append(target)


def render_trajectory(episode: EpisodeRecord, *, max_observation_chars: int | None = None) -> str:
    """Render an episode as a raw-trajectory memory would store it (task, observations, actions)."""
    lines = [f"Task: {episode.instruction}"]
    for turn in episode.turns:
        observation = turn.observation
        if max_observation_chars is not None and len(observation) > max_observation_chars:
            observation = observation[:max_observation_chars] + " ..."
        validity = "" if turn.action_valid else " (invalid)"
        lines.append(f"Observation {turn.turn}: {observation}")
        lines.append(f"Action {turn.turn}: {turn.action}{validity}")
    outcome = "success" if episode.success else "failure"
    lines.append(f"Outcome: {outcome}, score {episode.score:g}")
    return "\n".join(lines)

"""Reject entries that leak episode specifics into the bank.

A bank entry must transfer to other goals, so it may not carry what only one episode knew: long
verbatim spans of the episode's instruction, its episode or goal id, and whatever its environment
names as specific (:attr:`~envs.distill_adapter.DistillAdapter.leak_patterns` and
:meth:`~envs.distill_adapter.DistillAdapter.episode_leaks`). Text checked without an environment
(a general entry, a shipped file) is held to every registered environment's patterns.
"""

from __future__ import annotations

from collections.abc import Iterable

from envs import distill_adapter_for, registered
from envs.distill_adapter import DistillAdapter, has_span, words
from memory.types import EntryDraft
from skillrl_core.records import EpisodeRecord
from skillrl_core.splits import TEST_SPLIT

SPAN_WORDS = 7
"""A verbatim run of this many instruction words counts as copying the episode."""


def _adapters(env_ids: Iterable[str]) -> list[DistillAdapter]:
    wanted = list(dict.fromkeys(env_ids)) or list(registered())
    return [distill_adapter_for(env_id) for env_id in wanted]


def find_leaks(
    text: str, episodes: Iterable[EpisodeRecord] = (), env: str | None = None
) -> list[str]:
    """Return why ``text`` leaks episode specifics (empty when it is clean).

    Patterns come from ``env`` and the episodes' environments, or from every registered
    environment when neither is given.
    """
    episodes = list(episodes)
    reasons: list[str] = []
    env_ids = ([env] if env else []) + [episode.env_id for episode in episodes]
    for adapter in _adapters(env_ids):
        for leak in adapter.leak_patterns:
            if match := leak.pattern.search(text):
                reasons.append(f"contains {leak.what} ({match.group(0).strip()})")
    text_words = words(text)
    lowered = text.lower()
    for episode in episodes:
        if has_span(text_words, words(episode.instruction), SPAN_WORDS):
            reasons.append(f"copies {SPAN_WORDS}+ words of episode {episode.episode_id}'s task")
        reasons += distill_adapter_for(episode.env_id).episode_leaks(text, episode)
        for ident in (episode.episode_id, episode.goal_id):
            if ident and len(ident) >= 6 and ident.lower() in lowered:
                reasons.append(f"contains the id {ident}")
    return list(dict.fromkeys(reasons))


def draft_leaks(draft: EntryDraft, episodes: Iterable[EpisodeRecord] = ()) -> list[str]:
    """Return why ``draft`` leaks specifics of ``episodes`` (all text fields are checked).

    A case (``skillrl.distill.cases``) names its episode's specifics on purpose; what it may not
    do is come from a held-out episode.
    """
    if draft.kind == "case":
        return [
            f"a case made from test episode {episode.episode_id}"
            for episode in episodes
            if episode.split == TEST_SPLIT
        ]
    text = "\n".join(
        [
            draft.title,
            draft.principle,
            draft.when_to_apply,
            draft.failure_point,
            draft.flawed_action,
            draft.correction,
        ]
    )
    return find_leaks(text, list(episodes), env=draft.env)

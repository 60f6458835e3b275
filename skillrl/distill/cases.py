"""Cases: what solved a request in a finished training or validation episode.

A skill states a rule that transfers; a case is the opposite on purpose: it names what solved
one request (for WebShop, which product was bought for "individually wrapped herbal tea that is
organic"), so that a later episode whose request is near-identical can act on that experience
instead of re-deriving it from a page of look-alike results. ExpeL and Memento-style agents keep
such a memory; here it lives in the bank as entries of kind ``case``, retrieved by the similarity
of the request alone (``memory.retrieval``) and shown as one line. A case also keeps what its
solution was seen to come in (``offers``: for WebShop, the options on its product's page), and
one request solved by two products is two cases: of those, retrieval serves first the one that
comes in what the later request asks for.

What an environment knows of its cases is its :meth:`~envs.distill_adapter.DistillAdapter.
case_lesson`. Only solved episodes of a split other than the test split make cases: a held-out
goal never decides what the bank holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from envs import distill_adapter_for
from memory.types import EntryDraft, offers_text
from skillrl_core.records import EpisodeRecord
from skillrl_core.splits import TEST_SPLIT

SOURCE = "distiller:case"


def case_drafts(episodes: Iterable[EpisodeRecord]) -> list[EntryDraft]:
    """Return the case draft of each solved, non-test episode whose environment keeps cases."""
    drafts = []
    for episode in episodes:
        if not episode.success or episode.split == TEST_SPLIT:
            continue
        lesson = distill_adapter_for(episode.env_id).case_lesson(episode)
        if lesson is None:
            continue
        drafts.append(
            EntryDraft(
                kind="case",
                title=lesson.title,
                principle=lesson.principle,
                when_to_apply=lesson.when_to_apply,
                offers=offers_text(lesson.offers),
                env=episode.env_id,
                category=episode.category or None,
                source=SOURCE,
                trajectory_ids=[episode.episode_id],
                reason="solved in a training episode",
            )
        )
    return drafts

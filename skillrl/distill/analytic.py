"""The analytic distiller: skills and notes from trajectory structure, no teacher model.

Successes become task skills that state the decisive steps as a pattern (search with the type and
key attributes, open a matching title, set each requested option, check the price bound, buy), with
the episode's specifics left out. A pattern that recurs in successes of at least
``min_categories_for_general`` categories also becomes a general skill. Failures become
counterfactual notes (:mod:`skillrl.distill.notes`). Identical drafts from several episodes are
folded into one draft that lists all of them, so the bank sees each pattern once per pass.

With the 135M default policy as the only local model, this is what keeps the improvement loop
working offline; :class:`~skillrl.distill.teacher.TeacherDistiller` is for users with a strong
model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memory.types import EntryDraft
from skillrl.distill.notes import failure_notes, option_kind
from skillrl.distill.trajectory import TrajectoryFacts, trajectory_facts
from skillrl_core.errors import ConfigError
from skillrl_core.records import EpisodeRecord
from skillrl_core.validation import check_finite_fields


@dataclass
class AnalyticConfig:
    """Settings of the analytic distiller."""

    max_notes_per_failure: int = 3
    """At most this many counterfactual notes from one failed episode."""
    min_categories_for_general: int = 2
    """A success pattern seen in this many categories in one pass also becomes a general skill."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.max_notes_per_failure < 1:
            raise ConfigError(f"max_notes_per_failure ({self.max_notes_per_failure}) must be >= 1")
        if self.min_categories_for_general < 2:
            raise ConfigError(
                f"min_categories_for_general ({self.min_categories_for_general}) must be >= 2"
            )


def _option_names(episode: EpisodeRecord, facts: TrajectoryFacts) -> list[str]:
    breakdown = episode.reward_breakdown or {}
    chosen = (breakdown.get("options") or {}).get("chosen") or {}
    names = [str(name).lower() for name in chosen] or [option_kind(v) for v in facts.option_clicks]
    return sorted(set(names))


def _sentence(steps: list[str]) -> str:
    text = "; ".join(steps)
    return text[0].upper() + text[1:] + "."


def success_skill(episode: EpisodeRecord) -> tuple[EntryDraft, str]:
    """Return the task skill of one successful episode and the key of its general pattern."""
    facts = trajectory_facts(episode)
    names = _option_names(episode, facts)
    goal = (episode.reward_breakdown or {}).get("goal") or {}
    steps = ["search with the product type and the key attributes of the instruction"]
    if facts.refined_search:
        steps.append("refine the query when the first results miss the product type")
    steps.append("open a result whose title names the requested type and attributes")
    if facts.pages_turned:
        steps.append("turn to the next results page only when the first has no match")
    if names:
        steps.append(f"click the requested value of each option ({', '.join(names)})")
    if goal.get("price_upper") or (episode.reward_breakdown or {}).get("price"):
        steps.append("check that the listed price is under the instruction's bound")
    steps.append("click Buy Now")
    what = f" and set {' and '.join(names)}" if names else ""
    draft = EntryDraft(
        kind="task",
        title=f"{episode.category.replace('_', ' ').capitalize()}: find the match{what}, then buy",
        principle=_sentence(steps),
        when_to_apply=f"Shopping for a {episode.category.replace('_', ' ')} item"
        + (f" whose instruction names a {' or '.join(names)}." if names else "."),
        env=episode.env_id,
        category=episode.category,
        source="distiller:analytic",
        trajectory_ids=[episode.episode_id],
        reason=f"successful episode in {episode.category}",
    )
    return draft, "options" if names else "plain"


def general_skill(pattern: str, categories: list[str], episode_ids: list[str]) -> EntryDraft:
    """Return the principle shared by successes across categories, stated for any task."""
    if pattern == "options":
        title = "Make every choice the task names before the final action"
        principle = (
            "Before an irreversible final action (buying, submitting), make every explicit "
            "choice the task names (each requested option, size or color) and confirm the item "
            "matches the requested type and limits."
        )
    else:
        title = "Find the best match, verify it, then commit"
        principle = (
            "Search with the object type plus the key constraints of the task, open the first "
            "candidate that names them, verify its details against every constraint, then "
            "commit without further browsing."
        )
    return EntryDraft(
        kind="general",
        title=title,
        principle=principle,
        when_to_apply="Any multi-step task that ends in one irreversible action.",
        source="distiller:analytic",
        trajectory_ids=episode_ids,
        reason=f"success pattern in {len(categories)} categories: {', '.join(categories)}",
    )


def lesson_key(draft: EntryDraft) -> tuple[str, ...]:
    """Identity of an analytic lesson: a note's title names its lesson; skills need equal text."""
    text = draft.title if draft.kind == "mistake" else draft.text_for_embedding()
    return (draft.kind, draft.env or "", draft.category or "", text)


def fold_duplicates(
    drafts: list[EntryDraft], key: Callable[[EntryDraft], tuple[str, ...]] | None = None
) -> list[EntryDraft]:
    """Merge drafts with the same key (default: identical text), keeping every source episode.

    The first draft of a key is kept as written (a note keeps its first episode's precise
    failure point) and gains the other drafts' trajectory ids.
    """
    folded: dict[tuple[str, ...], EntryDraft] = {}
    for draft in drafts:
        key_of = key(draft) if key else (draft.kind, draft.env or "", draft.category or "",
                                         draft.text_for_embedding())  # fmt: skip
        if key_of in folded:
            kept = folded[key_of]
            kept.trajectory_ids = list(dict.fromkeys(kept.trajectory_ids + draft.trajectory_ids))
        else:
            folded[key_of] = draft
    return list(folded.values())


class AnalyticDistiller:
    """Distills without a teacher, from trajectory structure and the reward breakdown."""

    name = "analytic"

    def __init__(self, config: AnalyticConfig | None = None) -> None:
        self.config = config or AnalyticConfig()

    def distill(self, episodes: list[EpisodeRecord]) -> list[EntryDraft]:
        """Return task skills (successes), general skills (recurring patterns), notes (failures)."""
        drafts: list[EntryDraft] = []
        patterns: dict[str, dict[str, list[str]]] = {}
        for episode in episodes:
            if not episode.turns:
                continue
            if episode.success:
                skill, pattern = success_skill(episode)
                drafts.append(skill)
                by_category = patterns.setdefault(pattern, {})
                by_category.setdefault(episode.category, []).append(episode.episode_id)
            else:
                drafts += failure_notes(episode, self.config.max_notes_per_failure)
        for pattern, by_category in patterns.items():
            if len(by_category) >= self.config.min_categories_for_general:
                ids = [i for episode_ids in by_category.values() for i in episode_ids]
                drafts.append(general_skill(pattern, sorted(by_category), ids))
        folded = fold_duplicates(drafts, key=lesson_key)
        for draft in folded:
            if draft.kind == "mistake" and len(draft.trajectory_ids) > 1:
                draft.reason = f"{len(draft.trajectory_ids)} failed episodes in {draft.category}"
        return folded

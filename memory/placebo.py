"""Placebo retrieval: entries as many as the real ones, retrieved for another goal.

The control that tells whether retrieved skills carry information (``bench_skill_value``): a
policy trained with entries in its prompts may do better with them only because a prompt with
entries looks like its training prompts. With placebo entries the prompt keeps that look (the
same count of entries, of the same kinds where the bank allows, at the same place) and loses
what the entries say about this goal: each is retrieved for a *donor* task (another goal's
instruction and category, with the same page), and no entry retrieved for the episode's own
goal at that turn is ever served.

:class:`PlaceboRetrieval` stands where the rollout engine expects a bank: it answers
``retrieve`` and nothing else, and it never records a retrieval (a control must not change the
bank's usage statistics).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from memory.config import RetrievalConfig
from memory.types import RetrievalQuery, RetrievedEntry, RetrievedSkills
from skillrl_core.errors import ConfigError

if TYPE_CHECKING:
    from memory.bank import SkillBank

KINDS: tuple[str, ...] = ("general", "task", "mistakes", "cases")

OVERFETCH = 4
"""The donor query fetches this many times each kind's k, so that enough are left once the
episode's own entries are taken out."""


@dataclass(frozen=True)
class DonorTask:
    """A task placebo entries are retrieved for: another goal's instruction and category."""

    instruction: str
    category: str | None
    wants: tuple[str, ...] = ()
    """What the donor's instruction asks its solution to come in (``RetrievalQuery.wants``): a
    donor query asks with the donor's, never the episode's own."""


class PlaceboRetrieval:
    """Serves each query entries retrieved for a donor task instead of its own.

    ``donors``: the tasks to draw from (training goals, so no test goal's text is involved). A
    query's donor is fixed by a hash of its instruction (every turn of an episode gets the same
    donor, and a rerun the same entries) and has another category when any donor does.
    """

    def __init__(self, bank: SkillBank, donors: list[DonorTask]) -> None:
        if not donors:
            raise ConfigError("placebo retrieval needs at least one donor task")
        self.bank = bank
        self.donors = list(donors)
        self.shortfall = 0
        """Entries the placebo could not match (the bank held too few entries that were not
        retrieved for the episode's own goal); 0 means every count matched."""

    def retrieve(
        self,
        queries: list[RetrievalQuery],
        config: RetrievalConfig | None = None,
        *,
        record: bool = False,
    ) -> list[RetrievedSkills]:
        """Return, per query, as many entries as its own retrieval holds, drawn for its donor.

        ``record`` is accepted for the engine's sake and ignored: placebo retrievals are never
        recorded.
        """
        config = config or RetrievalConfig()
        own = self.bank.retrieve(queries, config, record=False)
        wide = RetrievalConfig(
            k_general=config.k_general * OVERFETCH,
            k_task=config.k_task * OVERFETCH,
            k_mistakes=config.k_mistakes * OVERFETCH,
            k_cases=config.k_cases * OVERFETCH,
            min_similarity=-1.0,
            case_fit_margin=config.case_fit_margin,
        )
        donor_queries = [self._donor_query(q) for q in queries]
        drawn = self.bank.retrieve(donor_queries, wide, record=False)
        return [self._match(mine, theirs) for mine, theirs in zip(own, drawn, strict=True)]

    @staticmethod
    def possible(donors: list[DonorTask]) -> bool:
        """Whether an environment's training goals (``donors``) hold two tasks that differ.

        With one task (Sokoban's one instruction in one category), every episode of that
        environment would be its own donor. Checked by the callers that play an environment's
        own goals, before any episode.
        """
        return len({(d.instruction, d.category) for d in donors}) > 1

    @classmethod
    def check(cls, donors: list[DonorTask]) -> None:
        """Refuse an environment's training goals that a placebo cannot draw from."""
        if not donors:
            raise ConfigError("placebo retrieval needs at least one donor task")
        if not cls.possible(donors):  # every query would be its own donor
            only = donors[0]
            raise ConfigError(
                "placebo entries need training goals that differ in instruction or category, "
                f"and every one here reads {only.instruction!r} in category {only.category!r}: "
                "entries retrieved for another goal would be the episode's own"
            )

    def donor_for(self, query: RetrievalQuery) -> DonorTask:
        """Return ``query``'s donor: another category's task when there is one, else another."""
        others = [d for d in self.donors if d.category != query.category] or [
            d for d in self.donors if d.instruction != query.instruction
        ]
        if not others:
            raise ConfigError("placebo retrieval needs a donor task other than the episode's own")
        return others[zlib.crc32(query.instruction.encode()) % len(others)]

    def _donor_query(self, query: RetrievalQuery) -> RetrievalQuery:
        donor = self.donor_for(query)
        return replace(
            query, instruction=donor.instruction, category=donor.category, wants=donor.wants
        )

    def _match(self, mine: RetrievedSkills, theirs: RetrievedSkills) -> RetrievedSkills:
        """Take per kind as many donor entries as ``mine`` holds, none of ``mine``.

        The slots a kind cannot fill are filled from the other kinds' leftovers, so the total
        count matches.
        """
        own_ids = set(mine.ids)
        pools = {
            kind: [r for r in getattr(theirs, kind) if r.entry.id not in own_ids] for kind in KINDS
        }
        chosen: dict[str, list[RetrievedEntry]] = {}
        missing = 0
        for kind in KINDS:
            want = len(getattr(mine, kind))
            chosen[kind] = pools[kind][:want]
            pools[kind] = pools[kind][want:]
            missing += want - len(chosen[kind])
        taken = {r.entry.id for hits in chosen.values() for r in hits}
        for kind in KINDS:
            while missing and pools[kind]:
                extra = pools[kind].pop(0)
                if extra.entry.id in taken:
                    continue
                chosen[kind].append(extra)
                taken.add(extra.entry.id)
                missing -= 1
        self.shortfall += missing
        return RetrievedSkills(
            chosen["general"], chosen["task"], chosen["mistakes"], chosen["cases"]
        )


EPISODE_ARMS: tuple[str, ...] = ("own", "none", "placebo")
"""What an episode of a mixed retrieval is shown: its own entries, none, or a placebo draw."""


class MixedRetrieval:
    """Serves each episode its own entries, none, or placebo entries, fixed per episode.

    Training that teaches a policy to use its entries must also show it prompts whose entries
    say nothing of this goal (placebo) and prompts with none, so that it learns to act on what an
    entry says when it applies and to fall back on the page when it does not. The arm is drawn
    once per episode (from a hash of ``seed`` and the instruction, so every turn of an episode
    agrees, and a rerun draws the same): a labeller that reads the prompt's entries then labels
    every turn consistently with what that prompt holds, which withholding entries from single
    turns after labelling cannot do.
    """

    def __init__(
        self,
        bank: SkillBank,
        placebo: PlaceboRetrieval | None,
        *,
        withhold: float = 0.0,
        placebo_fraction: float = 0.0,
        seed: int = 0,
    ) -> None:
        if not 0.0 <= withhold < 1.0 or not 0.0 <= placebo_fraction < 1.0:
            raise ConfigError(
                f"withhold ({withhold}) and placebo_fraction ({placebo_fraction}) must be in [0, 1)"
            )
        if withhold + placebo_fraction >= 1.0:
            raise ConfigError(
                f"withhold ({withhold}) + placebo_fraction ({placebo_fraction}) must be below 1: "
                "some episodes must see their own entries"
            )
        if placebo_fraction and placebo is None:
            raise ConfigError("placebo_fraction needs a placebo retrieval (donor tasks)")
        self.bank, self.placebo = bank, placebo
        self.withhold, self.placebo_fraction, self.seed = withhold, placebo_fraction, seed

    def arm_of(self, query: RetrievalQuery) -> str:
        """Return the arm of ``query``'s episode (one of :data:`EPISODE_ARMS`)."""
        draw = zlib.crc32(f"{self.seed}:{query.instruction}".encode()) / 2**32
        if draw < self.withhold:
            return "none"
        if draw < self.withhold + self.placebo_fraction:
            return "placebo"
        return "own"

    def retrieve(
        self,
        queries: list[RetrievalQuery],
        config: RetrievalConfig | None = None,
        *,
        record: bool = False,
    ) -> list[RetrievedSkills]:
        """Return each query's entries as its episode's arm says; never records a retrieval."""
        arms = [self.arm_of(q) for q in queries]
        out: list[RetrievedSkills] = [RetrievedSkills() for _ in queries]
        for arm, source in (("own", self.bank), ("placebo", self.placebo)):
            positions = [i for i, a in enumerate(arms) if a == arm]
            if not positions or source is None:
                continue
            found = source.retrieve([queries[i] for i in positions], config, record=False)
            for position, result in zip(positions, found, strict=True):
                out[position] = result
        return out

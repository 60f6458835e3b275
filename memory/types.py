"""Plain data types of the skill bank, shared by the runtime, the distiller and the CLI.

Three kinds of entry:

- ``general``: a principle that applies to any task of any environment;
- ``task``: a skill for one environment and task category (``webshop`` / ``fashion``);
- ``mistake``: a counterfactual note from a failure (where it went wrong, the flawed action,
  what should have been done instead, and the principle that prevents it);
- ``case``: what solved one request in a finished training or validation episode (the request,
  and the decisive action: for WebShop, the product bought). Unlike a skill it is specific on
  purpose: it is retrieved by the similarity of the request alone, and it carries what the page
  does not show (which of ten look-alike results satisfied a near-identical request before).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from skillrl_core.significance import mcnemar_exact

EntryKind = Literal["general", "task", "mistake", "case"]
SKILL_KINDS: tuple[str, ...] = ("general", "task", "mistake")
"""The kinds that state a transferable rule (what the distillers and a teacher model write)."""
ENTRY_KINDS: tuple[str, ...] = (*SKILL_KINDS, "case")
EntryStatus = Literal["active", "retired"]


OFFER_SEPARATOR = " | "
"""Between the values of :attr:`EntryDraft.offers`."""


def offered_values(offers: str) -> frozenset[str]:
    """Return the values an ``offers`` text lists, lowercased and stripped (empties dropped)."""
    return offer_values(offers.split(OFFER_SEPARATOR.strip()))


def offer_values(values: Iterable[str]) -> frozenset[str]:
    """Return ``values`` as offers and wants are compared: lowercased, stripped, no empties."""
    return frozenset(v.strip().lower() for v in values if v.strip())


def offers_text(values: Iterable[str]) -> str:
    """Return the ``offers`` text of ``values`` (each once, in order; separators taken out)."""
    clean = (" ".join(v.replace(OFFER_SEPARATOR.strip(), " ").split()) for v in values)
    return OFFER_SEPARATOR.join(dict.fromkeys(v for v in clean if v))


@dataclass
class EntryDraft:
    """What a writer (distiller, person, importer) proposes to add."""

    kind: EntryKind
    title: str
    principle: str
    """The rule itself, stated generally."""
    when_to_apply: str = ""
    env: str | None = None
    """Environment id (None for general skills)."""
    category: str | None = None
    """Task category within the environment (None for general skills)."""
    failure_point: str = ""
    """mistake only: where the episode went wrong."""
    flawed_action: str = ""
    """mistake only: the action that was wrong."""
    correction: str = ""
    """mistake only: what should have been done instead."""
    source: str = "person"
    """Who or what made it: ``person``, ``distiller:analytic``, ``distiller:teacher``,
    ``import:...``."""
    trajectory_ids: list[str] = field(default_factory=list)
    """Episodes it was distilled from."""
    reason: str = ""
    """Why it was added (evolution records the validation evidence here)."""
    external_id: str | None = None
    """Id in a foreign format (SkillRL's ``skill_id`` / ``mistake_id``), kept for round trips."""
    offers: str = ""
    """case only: what the case's solution is known to come in, values separated by
    :data:`OFFER_SEPARATOR` (WebShop: the options its product's page listed). Among the cases of
    one request, retrieval serves first one that offers everything the query wants
    (:attr:`RetrievalQuery.wants`); empty: not known."""

    @property
    def offered(self) -> frozenset[str]:
        """Return the values :attr:`offers` lists, lowercased."""
        return offered_values(self.offers)

    def text_for_embedding(self) -> str:
        """Return the text that is embedded for retrieval.

        A case embeds its request alone (``when_to_apply``): it is retrieved by the similarity of
        the episode's request to the one it solved, whatever page the episode is on.
        """
        if self.kind == "case":
            return self.when_to_apply or self.title
        parts = [self.title, self.principle, self.when_to_apply]
        if self.kind == "mistake":
            parts += [self.failure_point, self.flawed_action, self.correction]
        return "\n".join(p for p in parts if p)


@dataclass
class Entry(EntryDraft):
    """A stored entry: a draft plus identity, status, provenance and usage statistics."""

    id: str = ""
    status: EntryStatus = "active"
    revision: int = 1
    support_count: int = 1
    """How many distillations/imports merged into it."""
    provenance: list[dict[str, Any]] = field(default_factory=list)
    times_retrieved: int = 0
    """Turns whose prompt included it."""
    episodes_retrieved: int = 0
    """Finished episodes in which it was retrieved at least once."""
    success_episodes: int = 0
    """... of which succeeded."""
    failure_episodes: int = 0
    """... of which failed."""
    paired_pairs: int = 0
    """Paired rollouts measured (one goal and seed played with it and with it withheld)."""
    paired_with_only: int = 0
    """... of which only the rollout with it succeeded."""
    paired_without_only: int = 0
    """... of which only the rollout without it succeeded."""
    paired_score_delta_sum: float = 0.0
    """Sum over those pairs of (score with it - score without it)."""
    created_at: str = ""
    updated_at: str = ""

    @property
    def paired(self) -> PairedEvidence:
        """The entry's stored paired-rollout figures as one record."""
        return PairedEvidence(
            self.paired_pairs,
            self.paired_with_only,
            self.paired_without_only,
            self.paired_score_delta_sum,
        )


@dataclass(frozen=True)
class PairedEvidence:
    """What paired rollouts say of one entry: its success with it minus without it, goal by goal.

    Each goal is played twice with the same seed: with the entry retrieved as usual, and with it
    withheld from every turn's retrieved skills. A pair's success difference is +1 (only the
    rollout with it succeeded), -1 or 0, so the mean over pairs is
    ``(with_only - without_only) / pairs``; the concordant pairs say nothing about the entry,
    and the exact McNemar (sign) test on the discordant ones says whether the difference is more
    than chance.
    """

    pairs: int = 0
    with_only: int = 0
    """Pairs whose rollout with the entry succeeded and whose rollout without it failed."""
    without_only: int = 0
    """Pairs whose rollout without the entry succeeded and whose rollout with it failed."""
    score_delta_sum: float = 0.0
    """Sum over pairs of (score with - score without)."""

    @property
    def utility(self) -> float:
        """Mean success difference over pairs, with minus without (0 with no pairs)."""
        return (self.with_only - self.without_only) / self.pairs if self.pairs else 0.0

    @property
    def score_delta(self) -> float:
        """Mean score difference over pairs, with minus without (0 with no pairs)."""
        return self.score_delta_sum / self.pairs if self.pairs else 0.0

    @property
    def p_value(self) -> float:
        """Exact two-sided McNemar p-value of the discordant pairs (1.0 when there are none)."""
        return mcnemar_exact(self.without_only, self.with_only)

    def __add__(self, other: PairedEvidence) -> PairedEvidence:
        return PairedEvidence(
            self.pairs + other.pairs,
            self.with_only + other.with_only,
            self.without_only + other.without_only,
            self.score_delta_sum + other.score_delta_sum,
        )


@dataclass
class RetrievalQuery:
    """One episode's state at one turn, as retrieval sees it."""

    instruction: str
    observation: str
    env: str
    category: str | None = None
    withheld_ids: frozenset[str] = frozenset()
    """Entries this query is never served: taken out after the selection, so their places stay
    empty and the prompt differs from the unmasked one by these entries alone (paired utility
    rollouts); nor are they recorded as retrieved."""
    wants: tuple[str, ...] = ()
    """What the request asks the solution to come in (WebShop: the option values its
    instruction names), as the environment reads them from the instruction. Among equally
    similar cases, one whose :attr:`EntryDraft.offers` hold all of them is served first."""


@dataclass
class RetrievedEntry:
    """An entry chosen for a prompt, with its cosine similarity to the query."""

    entry: Entry
    similarity: float


@dataclass
class RetrievedSkills:
    """What retrieval returns for one query, per kind, best first."""

    general: list[RetrievedEntry] = field(default_factory=list)
    task: list[RetrievedEntry] = field(default_factory=list)
    mistakes: list[RetrievedEntry] = field(default_factory=list)
    cases: list[RetrievedEntry] = field(default_factory=list)

    @property
    def all(self) -> list[RetrievedEntry]:
        """Every retrieved entry, general first, then task skills, mistakes and cases."""
        return [*self.general, *self.task, *self.mistakes, *self.cases]

    @property
    def ids(self) -> list[str]:
        """Ids of every retrieved entry, in :attr:`all` order."""
        return [r.entry.id for r in self.all]

    def without(self, entry_ids: frozenset[str]) -> RetrievedSkills:
        """Return a copy with the entries ``entry_ids`` taken out (the others keep their order)."""
        if not entry_ids:
            return self
        return RetrievedSkills(
            *(
                [r for r in hits if r.entry.id not in entry_ids]
                for hits in (self.general, self.task, self.mistakes, self.cases)
            )
        )


@dataclass(frozen=True)
class RetrievalEvent:
    """One entry put into one turn's prompt (what a ``retrieval_events`` row holds)."""

    entry_id: str
    similarity: float
    env: str
    category: str | None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetrievalEvent:
        """Rebuild an event that :meth:`to_dict` wrote."""
        return cls(
            entry_id=str(data["entry_id"]),
            similarity=float(data["similarity"]),
            env=str(data["env"]),
            category=data.get("category"),
        )


def retrieval_events(
    queries: list[RetrievalQuery], results: list[RetrievedSkills]
) -> list[RetrievalEvent]:
    """Return the events of one batched retrieval: one per (query, entry served to it)."""
    return [
        RetrievalEvent(r.entry.id, float(r.similarity), query.env, query.category)
        for query, result in zip(queries, results, strict=True)
        for r in result.all
    ]


@dataclass
class AddResult:
    """What :meth:`memory.SkillBank.add` did with a draft."""

    entry: Entry
    """The new entry, or the existing one the draft merged into."""
    merged: bool
    """True when the draft was a near-duplicate and merged into :attr:`entry`."""
    similarity: float | None = None
    """Cosine similarity to the entry merged into (None when added)."""


@dataclass
class Revision:
    """One version of an entry's content and status, with who made it, when and why."""

    entry_id: str
    revision: int
    author: str
    reason: str
    created_at: str
    data: dict[str, Any] = field(default_factory=dict)
    """The entry's content fields and status at this revision."""


@dataclass
class SnapshotInfo:
    """A named bank snapshot."""

    name: str
    created_at: str
    entries: int
    """Number of entries (active and retired) it holds."""


@dataclass
class EntryChange:
    """How one entry differs between two snapshots (field -> (before, after))."""

    entry_id: str
    title: str
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)


@dataclass
class BankDiff:
    """Differences between two snapshots (or a snapshot and the current bank)."""

    a: str
    b: str
    added: list[dict[str, Any]] = field(default_factory=list)
    """Entries (content dicts with ``id``) in ``b`` but not in ``a``."""
    removed: list[dict[str, Any]] = field(default_factory=list)
    """Entries in ``a`` but not in ``b``."""
    changed: list[EntryChange] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when the two sides hold the same entries with the same content."""
        return not (self.added or self.removed or self.changed)

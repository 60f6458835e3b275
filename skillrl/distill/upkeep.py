"""Keep the bank small and useful: measured utility, retirement, and a cap per category.

Two measures of an entry's worth decide:

- **Paired utility** (:mod:`skillrl.distill.paired_utility`, ``skillrl skills measure``): goals
  played with the entry and again with it withheld, same seed; the mean success difference over
  those pairs. It is causal, so where it has settled it decides alone. An entry is retired on it
  when it is *resolved non-positive*: at least ``paired_min_pairs`` pairs and a paired utility
  at most ``paired_retire_at_most`` (it won no more pairs than it lost: the test of "it helps"
  found nothing), or fewer pairs whose losses already make the exact McNemar test significant at
  ``paired_alpha`` (it hurts). An entry the paired test shows helping (utility above
  ``paired_retire_at_most`` with McNemar p below ``paired_alpha``) is never retired on the
  observational figures below. An entry without such paired evidence (none, or too little to
  resolve) is judged by the observational rule only.
- **Observational utility** (:mod:`memory.stats`): the posterior success-rate lift of an entry
  over the skill-using episodes of its env/category that did not retrieve it, the same number
  ``skillrl skills list --sort utility`` shows. An entry is retired once ``n_with`` reaches
  ``min_evidence``, ``n_without`` reaches ``min_baseline`` and its utility is below
  ``retire_below``: a comparison needs episodes on both sides. Without a baseline the smoothed
  rate defaults to 0.5, so while the policy fails everything every retrieved entry would look
  harmful ("0/12 with it, 0/0 without") and be retired for what is only the policy's weakness.

Cases are retired on paired evidence only (their observational lift measures how hard their
request is, not whether they are right). Then each kind of each env/category but cases (one per
request solved: that memory grows with experience), and the general skills of each env, keep at
most their cap of entries, best utility first: the
paired utility of an entry shown to help, else the observational one once measured on both
sides, else neutral (0). Retiring goes through ``bank.retire``: the entry stays in SQL with its
history and ``bank.restore`` (or ``skillrl skills revert``) brings it back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from memory.stats import PRIOR_STRENGTH, ScopeTotals, utility_from_counts
from memory.types import Entry, PairedEvidence
from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

if TYPE_CHECKING:
    from memory.bank import SkillBank

logger = logging.getLogger(__name__)
AUTHOR = "upkeep"


@dataclass
class UpkeepConfig:
    """Settings of bank upkeep."""

    prior_strength: float = PRIOR_STRENGTH
    """Pseudo-episodes of the Beta prior (centred on the baseline success rate)."""
    min_evidence: int = 8
    """Episodes that retrieved an entry before it may be retired for low utility."""
    min_baseline: int = 8
    """Episodes of the entry's scope that did not retrieve it before it may be retired for low
    utility (without them there is nothing to compare its success rate with)."""
    retire_below: float = -0.15
    """Retire an entry whose utility (success-rate difference) is below this."""
    cap_per_category: int = 12
    """Most active entries of one kind (task or mistake) per env/category."""
    cap_general: int = 15
    """Most active general entries."""
    paired_min_pairs: int = 8
    """Paired rollouts (``skillrl skills measure``) an entry needs before a paired utility at
    most ``paired_retire_at_most`` retires it; with fewer, only a significant loss does."""
    paired_retire_at_most: float = 0.0
    """Retire an entry whose paired utility (mean success with it minus without it, over pairs
    of the same goal and seed) is at most this, once it has ``paired_min_pairs`` pairs."""
    paired_alpha: float = 0.05
    """Significance of the exact McNemar test on the discordant pairs: below it, fewer pairs
    than ``paired_min_pairs`` already retire an entry that loses, and an entry that wins is
    kept whatever its observational utility."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.paired_min_pairs < 1:
            raise ConfigError(f"paired_min_pairs ({self.paired_min_pairs}) must be >= 1")
        if not -1.0 <= self.paired_retire_at_most < 1.0:
            raise ConfigError(
                f"paired_retire_at_most ({self.paired_retire_at_most}) must be in [-1, 1)"
            )
        if not 0.0 < self.paired_alpha < 1.0:
            raise ConfigError(f"paired_alpha ({self.paired_alpha}) must be in (0, 1)")
        if self.prior_strength <= 0:
            raise ConfigError(f"prior_strength ({self.prior_strength}) must be > 0")
        if self.min_evidence < 1:
            raise ConfigError(f"min_evidence ({self.min_evidence}) must be >= 1")
        if self.min_baseline < 1:
            raise ConfigError(f"min_baseline ({self.min_baseline}) must be >= 1")
        if not -1.0 < self.retire_below <= 0.0:
            raise ConfigError(f"retire_below ({self.retire_below}) must be in (-1, 0]")
        if self.cap_per_category < 1 or self.cap_general < 1:
            raise ConfigError(
                f"cap_per_category ({self.cap_per_category}) and cap_general "
                f"({self.cap_general}) must be >= 1"
            )


PairedVerdict = Literal["unmeasured", "unresolved", "helps", "does not help"]
"""What an entry's paired evidence says under an :class:`UpkeepConfig` (module docstring)."""


def paired_verdict(evidence: PairedEvidence, config: UpkeepConfig) -> PairedVerdict:
    """Judge paired evidence: ``does not help`` retires, ``helps`` protects, the rest abstain."""
    if evidence.pairs == 0:
        return "unmeasured"
    settled = evidence.p_value < config.paired_alpha
    if evidence.utility <= config.paired_retire_at_most and (
        evidence.pairs >= config.paired_min_pairs or (settled and evidence.utility < 0)
    ):
        return "does not help"
    if evidence.utility > config.paired_retire_at_most and settled:
        return "helps"
    return "unresolved"


@dataclass
class Utility:
    """An entry's measured utility and the evidence behind it."""

    entry_id: str
    n_with: int
    s_with: int
    n_without: int
    s_without: int
    utility: float
    """Observational utility (:mod:`memory.stats`)."""
    paired: PairedEvidence = field(default_factory=PairedEvidence)
    """Its paired-rollout figures."""

    def measured(self, config: UpkeepConfig) -> bool:
        """Whether there is enough evidence with and without the entry to compare them."""
        return self.n_with >= config.min_evidence and self.n_without >= config.min_baseline


@dataclass
class UpkeepReport:
    """What upkeep measured and retired."""

    utilities: dict[str, Utility] = field(default_factory=dict)
    retired: dict[str, str] = field(default_factory=dict)
    """Entry id -> why it was retired."""


def measure(entry: Entry, totals: tuple[int, int], config: UpkeepConfig) -> Utility:
    """Measure one entry against ``(episodes, successes)`` of its scope (``memory.stats``)."""
    n_total, s_total = totals
    n_with, s_with = entry.episodes_retrieved, entry.success_episodes
    value = utility_from_counts(s_with, n_with, s_total, n_total, config.prior_strength)
    n_without = max(n_total - n_with, 0)
    return Utility(
        entry.id,
        n_with,
        s_with,
        n_without,
        min(max(s_total - s_with, 0), n_without),
        value,
        entry.paired,
    )


def _why(u: Utility) -> str:
    return (
        f"utility {u.utility:+.2f}: {u.s_with}/{u.n_with} episodes succeeded with it, "
        f"{u.s_without}/{u.n_without} without"
    )


def _why_paired(p: PairedEvidence) -> str:
    return (
        f"paired utility {p.utility:+.2f} over {p.pairs} pairs: {p.with_only} succeeded only "
        f"with it, {p.without_only} only without it (McNemar p={p.p_value:.3f})"
    )


def _rank_utility(u: Utility, config: UpkeepConfig) -> float:
    """Return the utility that ranks entries under a cap (module docstring)."""
    if paired_verdict(u.paired, config) == "helps":
        return u.paired.utility
    return u.utility if u.measured(config) else 0.0


def _retire_reason(entry: Entry, u: Utility, config: UpkeepConfig) -> str | None:
    """Why upkeep retires an entry on its utility (None: it stays); paired evidence first.

    A case is retired on paired evidence only: it records what solved one request, so the
    episodes that retrieve it are that request's, and its observational lift measures how hard
    that request is for the policy, not whether the case is right.
    """
    verdict = paired_verdict(u.paired, config)
    if verdict == "does not help":
        return f"does not help in paired rollouts ({_why_paired(u.paired)})"
    if verdict == "helps" or entry.kind == "case":
        return None  # causal evidence outweighs the episodes that happened to retrieve it
    if u.measured(config) and u.utility < config.retire_below:
        return f"low utility after {u.n_with} episodes ({_why(u)})"
    return None


def upkeep(
    bank: SkillBank, config: UpkeepConfig | None = None, *, dry_run: bool = False
) -> UpkeepReport:
    """Retire entries that paired or observational evidence finds useless, then enforce caps."""
    config = config or UpkeepConfig()
    report = UpkeepReport()
    totals = ScopeTotals(bank)
    entries = bank.list(status="active")
    for entry in entries:
        u = measure(entry, totals.of(entry), config)
        report.utilities[entry.id] = u
        reason = _retire_reason(entry, u, config)
        if reason is not None:
            report.retired[entry.id] = reason
    groups: dict[tuple[str, str | None, str | None], list[Entry]] = {}
    for entry in entries:
        # Cases are not capped: one per request solved, the memory grows with experience.
        if entry.id not in report.retired and entry.kind != "case":
            # General skills are capped per environment (those for every env count apart).
            group = (
                (entry.kind, entry.env, entry.category)
                if entry.kind != "general"
                else ("general", entry.env, None)
            )
            groups.setdefault(group, []).append(entry)
    for (kind, _, _), members in groups.items():
        cap = config.cap_general if kind == "general" else config.cap_per_category
        ranked = sorted(
            members,
            key=lambda e: (
                _rank_utility(report.utilities[e.id], config),
                e.support_count,
                e.times_retrieved,
            ),
            reverse=True,
        )
        for entry in ranked[cap:]:
            report.retired[entry.id] = f"over the cap of {cap} ({_why(report.utilities[entry.id])})"
    if not dry_run:
        for entry_id, reason in report.retired.items():
            bank.retire(entry_id, author=AUTHOR, reason=reason)
            logger.info("retired %s: %s", entry_id, reason)
    return report

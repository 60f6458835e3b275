"""Exact tests on paired outcomes, shared by every layer that compares two settings goal by goal.

Evaluation (``trainers.common.episode_metrics``) compares two policies on the same goals; the skill
bank's paired utility (``memory.types.PairedEvidence``) compares one policy with and without an
entry on the same goals and seeds. Both reduce to the discordant pairs, and both use this test.
"""

from __future__ import annotations

from collections.abc import Iterable
from math import comb

from skillrl_core.errors import ConfigError


def mcnemar_exact(lost: int, won: int) -> float:
    """Exact two-sided McNemar p-value for ``lost`` vs ``won`` discordant pairs.

    Under no change each discordant goal goes either way with probability 1/2, so
    p = min(1, 2 * P(X <= min(lost, won))) with X ~ Binomial(lost + won, 1/2) (McNemar 1947,
    exact binomial form; the same as the exact sign test on the discordant pairs).
    """
    if lost < 0 or won < 0:
        raise ConfigError(f"discordant counts must be >= 0, got lost={lost}, won={won}")
    n = lost + won
    if n == 0:
        return 1.0
    tail = sum(comb(n, k) for k in range(min(lost, won) + 1)) / 2**n
    return min(1.0, 2 * tail)


def discordant(baseline: Iterable[object], other: Iterable[object]) -> tuple[int, int]:
    """Count the discordant pairs of two plays of the same goals, in the same order.

    Each item is a success (anything truthy) or not. Returns ``(lost, won)``: the goals only
    ``baseline`` solved, and the goals only ``other`` solved, as :func:`mcnemar_exact` takes them.
    Plays of different lengths are refused with ``ValueError``.
    """
    lost = won = 0
    for a, b in zip(baseline, other, strict=True):
        lost += bool(a) and not b
        won += bool(b) and not a
    return lost, won

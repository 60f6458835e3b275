"""The two limits every played episode runs under, declared once for every command and config.

An episode ends at a turn limit, and each turn's reply is cut at a token budget. ``run``,
``eval``, ``skills measure``, ``train`` and ``sft`` all take both, and the runtime's configs
default to them: the defaults, bounds and help text live here, so a command cannot drift from
the others (``run`` once played 64 tokens a turn while ``eval`` measured 48).
"""

from __future__ import annotations

from typing import Any

from skillrl_core.option_fields import option

MAX_TURNS = 15
"""Default turn limit of an episode (an environment may keep a lower one of its own)."""
MAX_NEW_TOKENS = 48
"""Default token budget of one turn's reply: a thought and an action fit in it; constrained
decoding scores admissible actions and barely uses it."""


def max_turns_option(help: str = "Turn limit per episode.") -> Any:
    """Declare the turn-limit field (``--max-turns``) with its default and bound."""
    return option(MAX_TURNS, help=help, low=1)


def max_new_tokens_option(help: str = "Tokens the policy may generate per turn.") -> Any:
    """Declare a turn's token-budget field (``--max-new-tokens``) with its default and bound."""
    return option(MAX_NEW_TOKENS, help=help, low=1)

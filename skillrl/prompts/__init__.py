"""Turn prompts: task, this turn's skills, recent turns, observation, actions, within a budget."""

from __future__ import annotations

from skillrl.prompts.builder import (
    PARTS,
    BuiltPrompt,
    CountTokens,
    PromptConfig,
    build_prompt,
    estimate_tokens,
)

__all__ = ["PARTS", "BuiltPrompt", "CountTokens", "PromptConfig", "build_prompt", "estimate_tokens"]

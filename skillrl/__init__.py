"""skillrl: LLM agents that improve through a per-turn skill library and turn-level GRPO."""

from __future__ import annotations

__version__ = "0.1.0"

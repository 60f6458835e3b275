"""Sokoban's agent adapter: the rules in the prompt, the four moves, a score in [0, 1].

The four moves are the whole action set, so constrained decoding scores exactly them and there
is no free-text turn. A reply is read like the environment reads an action (``up``, ``push
left``, ``Move Down``), but anywhere in the ``<action>`` text, since models wrap it in words.

The episode score is the fraction of boxes on targets when the episode ends (1.0 when solved):
a 3-box room left with two boxes placed scores 2/3, where gym-sokoban's summed rewards would be
unbounded in the turn count and not comparable across room sizes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from envs.adapter import ActionListAdapter, ActionRead, Expert
from envs.sokoban.room import DIRECTIONS, LEGEND
from skillrl_core.errors import ConfigError

SYSTEM_PROMPT = (
    "You are playing Sokoban. Push every box onto a target. Each turn you move the player one "
    "cell up, down, left or right; walking into a box pushes it one cell if the cell behind it "
    "is free. Boxes cannot be pulled, so a box pushed into a corner or along a wall with no "
    f"target is stuck for good. Legend: {LEGEND}. Use the skills given."
)
_MOVE = re.compile(r"\b(?:(?:push|move)\s+)?(up|down|left|right)\b", re.IGNORECASE | re.ASCII)
_SHORT = {"u": "up", "d": "down", "l": "left", "r": "right", "w": "up", "s": "down", "a": "left"}
_INSTRUCTION_LINE = "Push every box onto a target."


class SokobanAgentAdapter(ActionListAdapter):
    """The :class:`envs.adapter.AgentAdapter` of Sokoban."""

    def __init__(self) -> None:
        super().__init__(SYSTEM_PROMPT, example_action="left")

    def clean_observation(self, observation: str, instruction: str) -> str:
        """Keep the grid and the box count; drop the task and legend lines (the prompt has both)."""
        lines = [
            line
            for line in observation.splitlines()
            if line.strip() not in (_INSTRUCTION_LINE, instruction.strip())
            and not line.startswith("Legend:")
        ]
        return "\n".join(lines).strip()

    def read_action(self, text: str, available_actions: Sequence[str]) -> ActionRead | None:
        """Return the first move named in ``text`` (optionally after ``push``/``move``)."""
        match = _MOVE.search(text)
        if match is None:
            return None
        move = match.group(1).lower()
        if move not in available_actions:
            return ActionRead(move, False, f"{move} is not among the admissible actions")
        return ActionRead(move, True)

    def episode_score(self, reward: float, terminated: bool, info: Mapping[str, Any]) -> float:
        """Boxes on targets at the end over boxes in the room (1.0 when solved)."""
        if self.episode_success(info):
            return 1.0
        boxes = int(info.get("num_boxes", 0) or 0)
        placed = int(info.get("boxes_on_target", 0) or 0)
        return min(max(placed / boxes, 0.0), 1.0) if boxes > 0 else 0.0

    def split_size(self, split: str, env_config: Mapping[str, Any]) -> int:
        """Rooms of ``split`` over all configured categories."""
        from envs.sokoban.config import SokobanConfig
        from envs.sokoban.levels import SPLITS, shared_levels

        if split not in SPLITS:
            raise ConfigError(f"split ({split!r}) must be one of {', '.join(SPLITS)}")
        return shared_levels(SokobanConfig(**env_config)).split_size(split)

    def categories(self, env_config: Mapping[str, Any]) -> list[str]:
        """Return the configured difficulties (``6x6-1box``, ...)."""
        from envs.sokoban.config import SokobanConfig

        return list(SokobanConfig(**env_config).categories)

    def make_expert(self, max_turns: int) -> Expert | None:
        """Return the solver-backed expert (it reads the grid; it needs no goal)."""
        from envs.sokoban.expert import SokobanExpert

        return SokobanExpert(max_turns=max_turns)

    def action_thought(self, action: str) -> str:
        """Return the planner's reason: the move is the next step of a plan that solves the room."""
        return f"Moving {action} follows a plan that gets every box onto a target."

    def expand_typed(self, typed: str, available_actions: Sequence[str]) -> str:
        """Pick the numbered move for a number; ``u/d/l/r`` (or ``w/a/s/d``) are initials."""
        text = typed.strip().lower()
        if text.isdigit() and 1 <= int(text) <= len(available_actions):
            return available_actions[int(text) - 1]
        return _SHORT.get(text, text)

    def play_help(self, available_actions: Sequence[str]) -> str:
        """Say that moves go by name, number or initial."""
        return f"type a move ({', '.join(DIRECTIONS)}), its number, or u/d/l/r; q quits"

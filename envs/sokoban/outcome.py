"""``SokobanStepOutcome``: what one turn did and why it earned its reward (``reward_breakdown``).

Rewards are gym-sokoban's, per move: ``step_penalty`` (-0.1) on every parsed move, blocked or
not; ``box_on_target_reward`` (+1) when a push raises the number of boxes on targets,
``box_off_target_penalty`` (-1) when it lowers it; ``solved_reward`` (+10) when every box is on
a target. An unparsable action is a no-op with reward 0 (no step penalty: nothing was played).

``deadlock`` flags a push that made the room unsolvable in a way one box shows: the box now
stands off target on a dead square (``deadlock_kind``: ``corner``, ``wall`` when along a wall
with no target on its line of travel, ``dead_square`` otherwise) or in a 2x2 block of walls and
boxes (``block``). Other deadlocks (several boxes jamming a corridor) are not detected.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

_DEADLOCK_WORDS = {
    "corner": "into a corner it can never leave",
    "wall": "against a wall it can never leave, with no target along it",
    "dead_square": "onto a square from which it can never reach a target",
    "block": "into a 2x2 block of walls and boxes where nothing can move again",
}


@dataclass(frozen=True)
class SokobanStepOutcome:
    """One turn of Sokoban: the action as understood, its effect, and the reward's parts."""

    action: str | None
    """The move played (``up|down|left|right``), or None when the text was not a move."""
    valid: bool
    """Whether the text parsed as one of the four moves."""
    moved: bool = False
    """The player changed cell."""
    pushed: bool = False
    """A box moved."""
    blocked: bool = False
    """A parsed move that did nothing: a wall, or a box that could not be pushed, was in the way."""
    box_from: tuple[int, int] | None = None
    """``(row, column)`` of the pushed box before the move."""
    box_to: tuple[int, int] | None = None
    """``(row, column)`` of the pushed box after the move."""
    boxes_on_target: int = 0
    """Boxes on targets after the move."""
    num_boxes: int = 0
    boxes_on_target_delta: int = 0
    """Change in boxes on targets caused by this move (-1, 0 or +1)."""
    step_cost: float = 0.0
    box_reward: float = 0.0
    """The on-target reward or off-target penalty of this move (0 if neither)."""
    solved: bool = False
    solved_bonus: float = 0.0
    reward: float = 0.0
    """``step_cost + box_reward + solved_bonus``: the step's reward."""
    deadlock: bool = False
    """This push left a box where it can never reach a target (the room is now unsolvable)."""
    deadlock_kind: str | None = None
    """``corner``, ``wall``, ``dead_square`` or ``block`` (see the module docstring)."""
    stuck_boxes: int = 0
    """Boxes that, after the move, stand off target on a dead square or in a frozen block."""

    def to_dict(self) -> dict[str, Any]:
        """Return the outcome as JSON-able data (positions as ``[row, column]`` lists)."""
        data = dataclasses.asdict(self)
        for key in ("box_from", "box_to"):
            if data[key] is not None:
                data[key] = list(data[key])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SokobanStepOutcome:
        """Inverse of :meth:`to_dict` (unknown keys are ignored)."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for key in ("box_from", "box_to"):
            if values.get(key) is not None:
                values[key] = (int(values[key][0]), int(values[key][1]))
        return cls(**values)

    def explain(self) -> str:
        """Describe the turn in one sentence, for notes and people."""
        if not self.valid:
            return "The action was not one of up, down, left, right: nothing happened (reward 0)."
        parts = [f"Moved {self.action}"]
        if self.blocked:
            parts = [f"Tried to move {self.action} but was blocked by a wall or an unmovable box"]
        elif self.pushed:
            parts.append(f"pushing a box from {_cell(self.box_from)} to {_cell(self.box_to)}")
            if self.boxes_on_target_delta > 0:
                parts.append(f"onto a target ({self.box_reward:+g})")
            elif self.boxes_on_target_delta < 0:
                parts.append(f"off a target ({self.box_reward:+g})")
            if self.deadlock and self.deadlock_kind:
                parts.append(
                    f"{_DEADLOCK_WORDS[self.deadlock_kind]}: deadlock, the room can no longer "
                    "be solved"
                )
        text = ", ".join(parts) + f"; step cost {self.step_cost:+g}"
        if self.solved:
            text += f"; every box is on a target: solved ({self.solved_bonus:+g})"
        else:
            text += f"; {self.boxes_on_target}/{self.num_boxes} boxes on targets"
        return text + f". Reward {self.reward:+g}."


def _cell(position: tuple[int, int] | None) -> str:
    return "?" if position is None else f"row {position[0]}, column {position[1]}"

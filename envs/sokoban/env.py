"""``SokobanEnv``: text Sokoban in the Gymnasium shape, as RAGEN and verl-agent play it.

One move a turn (``up|down|left|right``, see :mod:`envs.sokoban.parse`) with gym-sokoban's push
semantics and per-move rewards (see :mod:`envs.sokoban.outcome`). ``terminated`` when every box
is on a target (``success``), or at a dead state: a box pushed off target into a corner (two
perpendicular walls), which no move can undo; ``truncated`` at ``max_turns``. Every step's info
carries ``reward_breakdown``: that turn's :class:`SokobanStepOutcome` as a dict, and
``end_reason``: why the episode ended (:data:`END_REASONS`; None while it runs).

Departures from gym-sokoban: an unparsable action is a no-op with reward 0 (gym-sokoban has no
text; the skillrl contract makes invalid actions free no-ops), ``max_turns`` counts every
turn, unparsable ones included (as WebShop's limit does), and a corner deadlock ends the
episode (gym-sokoban and RAGEN play on until the turn limit, in a room that can no longer be
solved). Other deadlocks (along a wall, a frozen block) are flagged but play on: the corner is
the one a single box shows beyond doubt. Departure from RAGEN's text render:
``*`` for a box on a target instead of ``√``, so the grid is ASCII.
"""

from __future__ import annotations

import random
from typing import Any

from envs.sokoban.config import SokobanConfig
from envs.sokoban.levels import SPLITS, Level, LevelSet, custom_level, shared_levels
from envs.sokoban.outcome import SokobanStepOutcome
from envs.sokoban.parse import parse_move
from envs.sokoban.room import (
    DIRECTIONS,
    LEGEND,
    Move,
    Room,
    State,
    apply_move,
    describe_positions,
    render_grid,
)
from envs.sokoban.solver import dead_square_kind, dead_squares, frozen_block
from skillrl_core.errors import ConfigError, EnvStateError

INSTRUCTION = "Push every box onto a target."

SOLVED, DEAD_CORNER, TURN_LIMIT = "solved", "deadlock: a box off target in a corner", "max_turns"
END_REASONS = (SOLVED, DEAD_CORNER, TURN_LIMIT)
"""Why an episode ended, as ``info["end_reason"]`` says it."""


class SokobanEnv:
    """One Sokoban episode at a time; many instances share one set of generated rooms."""

    env_id = "sokoban"

    def __init__(self, config: SokobanConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = SokobanConfig(**overrides)
        elif overrides:
            raise ConfigError("pass either a SokobanConfig or keyword fields, not both")
        self.config = config
        self.levels: LevelSet = shared_levels(config)
        self.level: Level | None = None
        self.state: State | None = None
        self.turn = 0
        self.terminated = False
        self.truncated = False
        self.end_reason: str | None = None
        """Why the episode ended (one of :data:`END_REASONS`; None while it runs)."""
        self.episode_return = 0.0

    # -- episode control -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on the room ``options`` names (else a train room picked by ``seed``).

        ``options``: ``{"split": "test"|"eval"|"train", "goal_index": i}`` (position ``i`` of
        that split; without ``goal_index``, a room of the split drawn with ``seed``), or
        ``{"goal_id": "7x7-2box-0042"}``, or ``{"room": grid}`` to play a hand-made room (a
        grid in the legend's symbols; see :func:`envs.sokoban.levels.custom_level`).
        """
        options = options or {}
        if "room" in options:
            if set(options) != {"room"}:
                raise ConfigError("reset option 'room' cannot be combined with other options")
            self.level = custom_level(str(options["room"]))
        else:
            split, position = self._choose(seed, options)
            self.level = self.levels.level(split, position)
        self.state = self.level.puzzle.start
        self.turn = 0
        self.terminated = self.truncated = False
        self.end_reason = None
        self.episode_return = 0.0
        info = self._info(action_valid=True)
        info["goal"] = self.level.public()
        info["split"], info["goal_index"] = self.level.split, self.level.goal_index
        return self.observation(), info

    def _choose(self, seed: int | None, options: dict[str, Any]) -> tuple[str, int]:
        unknown = set(options) - {"split", "goal_index", "goal_id"}
        if unknown:
            raise ConfigError(
                f"unknown reset option(s) {sorted(unknown)}; use split/goal_index/goal_id/room"
            )
        if "goal_id" in options:
            found = self.levels.locate(str(options["goal_id"]))
            if found is None:
                raise ConfigError(f"no Sokoban goal has id {options['goal_id']!r}")
            return found
        split = str(options.get("split", "train"))
        if split not in SPLITS:
            raise ConfigError(f"split ({split!r}) must be one of test, eval, train")
        size = self.levels.split_size(split)
        if size == 0:
            raise ConfigError(f"split {split!r} has no rooms (test_rooms/eval_rooms are 0)")
        if "goal_index" not in options:
            return split, random.Random(seed).randrange(size)
        value = options["goal_index"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"goal_index ({value!r}) must be an integer")
        if not 0 <= value < size:
            raise ConfigError(
                f"goal_index ({value}) out of range for split {split!r} ({size} goals)"
            )
        return split, value

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one move; unparsable text is a no-op with reward 0 and ``action_valid=False``."""
        room, state = self._room_and_state("step()")
        if self.terminated or self.truncated:
            info = self._info(action_valid=False)
            info["reward_breakdown"] = self._outcome(None, state, state, None).to_dict()
            return self.observation(), 0.0, self.terminated, self.truncated, info
        direction = parse_move(action)
        self.turn += 1
        after = state
        move = None
        if direction is not None:
            move = apply_move(room, state, direction)
            after = move.state
        outcome = self._outcome(direction, state, after, move)
        self.state = after
        self.episode_return += outcome.reward
        dead = outcome.deadlock_kind == "corner"
        self.terminated = outcome.solved or dead
        self.truncated = not self.terminated and self.turn >= self.config.max_turns
        if self.terminated or self.truncated:
            reasons = ((outcome.solved, SOLVED), (dead, DEAD_CORNER), (True, TURN_LIMIT))
            self.end_reason = next(reason for ended, reason in reasons if ended)
        info = self._info(action_valid=direction is not None)
        info["reward_breakdown"] = outcome.to_dict()
        return self.observation(), outcome.reward, self.terminated, self.truncated, info

    def _outcome(
        self, direction: str | None, before: State, after: State, move: Move | None
    ) -> SokobanStepOutcome:
        room = self._room_and_state("_outcome()")[0]
        num_boxes = len(after.boxes)
        on_target = after.boxes_on_target(room)
        if direction is None:
            return SokobanStepOutcome(
                action=None, valid=False, boxes_on_target=on_target, num_boxes=num_boxes,
                stuck_boxes=self._stuck(room, after),
            )  # fmt: skip
        if move is None:
            raise EnvStateError("a parsed move must come with its result")
        config = self.config
        delta = on_target - before.boxes_on_target(room)
        box_reward = 0.0
        if delta > 0:
            box_reward = config.box_on_target_reward
        elif delta < 0:
            box_reward = config.box_off_target_penalty
        solved = after.solved(room)
        bonus = config.solved_reward if solved else 0.0
        kind = None
        if move.pushed and move.box_to not in room.targets:
            if move.box_to in dead_squares(room):
                kind = dead_square_kind(room, move.box_to)
            elif frozen_block(room, after.boxes, move.box_to):
                kind = "block"
        return SokobanStepOutcome(
            action=direction,
            valid=True,
            moved=move.moved,
            pushed=move.pushed,
            blocked=not move.moved,
            box_from=None if move.box_from is None else room.position(move.box_from),
            box_to=None if move.box_to is None else room.position(move.box_to),
            boxes_on_target=on_target,
            num_boxes=num_boxes,
            boxes_on_target_delta=delta,
            step_cost=config.step_penalty,
            box_reward=box_reward,
            solved=solved,
            solved_bonus=bonus,
            # Rounded so that -0.1 + 1 reads 0.9, not 0.9000000000000000222.
            reward=round(config.step_penalty + box_reward + bonus, 9),
            deadlock=kind is not None,
            deadlock_kind=kind,
            stuck_boxes=self._stuck(room, after),
        )

    @staticmethod
    def _stuck(room: Room, state: State) -> int:
        dead = dead_squares(room)
        return sum(
            b not in room.targets and (b in dead or frozen_block(room, state.boxes, b))
            for b in state.boxes
        )

    def _current(self, what: str) -> tuple[Level, State]:
        """Return the episode's level and state; using the env before ``reset()`` is an error."""
        if self.level is None or self.state is None:
            raise EnvStateError(f"call reset() before {what}")
        return self.level, self.state

    def _room_and_state(self, what: str) -> tuple[Room, State]:
        level, state = self._current(what)
        return level.puzzle.room, state

    # -- what the agent sees ---------------------------------------------------------------
    def observation(self) -> str:
        """Return the instruction, the legend (if shown), the grid and the box count."""
        room, state = self._room_and_state("observation()")
        lines = [INSTRUCTION]
        if self.config.show_legend:
            lines.append(f"Legend: {LEGEND}.")
        lines.append(render_grid(room, state))
        lines.append(f"Boxes on targets: {state.boxes_on_target(room)}/{len(state.boxes)}.")
        if self.config.observation_mode == "positions":
            lines.append(describe_positions(room, state))
        return "\n".join(lines)

    def available_actions(self) -> list[str]:
        """Return the four moves while the episode runs (blocked ones too, as in RAGEN); else []."""
        return [] if self.terminated or self.truncated else list(DIRECTIONS)

    def _info(self, action_valid: bool) -> dict[str, Any]:
        level, state = self._current("_info()")
        room = level.puzzle.room
        return {
            "available_actions": self.available_actions(),
            "action_valid": action_valid,
            "success": state.solved(room),
            "end_reason": self.end_reason,
            "instruction": INSTRUCTION,
            "category": level.category.name,
            "goal_id": level.goal_id,
            "turn": self.turn,
            "boxes_on_target": state.boxes_on_target(room),
            "num_boxes": len(state.boxes),
            "episode_return": round(self.episode_return, 9),
        }

"""Stand-ins for the paired-utility tests: a one-turn lever and an agent that needs one entry.

The lever succeeds when the agent pulls it; the scripted agent pulls only when a given entry is
among the skills retrieved into its prompt, so that entry is worth exactly one success per goal
and every other entry nothing.
"""

from __future__ import annotations

from typing import Any

from envs import ActionListAdapter, register
from skillrl.agents.base import AgentDecision, AgentState

LEVER = "lever"
LEVER_GOALS = 12


class LeverEnv:
    """One turn: ``pull`` solves the goal, ``wait`` ends it unsolved."""

    env_id = LEVER

    def __init__(self, max_turns: int = 3) -> None:
        self.max_turns = max_turns

    def reset(self, *, seed=None, options=None):
        self.goal = int((options or {}).get("goal_index", seed or 0))
        return f"Lever {self.goal} is up.", self._info(valid=True)

    def step(self, action: str):
        move = action.strip().lower()
        solved = move == "pull"
        info = self._info(valid=move in ("pull", "wait"), success=solved)
        return (
            f"Lever {self.goal} is {'down' if solved else 'up'}.",
            float(solved),
            True,
            False,
            info,
        )

    def _info(self, valid: bool, success: bool = False) -> dict[str, Any]:
        return {
            "available_actions": ["pull", "wait"],
            "action_valid": valid,
            "success": success,
            "instruction": f"Pull lever {self.goal}.",
            "category": "levers",
            "goal_id": f"lever-{self.goal}",
        }


register(
    LEVER,
    LeverEnv,
    "a one-turn lever for the paired-utility tests",
    adapter=ActionListAdapter(
        "Pull the lever.",
        example_action="pull",
        split_sizes={"train": LEVER_GOALS, "test": LEVER_GOALS},
        categories=["levers"],
    ),
)


class NeedsEntryAgent:
    """Pulls the lever only when entry ``key`` is in the prompt's retrieved skills."""

    name = "needs-entry"
    uses_skills = True

    def __init__(self, key: str) -> None:
        self.key = key
        self.prompts: list[list[str]] = []
        """The retrieved entry ids each decision saw."""

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        pass

    def end_episode(self, episode_id: str) -> None:
        pass

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        decisions = []
        for state in states:
            ids = state.skills.ids if state.skills is not None else []
            self.prompts.append(ids)
            decisions.append(AgentDecision(action="pull" if self.key in ids else "wait"))
        return decisions

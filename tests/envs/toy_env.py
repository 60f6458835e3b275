"""A user's own environment, registered with its adapter ("Your own environment" in the docs).

The code below the marker is docs/environments.md's example, word for word (a test compares
them), and the runtime tests play it with the same agents and engine as WebShop and Sokoban.
"""

# --- documented example ---
from envs import ActionListAdapter, EnvSpec, register_spec


class CounterEnv:
    """Reach the target number by adding or subtracting one per turn."""

    env_id = "counter"

    def __init__(self, max_turns: int = 10) -> None:
        self.max_turns = max_turns

    def reset(self, *, seed=None, options=None):
        index = (options or {}).get("goal_index", seed or 0)
        self.target, self.value, self.turn = index % 5 + 1, 0, 0
        return self._observation(), self._info(valid=True)

    def step(self, action):
        self.turn += 1
        move = action.strip().lower()
        valid = move in ("add", "subtract")
        if valid:
            self.value += 1 if move == "add" else -1
        solved = self.value == self.target
        truncated = not solved and self.turn >= self.max_turns
        info = self._info(valid=valid, success=solved)
        return self._observation(), float(solved), solved, truncated, info

    def _observation(self):
        return f"Counter: {self.value}. Target: {self.target}."

    def _info(self, valid, success=False):
        return {
            "available_actions": ["add", "subtract"],
            "action_valid": valid,
            "success": success,
            "instruction": "Make the counter show the target number.",
            "category": "counting",
            "goal_id": f"counter-{self.target}",
        }


class CounterExpert:
    """Reads the counter and the target from the observation."""

    def reset(self, reset_info):
        pass

    def act(self, observation, info):
        value, target = (int(word.strip(".")) for word in observation.split()[1::2])
        return "add" if value < target else "subtract"


SPEC = EnvSpec(
    "counter",
    CounterEnv,
    "Counter: add or subtract one until the counter shows the target.",
    adapter=ActionListAdapter(
        "You control a counter. Reach the target number in as few turns as you can.",
        example_action="add",
        split_sizes={"test": 5, "eval": 5, "train": 100},
        categories=["counting"],
        expert=lambda max_turns: CounterExpert(),
    ),
)
register_spec(SPEC)  # envs.make("counter") in this process
# --- end of documented example ---

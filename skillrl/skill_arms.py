"""Which entries an episode is shown: its own, none, or a placebo draw (another goal's).

The control that says whether a bank carries information (``skillrl eval --skills placebo``,
``benchmarks/bench_skill_value.py``) and the mix that teaches a policy to use its entries
(``skillrl sft --skill-placebo``) both need the same two things: the placebo's donor tasks
(training goals, so no held-out goal's text is involved) and the retrieval source of each arm.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import envs
from memory.placebo import DonorTask, PlaceboRetrieval
from skillrl_core.errors import ConfigError
from skillrl_core.splits import TRAIN_SPLIT

if TYPE_CHECKING:
    from memory.bank import SkillBank

SKILL_ARMS: tuple[str, ...] = ("on", "placebo", "off")
"""``on``: the entries retrieved for the episode's own goal at each turn; ``placebo``: as many
entries, retrieved for another goal (``memory.placebo``); ``off``: no entry."""

DEFAULT_DONORS = 200
"""Training goals a placebo draws its donors from."""


def donor_tasks(
    env_id: str, env_config: dict[str, Any] | None = None, count: int = DEFAULT_DONORS
) -> list[DonorTask]:
    """Return the instructions and categories of the first ``count`` training goals of ``env_id``.

    Placebo entries are retrieved for these (never for a test goal's text).
    """
    if count < 1:
        raise ConfigError(f"donors ({count}) must be >= 1")
    env = envs.make(env_id, **(env_config or {}))
    donors = []
    try:
        for index in range(count):
            try:
                _, info = env.reset(seed=index, options={"split": TRAIN_SPLIT, "goal_index": index})
            except ConfigError:
                if index == 0:
                    raise
                break  # the split holds fewer goals: take them all
            category = str(info.get("category") or "") or None
            instruction = str(info.get("instruction", ""))
            wants = envs.adapter_for(env_id).wanted_values(instruction)
            donors.append(DonorTask(instruction, category, wants))
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()
    return donors


def retrieval_source(
    arm: str, bank: SkillBank | None, donors: list[DonorTask] | None = None
) -> SkillBank | PlaceboRetrieval | None:
    """Return what an episode of ``arm`` retrieves from (None: no entries)."""
    if arm not in SKILL_ARMS:
        raise ConfigError(f"skills arm ({arm!r}) must be one of {', '.join(SKILL_ARMS)}")
    if arm == "off" or bank is None:
        return None
    if arm == "on":
        return bank
    if not donors:
        raise ConfigError("the placebo arm needs donor tasks (training goals)")
    return PlaceboRetrieval(bank, donors)

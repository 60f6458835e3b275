"""Settings every playing command checks before it loads a model, each refusal in one line.

A model load takes 10-15 s; a split that does not exist, goals past its end, a prompt budget that
cannot hold the prompt's fixed part or a model folder without weights would otherwise fail only
after it (or, worse, play on). Each check here asks the environment's adapter (split sizes, its
fixed prompt texts) or the files, never a model, and raises a :class:`SkillRLError` subclass
naming the setting, its value and what would be accepted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillrl_core.errors import ConfigError
from skillrl_core.goal_range import GoalRange, parse_goal_range


def split_size(env_id: str, env_config: Mapping[str, Any], split: str, option: str) -> int:
    """Return the goals in ``split``; refuse a split that does not exist or has no goals.

    ``option`` names the setting in the message (``--split``, ``--eval-split``). The adapter
    builds the environment's shared data to count, so a missing data folder fails here too.
    """
    import envs

    try:
        size = envs.adapter_for(env_id).split_size(split, env_config)
    except ConfigError as error:  # the adapter's own words (e.g. the splits it has)
        raise ConfigError(f"{option}: {error}") from error
    except KeyError as error:  # an adapter that knows no such split and says nothing more
        raise ConfigError(
            f"{option} {split!r}: environment {env_id!r} has no such split"
        ) from error
    if size < 1:
        raise ConfigError(
            f"{option} {split!r} of environment {env_id!r} has no goals{_with_options(env_config)}"
        )
    return size


def goal_range(env_id: str, env_config: Mapping[str, Any], split: str, text: str) -> GoalRange:
    """Read ``--goals`` text (``N`` or ``FIRST-LAST``) as goals of ``split``, refused outside it."""
    size = split_size(env_id, env_config, split, "--split")
    return parse_goal_range(text, size, split, option="--goals")


def check_goal_count(
    env_id: str,
    env_config: Mapping[str, Any],
    split: str,
    count: int,
    count_option: str,
    split_option: str,
) -> None:
    """Refuse playing the first ``count`` goals of ``split`` when it has fewer (0: none played)."""
    if count < 1:
        return
    size = split_size(env_id, env_config, split, split_option)
    if count > size:
        raise ConfigError(
            f"{count_option} ({count}) is more than the {size} goals of {split_option} {split!r}"
        )


def check_goal_id(env_id: str, env_config: Mapping[str, Any], split: str, goal_id: str) -> None:
    """Refuse a ``--goal`` text that is not a goal index of ``split`` and no goal's id either.

    The id is checked by resetting the environment on it, as the episode will (environments
    keep their goal ids to themselves); nothing is played.
    """
    import envs

    size = split_size(env_id, env_config, split, "--split")
    try:
        envs.make(env_id, **env_config).reset(options={"goal_id": goal_id.strip()})
    except ConfigError as error:
        raise ConfigError(
            f"--goal {goal_id!r} is neither a goal index of split {split!r} (0-{size - 1}) nor a "
            f"goal id: {error}"
        ) from error


def check_prompt_budget(env_id: str, max_prompt_tokens: int) -> None:
    """Refuse a ``--max-prompt-tokens`` below what every prompt of ``env_id`` needs.

    The fixed part (system message and reply format) is counted with the builder's estimate,
    without a tokenizer; the builder can shrink everything else, but not that.
    """
    import envs
    from skillrl.prompts.builder import PromptConfig, fixed_prompt_tokens

    config = PromptConfig(max_prompt_tokens=max_prompt_tokens)
    need = fixed_prompt_tokens(envs.adapter_for(env_id), config)
    if max_prompt_tokens < need:
        raise ConfigError(
            f"--max-prompt-tokens ({max_prompt_tokens}) is below the {need} tokens that the "
            f"system message and reply format of environment {env_id!r} take in every prompt; "
            f"give at least {need}"
        )


def _with_options(env_config: Mapping[str, Any]) -> str:
    if not env_config:
        return ""
    given = ", ".join(f"{key}={value}" for key, value in sorted(env_config.items()))
    return f" with the environment options {given}"

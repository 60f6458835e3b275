"""Click options shared by several subcommands."""

from __future__ import annotations

from typing import Any

import click

from skillrl.workspace import DEFAULT_WORKSPACE, WORKSPACE_ENV_VAR

workspace_option = click.option(
    "--workspace",
    type=click.Path(file_okay=False),
    envvar=WORKSPACE_ENV_VAR,
    default=DEFAULT_WORKSPACE,
    show_default=True,
    help=f"Workspace folder (skill bank, model cache, runs); also ${WORKSPACE_ENV_VAR}.",
)

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of tables."
)

backend_option = click.option(
    "--backend",
    type=click.Choice(["transformers", "openai", "vllm"]),
    default="transformers",
    show_default=True,
    help="Policy backend.",
)

max_turns_option = click.option(
    "--max-turns",
    type=click.IntRange(1),
    default=15,
    show_default=True,
    help="Turn limit per episode.",
)

max_new_tokens_option = click.option(
    "--max-new-tokens",
    type=click.IntRange(1),
    default=48,
    show_default=True,
    help="Tokens the policy may generate per turn.",
)

max_prompt_tokens_option = click.option(
    "--max-prompt-tokens",
    type=click.IntRange(16),
    default=900,
    show_default=True,
    help="Token budget of each turn's prompt (older history goes first, then skills).",
)


def prompt_config_from(o: dict[str, Any]) -> Any:
    """Build the :class:`skillrl.prompts.PromptConfig` that the command options ask for."""
    from skillrl.prompts import PromptConfig

    return PromptConfig(max_prompt_tokens=o["max_prompt_tokens"])

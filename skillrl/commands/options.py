"""Click options shared by several subcommands."""

from __future__ import annotations

from typing import Any

import click

from skillrl.errors import ConfigError
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


# Backends that cannot score candidate continuations (the chat API returns no prompt log-probs).
_FREE_ONLY_BACKENDS = ("openai",)

decoding_option = click.option(
    "--constrained/--free",
    default=None,
    help="Decoding. Constrained (the default, except with --backend openai): the model writes "
    "only the search words and picks each click among the admissible ones by its score, so "
    "every action is valid. --free: the model writes <think>/<action> freely and invalid "
    "actions are no-ops (the only choice with --backend openai).",
)


def constrained_from(o: dict[str, Any]) -> bool:
    """Resolve ``--constrained/--free`` for ``--backend``: constrained unless it cannot score.

    Raises :class:`ConfigError` up front for ``--constrained`` with a backend that cannot score
    continuations, instead of failing on the first click.
    """
    backend = o.get("backend", "transformers")
    choice = o.get("constrained")
    if choice is None:
        return backend not in _FREE_ONLY_BACKENDS
    if choice and backend in _FREE_ONLY_BACKENDS:
        raise ConfigError(
            f"--constrained needs a backend that can score candidate actions; --backend "
            f"{backend} cannot (its chat API returns no prompt log-probs): use --free, or "
            "--backend transformers/vllm"
        )
    return bool(choice)


def decoding_line(constrained: bool) -> str:
    """Say on screen which decoding is used and how to switch (rich markup)."""
    if constrained:
        return (
            "[dim]decoding: constrained (every action is admissible; --free lets the model "
            "write its own actions)[/]"
        )
    return "[dim]decoding: free (the model writes each action; invalid ones do nothing)[/]"

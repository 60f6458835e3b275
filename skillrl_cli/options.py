"""What several subcommands share: the workspace and JSON switches, ``--env-option``, the model.

The settings of a command are config fields (:mod:`skillrl_cli.config_options`); this module
holds the pieces more than one command plays with: :class:`PlayedModel` (the model ``run``,
``eval`` and ``skills measure`` play), ``--model auto`` (:func:`resolve_model`), a model's
recorded settings (:func:`recorded_settings`), the decoding choice (:func:`check_decoding`),
and the environment settings of ``--env-option``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envs.registry import DEFAULT_ENV
from skillrl.policies.config import DTYPES
from skillrl.policies.model_cache import CACHE_ENV_VAR
from skillrl.workspace import DEFAULT_WORKSPACE, WORKSPACE_CONTENTS, WORKSPACE_ENV_VAR
from skillrl_core.episode_limits import max_new_tokens_option
from skillrl_core.errors import ConfigError, SkillRLError
from skillrl_core.option_fields import option

if TYPE_CHECKING:
    from skillrl.policies import PolicyConfig
    from skillrl.prompts import PromptConfig

workspace_option = click.option(
    "--workspace",
    type=click.Path(file_okay=False),
    envvar=WORKSPACE_ENV_VAR,
    default=DEFAULT_WORKSPACE,
    show_default=True,
    help=f"Workspace folder ({WORKSPACE_CONTENTS}); also ${WORKSPACE_ENV_VAR}. Converted "
    f"models are cached per user, not here (${CACHE_ENV_VAR}, else $XDG_CACHE_HOME/skillrl, "
    "else ~/.cache/skillrl).",
)

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of tables."
)

AUTO_MODEL = "auto"
BASE_MODEL = "base"
SHIPPED_MODEL = "shipped"
MODEL_ALIASES = {"embedded": BASE_MODEL}
"""Older spellings of the ``--model`` words, kept for scripts (``train`` and ``sft`` said
``embedded`` for ``base``)."""

AUTO_MODEL_ORDER: tuple[tuple[str, str], ...] = (
    (
        "trained",
        "the newest checkpoint that `skillrl train` or `skillrl sft` saved in this workspace for "
        "the environment played (see `skillrl runs`; runs of other environments are skipped)",
    ),
    (SHIPPED_MODEL, "the trained adapter shipped for that environment"),
    (BASE_MODEL, "the embedded base model"),
)
"""Where ``--model auto`` looks, in order, as (source, how help names it): :func:`resolve_model`
tries the sources in this order and ``--model``'s help is written from the same tuple."""

MODEL_HELP = (
    "'auto': "
    + ", else ".join(text for _source, text in AUTO_MODEL_ORDER)
    + "; 'shipped': the adapter shipped for the environment; 'base' (or 'embedded'): "
    "SmolLM2-135M-Instruct as the package embeds it, untrained, never downloaded; or a "
    "checkpoint or LoRA adapter folder, a .gguf file or a hub id."
)
"""``--model``'s help, the same words in every command that takes a model."""


DECODING_HELP = (
    "Decoding. Constrained (the default, except with --backend openai): the model writes only "
    "the search words and picks each click among the admissible ones by its score, so every "
    "action is valid. --free: the model writes <think>/<action> freely and invalid actions are "
    "no-ops (the only choice with --backend openai). Default: as the model was trained (its "
    "recorded settings), else constrained."
)

PLAY_BACKENDS: tuple[str, ...] = ("transformers", "openai", "vllm")
"""Backends a model plays on in ``run``, ``eval`` and ``skills measure``."""

# Backends that cannot score candidate continuations (the chat API returns no prompt log-probs).
_FREE_ONLY_BACKENDS = ("openai",)


@dataclass(frozen=True)
class PlayedModel:
    """The model ``run``, ``eval`` and ``skills measure`` play, and how it is served."""

    model: str = option(AUTO_MODEL, help=MODEL_HELP)
    backend: str = option("transformers", help="Policy backend.", choices=PLAY_BACKENDS)
    dtype: str = option(
        "auto",
        help="Number format of the transformers policy. auto: bf16 on GPUs and on CPUs with "
        "native bf16 (AVX512-BF16, AMX), else float32. Training runs evaluate in float32: pass "
        "float32 to reproduce a run's own figures on such a CPU.",
        choices=DTYPES,
    )
    base_url: str | None = option(
        None, help="Server root for --backend openai (e.g. http://host:8000/v1)."
    )
    constrained: bool | None = option(None, help=DECODING_HELP, negative="--free")
    threads: int | None = option(None, help="CPU threads for torch.", low=1)
    max_new_tokens: int = max_new_tokens_option()

    def policy_config(self, workspace: str | None) -> PolicyConfig:
        """Return the :class:`~skillrl.policies.PolicyConfig` of this model (once resolved)."""
        from skillrl.policies import PolicyConfig
        from skillrl.workspace import resolve_workspace

        return PolicyConfig(
            backend=self.backend,
            model=self.model,
            base_url=self.base_url,
            dtype=self.dtype,
            threads=self.threads,
            workspace=resolve_workspace(workspace),
        )


def check_decoding(backend: str, choice: bool | None) -> bool:
    """Resolve ``--constrained/--free`` for ``backend``: constrained unless it cannot score.

    Raises :class:`ConfigError` up front for ``--constrained`` with a backend that cannot score
    continuations, instead of failing on the first click.
    """
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


# -- environment settings (--env-option KEY=VALUE) --------------------------------------------

ENV_OPTION_RESERVED: dict[str, str] = {"max_turns": "--max-turns"}
"""Environment settings that have their own command option (set there, not by --env-option)."""


def _parse_env_options(
    _ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
) -> dict[str, Any]:
    """Parse ``--env-option`` values as click calls back (:func:`parse_env_options`)."""
    return parse_env_options(values)


def parse_env_options(values: Sequence[str]) -> dict[str, Any]:
    """Turn repeated ``KEY=VALUE`` into a dict; each value is read as a YAML scalar.

    A malformed item raises ``click.BadParameter`` naming it.
    """
    import yaml

    settings: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as error:
            raise click.BadParameter(f"{item!r}: the value is not a YAML scalar") from error
        if isinstance(value, dict | list):
            raise click.BadParameter(f"{item!r}: the value must be a single value (a YAML scalar)")
        settings[key] = value
    return settings


YAML_LINE_BREAKS = "\x85\u2028\u2029"
"""Characters YAML reads as line breaks besides CR and LF."""


def env_option_text(key: str, value: Any) -> str:
    r"""Return the ``KEY=VALUE`` text that ``--env-option`` reads back as exactly ``value``.

    PyYAML writes the value, so PyYAML's reading of it is the inverse (JSON would not do:
    YAML 1.1 reads JSON's ``1e-09`` as a string). Text holding one of YAML's own line breaks
    (NEL, LS, PS) is written with escapes: PyYAML writes them raw in a quoted scalar, where
    reading folds them (``'a\x85b'`` came back as ``'a b'``).
    """
    import yaml

    plain = not (isinstance(value, str) and any(c in value for c in YAML_LINE_BREAKS))
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=plain, width=1 << 30)
    return f"{key}={text.removesuffix(chr(10)).removesuffix(chr(10) + '...')}"


def env_option(command: Any) -> Any:
    """Add ``--env-option KEY=VALUE`` (repeatable) to a command; parsed into ``env_options``.

    Check the result with :func:`env_config_from` once the environment id is known.
    """
    return click.option(
        "--env-option",
        "env_options",
        multiple=True,
        metavar="KEY=VALUE",
        callback=_parse_env_options,
        help="An environment setting, repeatable: a field of the environment's config, e.g. "
        "observation_mode=text_rich (values are YAML scalars; a wrong key lists the valid ones).",
    )(command)


def env_config_from(env_id: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Validate ``--env-option`` settings for ``env_id`` (and the id itself), building nothing.

    Raises UnknownEnvError / ConfigError naming the bad id or key and the valid ones: cheap
    enough to run before any model is loaded.
    """
    from envs.registry import check_config

    for key, flag in ENV_OPTION_RESERVED.items():
        if key in settings:
            raise click.UsageError(f"--env-option {key}=... : set it with {flag} instead")
    return check_config(env_id, settings)


# -- which model (--model auto) ----------------------------------------------------------------


def resolve_model(
    model: str, backend: str, workspace: str | None, console: Any, env_id: str = DEFAULT_ENV
) -> str:
    """Turn a ``--model`` word into a checkpoint path or ``embedded``, saying which.

    Every command that takes a model resolves it here. ``base`` (``embedded``) is the embedded
    model, never a hub download; ``shipped`` the adapter the package ships for ``env_id``
    (ConfigError if none ships); ``auto`` tries :data:`AUTO_MODEL_ORDER`: the workspace's newest
    checkpoint trained on ``env_id``, else the shipped adapter, else the embedded base model.
    Servers (``--backend openai``) name their own models, so there 'auto' means 'embedded', the
    name skillrl always sent. A model path that cannot load (a folder without weights, a
    corrupt file) raises ModelLoadError here, before anything loads.
    """
    from skillrl.policies.config import EMBEDDED_MODEL
    from skillrl.policies.model_folders import check_model_path

    model = MODEL_ALIASES.get(model, model)
    if model == BASE_MODEL:
        console.print("[cyan]model: the embedded SmolLM2-135M-Instruct, untrained[/]")
        return EMBEDDED_MODEL
    if model == SHIPPED_MODEL:
        shipped = _shipped_model(workspace, env_id, console)
        if shipped is None:
            raise ConfigError(
                f"--model shipped: no adapter ships for environment {env_id!r}; use --model "
                "base, or a checkpoint that `skillrl sft` or `skillrl train` made"
            )
        return shipped
    if model != AUTO_MODEL:
        if backend != "openai":  # a server's model name is the server's business
            check_model_path(model, tokenizer_only=backend == "trl-vllm")
        return model
    if backend == "openai":
        return EMBEDDED_MODEL
    finders = {"trained": _trained_model, SHIPPED_MODEL: _shipped_model, BASE_MODEL: _base_model}
    for source, _help in AUTO_MODEL_ORDER:
        chosen = finders[source](workspace, env_id, console)
        if chosen is not None:
            return chosen
    raise AssertionError("AUTO_MODEL_ORDER ends with the base model, which is always there")


def resolve_training_model(
    model: str, backend: str, workspace: str | None, env_id: str, *, quiet: bool = False
) -> str:
    """Resolve the model ``train`` and ``sft`` start from with :func:`resolve_model`.

    What ``auto`` or ``shipped`` found is said on stderr; ``base`` (their default) and
    ``quiet`` (``--init`` chose the start) say nothing.
    """
    from rich.console import Console

    said = not quiet and MODEL_ALIASES.get(model, model) != BASE_MODEL
    return resolve_model(model, backend, workspace, Console(stderr=True, quiet=not said), env_id)


def _trained_model(workspace: str | None, env_id: str, console: Any) -> str | None:
    from skillrl.workspace import resolve_workspace
    from trainers.runs import latest_checkpoint

    root = resolve_workspace(workspace)
    found = latest_checkpoint(root, env_id)
    skipped = found.skipped if found is not None else _other_env_runs(root, env_id)
    if skipped:
        names = ", ".join(f"{r.name!r} ({r.env_id or 'environment unknown'})" for r in skipped)
        console.print(
            f"[dim]skipped newer runs trained for another environment than {env_id!r}: {names}[/]",
            soft_wrap=True,
        )
    if found is None:
        return None
    console.print(
        f"[cyan]model: {found.checkpoint} (the newest checkpoint trained for {env_id!r}, "
        f"run {found.run.name!r}; --model base for the untrained model)[/]",
        soft_wrap=True,  # a wrapped path cannot be copied
    )
    weaker = _weaker_than_shipped(found.checkpoint, env_id)
    if weaker:
        console.print(f"[yellow]{weaker}[/]", soft_wrap=True)
    return str(found.checkpoint)


def _weaker_than_shipped(checkpoint: Any, env_id: str) -> str:
    """Say why ``checkpoint`` may play worse than the adapter shipped for ``env_id`` ("": no).

    ``--model auto`` plays the newest checkpoint trained in the workspace; this says so when
    it takes the place of the shipped adapter's recorded figures with none (a short toy run)
    or with a lower success rate, and how to play the shipped one instead.
    """
    from skillrl.policies.model_settings import ModelSettings, shipped_adapter

    shipped = shipped_adapter(env_id)
    ours = _test_figures(ModelSettings.load(checkpoint))
    theirs = _test_figures(ModelSettings.load(shipped)) if shipped is not None else None
    if theirs is None:
        return ""
    pick = "--model shipped plays that one instead, or --model PATH another"
    if ours is None:
        return (
            f"note: this checkpoint records no test figures, in place of the adapter shipped "
            f"for {env_id!r}, which solved {theirs[0]}/{theirs[1]} test goals; {pick}"
        )
    if ours[0] * theirs[1] < theirs[0] * ours[1]:  # a lower success rate, without division
        return (
            f"note: this checkpoint solved {ours[0]}/{ours[1]} test goals when it was made, a "
            f"lower rate than the {theirs[0]}/{theirs[1]} of the adapter shipped for {env_id!r}; "
            f"{pick}"
        )
    return ""


def _test_figures(settings: Any) -> tuple[int, int] | None:
    """(successes, goals) a model recorded on test goals (None: it recorded none)."""
    if settings is None:
        return None
    successes, goals = settings.figures.get("test_successes"), settings.figures.get("test_goals")
    if not isinstance(successes, int) or not isinstance(goals, int) or goals < 1:
        return None
    return successes, goals


def resolve_shipped_model(model: str, env_id: str) -> str:
    """Return ``model``, or for ``shipped`` the path of the adapter shipped for ``env_id``."""
    from skillrl.policies.model_settings import shipped_adapter

    if model != SHIPPED_MODEL:
        return model
    shipped = shipped_adapter(env_id)
    if shipped is None:
        raise ConfigError(f"--model shipped: no adapter ships for environment {env_id!r}")
    return str(shipped)


def _other_env_runs(root: Any, env_id: str) -> list[Any]:
    from trainers.runs import list_runs

    return [r for r in list_runs(root) if r.played_checkpoint is not None and r.env_id != env_id]


def _shipped_model(workspace: str | None, env_id: str, console: Any) -> str | None:
    from skillrl.policies.model_settings import ModelSettings, shipped_adapter

    shipped = shipped_adapter(env_id)
    if shipped is None:
        return None
    settings = ModelSettings.load(shipped)
    made = _figures_text(settings.figures) if settings else ""
    console.print(
        f"[cyan]model: the SmolLM2-135M-Instruct adapter shipped with skillrl"
        f"{made} (--model base for the untrained model; a checkpoint you train for {env_id!r} in "
        "this workspace takes its place)[/]",
        soft_wrap=True,
    )
    return str(shipped)


def _base_model(workspace: str | None, env_id: str, console: Any) -> str:
    from skillrl.policies.config import EMBEDDED_MODEL

    console.print(
        f"[cyan]model: the embedded SmolLM2-135M-Instruct, untrained (no checkpoint trained for "
        f"{env_id!r} in this workspace and none ships for it; `skillrl sft --env {env_id}` or "
        f"`skillrl train --env {env_id} --cold-start` makes one, and later runs use it)[/]",
        soft_wrap=True,
    )
    return EMBEDDED_MODEL


def model_line(model: str) -> str:
    """``model: ...`` for a model given by name or path (rich markup), as ``--model auto`` says it.

    The embedded base model and the package's shipped adapters are named in words; any other
    model by its path, with the test figures it records, if any.
    """
    from rich.markup import escape

    from skillrl.policies.config import EMBEDDED_MODEL
    from skillrl.policies.model_settings import SHIPPED_ADAPTERS, ModelSettings

    if model == EMBEDDED_MODEL:
        return "[cyan]model: the embedded SmolLM2-135M-Instruct, untrained[/]"
    path = Path(model).expanduser()
    try:
        settings = ModelSettings.load(path)
    except SkillRLError:
        settings = None  # the model's own load says what is wrong with it
    made = _figures_text(settings.figures) if settings else ""
    if path.resolve().parent == SHIPPED_ADAPTERS.resolve():
        shipped = "the SmolLM2-135M-Instruct adapter shipped with skillrl"
        return f"[cyan]model: {shipped}{made}[/]"
    return f"[cyan]model: {escape(model)}{made}[/]"


def _figures_text(figures: dict[str, Any]) -> str:
    success, goals = figures.get("test_successes"), figures.get("test_goals")
    if success is None or not goals:
        return ""
    return f", {success}/{goals} test goals solved in its recorded evaluation"


@dataclass(frozen=True)
class RecordedSettings:
    """The settings a model was trained under that a command takes (None: not taken).

    A setting is taken when the user left its option at the default; options the user gave win.
    """

    skills: bool | None
    """Whether the model plays with retrieved skills."""
    max_prompt_tokens: int | None
    """Its prompt budget."""
    constrained: bool | None
    """Constrained (True) or free decoding."""
    env_options: dict[str, Any]
    """The environment settings to play with: those the model recorded for this environment,
    with every ``--env-option`` the user gave in their place, key by key."""


def recorded_settings(
    model: str,
    ctx: click.Context,
    console: Any,
    *,
    env_id: str,
    backend: str,
    env_options: dict[str, Any],
    skills_option: str = "skills",
) -> RecordedSettings | None:
    """Read the settings recorded with ``model`` for each option left at its default.

    ``skills_option`` names the option that spells skills in the command (``skills``, or
    ``skills_mode`` in ``eval``). The screen says which settings came from the model. Returns
    None when the model records none.
    """
    from skillrl.policies.model_settings import SETTINGS_FILE, ModelSettings

    settings = ModelSettings.load(model)
    if settings is None:
        return None
    if settings.env_id != env_id:
        # Its skills, prompt budget and decoding are another environment's: refused, not
        # played silently under them.
        raise ConfigError(
            f"model {model} was trained on {settings.env_id!r} (its {SETTINGS_FILE}), not "
            f"{env_id!r}: give --env {settings.env_id}; to play it on {env_id} anyway, copy "
            f"the folder without its {SETTINGS_FILE}"
        )

    def defaulted(name: str) -> bool:
        source = ctx.get_parameter_source(name)
        return source is None or source == click.core.ParameterSource.DEFAULT

    taken = []
    skills = settings.skills if defaulted(skills_option) else None
    if skills is not None:
        taken.append("skills" if skills else "no skills")
    budget = settings.max_prompt_tokens if defaulted("max_prompt_tokens") else None
    if budget is not None:
        taken.append(f"{budget}-token prompts")
    constrained = None
    if defaulted("constrained") and backend not in _FREE_ONLY_BACKENDS:
        constrained = settings.constrained
        taken.append("constrained decoding" if constrained else "free decoding")
    played = dict(env_options)
    recorded = {k: v for k, v in sorted(settings.env_options.items()) if k not in played}
    played = {**recorded, **played}  # an --env-option the user gave wins, key by key
    taken += [f"{key}={value}" for key, value in recorded.items()]
    if taken:
        console.print(
            f"[dim]settings the model was trained under: {', '.join(taken)} (options you give "
            "override them)[/]"
        )
    return RecordedSettings(skills, budget, constrained, played)


@dataclass(frozen=True)
class SettledModel:
    """The model a command plays, with the settings it was trained under applied."""

    played: PlayedModel
    """The model (``--model auto`` resolved) and its decoding, the recorded one if not given."""
    prompt: PromptConfig
    """The prompt settings, with the recorded prompt budget if ``--max-prompt-tokens`` was not
    given."""
    skills: bool | None
    """The recorded skills setting when the command's option was left at its default (None:
    the command's own choice stands)."""
    env_config: dict[str, Any]
    """The environment settings to play with: the model's recorded ones, every
    ``--env-option`` the user gave in their place."""


def settle_played_model(
    played: PlayedModel,
    prompt: PromptConfig,
    ctx: click.Context,
    console: Any,
    *,
    env_id: str,
    workspace: str | None,
    env_options: dict[str, Any],
) -> SettledModel:
    """Resolve ``--model auto`` and apply the settings the model records to what was left default.

    ``run``, ``eval`` and ``skills measure`` settle the model they play this way; each then
    applies :attr:`SettledModel.skills` to its own skills choice and checks its goals against
    :attr:`SettledModel.env_config` (a recorded setting can shrink a split).
    """
    model = resolve_model(played.model, played.backend, workspace, console, env_id)
    played = dataclasses.replace(played, model=model)
    taken = recorded_settings(
        model, ctx, console, env_id=env_id, backend=played.backend, env_options=env_options
    )
    if taken is None:
        return SettledModel(played, prompt, None, env_config_from(env_id, env_options))
    if taken.constrained is not None:
        played = dataclasses.replace(played, constrained=taken.constrained)
    if taken.max_prompt_tokens is not None:
        prompt = dataclasses.replace(prompt, max_prompt_tokens=taken.max_prompt_tokens)
    return SettledModel(played, prompt, taken.skills, env_config_from(env_id, taken.env_options))

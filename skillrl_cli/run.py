"""``skillrl run``: play episodes with a model, the scripted expert or a person, turn by turn.

:func:`settle_play` turns the options into one typed
:class:`~skillrl_cli.library.PlaySettings` (the episodes, who plays, how the model plays, the
bank's use); :func:`play_on_screen` hands it to the library's
:func:`~skillrl_cli.library.play` with a :class:`~skillrl_cli.library.PlayWatch` that shows
every turn. Everything shown on screen is rendered here with rich.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import click
from rich.console import Console
from rich.markup import escape

from envs.registry import DEFAULT_ENV, ENV_HELP
from skillrl.prompts import PromptConfig
from skillrl.workspace import resolve_workspace
from skillrl_cli.config_options import OptionGroup, build, config_options
from skillrl_cli.options import (
    PlayedModel,
    check_decoding,
    decoding_line,
    env_config_from,
    env_option,
    json_option,
    settle_played_model,
    workspace_option,
)
from skillrl_cli.upfront_checks import (
    check_goal_id,
    check_prompt_budget,
    goal_range,
    split_size,
)
from skillrl_core.episode_limits import max_turns_option
from skillrl_core.errors import ConfigError
from skillrl_core.goal_range import FORMS, GoalRange
from skillrl_core.option_fields import SEED_MAX, option

if TYPE_CHECKING:
    from skillrl.agents.llm import LLMAgent
    from skillrl_cli.library import ModelPlay, PlayResult, PlaySettings, PlayWatch


@dataclass(frozen=True)
class RunChoices:
    """What ``skillrl run`` plays: which episodes, who acts, and how they are shown and kept."""

    env_id: str = option(DEFAULT_ENV, help=ENV_HELP, aliases=("--env",))
    policy: Literal["model", "expert", "human"] = option(
        "model",
        help="Who acts: the model, the scripted expert, or you at the terminal.",
        choices=("model", "expert", "human"),
    )
    episodes: int = option(1, help="Episodes to play.", low=1)
    split: str = option("test", help="Goal split: test, eval or train.")
    goal: str = option(
        "0", help="First goal index of the split (episode i plays goal+i), or one goal id."
    )
    goals: str | None = option(
        None,
        help=f"Goals of the split to play, one episode each: {FORMS}; instead of --goal and "
        "--episodes.",
        metavar="N|FIRST-LAST",
    )
    seed: int = option(0, help="Seed (episode i uses seed+i).", low=0, high=SEED_MAX)
    skills: bool | None = option(
        None,
        words=(True, False),
        help="Retrieve skills into every prompt (on, or --skills alone), or not (off, or "
        "--no-skills): off plays the same model with "
        "prompts that carry no entry and leaves the bank unread: a measure of what the entries "
        "add (the shipped adapters are trained with entries withheld from a quarter of their "
        "prompts, so they play either way). Default: as the model was trained (its recorded "
        "settings), else with skills.",
    )
    max_turns: int = max_turns_option()
    step: bool = option(
        False,
        help="Pause every turn: Enter accepts the action, or type another.",
        show_default=False,
    )
    temperature: float = option(0.0, help="Sampling temperature (0: greedy, reproducible).", low=0)
    parallel: int = option(16, help="Episodes played at once.", low=1)
    record: bool = option(
        True,
        help="Save the episodes into the skill bank's trajectory store (for distillation) and "
        "count their retrievals in the entries' usage statistics. Test-split episodes are never "
        "saved or counted: a held-out goal changes nothing in the bank.",
    )
    seed_bank: bool = option(
        True, help="Seed an empty skill bank with the starting skills on first run."
    )


RUN_OPTIONS = OptionGroup(RunChoices)
MODEL_OPTIONS = OptionGroup(PlayedModel)
PROMPT_OPTIONS = OptionGroup(PromptConfig)


@click.command("run")
@config_options(RUN_OPTIONS, MODEL_OPTIONS, PROMPT_OPTIONS)
@env_option
@json_option
@workspace_option
def run(**values: Any) -> None:
    """Play episodes and show every turn: skills, thinking, action, observation, reward."""
    console = Console(stderr=values["as_json"])
    choices = build(RUN_OPTIONS, values)
    # Settled before the bank or a model loads: a typo fails in a second, not after a minute.
    settings = settle_play(
        click.get_current_context(),
        choices,
        build(MODEL_OPTIONS, values),
        build(PROMPT_OPTIONS, values),
        env_options=values["env_options"],
        workspace=values["workspace"],
        console=console,
    )
    screen = RunScreen(step=choices.step, as_json=values["as_json"])
    played = play_on_screen(settings, console, screen)
    records, stats = played.episodes, played.stats
    from skillrl_cli.run_display import episode_summary, summary_table

    if screen.as_json:
        summary = {
            "episodes": len(records),
            "successes": played.successes,
            "success_rate": played.success_rate,
            "mean_score": played.mean_score,
        }
        out = {
            "summary": summary,
            "stats": stats.to_dict(),
            "episodes": [episode_summary(r) for r in records],
        }
        click.echo(json.dumps(out, indent=2))
        return
    console.print(summary_table(records))
    console.print(
        f"[dim]{stats.wall_seconds:.1f}s: model {stats.model_seconds:.1f}s, env "
        f"{stats.env_seconds:.1f}s, retrieval {stats.retrieval_seconds:.1f}s; "
        f"{stats.generated_tokens} tokens generated[/]"
    )


def settle_play(
    ctx: click.Context,
    choices: RunChoices,
    played: PlayedModel,
    prompt: PromptConfig,
    *,
    env_options: dict[str, Any],
    workspace: str | None,
    console: Console,
) -> PlaySettings:
    """Resolve the options of ``skillrl run`` into its settings, checking each on the way.

    The goals are checked first, then the model is resolved (``--model auto``) and its recorded
    settings apply to the options left at their defaults, which may change the environment's.
    """
    from skillrl_cli.library import PlaySettings

    env_config = env_config_from(choices.env_id, env_options)
    if choices.policy == "human":
        env_options = _pages_for_a_person(choices.env_id, env_options, console)
        env_config = env_config_from(choices.env_id, env_options)
    goals = _goal_range(ctx, choices, env_config)
    model = None
    if choices.policy == "model":
        settled = settle_played_model(
            played,
            prompt,
            ctx,
            console,
            env_id=choices.env_id,
            workspace=workspace,
            env_options=env_options,
        )
        if settled.skills is not None:
            choices = dataclasses.replace(choices, skills=settled.skills)
        env_config = settled.env_config
        goals = _goal_range(ctx, choices, env_config)  # within the split as it now is
        model = model_play(
            choices.env_id,
            settled.played,
            settled.prompt,
            workspace,
            temperature=choices.temperature,
            seed=choices.seed,
        )
    interactive = choices.step or choices.policy == "human"
    return PlaySettings(
        env_id=choices.env_id,
        env_config=env_config,
        split=choices.split,
        goals=goals if goals is not None else choices.goal.strip(),
        episodes=1 if goals is not None else choices.episodes,
        seed=choices.seed,
        player=choices.policy,
        model=model,
        skills=choices.skills is not False and choices.policy != "expert",
        max_turns=choices.max_turns,
        parallel=1 if interactive else choices.parallel,
        workspace=resolve_workspace(workspace),
        record=choices.record,
        seed_bank=choices.seed_bank,
    )


def _pages_for_a_person(
    env_id: str, env_options: dict[str, Any], console: Console
) -> dict[str, Any]:
    """Add the environment's settings for a person (a readable page) to ``--env-option``'s."""
    import envs

    readable = envs.adapter_for(env_id).human_env_options()
    added = {key: value for key, value in readable.items() if key not in env_options}
    if added:
        said = ", ".join(f"{key}={value}" for key, value in sorted(added.items()))
        console.print(f"[dim]pages for a person: {said} (--env-option sets another)[/]")
    return {**added, **env_options}


def model_play(
    env_id: str,
    played: PlayedModel,
    prompt: PromptConfig,
    workspace: str | None,
    *,
    temperature: float,
    seed: int,
) -> ModelPlay:
    """Return how the model plays, from settings already resolved (``--model``, its settings).

    ``skillrl skills measure`` builds its model the same way. Decoding and the prompt budget
    are checked here, before anything loads.
    """
    from skillrl.policies import SamplingConfig
    from skillrl_cli.library import ModelPlay

    constrained = check_decoding(played.backend, played.constrained)
    check_prompt_budget(env_id, prompt.max_prompt_tokens)  # as the model's settings say
    return ModelPlay(
        policy=played.policy_config(workspace),
        prompt=prompt,
        constrained=constrained,
        sampling=SamplingConfig(
            max_new_tokens=played.max_new_tokens,
            temperature=temperature,
            seed=seed,
            stop=["</action>"],
        ),
    )


@dataclass(frozen=True)
class RunScreen:
    """What only ``skillrl run``'s screen reads, beside the library's :class:`PlaySettings`."""

    step: bool = False
    """``--step``: a person reviews every turn (:attr:`~skillrl_cli.library.PlayWatch.review`)."""
    as_json: bool = False
    """``--json``: JSON on stdout at the end, no turn shown."""

    def interactive(self, settings: PlaySettings) -> bool:
        """Whether a person types at the terminal (playing, or reviewing every turn)."""
        return self.step or settings.player == "human"


def play_on_screen(
    settings: PlaySettings, console: Console, screen: RunScreen = RunScreen()
) -> PlayResult:
    """Play every episode with the library's :func:`~skillrl_cli.library.play`, shown on screen.

    The bank opens here, so that opening and seeding it show a status line.
    """
    from skillrl_cli.bank_access import open_bank
    from skillrl_cli.library import play

    if (
        screen.interactive(settings)
        and not sys.stdin.isatty()
        and not os.environ.get("SKILLRL_ALLOW_PIPED_INPUT")
    ):
        console.print("[yellow]reading actions from a non-terminal input[/]")
    if settings.player == "expert":
        import envs

        if envs.adapter_for(settings.env_id).make_expert(settings.max_turns) is None:
            raise click.UsageError(f"environment {settings.env_id!r} has no scripted expert")
    bank = None
    if settings.uses_skills or settings.record:
        bank = open_bank(
            settings.workspace, settings.env_id, seed=settings.seed_bank, console=console
        )
    try:
        return play(settings, watch=screen_watch(settings, screen, console), bank=bank)
    finally:
        if bank is not None:
            bank.close()


def screen_watch(settings: PlaySettings, screen: RunScreen, console: Console) -> PlayWatch:
    """Return what ``skillrl run`` shows while playing, and how a person takes part."""
    from skillrl_cli.library import PlayWatch

    human = settings.player == "human"
    quiet = screen.as_json or screen.interactive(settings)
    return PlayWatch(
        loading_model=_loading_status(console, settings.model) if settings.model else None,
        episode_started=None if screen.as_json else _show_task(console),
        deciding=None if quiet else _deciding(console),
        turn=None if screen.as_json else _show_turn(console, human),
        review=_reviewer(console) if screen.step else None,
        ask=_asker(console) if human else None,
    )


def model_agent(play: ModelPlay, console: Console, uses_skills: bool) -> LLMAgent:
    """Load the policy (a status line shows its progress) and wrap it as the playing agent."""
    from skillrl_cli.library import PlayWatch, load_model_agent

    watch = PlayWatch(loading_model=_loading_status(console, play))
    return load_model_agent(play, uses_skills=uses_skills, watch=watch)


def _loading_status(console: Console, play: ModelPlay) -> Callable[[str], Any]:
    """Show a status line while the model loads, then the decoding it plays with."""

    @contextmanager
    def loading(model: str) -> Iterator[Callable[[str], None]]:
        if play.policy.backend != "openai":
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # the rich status below shows progress instead
        with console.status(f"loading model {escape(model)}") as status:
            yield lambda message: status.update(escape(message))
        console.print(decoding_line(play.constrained))

    return loading


def _show_task(console: Console) -> Callable[[dict[str, Any]], None]:
    from skillrl_cli.run_display import header

    def show(reset_info: dict[str, Any]) -> None:
        goal_id = str(reset_info.get("goal_id", ""))
        console.print(header(str(reset_info.get("instruction", "")), goal_id))

    return show


def _deciding(console: Console) -> Callable[[str, int, int], Any]:
    def deciding(name: str, turn: int, episodes: int) -> Any:
        return console.status(f"turn {turn}: {escape(name)} deciding for {episodes} episode(s)")

    return deciding


def _asker(console: Console) -> Callable[[Any], str]:
    from skillrl_cli.run_display import show_page

    def ask(state: Any) -> str:
        show_page(console, state)
        return _typed_action(console, state, "your action> ")

    return ask


def _goal_range(
    ctx: click.Context, choices: RunChoices, env_config: dict[str, Any]
) -> GoalRange | None:
    """Return the goals the episodes play by index (None: each plays the goal id --goal).

    A split, --goal or --goals that names no goal of the split is refused before anything loads.
    """
    env_id, split = choices.env_id, choices.split
    if choices.goals is not None:
        given = [f"--{n}" for n in ("goal", "episodes") if not _defaulted(ctx, n)]
        if given:
            raise click.UsageError(f"--goals names the goals itself: leave out {given[0]}")
        return goal_range(env_id, env_config, split, choices.goals)
    goal = choices.goal.strip()
    if not (goal.isascii() and goal.isdigit()):
        check_goal_id(env_id, env_config, split, goal)
        return None
    played = GoalRange(int(goal), int(goal) + choices.episodes - 1)
    size = split_size(env_id, env_config, split, "--split")
    if played.last >= size:
        asked = (
            f"--goal {goal}"
            if played.count == 1
            else f"--goal {goal} --episodes {choices.episodes}"
        )
        raise ConfigError(
            f"{asked} reaches past the last goal of split {split!r} ({size} goals, 0-{size - 1})"
        )
    return played


def _defaulted(ctx: click.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is None or source == click.core.ParameterSource.DEFAULT


def _show_turn(console: Console, human: bool) -> Any:
    from skillrl_cli.run_display import turn_panel

    def show(event: Any) -> None:
        # A person saw this turn's skills with its page, and sees the next page in full before
        # typing: the panel repeats neither.
        console.print(
            turn_panel(event, with_observation=event.done or not human, with_skills=not human)
        )

    return show


def _reviewer(console: Console) -> Any:
    from skillrl.agents.human import read_typed_action
    from skillrl_cli.run_display import ask_step

    def review(state: Any, decision: Any) -> Any:
        try:
            typed = ask_step(console, state, decision).strip()
        except EOFError:  # Ctrl-D, or the end of piped input: as in human play, a quit
            typed = "q"
        if typed.lower() in QUIT_WORDS:
            _quit(console)
        if not typed:
            return decision
        typed = _with_query(console, state, typed)
        parsed = read_typed_action(typed, state)
        decision.action, decision.parse_ok = parsed.action, parsed.ok
        decision.model_output = f"{decision.model_output}\n[overridden by a person: {typed}]"
        decision.completion_token_ids = decision.completion_logprobs = None  # not the model's
        decision.action_substituted = True
        return decision

    return review


QUIT_WORDS = ("q", "quit")
"""What a person types to stop playing."""


def _quit(console: Console) -> None:
    """Stop the run as a person asked: exit 0 (episodes that finished before are kept)."""
    console.print("[dim]quit: the episode in progress is dropped; finished ones are kept[/]")
    raise click.exceptions.Exit(0)


def _typed_action(console: Console, state: Any, prompt: str) -> str:
    """Read a person's action: blank lines ask again, q quits, the search box asks for words."""
    typed = ""
    while not typed:
        typed = _read(console, prompt).strip()
    if typed.lower() in QUIT_WORDS:
        _quit(console)
    return _with_query(console, state, typed)


def _with_query(console: Console, state: Any, typed: str) -> str:
    """When a person picked a free-text box itself (e.g. a search box), ask for the words."""
    import envs

    adapter = envs.adapter_for(state.env_id)
    if not adapter.wants_free_text(typed, state.available_actions):
        return typed
    words = ""
    while not words:
        words = _read(console, "your words> ").strip()
    action, _ = adapter.free_text_action(words, state.instruction, repair=False)
    return action


def _read(console: Console, prompt: str) -> str:
    try:
        return console.input(prompt)
    except EOFError:  # Ctrl-D, or the end of piped input: the same as typing q
        _quit(console)
        raise  # not reached: _quit exits

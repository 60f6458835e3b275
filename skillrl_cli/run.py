"""``skillrl run``: play episodes with a model, the scripted expert or a person, turn by turn.

:func:`settle_play` turns the options into one typed :class:`PlaySettings` (the episodes, who plays,
how the model plays, the bank's use); :func:`play` opens the bank, builds the agent and runs the
library's ``RolloutEngine``. Everything shown on screen is rendered here with rich.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
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
from skillrl_core.errors import BankError, ConfigError
from skillrl_core.goal_range import FORMS, GoalRange
from skillrl_core.option_fields import SEED_MAX, option

if TYPE_CHECKING:
    from skillrl.policies import PolicyConfig, SamplingConfig
    from skillrl.rollout import EpisodeStart


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
    max_turns: int = option(15, help="Turn limit per episode.", low=1)
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
    # Settled before the bank or a model loads: a typo fails in a second, not after a minute.
    settings = settle_play(
        click.get_current_context(),
        build(RUN_OPTIONS, values),
        build(MODEL_OPTIONS, values),
        build(PROMPT_OPTIONS, values),
        env_options=values["env_options"],
        workspace=values["workspace"],
        as_json=values["as_json"],
        console=console,
    )
    records, stats = play(settings, console)
    from skillrl_cli.run_display import episode_summary, summary_table

    if settings.as_json:
        summary = {
            "episodes": len(records),
            "successes": sum(r.success for r in records),
            "success_rate": sum(r.success for r in records) / len(records),
            "mean_score": sum(r.score for r in records) / len(records),
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


@dataclass(frozen=True)
class ModelPlay:
    """How the model plays: which policy, its prompts, its decoding and sampling."""

    policy: PolicyConfig
    """The policy to load (backend, model, server, threads, workspace)."""
    prompt: PromptConfig
    """How each turn's prompt is built (its token budget)."""
    constrained: bool
    """Constrained decoding (clicks chosen among the admissible ones) or free."""
    sampling: SamplingConfig
    """Temperature, seed and generation budget of each turn."""


@dataclass(frozen=True)
class PlaySettings:
    """Everything ``skillrl run`` plays with, settled once from its options."""

    env_id: str
    """The environment."""
    starts: list[EpisodeStart]
    """The episodes to play, in order (goal, seed and environment settings of each)."""
    player: Literal["model", "expert", "human"]
    """Who acts (``--policy``)."""
    model: ModelPlay | None
    """How the model plays; None when the expert or a person does."""
    skills: bool
    """Retrieve skills into every turn (the bank opens); the expert never reads them."""
    max_turns: int
    """Turn limit of an episode."""
    parallel: int
    """Episodes played at once (one when a person acts or reviews)."""
    workspace: Path
    """The workspace folder (skill bank, runs)."""
    record: bool
    """Save the episodes and count their retrievals (training goals only)."""
    seed_bank: bool
    """Seed an empty bank with the starting skills."""
    step: bool
    """Pause every turn for a person to accept or replace the action."""
    as_json: bool
    """Print the results as JSON on stdout (the screen goes to stderr)."""

    @property
    def interactive(self) -> bool:
        """Whether a person types at the terminal (playing, or reviewing every turn)."""
        return self.step or self.player == "human"


def settle_play(
    ctx: click.Context,
    choices: RunChoices,
    played: PlayedModel,
    prompt: PromptConfig,
    *,
    env_options: dict[str, Any],
    workspace: str | None,
    as_json: bool,
    console: Console,
) -> PlaySettings:
    """Resolve the options of ``skillrl run`` into its settings, checking each on the way.

    The goals are checked first, then the model is resolved (``--model auto``) and its recorded
    settings apply to the options left at their defaults, which may change the environment's.
    """
    env_config = env_config_from(choices.env_id, env_options)
    if choices.policy == "human":
        env_options = _pages_for_a_person(choices.env_id, env_options, console)
        env_config = env_config_from(choices.env_id, env_options)
    goals = _goal_range(ctx, choices, env_config)
    model = None
    if choices.policy == "model":
        played, prompt, taken = settle_played_model(
            played,
            prompt,
            ctx,
            console,
            env_id=choices.env_id,
            workspace=workspace,
            env_options=env_options,
        )
        if taken is not None:
            if taken.skills is not None:
                choices = dataclasses.replace(choices, skills=taken.skills)
            env_config = env_config_from(choices.env_id, taken.env_options)
            goals = _goal_range(ctx, choices, env_config)  # within the split as it now is
        model = model_play(
            choices.env_id,
            played,
            prompt,
            workspace,
            temperature=choices.temperature,
            seed=choices.seed,
        )
    interactive = choices.step or choices.policy == "human"
    return PlaySettings(
        env_id=choices.env_id,
        starts=_play_starts(choices, env_config, goals),
        player=choices.policy,
        model=model,
        skills=choices.skills is not False and choices.policy != "expert",
        max_turns=choices.max_turns,
        parallel=1 if interactive else choices.parallel,
        workspace=resolve_workspace(workspace),
        record=choices.record,
        seed_bank=choices.seed_bank,
        step=choices.step,
        as_json=as_json,
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

    constrained = check_decoding(played.backend, played.constrained)
    check_prompt_budget(env_id, prompt.max_prompt_tokens)  # as the model's settings say
    return ModelPlay(
        policy=played.policy_config(workspace),
        prompt=prompt,
        constrained=constrained,
        sampling=SamplingConfig(
            max_new_tokens=64, temperature=temperature, seed=seed, stop=["</action>"]
        ),
    )


def play(settings: PlaySettings, console: Console) -> tuple[list[Any], Any]:
    """Open the bank, build the agent, play every episode; returns the records and timings."""
    from skillrl.rollout import RolloutConfig, RolloutEngine

    interactive = settings.interactive
    if interactive and not sys.stdin.isatty() and not os.environ.get("SKILLRL_ALLOW_PIPED_INPUT"):
        console.print("[yellow]reading actions from a non-terminal input[/]")
    needs_bank = settings.skills or settings.record
    bank = _open_bank(settings, console) if needs_bank else None
    try:
        agent = make_agent(settings, console, settings.skills and bank is not None)
        config = RolloutConfig(
            max_turns=settings.max_turns,
            max_parallel=settings.parallel,
            record=settings.record and bank is not None,
            # --no-record leaves the bank as it was; the engine counts training goals only.
            count_retrievals=settings.record,
        )
        engine = RolloutEngine(
            _Progress(
                agent,
                console,
                quiet=settings.as_json or interactive,
                show_task=not settings.as_json,
            ),
            bank=bank,
            config=config,
            on_turn=None if settings.as_json else _show_turn(console, settings.player == "human"),
            review=_reviewer(console) if settings.step else None,
        )
        records = engine.run(settings.starts)
    finally:
        if bank is not None:
            bank.close()
    return records, engine.stats


def _open_bank(settings: PlaySettings, console: Console) -> Any:
    from skillrl_cli.bank_access import open_bank

    bank = open_bank(settings.workspace, settings.env_id, seed=settings.seed_bank, console=console)
    if bank.read_only and settings.record:
        bank.close()
        raise BankError(
            f"the skill bank in {settings.workspace} is read-only, so the episodes could not be "
            "saved: add --no-record to play with its skills without saving anything"
        )
    return bank  # a read-only bank is played as it is: nothing was seeded into it


def make_agent(settings: PlaySettings, console: Console, uses_skills: bool) -> Any:
    """Build the agent ``--policy`` names: the scripted expert, a person, or the model."""
    if settings.player == "expert":
        import envs
        from skillrl.agents.expert import ExpertAgent

        if envs.adapter_for(settings.env_id).make_expert(settings.max_turns) is None:
            raise click.UsageError(f"environment {settings.env_id!r} has no scripted expert")
        return ExpertAgent(max_turns=settings.max_turns)
    if settings.player == "human":
        from skillrl.agents.human import HumanAgent
        from skillrl_cli.run_display import show_page

        def ask(state: Any) -> str:
            show_page(console, state)
            return _typed_action(console, state, "your action> ")

        return HumanAgent(ask, uses_skills=uses_skills)
    assert settings.model is not None  # settle_play() builds it whenever the model plays
    return model_agent(settings.model, console, uses_skills)


def model_agent(play: ModelPlay, console: Console, uses_skills: bool) -> Any:
    """Load the policy (a status line shows its progress) and wrap it as the playing agent."""
    from skillrl.agents.llm import LLMAgent, LLMAgentConfig
    from skillrl.policies import load_policy

    if play.policy.backend != "openai":
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the rich status below shows progress instead
    with console.status(f"loading model {escape(play.policy.model)}") as status:
        policy = load_policy(play.policy, progress=lambda m: status.update(escape(m)))
    console.print(decoding_line(play.constrained))
    return LLMAgent(
        policy,
        play.prompt,
        constrained=play.constrained,
        config=LLMAgentConfig(sampling=play.sampling),
        uses_skills=uses_skills,
    )


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


def _play_starts(
    choices: RunChoices, env_config: dict[str, Any], goals: GoalRange | None
) -> list[EpisodeStart]:
    from skillrl.rollout import EpisodeStart

    count = goals.count if goals is not None else choices.episodes
    starts = []
    for i in range(count):
        start = EpisodeStart(
            choices.env_id, choices.split, seed=choices.seed + i, env_config=env_config
        )
        if goals is not None:
            start.goal_index = goals.first + i
        else:
            start.goal_id = choices.goal.strip()
        starts.append(start)
    return starts


class _Progress:
    """Wraps an agent to show each episode's task as it starts and a spinner while it decides."""

    def __init__(self, agent: Any, console: Console, quiet: bool, show_task: bool) -> None:
        self.agent, self.console, self.quiet, self.show_task = agent, console, quiet, show_task
        self.name = agent.name
        self.uses_skills = agent.uses_skills

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        # The task is shown when the episode starts, before anyone (model or person) acts on it.
        if self.show_task:
            from skillrl_cli.run_display import header

            goal_id = str(reset_info.get("goal_id", ""))
            self.console.print(header(str(reset_info.get("instruction", "")), goal_id))
        self.agent.begin_episode(episode_id, reset_info)

    def end_episode(self, episode_id: str) -> None:
        self.agent.end_episode(episode_id)

    def act(self, states: list[Any]) -> list[Any]:
        if self.quiet or not states:
            return self.agent.act(states)
        turn = states[0].turn + 1
        name = escape(self.name)
        with self.console.status(f"turn {turn}: {name} deciding for {len(states)} episode(s)"):
            return self.agent.act(states)


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

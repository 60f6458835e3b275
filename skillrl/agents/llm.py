"""``LLMAgent``: a chat policy behind the :class:`skillrl.agent.Agent` contract.

Each turn it builds one prompt per active episode (with that turn's retrieved skills) and makes
one batched policy call. Free decoding parses ``<think>..</think><action>..</action>`` leniently;
anything unparsable or inadmissible becomes an invalid action, recorded and never raised.

Constrained decoding makes every action admissible: on a search page the model writes only the
query (the prompt is continued after ``<action>search[``), elsewhere each admissible click is
scored by the model and the most likely one is taken (mean log-prob per token by default, so long
product ids are not penalised for their length). When the sampling config samples (temperature
above 0, as in training rollouts and Pass@K evaluation), the click is instead drawn from the
softmax of those same scores divided by the temperature, so G episodes of a group explore
different clicks; greedy decoding is its zero-temperature limit.

A generated query that shares no word with the task (empty, or a copied placeholder) is replaced
by the task's first words only when decoding greedily (evaluation, interactive runs), and the
decision says so (``action_substituted``). Sampled turns (training rollouts) execute what the
model wrote, so the tokens a trainer learns from are the tokens that produced the action.
"""

from __future__ import annotations

import logging
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

from skillrl.agent import AgentDecision, AgentState
from skillrl.parsing import is_search_page, parse_action
from skillrl.policies.base import ChatPolicy, Generation, SamplingConfig
from skillrl.prompts import BuiltPrompt, PromptConfig, build_prompt, estimate_tokens
from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

logger = logging.getLogger(__name__)

SEARCH_PREFIX = "<action>search["
CLICK_PREFIX = "<action>"
_TAG = re.compile(r"</?\w+>")
_WORD = re.compile(r"[a-z0-9]{2,}")


@dataclass
class LLMAgentConfig:
    """Decoding settings of :class:`LLMAgent`."""

    sampling: SamplingConfig = field(
        default_factory=lambda: SamplingConfig(max_new_tokens=64, stop=["</action>"])
    )
    """Sampling for free decoding (greedy by default)."""
    query_tokens: int = 24
    """Most tokens of a generated search query (constrained decoding)."""
    length_normalize: bool = True
    """Constrained clicks: rank by mean per-token log-prob instead of the sum."""
    repair_queries: bool | None = None
    """Replace a generated query that shares no word with the task by the task's first words.
    None: only when decoding greedily; sampled turns (training) always send what was written."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.query_tokens < 1:
            raise ConfigError(f"query_tokens ({self.query_tokens}) must be at least 1")


class LLMAgent:
    """Acts for many episodes per call with one batched policy call per decoding mode."""

    uses_skills = True

    def __init__(
        self,
        policy: ChatPolicy,
        prompt_config: PromptConfig | None = None,
        constrained: bool = False,
        config: LLMAgentConfig | None = None,
        *,
        uses_skills: bool = True,
    ) -> None:
        self.policy = policy
        self.prompt_config = prompt_config or PromptConfig()
        self.constrained = constrained
        self.config = config or LLMAgentConfig()
        self.uses_skills = uses_skills
        self.name = getattr(policy, "name", "llm")
        self._count = getattr(policy, "count_tokens", estimate_tokens)

    def begin_episode(self, episode_id: str, reset_info: dict[str, Any]) -> None:
        """Nothing to set up: all context comes with each turn's state."""

    def end_episode(self, episode_id: str) -> None:
        """Nothing to tear down."""

    def prompt_for(self, state: AgentState) -> BuiltPrompt:
        """Return the prompt this agent would send for ``state``."""
        return build_prompt(state, self.prompt_config, self._count)

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Decide one action per state (one batched policy call per decoding mode)."""
        prompts = [self.prompt_for(s) for s in states]
        if not self.constrained:
            return self._act_free(states, prompts)
        decisions: list[AgentDecision | None] = [None] * len(states)
        search = [i for i, s in enumerate(states) if is_search_page(s.available_actions)]
        click = [i for i, s in enumerate(states) if i not in set(search)]
        for i, decision in zip(
            search, self._act_search([(states[i], prompts[i]) for i in search]), strict=True
        ):
            decisions[i] = decision
        for i, decision in zip(
            click, self._act_click([(states[i], prompts[i]) for i in click]), strict=True
        ):
            decisions[i] = decision
        return [d for d in decisions if d is not None]

    def _act_free(
        self, states: list[AgentState], prompts: list[BuiltPrompt]
    ) -> list[AgentDecision]:
        sampling = self._sampling(states)
        generations = self.policy.generate([p.messages for p in prompts], sampling)
        decisions = []
        for state, prompt, generation in zip(states, prompts, generations, strict=True):
            parsed = parse_action(generation.text, state.available_actions)
            if not parsed.ok:
                logger.debug("invalid action in episode %s: %s", state.episode_id, parsed.error)
            decisions.append(_decision(parsed.action, parsed.ok, generation, prompt))
        return decisions

    def _act_search(self, items: list[tuple[AgentState, BuiltPrompt]]) -> list[AgentDecision]:
        if not items:
            return []
        conversations = [
            [*p.messages, {"role": "assistant", "content": SEARCH_PREFIX}] for _, p in items
        ]
        base = self._sampling([s for s, _ in items])
        sampling = SamplingConfig(
            max_new_tokens=self.config.query_tokens,
            temperature=base.temperature,
            top_p=base.top_p,
            seed=base.seed,
            stop=["]"],
        )
        decisions = []
        for (state, prompt), generation in zip(
            items, self.policy.generate(conversations, sampling), strict=True
        ):
            # Brackets would break the search[...] syntax (the model sometimes opens another).
            text = _TAG.sub(" ", generation.text.split("]")[0]).replace("[", " ")
            query = " ".join(text.split())
            substituted = self._repairs(sampling) and not _shares_a_word(query, state.instruction)
            if substituted:
                # A query with no word of the task (empty, or a copied placeholder, which the
                # 135M model does) cannot find the product: search with the task's words. The
                # tokens did not write this query, so the decision is marked for the trainer.
                query = " ".join(state.instruction.split()[:12])
            generation.text = SEARCH_PREFIX + generation.text
            decision = _decision(f"search[{query}]", True, generation, prompt)
            decision.action_substituted = substituted
            decisions.append(decision)
        return decisions

    def _repairs(self, sampling: SamplingConfig) -> bool:
        """Whether an unusable query is replaced (by default only when decoding greedily)."""
        if self.config.repair_queries is None:
            return sampling.greedy
        return self.config.repair_queries

    def _act_click(self, items: list[tuple[AgentState, BuiltPrompt]]) -> list[AgentDecision]:
        if not items:
            return []
        conversations = [
            [*p.messages, {"role": "assistant", "content": CLICK_PREFIX}] for _, p in items
        ]
        candidates = [[f"{a}</action>" for a in s.available_actions] for s, _ in items]
        detailed = getattr(self.policy, "score_continuations_detailed", None)
        sampling = self._sampling([s for s, _ in items])
        # One generator per batch, seeded like the batch's generation: a seeded run repeats.
        rng = random.Random(sampling.seed)
        decisions = []
        if detailed is not None:
            for (state, prompt), scored in zip(
                items, detailed(conversations, candidates), strict=True
            ):
                best = _choose([self._rank(c) for c in scored], sampling, rng)
                choice = scored[best]
                generation = Generation(
                    text=CLICK_PREFIX + choice.text,
                    prompt_token_ids=choice.prompt_token_ids,
                    completion_token_ids=choice.token_ids,
                    logprobs=choice.token_logprobs,
                )
                decisions.append(_decision(state.available_actions[best], True, generation, prompt))
            return decisions
        sums = self.policy.score_continuations(conversations, candidates)
        for (state, prompt), row in zip(items, sums, strict=True):
            best = _choose(row, sampling, rng)
            action = state.available_actions[best]
            decisions.append(
                _decision(action, True, Generation(text=CLICK_PREFIX + action), prompt)
            )
        return decisions

    def _rank(self, scored: Any) -> float:
        if self.config.length_normalize and scored.token_ids:
            return scored.logprob / len(scored.token_ids)
        return scored.logprob

    def _sampling(self, states: list[AgentState]) -> SamplingConfig:
        sampling = self.config.sampling
        if sampling.greedy or sampling.seed is None or not states:
            return sampling
        # A different but reproducible seed per turn, so sampled turns do not repeat themselves.
        seed = sampling.seed + 1009 * states[0].turn
        return SamplingConfig(
            max_new_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=seed,
            stop=list(sampling.stop),
        )


def _choose(scores: list[float], sampling: SamplingConfig, rng: random.Random) -> int:
    """Index of the chosen candidate: the best score when greedy, else a softmax draw."""
    if sampling.greedy or len(scores) == 1:
        return max(range(len(scores)), key=scores.__getitem__)
    top = max(scores)
    weights = [math.exp((score - top) / sampling.temperature) for score in scores]
    return rng.choices(range(len(scores)), weights=weights)[0]


def _decision(action: str, ok: bool, generation: Generation, prompt: BuiltPrompt) -> AgentDecision:
    return AgentDecision(
        action=action,
        model_output=generation.text,
        parse_ok=ok,
        prompt_tokens=generation.prompt_token_count or prompt.total_tokens,
        completion_tokens=generation.completion_token_count,
        prompt_token_ids=generation.prompt_token_ids or None,
        completion_token_ids=generation.completion_token_ids or None,
        completion_logprobs=generation.logprobs or None,
        token_counts=dict(prompt.token_counts),
        skill_ids=list(prompt.skill_ids),
    )


def _shares_a_word(query: str, instruction: str) -> bool:
    words = set(_WORD.findall(query.lower()))
    return bool(words & set(_WORD.findall(instruction.lower())))

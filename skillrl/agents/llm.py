"""``LLMAgent``: a chat policy behind the :class:`skillrl.agents.base.Agent` contract.

Each turn it builds one prompt per active episode (with that turn's retrieved skills) and makes
one batched policy call. Free decoding parses ``<think>..</think><action>..</action>`` leniently;
anything unparsable or inadmissible becomes an invalid action, recorded and never raised.

Constrained decoding makes every action admissible. On a free-text turn (the environment's
adapter says which: WebShop's search page) the model writes only the text, after the adapter's
prefix (``<action>search[``); elsewhere each of the adapter's candidates (the admissible
actions) is scored by the model and the most likely one is taken (mean log-prob per token by
default, so long candidates are not penalised for their length). When the sampling config
samples (temperature above 0, as in training rollouts and Pass@K evaluation), the candidate is
instead drawn from the softmax of the candidates' summed log-probs divided by the temperature
(``sampling_scores="sequence"``): at temperature 1 that is the probability the model gives each
candidate's tokens, renormalised over the admissible candidates, which is the policy the GRPO
update differentiates (the chosen tokens' log-probs). The mean per-token score is a ranking, not
a distribution: candidates a few tokens long differ by tenths of a nat per token, so its softmax
is nearly flat and sampling from it leaves the trained policy behind (measured by
``benchmarks/bench_group_signal.py``; ``sampling_scores="mean"`` keeps that rule).

Free text that cannot work (WebShop: a query sharing no word with the task) is repaired by the
adapter only when decoding greedily (evaluation, interactive runs), and the decision says so
(``action_substituted``). Sampled turns (training rollouts) execute what the model wrote, so the
tokens a trainer learns from are the tokens that produced the action.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field
from typing import Any

import envs
from skillrl.agents.base import AgentDecision, AgentState
from skillrl.parsing import parse_action
from skillrl.policies.base import ChatPolicy, Generation, SamplingConfig, ScoredContinuation
from skillrl.prompts import BuiltPrompt, PromptConfig, build_prompt, estimate_tokens
from skillrl_core.episode_limits import MAX_NEW_TOKENS
from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

logger = logging.getLogger(__name__)

ACTION_PREFIX = "<action>"
SAMPLING_SCORES = ("sequence", "mean")
"""What a sampled constrained turn draws candidates by (:attr:`LLMAgentConfig.sampling_scores`)."""


@dataclass
class LLMAgentConfig:
    """Decoding settings of :class:`LLMAgent`."""

    sampling: SamplingConfig = field(
        default_factory=lambda: SamplingConfig(max_new_tokens=MAX_NEW_TOKENS, stop=["</action>"])
    )
    """Sampling for free decoding (greedy by default)."""
    query_tokens: int = 24
    """Most tokens of generated free text, e.g. a search query (constrained decoding)."""
    length_normalize: bool = True
    """Constrained candidates: rank by mean per-token log-prob instead of the sum (greedy)."""
    sampling_scores: str = "sequence"
    """Constrained candidates when sampling: draw from the softmax of each candidate's summed
    log-prob (``sequence``, the model's own distribution over the candidates) or of the score
    greedy ranks by (``mean``, flatter), divided by the temperature."""
    repair_queries: bool | None = None
    """Let the environment repair free text that cannot work (WebShop: a query sharing no word
    with the task). None: only when decoding greedily; sampled turns (training) always send
    what was written."""
    skip_no_op_repeats: bool = True
    """Constrained candidates: leave out an action the episode already took at this very
    observation when it left the observation unchanged (a no-op, e.g. WebShop's click on an
    option already chosen), unless nothing else is admissible. Without it a small policy can
    repeat a no-op until the turn cap: the shipped WebShop adapter did on 49 of 300 test goals."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.query_tokens < 1:
            raise ConfigError(f"query_tokens ({self.query_tokens}) must be at least 1")
        if self.sampling_scores not in SAMPLING_SCORES:
            raise ConfigError(
                f"sampling_scores ({self.sampling_scores!r}) must be one of "
                f"{', '.join(SAMPLING_SCORES)}"
            )


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
        return build_prompt(state, self.prompt_config, self._count, envs.adapter_for(state.env_id))

    def act(self, states: list[AgentState]) -> list[AgentDecision]:
        """Decide one action per state (one batched policy call per decoding mode)."""
        prompts = [self.prompt_for(s) for s in states]
        if not self.constrained:
            return self._act_free(states, prompts)
        decisions: list[AgentDecision | None] = [None] * len(states)
        free = [
            i
            for i, s in enumerate(states)
            if envs.adapter_for(s.env_id).is_free_text_turn(s.available_actions)
        ]
        scored = [i for i in range(len(states)) if i not in set(free)]
        for i, decision in zip(
            free, self._act_free_text([(states[i], prompts[i]) for i in free]), strict=True
        ):
            decisions[i] = decision
        for i, decision in zip(
            scored, self._act_candidates([(states[i], prompts[i]) for i in scored]), strict=True
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
            adapter = envs.adapter_for(state.env_id)
            parsed = parse_action(generation.text, state.available_actions, adapter)
            if not parsed.ok:
                logger.debug("invalid action in episode %s: %s", state.episode_id, parsed.error)
            decisions.append(_decision(parsed.action, parsed.ok, generation, prompt))
        return decisions

    def _act_free_text(self, items: list[tuple[AgentState, BuiltPrompt]]) -> list[AgentDecision]:
        if not items:
            return []
        adapters = [envs.adapter_for(s.env_id) for s, _ in items]
        prefixes = [ACTION_PREFIX + a.free_text_prefix() for a in adapters]
        conversations = [
            [*p.messages, {"role": "assistant", "content": prefix}]
            for (_, p), prefix in zip(items, prefixes, strict=True)
        ]
        base = self._sampling([s for s, _ in items])
        # One batched call per stop text (every built-in environment has one).
        decisions: list[AgentDecision | None] = [None] * len(items)
        for stop in sorted({a.free_text_stop() for a in adapters}):
            group = [i for i, a in enumerate(adapters) if a.free_text_stop() == stop]
            sampling = SamplingConfig(
                max_new_tokens=self.config.query_tokens,
                temperature=base.temperature,
                top_p=base.top_p,
                seed=base.seed,
                stop=[stop],
            )
            generations = self.policy.generate([conversations[i] for i in group], sampling)
            for i, generation in zip(group, generations, strict=True):
                state, prompt = items[i]
                action, repaired = adapters[i].free_text_action(
                    generation.text, state.instruction, self._repairs(sampling)
                )
                # A repaired action is not what the tokens wrote: marked for the trainer.
                generation.text = prefixes[i] + generation.text
                decision = _decision(action, True, generation, prompt)
                decision.action_substituted = repaired
                decisions[i] = decision
        return [d for d in decisions if d is not None]

    def _repairs(self, sampling: SamplingConfig) -> bool:
        """Whether an unusable query is replaced (by default only when decoding greedily)."""
        if self.config.repair_queries is None:
            return sampling.greedy
        return self.config.repair_queries

    def _act_candidates(self, items: list[tuple[AgentState, BuiltPrompt]]) -> list[AgentDecision]:
        if not items:
            return []
        conversations = [
            [*p.messages, {"role": "assistant", "content": ACTION_PREFIX}] for _, p in items
        ]
        actions = [self._candidates(s) for s, _ in items]
        candidates = [[f"{a}</action>" for a in row] for row in actions]
        detailed = getattr(self.policy, "score_continuations_detailed", None)
        sampling = self._sampling([s for s, _ in items])
        # One generator per batch, seeded like the batch's generation: a seeded run repeats.
        rng = random.Random(sampling.seed)
        decisions = []
        if detailed is not None:
            for (_, prompt), row, scored in zip(
                items, actions, detailed(conversations, candidates), strict=True
            ):
                ranks = [self._rank(c, sampling) for c in scored]
                best = _choose(ranks, sampling, rng)
                choice = scored[best]
                generation = Generation(
                    text=ACTION_PREFIX + choice.text,
                    prompt_token_ids=choice.prompt_token_ids,
                    completion_token_ids=choice.token_ids,
                    logprobs=_as_pi_old(choice.token_logprobs, sampling),
                )
                decision = _decision(row[best], True, generation, prompt)
                decision.candidate_scores = _scores(row, ranks)
                decisions.append(decision)
            return decisions
        sums = self.policy.score_continuations(conversations, candidates)
        for (_, prompt), row, scores in zip(items, actions, sums, strict=True):
            action = row[_choose(scores, sampling, rng)]
            decision = _decision(action, True, Generation(text=ACTION_PREFIX + action), prompt)
            decision.candidate_scores = _scores(row, scores)
            decisions.append(decision)
        return decisions

    def _candidates(self, state: AgentState) -> list[str]:
        candidates = list(envs.adapter_for(state.env_id).candidates(state.available_actions))
        if not self.config.skip_no_op_repeats:
            return candidates
        no_ops = no_op_actions(state)
        return [a for a in candidates if a not in no_ops] or candidates

    def _rank(self, scored: ScoredContinuation, sampling: SamplingConfig) -> float:
        if not sampling.greedy and self.config.sampling_scores == "sequence":
            return scored.logprob
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


def _as_pi_old(token_logprobs: list[float], sampling: SamplingConfig) -> list[float]:
    """Return the scored candidate's log-probs if the update can use them as pi_old, else [].

    Scores are the model's log-probs at temperature 1. The GRPO update computes a sampled
    turn's log-probs at the sampling temperature (logits / T, as TRL), so at any other
    temperature the scored ones are not pi_old: measured on SmolLM2 at T = 1.2, they differed
    from the update's by 0.15 nats per token on average, 0.74 at most. Without them the update
    treats the turn as on-policy (pi_old := the model as it computes the turn's loss): the ratio
    starts at 1, as it should, but is not clipped against the rollout policy after the update's
    first optimizer step. Greedy turns are not trained, so they keep theirs.
    """
    if sampling.greedy or sampling.temperature == 1.0:
        return token_logprobs
    return []


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


def _scores(actions: list[str], scores: list[float]) -> dict[str, float]:
    """Each scored action with its rank score, rounded to 4 places (a record, not a replay)."""
    return {a: round(float(s), 4) for a, s in zip(actions, scores, strict=True)}


def no_op_actions(state: AgentState) -> set[str]:
    """Actions the episode took at ``state.observation`` that left that observation unchanged.

    A turn's record holds the observation it acted on; the next turn's (or, for the last turn,
    the current state's) holds what the action led to.
    """
    if not state.history:
        return set()
    after = [t.observation for t in state.history[1:]] + [state.observation]
    return {
        turn.action
        for turn, result in zip(state.history, after, strict=True)
        if turn.observation == state.observation and result == state.observation
    }

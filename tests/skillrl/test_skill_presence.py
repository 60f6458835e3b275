"""At the default budget every WebShop page type keeps a retrieved entry in the prompt: the
results page (ten titles, where the agent picks what to open) had dropped all of them."""

from __future__ import annotations

import pytest

from envs.webshop.agent_adapter import page_kind
from skillrl.agents.expert import ExpertAgent
from skillrl.prompts import PromptConfig, build_prompt
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine


class StateRecorder(ExpertAgent):
    """The expert, asking for skills, keeping every state it saw."""

    uses_skills = True

    def __init__(self) -> None:
        super().__init__(max_turns=8)
        self.states = []

    def act(self, states):
        self.states.extend(states)
        return super().act(states)


@pytest.mark.slow
def test_every_page_type_of_the_real_env_keeps_a_skill_at_the_default_budget(tmp_path):
    from memory import BankConfig, SkillBank
    from skillrl.distill.seeding import seed_bank_if_empty
    from skillrl.policies import PolicyConfig, load_policy

    policy = load_policy(PolicyConfig(model="embedded", workspace=tmp_path, dtype="float32"))
    bank = SkillBank.open(BankConfig(workspace=tmp_path))
    seed_bank_if_empty(bank, "webshop")
    agent = StateRecorder()
    engine = RolloutEngine(agent, bank=bank, config=RolloutConfig(max_turns=8, record=False))
    engine.run([EpisodeStart("webshop", "test", g, seed=g) for g in range(3)])
    bank.close()
    kept, cut_first = {}, {}
    for state in agent.states:
        page = page_kind(state.available_actions)
        now = build_prompt(state, PromptConfig(), policy.count_tokens)
        before = build_prompt(state, PromptConfig(min_skills=0), policy.count_tokens)
        assert now.total_tokens <= PromptConfig().max_prompt_tokens
        kept.setdefault(page, []).append(len(now.skill_ids))
        cut_first.setdefault(page, []).append(len(before.skill_ids))
    assert {"search", "results", "item"} <= set(kept)
    assert all(count >= 1 for counts in kept.values() for count in counts)
    assert not any(cut_first["results"])  # the old rule, so the test sees the case it guards

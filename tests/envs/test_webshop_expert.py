"""The scripted expert succeeds on test goals, through the env and through the Agent contract."""

from __future__ import annotations

import envs
from envs.webshop.expert import WebShopExpert, search_query, split_observation
from skillrl.agents.base import Agent, AgentState
from skillrl.agents.expert import ExpertAgent


def play(env, expert, goal_index):
    obs, info = env.reset(options={"split": "test", "goal_index": goal_index})
    expert.reset(info)
    while True:
        obs, reward, terminated, truncated, info = env.step(expert.act(obs, info))
        if terminated or truncated:
            return reward, info


def test_expert_solves_test_goals_in_both_modes():
    for mode in ("text", "text_rich"):
        env = envs.make("webshop", observation_mode=mode)
        results = [play(env, WebShopExpert(), i) for i in range(40)]
        successes = sum(info["success"] for _, info in results)
        assert successes >= 38, mode
        assert all(info["action_valid"] for _, info in results)


def test_expert_helpers():
    assert (
        search_query(
            "i need a tea with caffeine free with flavor: ginger, and size: 20 count, "
            "and price lower than 30.00 dollars"
        )
        == "i need a tea with caffeine free"
    )
    assert split_observation("a [SEP] b") == ["a", "b"]
    assert split_observation("You have clicked red.\n[button] Buy Now [button_]\n  x\n") == [
        "Buy Now",
        "x",
    ]


def test_expert_agent_plays_through_the_agent_contract():
    agent = ExpertAgent()
    assert isinstance(agent, Agent) and agent.uses_skills is False
    env = envs.make("webshop")
    obs, info = env.reset(options={"split": "test", "goal_index": 5})
    agent.begin_episode("ep", info)
    for turn in range(15):
        state = AgentState(
            episode_id="ep",
            env_id="webshop",
            instruction=info["instruction"],
            category=info["category"],
            observation=obs,
            available_actions=info["available_actions"],
            turn=turn,
            info=info,
        )
        (decision,) = agent.act([state])
        obs, reward, terminated, truncated, info = env.step(decision.action)
        if terminated or truncated:
            break
    agent.end_episode("ep")
    assert terminated and info["success"] and reward == 1.0


def _results_page(env, goal_index):
    obs, info = env.reset(options={"split": "test", "goal_index": goal_index})
    expert = WebShopExpert(max_turns=8)
    expert.reset(info)
    obs, _, _, _, info = env.step(expert.act(obs, info))
    return expert, obs, info


def test_the_expert_opens_the_product_a_retrieved_case_names_when_it_is_listed():
    env = envs.make("webshop")
    for goal_index in range(5):
        expert, obs, info = _results_page(env, goal_index)
        listed = [a for a in info["available_actions"] if len(a) == len("click[b012345678]")]
        last = listed[-1]  # a product the title rule would rarely pick first
        case = f"A request like this was solved by {last}"
        assert expert.decide(obs, {**info, "case_titles": [case]}) == last


def test_a_case_whose_product_is_not_listed_changes_nothing():
    env = envs.make("webshop")
    expert, obs, info = _results_page(env, 0)
    without = expert.decide(obs, info)
    expert, obs, info = _results_page(env, 0)
    unlisted = "A request like this was solved by click[b0zzzzzzzz]"
    assert expert.decide(obs, {**info, "case_titles": [unlisted]}) == without

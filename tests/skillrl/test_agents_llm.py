from __future__ import annotations

from typing import Any

import pytest
from runtime_fakes import FakeBank, ScriptedPolicy, SolverPolicy

import envs
from skillrl.agents.base import AgentState
from skillrl.agents.expert import ExpertAgent
from skillrl.agents.human import HumanAgent
from skillrl.agents.llm import LLMAgent, LLMAgentConfig, no_op_actions
from skillrl.policies.base import SamplingConfig, ScoredContinuation
from skillrl.rollout import EpisodeStart, RolloutEngine
from skillrl_core.errors import ConfigError
from skillrl_core.records import TurnRecord

RESULTS = ["click[back to search]", "click[red ball]", "click[blue kite]"]


def state(actions: list[str], instruction: str = "buy the blue kite", turn: int = 0) -> AgentState:
    return AgentState(
        episode_id=f"e{turn}",
        env_id="fakeshop",
        instruction=instruction,
        category="toys",
        observation="Results [SEP] red ball [SEP] blue kite",
        available_actions=actions,
        turn=turn,
    )


def test_free_decoding_parses_each_output_in_one_batch():
    policy = ScriptedPolicy()
    agent = LLMAgent(policy)
    decisions = agent.act(
        [state(RESULTS), state(["search[<query>]"]), state(RESULTS, "buy the ghost toy")]
    )
    assert policy.generate_batches == [3]
    assert [d.action for d in decisions[:2]] == ["click[blue kite]", "search[blue kite]"]
    assert decisions[0].parse_ok and decisions[1].parse_ok and not decisions[2].parse_ok
    assert decisions[0].completion_logprobs == [-0.5] * decisions[0].completion_tokens
    assert decisions[0].token_counts["observation"] > 0


def test_constrained_decoding_scores_clicks_and_generates_only_the_query():
    policy = ScriptedPolicy()
    agent = LLMAgent(policy, constrained=True)
    decisions = agent.act(
        [
            state(RESULTS),
            state(["search[<query>]"]),
            state(RESULTS, "buy the red ball"),
            state(["search[<query>]"], "buy the ghost toy"),
            state(["search[<query>]"], "buy the bracket kite"),
        ]
    )
    # One scoring batch for the two click pages, one generation batch for the two search pages.
    assert policy.score_batches == [2] and policy.generate_batches == [3]
    assert [d.action for d in decisions] == [
        "click[blue kite]",
        "search[blue kite]",
        "click[red ball]",
        "search[buy the ghost toy]",  # the model wrote no query: the task's words are used
        "search[bracket kite]",  # a stray bracket would make the action invalid
    ]
    assert all(d.parse_ok for d in decisions)
    # Greedy decoding repaired the ghost query; the decision says its tokens did not write it.
    assert [d.action_substituted for d in decisions] == [False, False, False, True, False]
    # The search generation continued the assistant prefix: the query, not a whole reply.
    assert policy.conversations[0][-1] == {"role": "assistant", "content": "<action>search["}
    assert decisions[0].completion_token_ids == [ord(c) % 97 for c in "click[blue kite]</action>"]
    # A scored turn records every candidate with its rank score; the chosen one ranks first.
    scores = decisions[0].candidate_scores
    assert scores is not None and set(scores) == set(RESULTS)
    assert max(scores, key=scores.get) == "click[blue kite]"
    assert decisions[1].candidate_scores is None  # a written query scores no candidates


def test_sampled_search_sends_the_written_query_and_greedy_repair_is_marked():
    ghost = state(["search[<query>]"], "buy the ghost toy")
    sampled = LLMAgentConfig(sampling=SamplingConfig(temperature=1.0, seed=0))
    (decision,) = LLMAgent(ScriptedPolicy(), constrained=True, config=sampled).act([ghost])
    # A training rollout executes what the model wrote (an empty query), never the task's words.
    assert decision.action == "search[]" and not decision.action_substituted
    assert decision.completion_token_ids == [ord("]") % 97]
    (greedy,) = LLMAgent(ScriptedPolicy(), constrained=True).act([ghost])
    assert greedy.action == "search[buy the ghost toy]" and greedy.action_substituted
    forced = LLMAgentConfig(sampling=sampled.sampling, repair_queries=True)
    (repaired,) = LLMAgent(ScriptedPolicy(), constrained=True, config=forced).act([ghost])
    assert repaired.action == "search[buy the ghost toy]" and repaired.action_substituted
    never = LLMAgentConfig(repair_queries=False)
    (kept,) = LLMAgent(ScriptedPolicy(), constrained=True, config=never).act([ghost])
    assert kept.action == "search[]" and not kept.action_substituted


def test_a_substituted_turn_is_recorded_and_survives_serialisation():
    import json

    from skillrl_core.records import EpisodeRecord

    (ghost,) = RolloutEngine(LLMAgent(ScriptedPolicy(), constrained=True)).run(
        [EpisodeStart("fakeshop", "test", 3, env_config={"max_turns": 3})]
    )
    searches = [t for t in ghost.turns if t.action.startswith("search[")]
    assert searches and all(t.action_substituted for t in searches)
    assert not any(t.action_substituted for t in ghost.turns if t.action.startswith("click["))
    stored = EpisodeRecord.from_dict(json.loads(json.dumps(ghost.to_dict())))
    assert [t.action_substituted for t in stored.turns] == [
        t.action_substituted for t in ghost.turns
    ]
    # The candidates a click was chosen from reach the record, and survive it too.
    clicks = [t for t in ghost.turns if t.action.startswith("click[")]
    assert clicks and all(t.candidate_scores and t.action in t.candidate_scores for t in clicks)
    assert [t.candidate_scores for t in stored.turns] == [t.candidate_scores for t in ghost.turns]


def sampled_clicks(
    temperature: float, seed: int | None = 3, rule: str = "mean", policy: Any = None
) -> list[str]:
    config = LLMAgentConfig(
        sampling=SamplingConfig(temperature=temperature, seed=seed), sampling_scores=rule
    )
    agent = LLMAgent(policy or ScriptedPolicy(), constrained=True, config=config)
    states = [state(RESULTS, turn=t) for t in range(200)]
    return [d.action for d in agent.act(states)]


class FixedScores:
    """Scores each click by a fixed (sum log-prob, token count): the two rules differ."""

    SCORES = {  # click -> (summed log-prob, tokens)
        "back to search": (-1.0, 1),  # mean -1.0
        "red ball": (-6.0, 12),  # mean -0.5: the best by mean, unlikely as a sequence
        "blue kite": (-1.5, 3),  # mean -0.5
    }

    def score_continuations_detailed(self, conversations, continuations):
        rows = []
        for candidates in continuations:
            row = []
            for text in candidates:
                total, count = self.SCORES[text.removeprefix("click[").split("]")[0]]
                ids = list(range(count))
                row.append(ScoredContinuation(text, total, [1], ids, [total / count] * count))
            rows.append(row)
        return rows


def test_sampled_clicks_follow_the_model_s_sequence_probabilities_by_default():
    assert LLMAgentConfig().sampling_scores == "sequence"
    clicks = sampled_clicks(1.0, rule="sequence", policy=FixedScores())
    # exp(-1.0) : exp(-6.0) : exp(-1.5) = 0.62 : 0.004 : 0.37 of the 200 draws.
    assert 100 <= clicks.count("click[back to search]") <= 148
    assert 50 <= clicks.count("click[blue kite]") <= 98
    assert clicks.count("click[red ball]") <= 5
    # By mean per-token score the ball and the kite tie and lead: a flatter, other distribution.
    by_mean = sampled_clicks(1.0, rule="mean", policy=FixedScores())
    assert by_mean.count("click[red ball]") >= 40
    # Greedy ranks by the mean whatever the sampling rule (the ball and kite tie: first wins).
    greedy = sampled_clicks(0.0, rule="sequence", policy=FixedScores())
    assert set(greedy) == {"click[red ball]"}


def test_an_unknown_sampling_rule_is_refused_by_name():
    with pytest.raises(ConfigError, match="sampling_scores .'sum'. must be one of sequence, mean"):
        LLMAgentConfig(sampling_scores="sum")


def test_sampled_constrained_clicks_explore_in_proportion_to_the_scores():
    # Scores per token (the "mean" rule): the wanted kite -0.1, the other two -3.0. At
    # temperature 1 the kite has weight 1 against exp(-2.9) = 0.055 for each other click:
    # about 90% of the draws.
    clicks = sampled_clicks(temperature=1.0)
    kite = clicks.count("click[blue kite]")
    assert 160 <= kite < 200
    assert set(clicks) == set(RESULTS)
    assert clicks == sampled_clicks(temperature=1.0)  # same seed, same draws
    assert clicks != sampled_clicks(temperature=1.0, seed=4)
    assert set(sampled_clicks(temperature=0.0)) == {"click[blue kite]"}


def test_constrained_agent_never_sends_an_invalid_action():
    (ghost,) = RolloutEngine(LLMAgent(ScriptedPolicy(), constrained=True), bank=FakeBank()).run(
        [EpisodeStart("fakeshop", "test", 3)]
    )
    assert ghost.invalid_actions == 0 and ghost.num_turns >= 3


def expand_typed_action(typed, actions):
    return envs.adapter_for("webshop").expand_typed(typed, actions)


def test_human_shorthand_becomes_actions():
    assert expand_typed_action("2", RESULTS) == "click[red ball]"
    assert expand_typed_action("Blue Kite", RESULTS) == "click[blue kite]"
    assert expand_typed_action("warm socks", ["search[<query>]"]) == "search[warm socks]"
    assert expand_typed_action("click[red ball]", RESULTS) == "click[red ball]"


def test_human_agent_records_what_was_typed():
    typed = iter(["3", "nonsense"])
    agent = HumanAgent(lambda s: next(typed))
    first, second = agent.act([state(RESULTS), state(RESULTS)])
    assert first.action == "click[blue kite]" and first.parse_ok and first.model_output == "3"
    assert not second.parse_ok and second.action == "click[nonsense]"


MOVES = ["up", "down", "left", "right"]


def sokoban_state(turn: int = 0, goal_index: int = 0) -> AgentState:
    env = envs.make("sokoban")
    observation, info = env.reset(options={"split": "test", "goal_index": goal_index})
    return AgentState(
        episode_id=f"s{turn}-{goal_index}",
        env_id="sokoban",
        instruction=info["instruction"],
        category=info["category"],
        observation=observation,
        available_actions=info["available_actions"],
        turn=turn,
    )


@pytest.mark.parametrize("constrained", [False, True], ids=["free", "constrained"])
def test_sokoban_turns_go_through_the_same_agent(constrained):
    policy = SolverPolicy()
    agent = LLMAgent(policy, constrained=constrained)
    states = [sokoban_state(goal_index=i) for i in range(3)]
    decisions = agent.act(states)
    wanted = [SolverPolicy.move(agent.prompt_for(s).messages) for s in states]
    assert [d.action for d in decisions] == wanted and all(d.parse_ok for d in decisions)
    assert all(d.action in MOVES for d in decisions)
    if constrained:  # the four moves are scored in one batch; nothing is generated
        assert policy.score_batches == [3] and policy.generate_batches == []
        assert decisions[0].completion_token_ids == [ord(c) % 97 for c in f"{wanted[0]}</action>"]
    else:
        assert policy.generate_batches == [3] and policy.score_batches == []


def test_human_plays_sokoban_by_name_number_or_initial():
    typed = iter(["left", "2", "u", "push right", "jump"])
    agent = HumanAgent(lambda s: next(typed))
    decisions = agent.act([sokoban_state(turn=t) for t in range(5)])
    assert [d.action for d in decisions[:4]] == ["left", "down", "up", "right"]
    assert all(d.parse_ok for d in decisions[:4]) and not decisions[4].parse_ok


@pytest.mark.parametrize(
    ("env_id", "goal"), [("webshop", {"split": "test", "goal_index": 5}), ("sokoban", {})]
)
def test_the_expert_agent_plays_every_environment_with_an_expert(env_id, goal):
    from skillrl.rollout import EpisodeStart

    start = EpisodeStart(env_id, "test", goal_index=goal.get("goal_index", 4))
    (record,) = RolloutEngine(ExpertAgent(max_turns=20)).run([start])
    assert record.success and record.score == 1.0 and not record.error
    assert record.agent == "expert" and record.invalid_actions == 0


@pytest.mark.parametrize(("temperature", "kept"), [(1.0, True), (1.2, False), (0.7, False)])
def test_a_sampled_click_keeps_its_scores_as_pi_old_only_at_temperature_one(temperature, kept):
    """Scores are log-probs at T = 1; the update computes a sampled turn's at T (logits / T)."""
    sampled = LLMAgentConfig(sampling=SamplingConfig(temperature=temperature, seed=3))
    (decision,) = LLMAgent(ScriptedPolicy(), constrained=True, config=sampled).act([state(RESULTS)])
    assert decision.completion_token_ids  # the turn still trains, on its own tokens
    if kept:
        assert len(decision.completion_logprobs) == len(decision.completion_token_ids)
    else:
        assert decision.completion_logprobs is None  # the update takes pi_old from the model
    (greedy,) = LLMAgent(ScriptedPolicy(), constrained=True).act([state(RESULTS)])
    assert len(greedy.completion_logprobs) == len(greedy.completion_token_ids)


def turn_at(observation: str, action: str, turn: int = 0) -> TurnRecord:
    return TurnRecord(turn, observation, list(RESULTS), action, True, 0.0)


def after(history: list[TurnRecord], observation: str, actions: list[str]) -> AgentState:
    s = state(actions, turn=len(history))
    s.observation, s.history = observation, history
    return s


def test_an_action_that_left_the_page_unchanged_is_not_chosen_again_there():
    page = state(RESULTS).observation
    looped = after([turn_at(page, "click[blue kite]")], page, RESULTS)
    (decision,) = LLMAgent(ScriptedPolicy(), constrained=True).act([looped])
    assert decision.action != "click[blue kite]" and decision.action in RESULTS
    assert no_op_actions(looped) == {"click[blue kite]"}
    # The same action is chosen again where it changed the page, or with the rule off.
    moved = after([turn_at("Search page", "click[blue kite]")], page, RESULTS)
    (again,) = LLMAgent(ScriptedPolicy(), constrained=True).act([moved])
    assert again.action == "click[blue kite]" and no_op_actions(moved) == set()
    allowed = LLMAgentConfig(skip_no_op_repeats=False)
    (repeated,) = LLMAgent(ScriptedPolicy(), constrained=True, config=allowed).act([looped])
    assert repeated.action == "click[blue kite]"


def test_a_no_op_that_is_the_only_admissible_action_is_still_taken():
    page = state(RESULTS).observation
    only = ["click[blue kite]"]
    (decision,) = LLMAgent(ScriptedPolicy(), constrained=True).act(
        [after([turn_at(page, "click[blue kite]")], page, only)]
    )
    assert decision.action == "click[blue kite]"


def test_a_no_op_is_recognised_from_an_earlier_turn_at_the_same_page():
    page = state(RESULTS).observation
    history = [
        turn_at(page, "click[red ball]", 0),
        turn_at(page, "click[< prev]", 1),
        turn_at("Item page", "click[back to search]", 2),
    ]
    # red ball left `page` unchanged; < prev led from it to the item page.
    assert no_op_actions(after(history, page, RESULTS)) == {"click[red ball]"}
    assert no_op_actions(after(history, "Another page", RESULTS)) == set()

from __future__ import annotations

import pytest
from runtime_fakes import FakeBank, FakeShopEnv, ScriptedPolicy, SolverPolicy

from envs.webshop.agent_adapter import WebShopAgentAdapter
from skillrl.agents.llm import LLMAgent
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine
from skillrl_core.records import EpisodeRecord


def starts(n: int, split: str = "test", **kwargs) -> list[EpisodeStart]:
    return [EpisodeStart("fakeshop", split, i, seed=i, **kwargs) for i in range(n)]


def test_one_batched_act_and_retrieval_per_turn_and_finished_episodes_drop_out():
    policy, bank = ScriptedPolicy(), FakeBank()
    engine = RolloutEngine(LLMAgent(policy), bank=bank, config=RolloutConfig(max_turns=6))
    records = engine.run(starts(6))  # goals 3 and 5... : index 3 is the "ghost toy" (never buys)
    solved = [r for r in records if r.success]
    assert [r.goal_id for r in records] == [f"fake-{i}" for i in range(6)]
    assert len(solved) == 5 and all(r.num_turns == 3 and r.score == 1.0 for r in solved)
    ghost = records[3]
    assert not ghost.success and ghost.num_turns == 6 and ghost.turns[-1].truncated
    # Turns 1-3: all six active; turns 4-6: only the ghost episode is left.
    assert policy.generate_batches == [6, 6, 6, 1, 1, 1]
    assert bank.retrieve_batches == [6, 6, 6, 1, 1, 1]
    assert engine.stats.agent_calls == 6 and engine.stats.turns == 5 * 3 + 6
    assert engine.stats.episodes == 6 and engine.stats.wall_seconds > 0


def test_invalid_actions_are_recorded_not_raised():
    records = RolloutEngine(LLMAgent(ScriptedPolicy()), config=RolloutConfig(max_turns=4)).run(
        [EpisodeStart("fakeshop", "test", 3, seed=0)]
    )
    (ghost,) = records
    assert ghost.invalid_actions == 4 and not any(t.action_valid for t in ghost.turns)
    assert all(t.info["parse_ok"] is False for t in ghost.turns)
    assert ghost.turns[0].model_output == "I am not sure what to do here."
    assert ghost.score == 0.0 and ghost.reward_breakdown is None


def test_records_hold_tokens_logprobs_and_retrieved_ids_and_are_saved():
    policy, bank = ScriptedPolicy(), FakeBank()
    config = RolloutConfig(max_turns=6, record=True)
    engine = RolloutEngine(LLMAgent(policy), bank=bank, config=config)
    records = engine.run(starts(2, split="train", group_id="g"))
    assert {r.episode_id for r in bank.saved} == {r.episode_id for r in records}
    # A held-out goal's episode is never saved: it changes nothing in the bank.
    assert engine.run(starts(1)) and len(bank.saved) == 2
    turn = records[0].turns[0]
    assert turn.action == "search[red ball]" and turn.action_valid
    assert turn.retrieved_ids == ["g1", "t-toys", "m1"]
    assert turn.completion_token_ids and len(turn.completion_logprobs) == len(
        turn.completion_token_ids
    )
    assert turn.completion_tokens == len(turn.completion_token_ids)
    assert turn.prompt_token_ids is not None and turn.prompt_tokens == len(turn.prompt_token_ids)
    assert turn.token_counts["skills"] > 0 and turn.token_counts["observation"] > 0
    assert records[0].group_id == "g" and records[0].skills_enabled
    assert records[0].reward_breakdown == {"reward": 1.0}
    # A record survives the JSON round trip the trajectory store uses.
    assert EpisodeRecord.from_dict(records[0].to_dict()) == records[0]
    # The observation retrieval saw is the one the agent acted on, every turn.
    assert [q.observation for q in bank.queries[:2]] == [
        records[0].turns[0].observation,
        records[1].turns[0].observation,
    ]


def test_only_training_split_episodes_count_towards_usage_statistics():
    bank = FakeBank()
    engine = RolloutEngine(LLMAgent(ScriptedPolicy()), bank=bank)
    engine.run(starts(2))  # test split: retrieval never counts, whatever the config says
    assert bank.record_flags == [False] * 3
    bank.record_flags.clear()
    mixed = [EpisodeStart("fakeshop", "train", 0), EpisodeStart("fakeshop", "test", 1)]
    engine.run(mixed)
    # One counted call for the training episode, one uncounted for the test one, per turn.
    assert bank.record_flags == [True, False] * 3 and bank.retrieve_batches[-6:] == [1] * 6
    bank.record_flags.clear()
    off = RolloutEngine(
        LLMAgent(ScriptedPolicy()), bank=bank, config=RolloutConfig(count_retrievals=False)
    )
    off.run([EpisodeStart("fakeshop", "train", 0)])
    assert bank.record_flags == [False] * 3


def test_max_parallel_limits_the_batch_and_keeps_start_order():
    policy = ScriptedPolicy()
    engine = RolloutEngine(LLMAgent(policy), config=RolloutConfig(max_parallel=2))
    records = engine.run([EpisodeStart("fakeshop", "test", i) for i in (0, 1, 2)])
    assert max(policy.generate_batches) == 2
    assert [r.goal_id for r in records] == ["fake-0", "fake-1", "fake-2"]


def test_no_skills_when_agent_opts_out_and_review_can_override():
    bank = FakeBank()
    agent = LLMAgent(ScriptedPolicy(), uses_skills=False)

    def review(state, decision):
        if state.turn == 0:
            decision.action = "search[blue kite]"  # a person overrides the first action
        return decision

    (record,) = RolloutEngine(agent, bank=bank, review=review).run(starts(1))
    assert bank.retrieve_batches == [] and not record.skills_enabled
    assert record.turns[0].action == "search[blue kite]"
    assert all(t.retrieved_ids == [] for t in record.turns)


def test_same_starts_give_the_same_records_with_greedy_decoding():
    def run():
        records = RolloutEngine(LLMAgent(ScriptedPolicy()), bank=FakeBank()).run(starts(3))
        return [[(t.action, t.reward, t.model_output) for t in r.turns] for r in records]

    assert run() == run()


def test_record_without_bank_is_a_configuration_error():
    with pytest.raises(ValueError, match="record=True needs a bank"):
        RolloutEngine(LLMAgent(ScriptedPolicy()), config=RolloutConfig(record=True))
    with pytest.raises(ValueError, match="max_turns"):
        RolloutConfig(max_turns=0)


class BrokenShopEnv:
    """The fake shop, except that goal ``broken_goal`` raises at ``broken_turn`` (-1: at reset)."""

    env_id = "brokenshop"

    def __init__(self, broken_goal: int = 1, broken_turn: int = 1) -> None:
        from runtime_fakes import FakeShopEnv

        self.inner, self.broken_goal, self.broken_turn = FakeShopEnv(), broken_goal, broken_turn
        self.goal, self.turn = -1, 0

    def reset(self, *, seed=None, options=None):
        self.goal = int((options or {}).get("goal_index", 0))
        self.turn = 0
        if self.goal == self.broken_goal and self.broken_turn < 0:
            raise OSError("catalog file vanished")
        return self.inner.reset(seed=seed, options=options)

    def step(self, action):
        if self.goal == self.broken_goal and self.turn == self.broken_turn:
            raise ValueError("index blew up on this query")
        self.turn += 1
        return self.inner.step(action)


def _broken_starts(n: int, broken_turn: int) -> list[EpisodeStart]:
    config = {"broken_goal": 1, "broken_turn": broken_turn}
    return [EpisodeStart("brokenshop", "train", i, seed=i, env_config=config) for i in range(n)]


@pytest.fixture
def brokenshop():
    from envs import register

    register(
        "brokenshop",
        BrokenShopEnv,
        "the fake shop with one broken goal",
        adapter=WebShopAgentAdapter(),
    )


@pytest.mark.parametrize("broken_turn", [0, 1, -1])
def test_one_failing_episode_does_not_end_the_others(brokenshop, broken_turn, caplog):
    policy, bank = ScriptedPolicy(), FakeBank()
    config = RolloutConfig(max_turns=6, record=True)
    seen = []
    engine = RolloutEngine(LLMAgent(policy), bank=bank, config=config, on_turn=seen.append)
    records = engine.run(_broken_starts(3, broken_turn))
    others = [records[0], records[2]]
    assert all(r.success and r.score == 1.0 and not r.error for r in others)
    broken = records[1]
    assert not broken.success and broken.score == 0.0
    assert broken.error.startswith("OSError" if broken_turn < 0 else "ValueError")
    assert broken.num_turns == max(broken_turn, 0)
    if broken.turns:
        assert broken.turns[-1].truncated
    assert "failed" in caplog.text and "episode 1" in caplog.text
    # Failed episodes are not stored as if the agent had played them out.
    assert {r.episode_id for r in bank.saved} == {r.episode_id for r in others}
    assert sum(e.slot == 1 for e in seen) == broken.num_turns
    assert EpisodeRecord.from_dict(broken.to_dict()) == broken


def test_configuration_errors_at_reset_still_raise(brokenshop):
    from skillrl_core.errors import ConfigError

    class MisconfiguredShop(BrokenShopEnv):
        def reset(self, *, seed=None, options=None):
            raise ConfigError("goal_index (99) out of range")

    from envs import register

    register(
        "misconfigured",
        MisconfiguredShop,
        "raises a configuration error at reset",
        adapter=WebShopAgentAdapter(),
    )
    with pytest.raises(ConfigError, match="out of range"):
        RolloutEngine(LLMAgent(ScriptedPolicy())).run([EpisodeStart("misconfigured")])


ENVIRONMENTS = {
    # env id: (a scripted stand-in for the model, first goal indices of the test split)
    "fakeshop": (ScriptedPolicy, [0, 1, 2]),
    "sokoban": (SolverPolicy, [0, 1, 2]),  # one room of each difficulty
}


@pytest.mark.parametrize("constrained", [False, True], ids=["free", "constrained"])
@pytest.mark.parametrize("env_id", sorted(ENVIRONMENTS))
def test_the_same_engine_and_agent_play_every_environment(env_id, constrained):
    make_policy, goals = ENVIRONMENTS[env_id]
    policy, bank = make_policy(), FakeBank()
    engine = RolloutEngine(
        LLMAgent(policy, constrained=constrained), bank=bank, config=RolloutConfig(max_turns=20)
    )
    records = engine.run([EpisodeStart(env_id, "test", i) for i in goals])
    assert all(r.success and r.score == 1.0 and not r.error for r in records)
    assert all(r.invalid_actions == 0 for r in records)
    # One batched retrieval and one batched act per turn, whatever the environment.
    assert len(bank.retrieve_batches) == engine.stats.agent_calls
    calls = len(policy.generate_batches) + len(policy.score_batches)
    assert engine.stats.agent_calls <= calls <= 2 * engine.stats.agent_calls
    assert all(r.turns[0].retrieved_ids for r in records)


def test_sokoban_turns_keep_their_reward_breakdown():
    (record,) = RolloutEngine(LLMAgent(SolverPolicy(), constrained=True)).run(
        [EpisodeStart("sokoban", "test", 1)]
    )
    breakdowns = [t.info["reward_breakdown"] for t in record.turns]
    assert [b["reward"] for b in breakdowns] == [t.reward for t in record.turns]
    assert [b["solved"] for b in breakdowns] == [False] * (len(breakdowns) - 1) + [True]
    assert record.reward_breakdown == breakdowns[-1]
    # The episode score is the adapter's, in [0, 1] (the last step's reward is 10 - 0.1 + 1).
    assert record.turns[-1].reward > 1 and record.score == 1.0
    stored = EpisodeRecord.from_dict(record.to_dict())
    assert stored.turns[0].info["reward_breakdown"] == breakdowns[0]


def test_an_unsolved_sokoban_episode_scores_the_boxes_it_placed():
    import envs

    adapter = envs.adapter_for("sokoban")
    assert adapter.episode_score(-0.1, False, {"num_boxes": 3, "boxes_on_target": 2}) == 2 / 3
    assert adapter.episode_score(9.9, True, {"success": True, "num_boxes": 3}) == 1.0
    (record,) = RolloutEngine(
        LLMAgent(SolverPolicy(), constrained=True), config=RolloutConfig(max_turns=2)
    ).run([EpisodeStart("sokoban", "test", 2)])  # 3 boxes, cut after two moves
    assert record.turns[-1].truncated and not record.success
    last = record.turns[-1].info
    assert record.score == last["boxes_on_target"] / last["num_boxes"]


def test_a_turn_records_the_retrieved_entries_its_prompt_left_out():
    from runtime_fakes import entry

    from memory.types import RetrievedEntry, RetrievedSkills
    from skillrl.agents.base import AgentDecision, AgentState
    from skillrl.episode_records import turn_record

    skills = RetrievedSkills(
        general=[RetrievedEntry(entry("g1", "general", "Read the task"), 0.8)],
        task=[RetrievedEntry(entry("t1", "task", "Pick the option"), 0.7)],
        mistakes=[RetrievedEntry(entry("m1", "mistake", "Do not skip options"), 0.6)],
    )
    state = AgentState("e", "fakeshop", "buy", "toys", "page", ["search[x]"], 0, skills=skills)
    cut = AgentDecision("search[x]", skill_ids=["g1"])  # the budget kept one entry
    record = turn_record(state, cut, skills, 0.0, False, False, {})
    assert record.retrieved_ids == ["g1"] and record.left_out_ids == ["t1", "m1"]
    all_kept = turn_record(state, AgentDecision("search[x]"), skills, 0.0, False, False, {})
    assert all_kept.retrieved_ids == ["g1", "t1", "m1"] and all_kept.left_out_ids == []
    off = turn_record(state, AgentDecision("search[x]"), None, 0.0, False, False, {})
    assert off.left_out_ids == []


def test_records_written_before_left_out_ids_was_kept_read_it_as_unknown():
    data = EpisodeRecord("fakeshop", "g", "buy", "toys").to_dict()
    data["turns"] = [{"turn": 0, "observation": "o", "available_actions": [], "action": "a",
                      "action_valid": True, "reward": 0.0, "retrieved_ids": ["g1"]}]  # fmt: skip
    assert EpisodeRecord.from_dict(data).turns[0].left_out_ids is None


def test_retrieval_asks_with_the_option_values_the_instruction_names(monkeypatch):
    reset = FakeShopEnv.reset

    def with_options(self, *, seed=None, options=None):
        reset(self, seed=seed, options=options)
        self.instruction += " with color: Red, and size: small, and price lower than 9.00 dollars"
        return self._obs(), self._info(True)

    monkeypatch.setattr(FakeShopEnv, "reset", with_options)
    bank = FakeBank()
    RolloutEngine(LLMAgent(ScriptedPolicy()), bank=bank).run(starts(1))
    assert bank.queries and {q.wants for q in bank.queries} == {("red", "small")}

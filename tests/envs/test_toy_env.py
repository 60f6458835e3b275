"""A user's own environment (the documented example) runs on the same runtime as the built-ins."""

from __future__ import annotations

import contextlib
import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

import envs
from envs.adapter import AgentAdapter
from skillrl.agents.base import AgentState
from skillrl.agents.expert import ExpertAgent
from skillrl.agents.human import HumanAgent
from skillrl.agents.llm import LLMAgent
from skillrl.policies.base import Generation, ScoredContinuation
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine
from skillrl_core.errors import ConfigError
from trainers.common.policy_rollouts import PolicyRollouts


@pytest.fixture(autouse=True)
def toy_env() -> ModuleType:
    """The documented example, imported as a user's code would be, inside the test.

    Importing it registers "counter" into this test's own copy of the registry (the suite's
    ``env_registry`` fixture): imported at collection, it stayed registered for every later
    module, and the environment contract tests then ran on it or not depending on file order.
    """
    import toy_env

    return importlib.reload(toy_env)  # registers again: each test's registry starts without it


ROOT = Path(__file__).resolve().parents[2]
_NUMBERS = re.compile(r"Counter: (-?\d+)\. Target: (\d+)\.")


class CounterPolicy:
    """Answers from the prompt like a model would: add below the target, subtract above."""

    name = "counter-policy"

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    @staticmethod
    def _move(conversation) -> str:
        user = next(m["content"] for m in conversation if m["role"] == "user")
        value, target = (int(g) for g in _NUMBERS.search(user).groups())
        return "add" if value < target else "subtract"

    def generate(self, conversations, sampling):
        return [
            Generation(f"<think>compare</think><action>{self._move(c).upper()}</action>")
            for c in conversations
        ]

    def score_continuations_detailed(self, conversations, continuations):
        return [
            [
                ScoredContinuation(t, -0.1 if t.startswith(self._move(c)) else -5.0, [1], [1], [0])
                for t in row
            ]
            for c, row in zip(conversations, continuations, strict=True)
        ]


def test_the_docs_show_the_toy_environment_word_for_word():
    source = (ROOT / "tests/envs/toy_env.py").read_text()
    start, end = "# --- documented example ---\n", "# --- end of documented example"
    code = source.split(start)[1].split(end)[0]
    doc = (ROOT / "docs/environments.md").read_text()
    section = doc.split("## Your own environment")[1]
    assert f"```python\n{code.rstrip()}\n```" in section


def test_the_toy_adapter_meets_the_protocol():
    adapter = envs.adapter_for("counter")
    assert isinstance(adapter, AgentAdapter)
    assert adapter.split_size("test", {}) == 5 and adapter.categories({}) == ["counting"]
    assert "counter" in envs.registered()


@pytest.mark.parametrize("constrained", [False, True], ids=["free", "constrained"])
def test_a_model_plays_the_toy_environment_through_the_runtime(constrained):
    agent = LLMAgent(CounterPolicy(), constrained=constrained)
    records = RolloutEngine(agent).run(
        [EpisodeStart("counter", "test", goal_index=i) for i in range(5)]
    )
    assert [r.success for r in records] == [True] * 5
    assert [r.num_turns for r in records] == [1, 2, 3, 4, 5]  # targets 1..5, one add a turn
    assert all(r.score == 1.0 and r.invalid_actions == 0 for r in records)


def test_the_expert_and_a_person_play_it_too():
    (expert,) = RolloutEngine(ExpertAgent()).run([EpisodeStart("counter", "test", goal_index=2)])
    assert expert.success and [t.action for t in expert.turns] == ["add"] * 3
    typed = iter(["1", "ADD", "subtract", "jump"])
    human = HumanAgent(lambda state: next(typed))
    (played,) = RolloutEngine(human, config=None).run(
        [EpisodeStart("counter", "test", goal_index=1)]
    )
    assert played.success and [t.action for t in played.turns] == ["add", "add"]


def test_a_person_typing_nonsense_is_an_invalid_turn():
    state = AgentState("e", "counter", "x", "counting", "Counter: 0. Target: 1.", ["add"], 0)
    (decision,) = HumanAgent(lambda s: "jump").act([state])
    assert not decision.parse_ok


def test_the_trainer_reads_split_sizes_from_the_adapter():
    assert PolicyRollouts(policy=None, env_id="counter").split_size("test") == 5


def test_the_trainer_plays_its_own_starts_with_its_turn_limit():
    runner = PolicyRollouts(policy=CounterPolicy(), env_id="counter", max_turns=2)
    starts = [runner.start("test", i, seed=i, group_id="g") for i in (0, 4)]
    short, long = runner.run(starts, temperature=0.0)
    assert (short.success, short.num_turns) == (True, 1)
    assert (long.success, long.num_turns) == (False, 2)  # target 5 needs 5 turns; the cap is 2
    assert long.group_id == "g"


def test_the_trainer_reports_turns_and_the_turn_budget_left_as_it_plays():
    seen = []
    runner = PolicyRollouts(policy=CounterPolicy(), env_id="counter", max_turns=5)
    runner.on_progress = seen.append
    runner.run([runner.start("test", i) for i in (0, 4)], temperature=0.0)  # 1 turn, 5 turns
    assert [p.turns for p in seen] == list(range(1, 7))  # one report per episode turn
    first, last = seen[0], seen[-1]
    # The short episode ended at once: its 4 unused turns leave the budget, not the rollout.
    assert (first.episodes_done, first.budget_spent, first.turn_budget) == (1, 5, 10)
    assert (last.episodes_done, last.episodes, last.budget_spent) == (2, 2, 10)
    assert all(p.seconds_left is None or p.seconds_left >= 0 for p in seen)


def test_the_trainer_refuses_a_start_of_another_environment():
    runner = PolicyRollouts(policy=CounterPolicy(), env_id="counter")
    with pytest.raises(ConfigError, match="'webshop'.*'counter'"):
        runner.run([EpisodeStart("webshop", "test", 0)], temperature=0.0)


def test_an_environment_registered_without_adapter_gets_a_plain_one_without_expert(toy_env):
    envs.register("counter-plain", toy_env.CounterEnv, "the counter, no adapter given")
    (record,) = RolloutEngine(LLMAgent(CounterPolicy(), constrained=True)).run(
        [EpisodeStart("counter-plain", "test", goal_index=0)]
    )
    assert record.success and record.score == 1.0
    with pytest.raises(ConfigError, match="no scripted expert"):
        RolloutEngine(ExpertAgent()).run([EpisodeStart("counter-plain", "test", goal_index=0)])


def test_the_engine_hands_its_turn_limit_to_an_environment_that_keeps_one(monkeypatch):
    made = []
    make = envs.make

    def spy(env_id, **settings):
        made.append(settings)
        return make(env_id, **settings)

    monkeypatch.setattr(envs, "make", spy)
    engine = RolloutEngine(ExpertAgent(), config=RolloutConfig(max_turns=2))
    (capped,) = engine.run([EpisodeStart("counter", "test", goal_index=4)])
    assert made[-1] == {"max_turns": 2}  # one limit: the engine's, set in RolloutConfig
    assert (capped.success, capped.num_turns, capped.turns[-1].truncated) == (False, 2, True)
    own = EpisodeStart("counter", "test", goal_index=4, env_config={"max_turns": 1})
    (named,) = engine.run([own])
    assert made[-1] == {"max_turns": 1} and named.num_turns == 1  # the episode's own wins


def test_the_library_plays_it_as_skillrl_run_does_without_the_command(monkeypatch):
    """The entry point under ``skillrl run``: typed settings in, episode records out."""
    import skillrl.policies
    from skillrl.policies import PolicyConfig
    from skillrl_cli.library import ModelPlay, PlaySettings, PlayWatch, play
    from skillrl_core.goal_range import GoalRange

    loaded = []

    def load(config, progress=None):
        loaded.append(config.model)
        return CounterPolicy()

    monkeypatch.setattr(skillrl.policies, "load_policy", load)
    started, turns, decided = [], [], []

    def deciding(name, turn, episodes):
        decided.append((name, turn, episodes))
        return contextlib.nullcontext()

    watch = PlayWatch(
        episode_started=lambda info: started.append(info["goal_id"]),
        turn=turns.append,
        deciding=deciding,
    )
    model = ModelPlay(PolicyConfig(model="counter-model"), constrained=False)
    settings = PlaySettings(env_id="counter", goals=GoalRange(0, 4), model=model, skills=False)
    result = play(settings, watch=watch)
    assert loaded == ["counter-model"]
    assert [r.success for r in result.episodes] == [True] * 5
    assert [r.num_turns for r in result.episodes] == [1, 2, 3, 4, 5]  # targets 1..5
    assert (result.successes, result.success_rate, result.mean_score) == (5, 1.0, 1.0)
    assert result.stats.turns == len(turns) == 15
    assert started == [f"counter-{target}" for target in range(1, 6)]
    assert decided[0] == ("counter-policy", 1, 5) and decided[-1] == ("counter-policy", 5, 1)


def test_the_library_lets_the_expert_and_a_person_play_it():
    from skillrl_cli.library import PlaySettings, PlayWatch, play
    from skillrl_core.goal_range import GoalRange

    expert = play(PlaySettings(env_id="counter", goals=GoalRange(2, 2), player="expert"))
    assert [t.action for t in expert.episodes[0].turns] == ["add"] * 3  # no bank: none opened
    typed = iter(["add", "ADD"])
    person = PlaySettings(env_id="counter", goals=GoalRange(1, 1), player="human", skills=False)
    (played,) = play(person, watch=PlayWatch(ask=lambda state: next(typed))).episodes
    assert played.success and [t.action for t in played.turns] == ["add", "add"]
    with pytest.raises(ConfigError, match="PlayWatch\\(ask="):
        play(person)  # a person's actions must come from somewhere
    with pytest.raises(ConfigError, match="needs model=ModelPlay"):
        PlaySettings(env_id="counter")

"""Cold start (SFT + DAgger): examples are the run-time prompts, loss on targets only, expert
labels from the learner's states, training goals only, kill and resume."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_cycle_resume import EMBEDDER
from tiny_checkpoint import write_tiny_checkpoint

import envs
from envs.webshop.expert import split_observation
from memory import BankConfig, SkillBank
from skillrl.agents.base import AgentState
from skillrl.agents.llm import LLMAgent
from skillrl.distill import seed_bank_if_empty
from skillrl.policies import PolicyConfig, load_policy
from skillrl.prompts import PromptConfig
from skillrl.rollout import EpisodeStart
from skillrl_core.errors import ConfigError, DataFileError
from trainers.cold_start.cold_start import ColdStartPhase, ColdStartRun
from trainers.cold_start.cold_start_data import ExampleGatherer
from trainers.cold_start.dagger import ExpertLabeller, LabellingAgent, collect_examples, succeeded
from trainers.cold_start.round_metrics import SourceFigures
from trainers.cold_start.sft import build_trainer, train_round
from trainers.cold_start.sft_config import ColdStartConfig
from trainers.cold_start.sft_data import action_target, read_examples, tokenize_example
from trainers.common.phased_run import PhaseSaved, PhaseStarted, RunEvents
from trainers.common.policy_rollouts import PolicyRollouts

PROMPT = PromptConfig(max_prompt_tokens=900)


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "model")


def tiny_policy(folder):
    return load_policy(PolicyConfig(model=str(folder), dtype="float32", device="cpu"))


@pytest.fixture
def bank(tmp_path):
    bank = SkillBank.open(BankConfig(workspace=tmp_path / "ws"), embedder=EMBEDDER)
    seed_bank_if_empty(bank, "webshop")
    yield bank
    bank.close()


def train_start(goal, max_turns):
    return EpisodeStart(
        "webshop", split="train", goal_index=goal, seed=goal, env_config={"max_turns": max_turns}
    )


@pytest.mark.parametrize("constrained", [True, False])
def test_example_prompt_is_the_rollout_engines_prompt_token_for_token(
    tiny_folder, bank, constrained
):
    policy = tiny_policy(tiny_folder)
    # The runtime: the trainer's runner plays one training goal greedily with skills.
    runner = PolicyRollouts(
        policy, bank=bank, max_turns=4, constrained=constrained, prompt_config=PROMPT
    )
    played = runner.run(
        [runner.start("train", 11, seed=11)], temperature=0.0, count_retrievals=False
    )[0]
    # DAgger on the same goal: the same greedy policy acts, the expert labels every state.
    agent = LabellingAgent(
        runner.make_agent(0.0),
        actor=runner.make_agent(0.0),
        labeller=ExpertLabeller(4),
        skills=True,
        constrained=constrained,
    )
    labelled = collect_examples(
        agent, [train_start(11, 4)], bank=bank, source="dagger", round_index=1, max_turns=4
    )
    assert len(labelled.examples) == len(played.turns) >= 2
    assert any("Skills:" in e.prompt[1]["content"] for e in labelled.examples)
    compared = 0
    for example, turn in zip(labelled.examples, played.turns, strict=True):
        tokens = tokenize_example(policy.tokenizer, example)
        prompt_length = tokens["completion_mask"].index(1)
        assert tokens["input_ids"][:prompt_length] == turn.prompt_token_ids
        assert example.skill_ids == turn.retrieved_ids
        assert example.learner_action == turn.action
        if constrained and turn.action.startswith("click["):
            # A target is tokenized exactly as the constrained agent scores that click.
            _, target = action_target(turn.action, agent_state(example, turn), constrained=True)
            ids = policy.tokenizer.encode(target, add_special_tokens=False)
            assert ids == turn.completion_token_ids
            compared += 1
    assert compared or not constrained


def agent_state(example, turn):
    return AgentState("e", "webshop", "", "", turn.observation, turn.available_actions, turn.turn)


def expert_examples(policy, goals, constrained=True, max_turns=8):
    agent = LabellingAgent(
        LLMAgent(policy, PROMPT, constrained=constrained),
        actor=None,
        labeller=ExpertLabeller(max_turns),
        skills=False,
        constrained=constrained,
    )
    starts = [train_start(g, max_turns) for g in goals]
    return collect_examples(
        agent,
        starts,
        bank=None,
        source="expert",
        round_index=0,
        max_turns=max_turns,
        keep=succeeded,
    )


@pytest.mark.parametrize("constrained", [True, False])
def test_loss_mask_covers_only_the_target_tokens(tiny_folder, tmp_path, constrained):
    policy = tiny_policy(tiny_folder)
    examples = expert_examples(policy, [3, 4], constrained=constrained).examples
    assert examples
    config = ColdStartConfig(skills=False, per_device_train_batch_size=4, use_peft=True)
    trainer = build_trainer(policy.model, policy.tokenizer, examples[:4], config, tmp_path / "t")
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(examples[:4]))])
    tokenizer = policy.tokenizer
    for row, example in enumerate(examples[:4]):
        labels = batch["labels"][row].tolist()
        ids = batch["input_ids"][row].tolist()
        prompt = tokenize_example(tokenizer, example)["completion_mask"].index(1)
        trained = [i for i, label in enumerate(labels) if label != -100]
        target = tokenizer.encode(example.target, add_special_tokens=False)
        assert trained == list(range(prompt, prompt + len(target)))
        assert tokenizer.decode([ids[i] for i in trained]) == example.target
        if constrained:
            assert example.assistant_prefix and example.target.endswith(("]", "</action>"))
        else:
            assert example.target.startswith("<think>") and example.target.endswith("</action>")


@pytest.mark.parametrize(("save_steps", "kept"), [(100, []), (2, ["checkpoint-2", "checkpoint-4"])])
def test_round_writes_checkpoints_every_save_steps_and_none_extra_at_the_end(
    tiny_folder, tmp_path, save_steps, kept
):
    # The round's caller saves the merged model right after; a final trainer checkpoint would be
    # a second full write of weights and optimizer state that nobody reads.
    policy = tiny_policy(tiny_folder)
    examples = expert_examples(policy, [3]).examples[:4]
    assert len(examples) == 4
    config = ColdStartConfig(
        skills=False,
        num_train_epochs=4,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=1,
        save_steps=save_steps,
        lora_target_modules=["q_proj"],
    )
    saved = []
    _, result = train_round(
        policy.model, policy.tokenizer, examples, config, tmp_path / "t", on_save=saved.append
    )
    assert result.global_step == 4
    assert saved == [int(name.split("-")[1]) for name in kept]
    # HF Trainer keeps save_total_limit=1 folders: the newest periodic one, never a final one
    assert sorted(p.name for p in (tmp_path / "t").glob("checkpoint-*")) == kept[-1:]


def find_wrong_product_state():
    """A training goal whose results list a product with fewer goal words than the best one."""
    env = envs.make("webshop")
    for goal in range(40):
        observation, info = env.reset(options={"split": "train", "goal_index": goal})
        reset_info = info
        labeller = ExpertLabeller()
        labeller.begin("ep", info)

        def state(observation, info, turn):
            return AgentState(
                "ep",
                "webshop",
                info["instruction"],
                info["category"],
                observation,
                list(info["available_actions"]),
                turn,
                info=dict(info),
            )

        search = labeller.label(state(observation, info, 0))
        labeller.observe("ep", search)
        observation, _, _, _, info = env.step(search)
        best = labeller.label(state(observation, info, 1))
        attributes = [a.lower() for a in reset_info["goal"]["attributes"]]
        texts = split_observation(observation)
        hits = {
            texts[i].lower(): sum(a in texts[i + 1].lower() for a in attributes)
            for i in range(len(texts) - 1)
            if f"click[{texts[i].lower()}]" in info["available_actions"] and len(texts[i]) == 10
        }
        wrong = [a for a, h in hits.items() if h < hits.get(best[6:-1], 0)]
        if wrong:
            return env, labeller, state, observation, info, best, f"click[{wrong[0]}]"
    pytest.skip("no training goal with a clearly worse product on its first results page")


def test_expert_labels_the_learners_state_not_its_own_path():
    env, labeller, state, observation, info, best, wrong = find_wrong_product_state()
    # The learner opens the wrong product; the expert is told, then labels the new state.
    labeller.observe("ep", wrong)
    observation, _, _, _, info = env.step(wrong)
    assert info["page"] == "item"
    label = labeller.label(state(observation, info, 2))
    assert label in ("click[< prev]", "click[back to search]")
    # Following the label leads back to the results, where the expert opens its best product.
    labeller.observe("ep", label)
    observation, _, _, _, info = env.step(label)
    assert labeller.label(state(observation, info, 3)) == best


def test_only_training_goals_reach_the_dataset(tiny_folder):
    with pytest.raises(ConfigError, match="only training goals"):
        ColdStartConfig(split="test")
    policy = tiny_policy(tiny_folder)
    agent = LabellingAgent(
        LLMAgent(policy, PROMPT),
        actor=None,
        labeller=ExpertLabeller(),
        skills=False,
        constrained=True,
    )
    test_start = EpisodeStart("webshop", split="test", goal_index=0, seed=0)
    with pytest.raises(ConfigError, match="only training"):
        collect_examples(
            agent, [test_start], bank=None, source="expert", round_index=0, max_turns=3
        )
    eval_by_id = EpisodeStart("webshop", goal_id=first_goal_id("eval"))
    with pytest.raises(ConfigError, match="only training"):
        collect_examples(
            agent, [eval_by_id], bank=None, source="expert", round_index=0, max_turns=3
        )


def first_goal_id(split):
    env = envs.make("webshop")
    _, info = env.reset(options={"split": split, "goal_index": 0})
    return info["goal_id"]


CONFIG = ColdStartConfig(
    goals=3,
    dagger_rounds=1,
    dagger_goals=2,
    skills=False,
    max_turns=6,
    num_train_epochs=2,
    per_device_train_batch_size=2,
    gradient_accumulation_steps=1,
    save_steps=3,
    lora_target_modules=["q_proj", "v_proj"],
)


class Killed(Exception):
    pass


def test_killed_and_resumed_run_ends_with_the_same_dataset_and_steps(tiny_folder, tmp_path):
    straight = ColdStartRun(CONFIG, policy=tiny_policy(tiny_folder), run_dir=tmp_path / "a")
    expected = straight.run()

    def kill(event):
        if event == PhaseSaved(1, ColdStartPhase.TRAIN):
            raise Killed

    killed = ColdStartRun(
        CONFIG,
        policy=tiny_policy(tiny_folder),
        run_dir=tmp_path / "b",
        events=RunEvents().on(PhaseSaved, kill),
    )
    with pytest.raises(Killed):
        killed.run()
    assert (tmp_path / "b" / "trainer" / "round-0001").exists()
    gathered = (tmp_path / "b" / "data" / "round-0001.jsonl").read_bytes()

    started = []
    resumed = ColdStartRun(
        CONFIG,
        policy=tiny_policy(tiny_folder),
        run_dir=tmp_path / "b",
        events=RunEvents().on(PhaseStarted, started.append),
    )
    state = resumed.run(resume=True)
    assert PhaseStarted(1, ColdStartPhase.TRAIN) in started
    assert not [e for e in started if e.phase is ColdStartPhase.DATA]  # nothing gathered twice
    assert (tmp_path / "b" / "data" / "round-0001.jsonl").read_bytes() == gathered
    assert (tmp_path / "b" / "dataset.jsonl").read_bytes() == (
        tmp_path / "a" / "dataset.jsonl"
    ).read_bytes()
    steps = [row["train.global_step"] for row in state.history]
    assert steps == [row["train.global_step"] for row in expected.history]
    assert steps[1] > CONFIG.save_steps  # the kill was in the middle of round 1's training
    assert all(e.split == "train" for e in read_examples(tmp_path / "b" / "dataset.jsonl"))
    assert resumed.final_checkpoint.exists()
    with pytest.raises(Exception, match="already holds"):
        ColdStartRun(CONFIG, policy=tiny_policy(tiny_folder), run_dir=tmp_path / "b").run()


def test_a_resume_over_a_damaged_config_is_refused_naming_the_file(tiny_folder, tmp_path):
    from skillrl_core.errors import CheckpointError

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "state.json").write_text('{"round": 1, "phase": "", "done": false}')
    (folder / "config.json").write_text('{"cold_start": {"goals": 3')  # cut by a kill
    run = ColdStartRun(CONFIG, policy=tiny_policy(tiny_folder), run_dir=folder)
    with pytest.raises(CheckpointError, match=r"config\.json.*cannot be resumed"):
        run.run(resume=True)
    assert (folder / "config.json").read_text() == '{"cold_start": {"goals": 3'


def test_dataset_is_jsonl_that_datasets_reads(tiny_folder, tmp_path):
    from datasets import load_dataset

    run = ColdStartRun(
        ColdStartConfig(
            goals=2, skills=False, max_turns=6, num_train_epochs=1, lora_target_modules=["q_proj"]
        ),
        policy=tiny_policy(tiny_folder),
        run_dir=tmp_path / "r",
    )
    run.run()
    rows = [json.loads(line) for line in run.dataset_path.read_text().splitlines()]
    loaded = load_dataset("json", data_files=str(run.dataset_path), split="train")
    assert len(loaded) == len(rows) > 0
    assert loaded[0]["prompt"][0]["role"] == "system"
    assert loaded[0]["completion"][0]["role"] == "assistant"
    assert set(loaded["split"]) == {"train"}


def test_bank_episodes_replay_into_the_same_examples_as_the_expert_gave(tiny_folder, bank):
    policy = tiny_policy(tiny_folder)
    demonstrated = expert_examples(policy, [3, 4, 5])
    bank.trajectories.save_episodes(demonstrated.episodes)
    stored = [e for e in bank.trajectories.episodes(env="webshop", split="train", success=True)]
    assert stored
    config = ColdStartConfig(sources=("bank",), skills=False, max_turns=8)
    gatherer = ExampleGatherer(
        config,
        policy=policy,
        bank=bank,
        teacher=None,
        env_config={"max_turns": 8},
        prompt_config=PROMPT,
    )
    gathered = gatherer.gather(0, goals=[])  # the bank source replays what is stored
    replayed = gathered.examples
    assert gathered.sources == {"bank": SourceFigures(episodes=len(stored), success_rate=1.0)}
    key = lambda e: (e.goal_id, e.turn)  # noqa: E731
    expected = {key(e): e for e in demonstrated.examples}
    assert {key(e) for e in replayed} == set(expected)
    for example in replayed:
        assert example.source == "bank"
        assert example.prompt == expected[key(example)].prompt
        assert example.completion == expected[key(example)].completion


def test_teacher_turns_keep_the_teachers_action_and_thought(tiny_folder):
    from fake_policy import ScriptedPolicy

    policy = tiny_policy(tiny_folder)
    teacher = LLMAgent(ScriptedPolicy(), PROMPT, constrained=False)
    agent = LabellingAgent(
        LLMAgent(policy, PROMPT), actor=teacher, labeller=None, skills=False, constrained=False
    )
    labelled = collect_examples(
        agent,
        [train_start(2, 4)],
        bank=None,
        source="teacher",
        round_index=0,
        max_turns=4,
        keep=lambda record: True,
    )
    turns = [t for t in labelled.episodes[0].turns if t.action_valid]
    assert [e.action for e in labelled.examples] == [t.action for t in turns]
    for example in labelled.examples:
        assert example.target == f"<think>go</think><action>{example.action}</action>"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=80, deadline=None)
@given(
    st.one_of(
        st.text(max_size=300),
        st.lists(JSON, max_size=4).map(lambda rows: "\n".join(json.dumps(r) for r in rows)),
    )
)
def test_reading_a_dataset_file_never_fails_with_anything_but_a_data_file_error(text):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.jsonl"
        path.write_text(text, encoding="utf-8")
        try:
            rows = read_examples(path)
        except DataFileError:
            return
        assert len(rows) == sum(1 for line in text.splitlines() if line.strip())


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="[]"), max_size=40))
def test_targets_rebuild_the_assistant_message(value):
    state = AgentState("e", "webshop", "t", "c", "o", [f"click[{value}]"], 0)
    for constrained in (True, False):
        prefix, target = action_target(f"click[{value}]", state, constrained=constrained)
        assert f"click[{value}]" in prefix + target
        assert (prefix + target).endswith("</action>")
    search = AgentState("e", "webshop", "t", "c", "o", ["search[<query>]"], 0)
    prefix, target = action_target(f"search[{value}]", search, constrained=True)
    assert prefix + target == f"<action>search[{value}]"


def expert_prompts(policy, bank, withhold):
    agent = LabellingAgent(
        LLMAgent(policy, PROMPT, constrained=True),
        actor=None,
        labeller=ExpertLabeller(6),
        skills=bank is not None,
        constrained=True,
    )
    labelled = collect_examples(
        agent,
        [train_start(g, 6) for g in (3, 4, 5, 6)],
        bank=bank,
        source="expert",
        round_index=0,
        max_turns=6,
        keep=succeeded,
        skill_withhold=withhold,
        seed=0,
    )
    return [(e.prompt[1]["content"], e.skill_ids, e.action) for e in labelled.examples]


def test_withheld_examples_are_the_prompts_the_agent_builds_without_entries(tiny_folder, bank):
    policy = tiny_policy(tiny_folder)
    with_entries = expert_prompts(policy, bank, 0.0)
    without = expert_prompts(policy, None, 0.0)
    mixed = expert_prompts(policy, bank, 0.5)
    assert mixed == expert_prompts(policy, bank, 0.5)  # the same turns withheld on a rerun
    assert len(mixed) == len(with_entries) == len(without) >= 8
    withheld = 0
    for got, full, bare in zip(mixed, with_entries, without, strict=True):
        assert got[2] == full[2] == bare[2]  # the expert's label does not depend on entries
        if got == full:
            assert full[1]
        else:
            assert got == bare and not got[1] and "Skills:" not in got[0]
            withheld += 1
    assert 0 < withheld < len(mixed)


def test_withholding_needs_skills():
    with pytest.raises(ConfigError, match="skill_withhold"):
        ColdStartConfig(skills=False, skill_withhold=0.3)
    with pytest.raises(ConfigError, match="skill_withhold"):
        ColdStartConfig(skill_withhold=1.0)


def test_dagger_makes_no_example_where_the_expert_has_no_move_to_teach(tiny_folder):
    """A learner that only walks left pins boxes to walls; deadlocked states become no example."""
    from envs.sokoban.expert import SokobanExpert
    from trainers.cold_start.dagger import ReplayAgent

    goals = range(24)
    agent = LabellingAgent(
        LLMAgent(tiny_policy(tiny_folder), PROMPT, constrained=True),
        actor=ReplayAgent([["left"] * 10 for _ in goals]),
        labeller=ExpertLabeller(10),
        skills=False,
        constrained=True,
    )
    starts = [
        EpisodeStart(
            "sokoban",
            split="train",
            goal_index=g,
            seed=g,
            env_config={"categories": "6x6-1box", "max_turns": 10},
        )
        for g in goals
    ]
    labelled = collect_examples(
        agent, starts, bank=None, source="dagger", round_index=1, max_turns=10
    )
    turns = sum(len(e.turns) for e in labelled.episodes)
    assert labelled.declined > 0
    assert len(labelled.examples) + labelled.declined == turns
    for example in labelled.examples:  # every kept label is a move the solver plans from there
        observation = example.prompt[-1]["content"]
        assert SokobanExpert().label(observation, {}) == example.action

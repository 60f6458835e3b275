"""``skillrl run`` through click's runner and as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli import main


def run_cli(*args: str):
    return CliRunner().invoke(main, ["run", *args], catch_exceptions=False)


def test_expert_plays_and_json_reports_every_episode(workspace):
    result = run_cli("--policy", "expert", "--episodes", "2", "--no-record", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["summary"] == {
        "episodes": 2,
        "successes": 2,
        "success_rate": 1.0,
        "mean_score": 1.0,
    }
    first = data["episodes"][0]
    assert first["split"] == "test" and first["agent"] == "expert" and first["success"]
    assert first["steps"][-1]["action"] == "click[buy now]" and first["steps"][-1]["reward"] == 1.0
    assert data["stats"]["turns"] == sum(e["turns"] for e in data["episodes"])


def test_rich_output_shows_turns_and_summary(workspace):
    result = run_cli("--policy", "expert", "--goal", "3", "--no-record")
    assert result.exit_code == 0, result.output
    assert "episode 1 · turn 1" in result.output and "action: search[" in result.output
    assert "summary" in result.output and "1/1" in result.output


def test_step_mode_lets_a_person_override_the_action(workspace):
    result = CliRunner().invoke(
        main,
        ["run", "--policy", "expert", "--step", "--no-record", "--max-turns", "2", "--json"],
        input="search[zzz qqq]\n\n",
    )
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["episodes"][0]["steps"]
    assert steps[0]["action"] == "search[zzz qqq]" and "overridden" in steps[0]["model_output"]
    assert steps[0]["substituted"] and not steps[1]["substituted"]
    assert len(steps) == 2  # the turn limit ends it


def test_bad_options_fail_with_a_clear_message(workspace):
    result = CliRunner().invoke(main, ["run", "--env", "nope", "--policy", "expert", "--no-record"])
    assert result.exit_code == 1 and "unknown environment 'nope'" in result.output
    result = CliRunner().invoke(main, ["run", "--backend", "openai", "--no-skills", "--no-record"])
    assert result.exit_code == 1 and "base_url is required" in result.output


def every_option(command=None, path=("skillrl",)):
    """(command path, option) for every option of every command and subcommand."""
    import click

    command = command or main
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            yield from every_option(command.get_command(context, name), (*path, name))
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            yield " ".join(path), param


def test_every_option_of_every_command_has_help_that_is_shown():
    options = list(every_option())
    assert len(options) > 100
    for path, option in options:
        assert (option.help or "").strip(), f"{path} {option.opts[0]} has no help"
    for path in sorted({p for p, _ in options}):
        shown = CliRunner().invoke(main, [*path.split()[1:], "--help"]).output
        for _, option in (o for o in options if o[0] == path):
            assert any(name in shown for name in option.opts), f"{path} hides {option.opts}"


def test_no_help_speaks_of_what_only_python_callers_can_pass():
    for path, option in every_option():
        assert "from Python" not in (option.help or ""), f"{path} {option.opts[0]}"
    assert "clipped above at 1 + epsilon_high." in shown_help("train")


def shown_help(*command: str) -> str:
    """The --help of a command, on one line (no wrapping to a terminal's width)."""
    result = CliRunner().invoke(main, [*command, "--help"], env={"COLUMNS": "2000"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_model_help_lists_the_sources_auto_tries_in_the_order_it_tries_them(
    workspace, monkeypatch, tmp_path
):
    import io

    from rich.console import Console

    from skillrl.policies.config import EMBEDDED_MODEL
    from skillrl.policies.model_settings import shipped_adapter
    from skillrl_cli.options import AUTO_MODEL_ORDER, resolve_model

    texts = [" ".join(text.split()) for _source, text in AUTO_MODEL_ORDER]
    for command in (("run",), ("eval",), ("skills", "measure")):
        shown = shown_help(*command)
        places = [shown.find(text) for text in texts]
        assert -1 not in places and places == sorted(places), (command, places)
    assert "(the embedded base model when there is none)" not in shown_help("eval")

    def played(env_id: str) -> str:
        return resolve_model("auto", "transformers", str(workspace), Console(file=io.StringIO()),
                             env_id)  # fmt: skip

    # Behaviour, source by source: what the help names first wins whenever it is there.
    assert [source for source, _ in AUTO_MODEL_ORDER] == ["trained", "shipped", "base"]
    assert played("webshop") == str(shipped_adapter("webshop"))
    assert played("sokoban") == str(shipped_adapter("sokoban"))
    folder = workspace / "runs" / "shop"
    from test_commands_options import whole_checkpoint

    whole_checkpoint(folder / "checkpoints" / "cycle-0001")
    (folder / "state.json").write_text(json.dumps({"history": [], "done": True}))
    (folder / "config.json").write_text(json.dumps({"cycle": {"cycles": 1, "env_id": "webshop"}}))
    assert played("webshop") == str(folder / "checkpoints" / "cycle-0001")
    assert played("sokoban") == str(shipped_adapter("sokoban"))  # never WebShop's model
    from skillrl.policies import model_settings

    # An environment that no adapter ships for falls through to the base model.
    monkeypatch.setattr(model_settings, "SHIPPED_ADAPTERS", tmp_path / "no-adapters")
    assert played("sokoban") == EMBEDDED_MODEL


class Evaluated(Exception):
    pass


def test_eval_skills_default_is_the_models_recorded_setting_as_its_help_says(
    workspace, monkeypatch
):
    import skillrl.policies
    import skillrl_cli.library
    import trainers.common.policy_rollouts
    import trainers.evaluate

    shown = shown_help("eval")
    assert "[default: both]" not in shown
    assert (
        "Default: as the model was trained (on or off, from its recorded settings), else both"
        in (shown)
    )
    with_skills = []

    class Rollouts:
        def __init__(self, policy, *, bank, **options):
            with_skills.append(bank is not None)

    class Closed:
        def close(self):
            pass

    class Result:
        arm, outcomes = "on", []

        def to_dict(self):
            return {}

    monkeypatch.setattr(skillrl.policies, "load_policy", lambda config, *a, **k: object())
    monkeypatch.setattr(skillrl_cli.library, "open_bank", lambda *a, **k: Closed())
    monkeypatch.setattr(trainers.common.policy_rollouts, "PolicyRollouts", Rollouts)
    monkeypatch.setattr(trainers.evaluate, "evaluate", lambda runner, config, arm=None: Result())

    def evaluated(*args: str) -> list[bool]:
        with_skills.clear()
        result = CliRunner().invoke(main, ["eval", "--goals", "1", "--json", *args])
        assert result.exit_code == 0, result.output
        return list(with_skills)

    from skillrl.policies.model_settings import ModelSettings, shipped_adapter

    recorded = ModelSettings.load(shipped_adapter("webshop")).skills
    assert evaluated() == [recorded]  # auto plays the shipped WebShop adapter: its setting only
    assert evaluated("--model", "base") == [True, False]  # no recorded settings: both
    assert evaluated("--skills", "both") == [True, False]  # an option given wins


def test_eval_off_a_terminal_prints_plain_progress_lines(workspace, monkeypatch):
    import skillrl.policies
    import trainers.common.policy_rollouts
    import trainers.evaluate
    from trainers.common.policy_rollouts import RolloutProgress

    class Rollouts:
        def __init__(self, policy, *, on_progress, **options):
            self.on_progress = on_progress

    def evaluate(runner, config, arm=None):
        runner.on_progress(RolloutProgress(3, 3, 12, 24, 12, 6.0))
        raise Evaluated()  # the lines came before the results

    monkeypatch.setattr(skillrl.policies, "load_policy", lambda config, *a, **k: object())
    monkeypatch.setattr(trainers.common.policy_rollouts, "PolicyRollouts", Rollouts)
    monkeypatch.setattr(trainers.evaluate, "evaluate", evaluate)
    args = ["eval", "--goals", "3", "--model", "base", "--skills", "off"]
    result = CliRunner().invoke(main, args)
    assert isinstance(result.exception, Evaluated), result.output
    lines = result.output.splitlines()
    assert "[0/1 phases, 0:00:00] evaluating skills arm 'off'" in lines
    assert "goals: episodes 3/3, turns 12, 2.00 turns/s" in lines


def test_run_skills_default_is_the_models_recorded_setting_as_its_help_says(workspace, monkeypatch):
    import skillrl_cli.run
    from skillrl.policies.model_settings import ModelSettings, shipped_adapter

    shown = shown_help("run")
    assert "Default: as the model was trained (its recorded settings), else with skills" in shown
    settled = []

    def capture(settings, console, *_display):
        settled.append(settings.skills)
        raise Evaluated()

    monkeypatch.setattr(skillrl_cli.run, "play_on_screen", capture)
    for args in ([], ["--model", "base"], ["--skills"], ["--no-skills"]):
        result = CliRunner().invoke(main, ["run", "--no-record", *args])
        assert isinstance(result.exception, Evaluated), result.output
    recorded = ModelSettings.load(shipped_adapter("webshop")).skills
    assert settled == [recorded, True, True, False]


def test_workspace_help_names_what_the_workspace_holds_and_not_the_model_cache(
    workspace, tmp_path, monkeypatch
):
    from skillrl.policies.model_cache import cache_dir
    from skillrl.workspace import WORKSPACE_CONTENTS

    top = shown_help()
    assert "model cache" not in top.split("Converted models")[0]
    assert "cached per user" in top and "$XDG_CACHE_HOME/skillrl" in top
    commands = sorted({path for path, option in every_option() if "--workspace" in option.opts})
    assert len(commands) > 10
    for path in commands:
        shown = shown_help(*path.split()[1:])
        assert f"Workspace folder ({WORKSPACE_CONTENTS})" in shown, path
        assert "model cache" not in shown and "cached per user, not here" in shown, path
        assert "$XDG_CACHE_HOME/skillrl" in " ".join(shown.split()), path  # as cache_dir reads
    # As said: the converted models' cache is the user's, wherever the workspace is.
    monkeypatch.delenv("SKILLRL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))
    assert cache_dir() == (tmp_path / "user-cache" / "skillrl").resolve()
    assert workspace not in cache_dir().parents


@pytest.mark.slow
def test_subprocess_expert_run_records_into_a_seeded_bank(workspace):
    env = {**os.environ, "SKILLRL_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        # Training goals: an episode of a test goal is never saved (it changes nothing in the bank).
        [
            sys.executable,
            "-m",
            "cli",
            "run",
            "--policy",
            "expert",
            "--episodes",
            "2",
            "--split",
            "train",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["successes"] == 2
    assert "seeded the skill bank with webshop's" in done.stderr
    from memory import BankConfig, SkillBank

    with SkillBank.open(BankConfig(workspace=workspace)) as bank:
        assert len(bank.trajectories.episodes(env="webshop")) == 2 and bank.count() > 0


def test_a_person_plays_with_typed_shorthand(workspace):
    result = CliRunner().invoke(
        main,
        ["run", "--policy", "human", "--no-skills", "--no-record", "--max-turns", "2", "--json"],
        input="herbal tea\n3\n",
    )
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["episodes"][0]["steps"]
    assert [s["action"] for s in steps][0] == "search[herbal tea]"
    assert steps[1]["action"].startswith("click[") and steps[1]["valid"]
    assert steps[0]["model_output"] == "herbal tea"


def _pages_after(*actions: str) -> list[list[str]]:
    """The admissible actions of test goal 0 after each prefix of ``actions``."""
    import envs

    env = envs.make("webshop", max_turns=15)
    _, info = env.reset(options={"split": "test", "goal_index": 0})
    pages = [info["available_actions"]]
    for action in actions:
        _, _, _, _, info = env.step(action)
        pages.append(info["available_actions"])
    return pages


def test_a_person_sees_every_clickable_numbered_and_the_search_box_asks_for_words(workspace):
    result = CliRunner().invoke(
        main,
        ["run", "--policy", "human", "--no-skills", "--no-record", "--max-turns", "3"],
        input="1\nherbal tea\n3\n\nq\n",
    )
    assert "your words> " in result.output  # choosing the search box asked for the words
    results_page = _pages_after("search[herbal tea]")[1]
    product = results_page[2]
    item_page = _pages_after("search[herbal tea]", product)[2]
    for page in (results_page, item_page):
        for number, action in enumerate(page, start=1):
            label = action[len("click[") : -1]
            assert f"{number:>2}. {label}" in result.output, (label, result.output)
    assert len(item_page) > 6  # the item's options (flavors, sizes) were among those checked
    assert "your action> " in result.output


def test_a_person_who_picks_the_search_box_types_the_query_next(workspace):
    result = CliRunner().invoke(
        main,
        ["run", "--policy", "human", "--no-skills", "--no-record", "--max-turns", "2", "--json"],
        input="1\n\nherbal tea\n3\n",
    )
    assert result.exit_code == 0, result.output
    steps = json.loads(result.stdout)["episodes"][0]["steps"]
    assert steps[0]["action"] == "search[herbal tea]" and steps[0]["valid"]
    assert steps[1]["action"].startswith("click[b") and steps[1]["valid"]


def tea_page(observation: str, actions: list[str]):
    """The first turn of a tea-buying episode on ``observation`` (what ``show_page`` draws)."""
    from skillrl.agents.base import AgentState

    return AgentState(episode_id="e", env_id="webshop", instruction="buy tea",
                      category="grocery", observation=observation, available_actions=actions,
                      turn=0, history=[], skills=None, info={})  # fmt: skip


def test_model_text_with_brackets_is_shown_not_read_as_markup():
    from rich.console import Console

    from skillrl_cli.run_display import show_page

    console = Console(width=200, record=True)
    state = tea_page("[button] Buy Now [button_] [ginger] [/] [bold]x",
                     ["click[ginger]", "click[b0abc12345]", "click[buy now]"])  # fmt: skip
    show_page(console, state)
    out = console.export_text()
    assert "[button] Buy Now [button_] [ginger] [/] [bold]x" in out
    assert " 1. ginger" in out and " 2. b0abc12345" in out and " 3. buy now" in out


def test_page_text_with_escape_sequences_is_shown_made_visible():
    import io

    from rich.console import Console

    from skillrl_cli.run_display import show_page

    out = io.StringIO()
    console = Console(file=out, width=200)
    state = tea_page("tea \x1b[2J\x1b]8;;http://x\x1b\\link [/oops]", ["click[buy now]"])
    show_page(console, state)
    text = out.getvalue()
    assert "\x1b" not in text  # no raw ESC reached the terminal
    assert "tea \\x1b[2J\\x1b]8;;http://x\\x1b\\link [/oops]" in text


def test_a_person_reads_webshop_pages_in_the_models_readable_layout(workspace):
    args = ["run", "--policy", "human", "--no-skills", "--no-record", "--max-turns", "2"]
    played = CliRunner().invoke(main, args, input="herbal tea\nq\n", env={"COLUMNS": "200"})
    assert played.exit_code == 0, played.output
    assert "pages for a person: observation_mode=text_rich" in played.output
    assert "[button] Search [button_]" in played.output and " [SEP] " not in played.output
    assert "[button] Back to Search [button_]" in played.output  # the results page too
    chosen = CliRunner().invoke(main, [*args, "--env-option", "observation_mode=text"], input="q\n")
    assert chosen.exit_code == 0, chosen.output
    assert " [SEP] " in chosen.output and "pages for a person" not in chosen.output


def test_retrieved_skills_show_the_highest_score_first():
    from types import SimpleNamespace

    from rich.console import Console

    from memory.types import RetrievedEntry, RetrievedSkills
    from skillrl.agents.base import AgentState
    from skillrl_cli.run_display import show_page, skills_table

    def retrieved(title: str, kind: str, score: float) -> RetrievedEntry:
        return RetrievedEntry(SimpleNamespace(id=title, title=title, kind=kind), score)

    skills = RetrievedSkills(
        general=[retrieved("low general", "general", 0.31)],
        task=[retrieved("mid task", "task", 0.52)],
        mistakes=[retrieved("top mistake", "mistake", 0.77)],
    )
    console = Console(width=200, record=True)
    console.print(skills_table(skills.all, {"mid task"}))
    lines = [line for line in console.export_text().splitlines() if "0." in line]
    assert [line.split()[0] for line in lines] == ["top", "mid", "low"]
    # Without styles (a pipe, a log) the words mark what the prompt left out.
    cut = [line for line in lines if "(cut: not in the prompt)" in line]
    assert [line.split()[0] for line in cut] == ["top", "low"]
    state = AgentState("e", "webshop", "buy tea", "grocery", "a page", ["click[buy now]"], 0,
                       history=[], skills=skills, info={})  # fmt: skip
    show_page(console, state)
    page = console.export_text()
    assert page.index("top mistake") < page.index("mid task") < page.index("low general")


@pytest.mark.parametrize("human", [True, False])
def test_the_retrieved_skills_table_shows_once_per_turn(human):
    from types import SimpleNamespace

    from rich.console import Console

    from memory.types import RetrievedEntry, RetrievedSkills
    from skillrl.agents.base import AgentState
    from skillrl_cli.run import _show_turn
    from skillrl_cli.run_display import show_page

    entry = SimpleNamespace(id="s1", title="Compare the prices first", kind="general")
    skills = RetrievedSkills(general=[RetrievedEntry(entry, 0.5)])
    turn = SimpleNamespace(
        retrieved_ids=["s1"],
        model_output="",
        action_valid=True,
        action_substituted=False,
        action="click[buy now]",
        turn=0,
        reward=0.0,
    )
    record = SimpleNamespace(skills_enabled=True, error=None, success=False)
    event = SimpleNamespace(skills=skills, turn=turn, record=record, next_observation="a page",
                            done=False, slot=0)  # fmt: skip
    console = Console(width=200, record=True)
    if human:  # a person is shown the page and its skills before typing
        show_page(
            console,
            AgentState(
                "e",
                "webshop",
                "buy tea",
                "grocery",
                "a page",
                ["click[buy now]"],
                0,
                history=[],
                skills=skills,
                info={},
            ),
        )
    _show_turn(console, human)(event)
    assert console.export_text().count("Compare the prices first") == 1


@pytest.mark.parametrize(
    ("backend", "choice", "constrained"),
    [
        ("transformers", None, True),
        ("vllm", None, True),
        ("trl-vllm", None, True),
        ("openai", None, False),
        ("transformers", False, False),
        ("openai", False, False),
        ("vllm", True, True),
    ],
)
def test_constrained_decoding_is_the_default_where_the_backend_can_score(
    backend, choice, constrained
):
    from skillrl_cli.options import check_decoding

    assert check_decoding(backend, choice) is constrained


@pytest.mark.parametrize("command", ["run", "eval"])
def test_openai_with_constrained_is_refused_before_anything_runs(workspace, command):
    args = [command, "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--constrained"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "--constrained needs a backend that can score" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_help_explains_constrained_and_free():
    for command in ("run", "eval", "train"):
        output = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
        assert "--constrained / --free" in output
        assert "Constrained (the default, except with --backend openai)" in output


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "line"), [(None, "constrained"), ("--free", "free")])
def test_the_screen_says_which_decoding_a_model_run_uses(workspace, tmp_path, flag, line):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "trainers"))
    from tiny_checkpoint import write_tiny_checkpoint

    model = write_tiny_checkpoint(tmp_path / "tiny")
    args = ["run", "--model", str(model), "--no-skills", "--no-record", "--max-turns", "2"]
    args += ["--threads", "1", "--json", *([flag] if flag else [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert f"decoding: {line}" in result.stderr
    steps = json.loads(result.stdout)["episodes"][0]["steps"]
    if flag is None:  # every constrained action is admissible, whatever the tiny model says
        assert all(s["valid"] for s in steps)


def test_step_mode_search_box_number_asks_for_the_words(workspace):
    result = CliRunner().invoke(
        main,
        ["run", "--policy", "expert", "--step", "--no-record", "--max-turns", "1", "--json"],
        input="1\nzzz qqq\n",
    )
    assert result.exit_code == 0, result.output
    assert "your words> " in result.output
    steps = json.loads(result.stdout)["episodes"][0]["steps"]
    assert steps[0]["action"] == "search[zzz qqq]"


def test_a_person_sees_the_task_before_the_first_action(workspace):
    result = CliRunner().invoke(
        main,
        ["run", "--policy", "human", "--no-skills", "--no-record", "--max-turns", "1"],
        input="q\n",
    )
    assert result.exit_code == 0 and "Aborted" not in result.output  # q is a way out, not an error
    assert "quit: the episode in progress is dropped" in result.output
    task_at = result.output.find("task (")
    assert task_at != -1, result.output
    assert task_at < result.output.find("your action> "), result.output  # before turn 1's prompt
    assert result.output.count("task (") == 1


def test_the_end_of_input_ends_human_play_like_q(workspace):
    result = CliRunner().invoke(
        main, ["run", "--policy", "human", "--no-skills", "--no-record", "--max-turns", "1"]
    )  # no input at all: Ctrl-D at the first prompt
    assert result.exit_code == 0 and "Aborted" not in result.output, result.output
    assert "quit: the episode in progress is dropped" in result.output


def test_a_failed_episodes_last_panel_says_why_the_environment_ended_it():
    from rich.console import Console

    from skillrl.agents.base import AgentDecision
    from skillrl.rollout import TurnEvent
    from skillrl_cli.run_display import turn_panel
    from skillrl_core.records import EpisodeRecord, TurnRecord

    reason = "deadlock: a box off target in a corner"
    turn = TurnRecord(turn=3, observation="a room", available_actions=["up"], action="up",
                      action_valid=True, reward=-0.1, terminated=True, truncated=False,
                      info={"end_reason": reason})  # fmt: skip
    record = EpisodeRecord(env_id="sokoban", goal_id="g", instruction="push", category="c",
                           turns=[turn], success=False, score=0.0)  # fmt: skip
    event = TurnEvent(0, record, turn, None, AgentDecision(action="up", model_output="up"),
                      "a room", True)  # fmt: skip
    console = Console(width=120, record=True)
    console.print(turn_panel(event))
    assert f"no success ({reason})" in console.export_text()


def test_the_end_of_input_ends_step_mode_like_q(workspace):
    result = CliRunner().invoke(
        main, ["run", "--policy", "expert", "--step", "--no-record", "--max-turns", "2"]
    )  # no input at all: Ctrl-D at the first review
    assert result.exit_code == 0 and "Aborted" not in result.output, result.output
    assert "quit: the episode in progress is dropped" in result.output

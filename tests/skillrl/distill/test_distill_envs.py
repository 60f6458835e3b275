"""The same distiller on every environment: only the adapter differs."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest
from distill_episodes import episode
from sokoban_episodes import INTO_THE_CORNER, SOLUTION, play

import envs
from envs.distill_adapter import DistillAdapter
from skillrl.distill.analytic import AnalyticDistiller
from skillrl.distill.leakage import draft_leaks, find_leaks

DISTILL = Path(__file__).parents[3] / "skillrl" / "distill"
# What the distiller must not know: WebShop's ids, page separator, verbs, prices and sizes, and
# any branching on an environment's name.
ENV_WORDS = re.compile(
    r"\basin|\bb0|\[sep\]|search\[|click\[|\bprices?\b|\bsizes?\b"
    r"|(?:==|!=|\bin)\s*[(\[{]?\s*['\"](?:webshop|sokoban)['\"]",
    re.IGNORECASE,
)

EPISODES = {
    "webshop": {
        "failure": lambda: episode(
            success=False, chosen={"size": "medium"}, missed_options=["large"]
        ),
        "success": lambda: episode(success=True, chosen={"size": "large", "color": "navy"}),
        "leak": "click[b07hrfsnl4] costs $24",
    },
    "sokoban": {
        "failure": lambda: play(INTO_THE_CORNER),
        "success": lambda: play(SOLUTION),
        "leak": "the box at row 2, column 3 of room 6x6-1box-0042",
    },
}


@pytest.fixture(params=sorted(EPISODES))
def env_id(request):
    return request.param


def test_every_builtin_env_has_an_adapter_keyed_by_its_id(env_id):
    adapter = envs.distill_adapter_for(env_id)
    assert isinstance(adapter, DistillAdapter) and adapter.env_id == env_id
    assert adapter.categories and adapter.leak_patterns and adapter.specifics_rule


def test_a_failure_becomes_precise_notes_that_leak_nothing(env_id):
    failed = EPISODES[env_id]["failure"]()
    notes = AnalyticDistiller().distill([failed])
    assert notes and all(n.kind == "mistake" for n in notes)
    for note in notes:
        assert (note.env, note.category) == (env_id, failed.category)
        assert note.failure_point and note.flawed_action and note.correction
        assert draft_leaks(note, [failed]) == []


def test_a_success_becomes_a_task_skill_for_its_category(env_id):
    won = EPISODES[env_id]["success"]()
    [skill] = AnalyticDistiller().distill([won])
    assert (skill.kind, skill.env, skill.category) == ("task", env_id, won.category)
    assert skill.title and skill.principle.endswith(".")
    assert draft_leaks(skill, [won]) == []


def test_the_adapter_explains_the_outcome_it_parsed(env_id):
    failed = EPISODES[env_id]["failure"]()
    adapter = envs.distill_adapter_for(env_id)
    outcome = adapter.outcome(failed)
    assert outcome is not None and adapter.explain(failed) == outcome.explain()
    assert len(adapter.summarise_actions(failed).splitlines()) == len(failed.turns)


def test_env_specifics_leak_under_their_env_and_under_none(env_id):
    text = EPISODES[env_id]["leak"]
    assert find_leaks(text, env=env_id)
    assert find_leaks(text)  # no env named: every registered env's patterns apply


def test_an_env_without_an_adapter_gets_trajectory_only_lessons(monkeypatch):
    from envs import registry

    envs.registered()  # built-ins first, so that restoring the tables keeps them
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    envs.register("toy-distill", lambda **_: None, "a test env")
    adapter = envs.distill_adapter_for("toy-distill")
    failed = EPISODES["webshop"]["failure"]()
    failed.env_id = "toy-distill"
    for turn in failed.turns:
        turn.action_valid = False
    [note] = AnalyticDistiller().distill([failed])
    assert adapter.outcome(failed) is None
    assert note.title == "Use only admissible actions" and note.env == "toy-distill"


def _code_without_comments(source: str) -> str:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return " ".join(t.string for t in tokens if t.type != tokenize.COMMENT)


def test_the_word_check_catches_env_knowledge():
    assert ENV_WORDS.search(_code_without_comments('x = "click[buy now]"\n'))
    assert ENV_WORDS.search(_code_without_comments('if env == "sokoban":\n    pass\n'))
    assert not ENV_WORDS.search(_code_without_comments("# an ASIN, a price\nbatch_size = 1\n"))


def test_the_distiller_knows_no_environment():
    files = sorted(DISTILL.rglob("*.py")) + sorted(DISTILL.rglob("*.txt"))
    assert len(files) > 10
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        code = _code_without_comments(text) if path.suffix == ".py" else text
        found += [f"{path.name}: {m.group(0)}" for m in ENV_WORDS.finditer(code)]
    assert found == []

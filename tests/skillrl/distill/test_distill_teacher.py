from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from distill_episodes import episode

from skillrl.distill.teacher import TeacherConfig, TeacherDistiller, build_conversation
from skillrl_core.errors import DistillError

GOOD = json.dumps(
    {
        "entries": [
            {
                "kind": "mistake",
                "title": "Select the requested size",
                "principle": "Select every option named in the instruction before Buy Now.",
                "failure_point": "chose size medium while the goal asked for large",
                "flawed_action": "click[medium]",
                "correction": "click[large], then buy",
            }
        ]
    }
)


@dataclass
class Generation:
    text: str


class ScriptedTeacher:
    """Replies from a script, one reply per conversation per call; records what it was asked."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.calls: list[list[list[dict]]] = []

    def generate(self, conversations, sampling):
        self.calls.append(conversations)
        return [Generation(self.replies.pop(0)) for _ in conversations]


def failed():
    return episode(success=False, chosen={"size": "medium"}, missed_options=["large"])


def test_recovers_from_malformed_json_with_the_error_fed_back():
    teacher = ScriptedTeacher(['{"entries": [ {"kind": "mistake", ', GOOD])
    ep = failed()
    [draft] = TeacherDistiller(teacher, sampling="s").distill([ep])
    assert draft.kind == "mistake" and draft.correction == "click[large], then buy"
    assert draft.trajectory_ids == [ep.episode_id]
    assert len(teacher.calls) == 2
    retry = teacher.calls[1][0]
    assert retry[-2] == {"role": "assistant", "content": '{"entries": [ {"kind": "mistake", '}
    assert "invalid JSON" in retry[-1]["content"]


def test_leaky_entries_are_sent_back_not_kept():
    leaky = GOOD.replace("click[medium]", "click[b09qkp7xql]")
    teacher = ScriptedTeacher([leaky, GOOD])
    [draft] = TeacherDistiller(teacher, sampling="s").distill([failed()])
    assert "b09" not in draft.flawed_action
    assert "product id" in teacher.calls[1][0][-1]["content"]


def test_gives_up_cleanly_after_its_retries():
    teacher = ScriptedTeacher(["no json here"] * 3)
    distiller = TeacherDistiller(teacher, TeacherConfig(max_retries=2), sampling="s")
    with pytest.raises(DistillError, match="after 3 attempts.*no JSON object"):
        distiller.distill([failed()])
    assert len(teacher.calls) == 3


def test_batches_episodes_and_retries_only_the_bad_ones():
    teacher = ScriptedTeacher([GOOD, "oops", GOOD])
    drafts = TeacherDistiller(teacher, sampling="s").distill([failed(), failed()])
    assert len(drafts) == 2
    assert [len(c) for c in teacher.calls] == [2, 1]


def test_prompt_comes_from_package_data_and_hides_prices_and_ids():
    conversation = build_conversation(failed(), TeacherConfig())
    assert conversation[0]["role"] == "system" and "JSON" in conversation[0]["content"]
    user = conversation[1]["content"]
    assert "FAILED" in user and "options missed: large" in user
    judge = user.split("judge found")[1]
    assert "$" not in judge and "b09" not in judge.lower()

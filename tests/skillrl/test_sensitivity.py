"""The skill-sensitivity probe: 0 for a policy that ignores its entries, positive for one that
acts on them, and the played decisions are the agent's own."""

from __future__ import annotations

from dataclasses import replace

from runtime_fakes import entry

from memory.types import RetrievedEntry, RetrievedSkills
from skillrl.agents.base import AgentState
from skillrl.agents.llm import LLMAgent
from skillrl.sensitivity import SensitivityProbe, kl_divergence, softmax

PRODUCTS = ["b0aaaaaaaa", "b0bbbbbbbb", "b0cccccccc"]
ACTIONS = ["click[back to search]", "click[next >]", *(f"click[{p}]" for p in PRODUCTS)]


def case_skills(product: str) -> RetrievedSkills:
    case = entry(f"case-{product}", "case", f"A request like this was solved by click[{product}]")
    return RetrievedSkills(cases=[RetrievedEntry(case, 0.9)])


class ScoringPolicy:
    """Scores each candidate; ``copies``: a candidate the prompt's entries name scores high."""

    name = "stub"

    def __init__(self, copies: bool) -> None:
        self.copies = copies

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    def score_continuations(self, conversations, continuations):
        out = []
        for conversation, row in zip(conversations, continuations, strict=True):
            prompt = conversation[1]["content"]
            skills = prompt.split("Skills:")[1] if "Skills:" in prompt else ""
            skills = skills.split("Observation:")[0]
            scores = []
            for position, candidate in enumerate(row):
                named = candidate.removesuffix("</action>") in skills
                scores.append((5.0 if self.copies and named else 0.0) - 0.1 * position)
            out.append(scores)
        return out


class FixedPlacebo:
    def __init__(self, product: str) -> None:
        self.product = product

    def retrieve(self, queries, config=None, *, record=False):
        return [case_skills(self.product) for _ in queries]


def states() -> list[AgentState]:
    return [
        AgentState(
            episode_id=f"e{i}",
            env_id="webshop",
            instruction="i need organic herbal tea, and price lower than 50.00 dollars",
            category="grocery",
            observation="Page 1 [SEP] B0AAAAAAAA [SEP] Tea [SEP] B0BBBBBBBB [SEP] Tea",
            available_actions=list(ACTIONS),
            turn=1,
            skills=case_skills(PRODUCTS[2]),
            info={"page": "results"},
        )
        for i in range(3)
    ]


def probe(copies: bool) -> tuple[SensitivityProbe, list]:
    agent = LLMAgent(ScoringPolicy(copies), constrained=True)
    probe = SensitivityProbe(agent, FixedPlacebo(PRODUCTS[1]))
    return probe, probe.act(states())


def test_a_policy_that_ignores_its_entries_scores_zero():
    sensed, decisions = probe(copies=False)
    figures = sensed.report.overall
    assert figures.turns == 3 and figures.changed_share == 0.0 and figures.mean_kl == 0.0


def test_a_policy_that_acts_on_its_entries_changes_and_diverges():
    sensed, decisions = probe(copies=True)
    assert [d.action for d in decisions] == [f"click[{PRODUCTS[2]}]"] * 3  # its own choice played
    figures = sensed.report.by_page["results"]
    assert figures.turns == 3 and figures.changed_share == 1.0 and figures.mean_kl > 1.0
    assert {t.placebo_action for t in sensed.report.turns} == {f"click[{PRODUCTS[1]}]"}


class Reference:
    """Always does one thing (a stand-in for the scripted expert), and sees every state."""

    def __init__(self, action: str) -> None:
        self.action, self.seen, self.episodes = action, 0, []

    def begin_episode(self, episode_id, reset_info):
        self.episodes.append(episode_id)

    def end_episode(self, episode_id):
        pass

    def act(self, states):
        from skillrl.agents.base import AgentDecision

        self.seen += len(states)
        return [AgentDecision(action=self.action, model_output=self.action) for _ in states]


def test_a_reference_calls_each_changed_turn_a_win_or_a_loss_for_the_entries():
    for right, won, lost in ((PRODUCTS[2], 3, 0), (PRODUCTS[1], 0, 3), (PRODUCTS[0], 0, 0)):
        reference = Reference(f"click[{right}]")
        agent = LLMAgent(ScoringPolicy(copies=True), constrained=True)
        sensed = SensitivityProbe(agent, FixedPlacebo(PRODUCTS[1]), reference=reference)
        sensed.begin_episode("e0", {})
        decisions = sensed.act(states())
        played = [d.action for d in decisions]
        assert played == [f"click[{PRODUCTS[2]}]"] * 3  # the agent's, never the reference's
        figures = sensed.report.overall
        assert (figures.changes_won, figures.changes_lost) == (won, lost)
        assert reference.seen == 3 and reference.episodes == ["e0"]
    ignoring, _ = probe(copies=False)
    assert ignoring.report.overall.changes_won == ignoring.report.overall.changes_lost == 0


def test_kl_of_a_distribution_with_itself_is_zero_and_positive_otherwise():
    p = softmax({"a": 1.0, "b": 0.0})
    assert kl_divergence(p, p) == 0.0
    assert kl_divergence(p, softmax({"a": 0.0, "b": 1.0})) > 0.0


class CaseReader(Reference):
    """A reference that opens the product its entries name (asked again without moving on)."""

    def __init__(self) -> None:
        super().__init__("")
        self.peeked = 0

    def act(self, states):
        from skillrl.agents.base import AgentDecision

        self.seen += len(states)
        return [AgentDecision(action=self.named(s), model_output="") for s in states]

    def peek(self, states):
        from skillrl.agents.base import AgentDecision

        self.peeked += len(states)
        return [AgentDecision(action=self.named(s), model_output="") for s in states]

    @staticmethod
    def named(state) -> str:
        return state.skills.cases[0].entry.title.split("solved by ")[1]


def test_a_reference_that_peeks_says_which_turns_the_entries_decide():
    for copies, followed in ((True, 3), (False, 0)):
        reference = CaseReader()
        agent = LLMAgent(ScoringPolicy(copies=copies), constrained=True)
        sensed = SensitivityProbe(agent, FixedPlacebo(PRODUCTS[1]), reference=reference)
        sensed.begin_episode("e0", {})
        sensed.act(states())
        figures = sensed.report.overall
        assert (figures.reference_asked, figures.reference_changes) == (3, 3)
        assert figures.reference_changes_followed == followed
        assert reference.peeked == 3 and reference.seen == 3
        assert {t.reference_placebo_action for t in sensed.report.turns} == {
            f"click[{PRODUCTS[1]}]"
        }
    # A reference that cannot be asked without moving on is asked nothing more.
    plain = SensitivityProbe(
        LLMAgent(ScoringPolicy(copies=True), constrained=True),
        FixedPlacebo(PRODUCTS[1]),
        reference=Reference(f"click[{PRODUCTS[2]}]"),
    )
    plain.act(states())
    assert plain.report.overall.reference_asked == plain.report.overall.reference_changes == 0


def test_the_expert_peeks_without_moving_on_and_reads_the_entries_it_is_shown():
    from skillrl.agents.expert import ExpertAgent

    goal = {"instruction": "i need organic herbal tea", "attributes": ["organic"], "options": []}
    results = AgentState(
        episode_id="e0",
        env_id="webshop",
        instruction=goal["instruction"],
        category="grocery",
        observation=(
            "Back to Search [SEP] Page 1 (Total results: 2) [SEP] Next > [SEP] B0AAAAAAAA [SEP] "
            "Organic herbal tea [SEP] $5.00 [SEP] B0BBBBBBBB [SEP] Black tea [SEP] $4.00"
        ),
        available_actions=["click[back to search]", "click[next >]", *ACTIONS[2:4]],
        turn=1,
        skills=case_skills(PRODUCTS[1]),
        info={"page": "results", "turn": 1},
    )
    expert = ExpertAgent(max_turns=8)
    expert.begin_episode("e0", {"goal": goal, "instruction": goal["instruction"]})
    without_case = replace(results, skills=RetrievedSkills())
    # Asked twice, with the case and without: each answer as if asked first.
    assert [d.action for d in expert.peek([results])] == [f"click[{PRODUCTS[1]}]"]
    assert [d.action for d in expert.peek([without_case])] == [f"click[{PRODUCTS[0]}]"]
    assert [d.action for d in expert.peek([results])] == [f"click[{PRODUCTS[1]}]"]
    assert [d.action for d in expert.act([results])] == [f"click[{PRODUCTS[1]}]"]

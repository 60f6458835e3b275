"""Deterministic stand-ins for the runtime tests: a tiny shop env, a scripted policy, a bank."""

from __future__ import annotations

import re
from typing import Any

from envs import register
from envs.webshop.agent_adapter import WebShopAgentAdapter
from memory.types import Entry, RetrievedEntry, RetrievedSkills
from skillrl.policies.base import Generation, SamplingConfig, ScoredContinuation

ITEMS = ("red ball", "blue kite", "green yoyo", "ghost toy")
"""Goal i wants ITEMS[i % 4]; the scripted policy cannot handle "ghost toy" (invalid actions)."""


class FakeShopEnv:
    """Search page -> results -> item -> buy; buying the wanted item scores 1."""

    env_id = "fakeshop"

    def __init__(self, max_turns: int = 6) -> None:
        self.max_turns = max_turns
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        options = options or {}
        index = int(options.get("goal_index", seed or 0))
        self.target = ITEMS[index % len(ITEMS)]
        self.page, self.turn, self.item = "search", 0, None
        self.instruction = f"buy the {self.target}"
        self.goal_id = f"fake-{index}"
        self.resets += 1
        return self._obs(), self._info(True)

    def _actions(self) -> list[str]:
        if self.page == "search":
            return ["search[<query>]"]
        if self.page == "results":
            return ["click[back to search]"] + [f"click[{item}]" for item in ITEMS]
        return ["click[back to search]", "click[buy now]"]

    def _obs(self) -> str:
        if self.page == "search":
            return f"WebShop [SEP] Instruction: [SEP] {self.instruction} [SEP] Search"
        if self.page == "results":
            return "Results [SEP] " + " [SEP] ".join(ITEMS)
        return f"Item [SEP] {self.item} [SEP] Buy Now"

    def _info(self, valid: bool, **extra: Any) -> dict[str, Any]:
        return {
            "available_actions": self._actions(),
            "action_valid": valid,
            "success": False,
            "instruction": self.instruction,
            "category": "toys",
            "goal_id": self.goal_id,
            "page": self.page,
            **extra,
        }

    def step(self, action: str):
        self.turn += 1
        valid, reward, terminated = False, 0.0, False
        extra: dict[str, Any] = {}
        match = re.fullmatch(r"(search|click)\[(.*)\]", action)
        if match and match.group(1) == "search" and self.page == "search":
            self.page, valid = "results", True
        elif match and action in self._actions():
            valid, target = True, match.group(2)
            if target == "back to search":
                self.page = "search"
            elif target == "buy now":
                reward = 1.0 if self.item == self.target else 0.0
                terminated = True
                extra = {"success": reward == 1.0, "reward_breakdown": {"reward": reward}}
            else:
                self.page, self.item = "item", target
        truncated = not terminated and self.turn >= self.max_turns
        info = self._info(valid)
        info.update(extra)
        return self._obs(), reward, terminated, truncated, info


# Shop-shaped, so it speaks WebShop's grammar through WebShop's adapter.
register(
    "fakeshop",
    FakeShopEnv,
    "a tiny deterministic shop for runtime tests",
    adapter=WebShopAgentAdapter(),
)


def _task(conversation: list[dict[str, str]]) -> str:
    user = next(m["content"] for m in conversation if m["role"] == "user")
    match = re.search(r"Task: buy the (.+)", user)
    return match.group(1).strip() if match else ""


class ScriptedPolicy:
    """Answers like a model would, from the prompt text alone; counts its batched calls."""

    name = "scripted"

    def __init__(self) -> None:
        self.generate_batches: list[int] = []
        self.score_batches: list[int] = []
        self.conversations: list[list[dict[str, str]]] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, conversations, sampling: SamplingConfig) -> list[Generation]:
        self.generate_batches.append(len(conversations))
        self.conversations.extend(conversations)
        return [self._one(c) for c in conversations]

    def _one(self, conversation) -> Generation:
        target = _task(conversation)
        user = next(m["content"] for m in conversation if m["role"] == "user")
        prefix = conversation[-1]["content"] if conversation[-1]["role"] == "assistant" else ""
        if target == "ghost toy":
            text = "]" if prefix.endswith("search[") else "I am not sure what to do here."
        elif target == "bracket kite" and prefix.endswith("search["):
            text = "[bracket kite]]"  # opens another bracket, as the 135M model sometimes does
        elif prefix.endswith("search["):
            text = f"{target}]"
        elif "Actions: search with key words" in user:
            text = f"<think>look for it</think><action>search[{target}]</action>"
        elif "click[buy now]" in user:
            text = "<think>buy it</think><action>click[buy now]</action>"
        else:
            text = f"<think>open it</think>click[{target.upper()}]"  # lenient: case, no tags
        completion = [ord(ch) % 97 for ch in text]
        return Generation(
            text=text,
            prompt_token_ids=list(range(len(user.split()))),
            completion_token_ids=completion,
            logprobs=[-0.5] * len(completion),
        )

    def score_continuations(self, conversations, continuations):
        detailed = self.score_continuations_detailed(conversations, continuations)
        return [[c.logprob for c in row] for row in detailed]

    def score_continuations_detailed(self, conversations, continuations):
        self.score_batches.append(len(conversations))
        result = []
        for conversation, candidates in zip(conversations, continuations, strict=True):
            target = _task(conversation)
            row = []
            for text in candidates:
                good = ("buy now" in text) or (target and target in text)
                ids = [ord(ch) % 97 for ch in text]
                lps = [-0.1 if good else -3.0] * len(ids)
                row.append(ScoredContinuation(text, sum(lps), [1, 2, 3], ids, lps))
            result.append(row)
        return result


def entry(entry_id: str, kind: str, title: str, principle: str = "do the right thing") -> Entry:
    return Entry(kind=kind, title=title, principle=principle, id=entry_id)


class FakeBank:
    """Records retrieve calls and saved episodes; returns fixed skills per kind."""

    def __init__(self) -> None:
        self.retrieve_batches: list[int] = []
        self.record_flags: list[bool] = []
        self.queries: list[Any] = []
        self.saved: list[Any] = []

    def retrieve(self, queries, config=None, *, record=True):
        self.retrieve_batches.append(len(queries))
        self.record_flags.append(record)
        self.queries.extend(queries)
        return [
            RetrievedSkills(
                general=[RetrievedEntry(entry("g1", "general", "Read the task"), 0.8)],
                task=[RetrievedEntry(entry(f"t-{q.category}", "task", "Pick the option"), 0.7)],
                mistakes=[RetrievedEntry(entry("m1", "mistake", "Do not skip options"), 0.6)],
            )
            for q in queries
        ]

    @property
    def trajectories(self) -> FakeBank:
        """The real bank keeps episodes in ``bank.trajectories``; the fake keeps them itself."""
        return self

    def save_episodes(self, episodes) -> None:
        self.saved.extend(episodes)


class SolverPolicy:
    """A Sokoban stand-in for a model: reads the grid in the prompt, answers the solver's move.

    Free decoding writes ``<think>..</think><action>move</action>``; scoring prefers the
    candidate that starts with the solver's move. It counts its batched calls like
    :class:`ScriptedPolicy`, so the same runtime tests run on Sokoban.
    """

    name = "solver"

    def __init__(self) -> None:
        self.generate_batches: list[int] = []
        self.score_batches: list[int] = []
        self.conversations: list[list[dict[str, str]]] = []

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    @staticmethod
    def move(conversation) -> str:
        from envs.sokoban.room import parse_grid
        from envs.sokoban.solver import solve

        user = next(m["content"] for m in conversation if m["role"] == "user")
        room, state = parse_grid(user)
        solution = solve(room, state)
        return solution.moves[0] if solution is not None and solution.moves else "up"

    def generate(self, conversations, sampling: SamplingConfig) -> list[Generation]:
        self.generate_batches.append(len(conversations))
        self.conversations.extend(conversations)
        out = []
        for conversation in conversations:
            text = f"<think>the solver says so</think><action>{self.move(conversation)}</action>"
            ids = [ord(ch) % 97 for ch in text]
            out.append(Generation(text, [1, 2, 3], ids, [-0.5] * len(ids)))
        return out

    def score_continuations(self, conversations, continuations):
        detailed = self.score_continuations_detailed(conversations, continuations)
        return [[c.logprob for c in row] for row in detailed]

    def score_continuations_detailed(self, conversations, continuations):
        self.score_batches.append(len(conversations))
        self.conversations.extend(conversations)
        result = []
        for conversation, candidates in zip(conversations, continuations, strict=True):
            move = self.move(conversation)
            row = []
            for text in candidates:
                ids = [ord(ch) % 97 for ch in text]
                lps = [-0.1 if text.startswith(move) else -3.0] * len(ids)
                row.append(ScoredContinuation(text, sum(lps), [1, 2, 3], ids, lps))
            result.append(row)
        return result

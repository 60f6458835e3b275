"""WebShop's agent adapter: the shop's prompt, the search/click grammar, scores and play.

Reading is lenient, because small models drift: a bare ``search[...]`` / ``click[...]``
anywhere in the text, any case of the verb, a missing ``]``, and a click whose target differs
from an admissible one only by case or surrounding spaces. A search page is the one free-text
turn: under constrained decoding the model writes only the query, after ``<action>search[``; a
query that shares no word with the task (empty, or a copied placeholder) is replaced by the
task's first words when repair is asked for (greedy decoding), and the turn says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from envs.adapter import ActionRead, Expert
from skillrl_core.errors import ConfigError

SYSTEM_PROMPT = (
    "You are a web shopping agent. Buy the product that best matches the task: search, open a "
    "matching product, click the wanted options, then click buy now. Use the skills given."
)
SEARCH_HINT = "Reply with <action>search[key words]</action> using the product words of the task."

_COMMAND = re.compile(r"\b(search|click)\s*\[([^\[\]]*)\]?", re.IGNORECASE)
_TAG = re.compile(r"</?\w+>")
_WORD = re.compile(r"[a-z0-9]{2,}")
_ID_LIKE = re.compile(r"^(?=.*\d)\S{8,}$")
_RICH_MARKERS = re.compile(r"\[(?:clicked )?button_?\]")
HINT_CHARS = 100
QUERY_WORDS = 12
"""A repaired query is the task's first this-many words."""


def is_search_page(available_actions: Sequence[str]) -> bool:
    """Whether the only admissible action is a free-text search."""
    return bool(available_actions) and all(a.startswith("search[") for a in available_actions)


PAGE_KINDS = ("search", "results", "item", "detail")
"""WebShop's page types: the search box, a results list, a product, a product's detail tab."""


def page_kind(available_actions: Sequence[str]) -> str:
    """Which page (:data:`PAGE_KINDS`) offers ``available_actions``."""
    if is_search_page(available_actions):
        return "search"
    labels = [a[len("click[") : -1] for a in available_actions if a.startswith("click[")]
    if any(_is_product_id(label) for label in labels):
        return "results"
    return "item" if "buy now" in labels else "detail"


class WebShopAgentAdapter:
    """The :class:`envs.adapter.AgentAdapter` of WebShop (and of shop-shaped test doubles)."""

    def system_prompt(self) -> str:
        """Return the shopper's role."""
        return SYSTEM_PROMPT

    def format_text(self, think: bool) -> str:
        """One click in the envelope (the search page adds its own line to the actions)."""
        if think:
            return (
                "Reply with a short thought and exactly one admissible action, like:\n"
                "<think>reason</think><action>click[...]</action>"
            )
        return "Reply with exactly one admissible action, like:\n<action>click[...]</action>"

    def clean_observation(self, observation: str, instruction: str) -> str:
        """Remove the task text the page repeats (it is in the prompt once already)."""
        if instruction and instruction in observation:
            observation = observation.replace(f"Instruction: [SEP] {instruction} [SEP] ", "")
            observation = observation.replace(instruction, "(the task)")
        return observation.strip()

    def actions_text(self, available_actions: Sequence[str], max_actions: int) -> str:
        """List the clickables, or on the search page say what to write."""
        if is_search_page(available_actions):
            return f"Actions: search with key words. {SEARCH_HINT}"
        shown = list(available_actions[:max_actions])
        more = len(available_actions) - len(shown)
        return "Actions: " + ", ".join(shown) + (f" (+{more} more)" if more > 0 else "")

    def read_action(self, text: str, available_actions: Sequence[str]) -> ActionRead | None:
        """Return the first ``search[...]``/``click[...]`` in ``text``, checked against the page."""
        command = _COMMAND.search(text)
        if command is None:
            return None
        verb, argument = command.group(1).lower(), " ".join(command.group(2).split())
        action = f"{verb}[{argument}]"
        if verb == "search":
            if not any(a.startswith("search[") for a in available_actions):
                return ActionRead(action, False, "search is not available on this page")
            if not argument or argument == "<query>":
                return ActionRead(action, False, "empty search query")
            return ActionRead(action, True)
        wanted = f"click[{argument.lower()}]"
        for candidate in available_actions:
            if candidate.lower() == wanted:
                return ActionRead(candidate, True)
        return ActionRead(action, False, f"{action} is not among the admissible actions")

    def is_free_text_turn(self, available_actions: Sequence[str]) -> bool:
        """Return whether this is the search page."""
        return is_search_page(available_actions)

    def free_text_prefix(self) -> str:
        """Return ``search[``: the query follows it."""
        return "search["

    def free_text_stop(self) -> str:
        """Return ``]``: it ends the query."""
        return "]"

    def free_text_action(self, written: str, instruction: str, repair: bool) -> tuple[str, bool]:
        """``search[query]`` from the written query (brackets and tags removed)."""
        # Brackets would break the search[...] syntax (the model sometimes opens another).
        text = _TAG.sub(" ", written.split("]")[0]).replace("[", " ")
        query = " ".join(text.split())
        repaired = repair and not _shares_a_word(query, instruction)
        if repaired:
            # A query with no word of the task (empty, or a copied placeholder, which the 135M
            # model does) cannot find the product: search with the task's words instead.
            query = " ".join(instruction.split()[:QUERY_WORDS])
        return f"search[{query}]", repaired

    def candidates(self, available_actions: Sequence[str]) -> list[str]:
        """Return the admissible clicks."""
        return list(available_actions)

    def episode_score(self, reward: float, terminated: bool, info: Mapping[str, Any]) -> float:
        """Return the purchase's reward in [0, 1]; 0 when nothing was bought."""
        return min(max(float(reward), 0.0), 1.0) if terminated else 0.0

    def episode_success(self, info: Mapping[str, Any]) -> bool:
        """``info["success"]`` (a purchase scoring 1)."""
        return bool(info.get("success", False))

    def split_size(self, split: str, env_config: Mapping[str, Any]) -> int:
        """Goals of ``split`` in the (cached) world of this configuration."""
        from envs.webshop.config import WebShopConfig
        from envs.webshop.goals import SPLITS
        from envs.webshop.world import shared_world

        if split not in SPLITS:
            raise ConfigError(f"split ({split!r}) must be one of {', '.join(SPLITS)}")
        return len(shared_world(WebShopConfig(**env_config)).split(split))

    def categories(self, env_config: Mapping[str, Any]) -> list[str]:
        """WebShop's five product categories."""
        from envs.webshop.categories import CATEGORIES

        return list(CATEGORIES)

    def wanted_values(self, instruction: str) -> tuple[str, ...]:
        """Return the option values the instruction names (``color: navy blue`` -> navy blue)."""
        from envs.webshop.expert import requested_options

        return requested_options(instruction)

    def make_expert(self, max_turns: int) -> Expert | None:
        """Return the scripted shopper (it needs the goal in the reset info)."""
        from envs.webshop.expert import WebShopExpert

        return WebShopExpert(max_turns=max_turns)

    def action_thought(self, action: str) -> str:
        """Return a short reason for an expert action, by what the action does on the page."""
        if action.startswith("search["):
            return "Search with the product words of the task."
        value = action[len("click[") : -1] if action.startswith("click[") else action
        if value == "buy now":
            return "The product and the wanted options match the task, so buy it."
        if value in ("< prev", "back to search"):
            return "This product does not fit the task, so go back."
        if value in ("next >", "< prev page"):
            return "Nothing on this page fits the task; try the next page."
        if value in ("features", "description", "attributes", "reviews"):
            return "Check the product details for the attributes of the task."
        if _is_product_id(value):
            return "Open the product whose title best matches the task."
        return f"Choose the wanted option {value}."

    def expand_typed(self, typed: str, available_actions: Sequence[str]) -> str:
        """Pick by number, click a bare word's button, or search plain text on the search page."""
        text = typed.strip()
        lowered = text.lower()
        if lowered.startswith(("search[", "click[")):
            return text
        if text.isdigit() and 1 <= int(text) <= len(available_actions):
            return available_actions[int(text) - 1]
        if is_search_page(available_actions):
            return f"search[{text}]"
        return f"click[{lowered}]"

    def wants_free_text(self, typed: str, available_actions: Sequence[str]) -> bool:
        """Return whether the search box itself (its number, or ``search``) was picked."""
        if not is_search_page(available_actions):
            return False
        text = typed.strip().lower()
        if text.isdigit() and 1 <= int(text) <= len(available_actions):
            return available_actions[int(text) - 1].startswith("search[")
        return text in ("search", "search[]", "search[<query>]")

    def present_actions(
        self, observation: str, available_actions: Sequence[str]
    ) -> list[tuple[str, str]]:
        """Click labels, product ids with their titles as hints, the search box explained."""
        hints = _hints(observation)
        shown = []
        for action in available_actions:
            if action.startswith("search["):
                shown.append(("search", "(the search box: asks for the words)"))
                continue
            label = action[len("click[") : -1] if action.startswith("click[") else action
            shown.append((label, hints.get(label.lower(), "")))
        return shown

    def play_help(self, available_actions: Sequence[str]) -> str:
        """Say what to type on this page."""
        if is_search_page(available_actions):
            return "type the words to search for (or 1, then the words); q quits"
        return "type a number, or the words of a button (e.g. buy now); q quits"

    def human_env_options(self) -> Mapping[str, Any]:
        """Show a person the ``text_rich`` layout (a text per line, buttons marked).

        The default ``text`` page is every text joined by `` [SEP] `` on one wrapped line; the
        shipped adapter plays ``text_rich`` too, so a person sees at least the model's layout.
        """
        return {"observation_mode": "text_rich"}


def _is_product_id(label: str) -> bool:
    """Tell an ASIN as the pages show it: ten letters and digits, at least one a digit."""
    return len(label) == 10 and label.isalnum() and any(c.isdigit() for c in label)


def _shares_a_word(query: str, instruction: str) -> bool:
    words = set(_WORD.findall(query.lower()))
    return bool(words & set(_WORD.findall(instruction.lower())))


def _hints(observation: str) -> dict[str, str]:
    """Id-like clickables (product ids) with the text that follows them on the page (a title)."""
    if " [SEP] " in observation:
        segments = observation.split(" [SEP] ")
    else:  # text_rich: one text per line, buttons marked
        segments = [_RICH_MARKERS.sub("", line).strip() for line in observation.splitlines()]
        segments = [s for s in segments if s]
    hints = {}
    for text, following in zip(segments, segments[1:], strict=False):
        if _ID_LIKE.match(text.strip()):
            hint = following.strip()
            if len(hint) > HINT_CHARS:
                hint = hint[: HINT_CHARS - 3] + "..."
            hints[text.strip().lower()] = hint
    return hints

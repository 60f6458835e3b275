"""``WebShopEnv``: WebShop's text environment in the Gymnasium shape (see docs/ARCHITECTURE.md).

Behaviour follows ``web_agent_site/envs/web_agent_text_env.py``: ``search[q]`` and ``click[x]``
(argument lowercased; ``x`` must be a clickable of the current page), anything else is a no-op
with reward 0. Departures, both from the skillrl contract: ``search[...]`` is accepted only on
the search page (upstream accepts it anywhere but lists it only there), and a turn limit
truncates the episode. Without reset options, a goal is drawn uniformly from the train split
with ``seed`` (upstream draws from all goals, weighted by attribute rarity).
"""

from __future__ import annotations

import math
import random
from typing import Any

from envs.webshop.config import WebShopConfig
from envs.webshop.data import Product
from envs.webshop.goals import Goal
from envs.webshop.pages import (
    DONE,
    ITEM,
    ITEM_SUB,
    RESULTS,
    SEARCH,
    Clickable,
    Segment,
    Session,
    apply_click,
    clickables,
    done_segments,
    item_segments,
    results_segments,
    search_segments,
    show_results,
    sub_page_segments,
)
from envs.webshop.parse import split_command
from envs.webshop.render import render
from envs.webshop.reward import get_reward
from envs.webshop.world import World, shared_world
from skillrl_core.errors import ConfigError, EnvStateError

SEARCH_ACTION = "search[<query>]"


class WebShopEnv:
    """One WebShop episode at a time; many instances share one catalog and index."""

    env_id = "webshop"

    def __init__(self, config: WebShopConfig | None = None, **overrides: Any) -> None:
        if config is None:
            config = WebShopConfig(**overrides)
        elif overrides:
            raise ConfigError("pass either a WebShopConfig or keyword fields, not both")
        self.config = config
        self.world: World = shared_world(config)
        self.goal: Goal | None = None
        self.goal_index = -1
        self.split = ""
        self.session = Session()
        self.turn = 0
        self.terminated = False
        self.truncated = False
        self.reward = 0.0
        self.breakdown: dict[str, Any] | None = None

    # -- episode control -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode on the goal ``options`` names (else a train goal picked by ``seed``)."""
        self.split, self.goal_index = self._choose_goal(seed, options or {})
        self.goal = self.world.goals[self.goal_index]
        self.session = Session()
        self.turn = 0
        self.terminated = self.truncated = False
        self.reward, self.breakdown = 0.0, None
        info = self._info(action_valid=True)
        info["goal"] = self.goal.public()
        info["split"], info["goal_index"] = self.split, self.goal_index
        return self.observation(), info

    def _choose_goal(self, seed: int | None, options: dict[str, Any]) -> tuple[str, int]:
        unknown = set(options) - {"split", "goal_index", "goal_id"}
        if unknown:
            raise ConfigError(
                f"unknown reset option(s) {sorted(unknown)}; use split/goal_index/goal_id"
            )
        if "goal_id" in options:
            goal_id = str(options["goal_id"])
            if goal_id not in self.world.goal_by_id:
                raise ConfigError(f"no WebShop goal has id {goal_id!r}")
            index = self.world.goal_by_id[goal_id]
            return self._split_of(index), index
        split = str(options.get("split", "train"))
        try:
            indices = self.world.split(split)
        except KeyError:
            raise ConfigError(f"split ({split!r}) must be one of test, eval, train") from None
        if not indices:
            raise ConfigError(
                f"split {split!r} has no goals ({len(self.world.goals)} goals in all)"
            )
        if "goal_index" in options:
            try:
                position = int(options["goal_index"])
            except (TypeError, ValueError):
                value = options["goal_index"]
                raise ConfigError(f"goal_index ({value!r}) must be an integer") from None
            if not 0 <= position < len(indices):
                raise ConfigError(
                    f"goal_index ({position}) out of range for split {split!r} "
                    f"({len(indices)} goals)"
                )
            return split, indices[position]
        return split, random.Random(seed).choice(indices)

    def _split_of(self, index: int) -> str:
        return next(s for s in ("test", "eval", "train") if index in self.world.split(s))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one action; invalid ones are no-ops with reward 0 and ``action_valid=False``."""
        self._require_goal("step()")
        if self.terminated or self.truncated:
            return self.observation(), 0.0, self.terminated, self.truncated, self._info(False)
        valid, bought = self._apply(action)
        self.turn += 1
        reward = 0.0
        if bought:
            reward = self._purchase()
            self.terminated = True
        elif self.turn >= self.config.max_turns:
            self.truncated = True
        info = self._info(action_valid=valid)
        if bought:
            info["reward_breakdown"] = self.breakdown
        return self.observation(), reward, self.terminated, self.truncated, info

    def _apply(self, action: str) -> tuple[bool, bool]:
        parsed = split_command(action)
        if parsed.name == "search" and parsed.arg and self.session.page == SEARCH:
            self.session.keywords = parsed.arg
            self.session.results = self.world.index.search(parsed.arg)
            show_results(self.session, 1)
            return True, False
        if parsed.name == "click" and parsed.arg is not None:
            found = self._clickables()
            if parsed.arg in found and parsed.arg != "search":
                return True, apply_click(self.session, parsed.arg, found[parsed.arg])
        return False, False

    def _require_goal(self, what: str) -> Goal:
        """Return the episode's goal; using the env before ``reset()`` is a programming error."""
        if self.goal is None:
            raise EnvStateError(f"call reset() before {what}")
        return self.goal

    def _purchase(self) -> float:
        goal = self._require_goal("buying")
        asin = self.session.asin
        if asin is None:  # Buy Now is only clickable on an item page
            raise EnvStateError("Buy Now was applied with no product open")
        product = self.world.catalog.by_asin[asin]
        result = get_reward(
            product, goal, self.world.catalog.prices[asin], dict(self.session.options)
        )
        self.reward, self.breakdown = result.reward, result.breakdown
        return result.reward

    # -- what the agent sees ---------------------------------------------------------------
    def _product(self) -> Product | None:
        asin = self.session.asin
        return self.world.catalog.by_asin[asin] if asin is not None else None

    def _clickables(self) -> dict[str, Clickable]:
        return clickables(self.session, self._product(), self.config.show_attrs)

    def segments(self) -> list[Segment]:
        """Return the current page as segments (for renderers other than the two text modes)."""
        instruction = self._require_goal("segments()").instruction_text
        page = self.session.page
        if page == RESULTS:
            return results_segments(self.session, instruction, self.world.catalog.by_asin)
        if page == ITEM:
            return item_segments(self.session, instruction, self._product(), self.config.show_attrs)
        if page == ITEM_SUB:
            return sub_page_segments(self.session, instruction, self._product())
        if page == DONE:
            return done_segments(self.reward)
        return search_segments(instruction)

    def observation(self) -> str:
        """Render the current page in the configured observation mode."""
        return render(self.segments(), self.config.observation_mode)

    def available_actions(self) -> list[str]:
        """``["search[<query>]"]`` on the search page, else ``click[...]`` for every clickable."""
        if self.terminated or self.truncated:
            return []
        if self.session.page == SEARCH:
            return [SEARCH_ACTION]
        return [f"click[{text}]" for text in self._clickables()]

    def _info(self, action_valid: bool) -> dict[str, Any]:
        goal = self._require_goal("_info()")
        return {
            "available_actions": self.available_actions(),
            "action_valid": action_valid,
            "success": self.terminated and math.isclose(self.reward, 1.0),
            "instruction": goal.instruction_text,
            "category": goal.category,
            "goal_id": goal.goal_id,
            "page": self.session.page,
            "turn": self.turn,
        }

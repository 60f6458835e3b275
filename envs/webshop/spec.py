"""WebShop's :class:`envs.spec.EnvSpec` (registered by :mod:`envs.registry`)."""

from __future__ import annotations

from typing import Any

from envs.spec import EnvSpec
from envs.webshop.agent_adapter import WebShopAgentAdapter
from envs.webshop.categories import SKILLRL_CATEGORIES
from envs.webshop.config import WebShopConfig
from envs.webshop.distill_adapter import WebShopDistillAdapter
from envs.webshop.env import WebShopEnv


def make_webshop(**config: Any) -> WebShopEnv:
    """Build a :class:`WebShopEnv` from :class:`WebShopConfig` fields."""
    return WebShopEnv(WebShopConfig(**config))


SPEC = EnvSpec(
    "webshop",
    make_webshop,
    "WebShop: search a product catalog, pick options, buy what the instruction asks for.",
    config_class=WebShopConfig,
    adapter=WebShopAgentAdapter(),
    distill_adapter=WebShopDistillAdapter(),
    skillrl_categories=SKILLRL_CATEGORIES,
)

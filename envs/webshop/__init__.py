"""WebShop (Yao et al. 2022) in pure Python: ``envs.make("webshop", **WebShopConfig fields)``."""

from __future__ import annotations

from typing import Any

from envs.registry import register
from envs.webshop.agent import WebShopAgentAdapter
from envs.webshop.categories import SKILLRL_CATEGORIES
from envs.webshop.config import WebShopConfig
from envs.webshop.distill import WebShopDistillAdapter
from envs.webshop.env import WebShopEnv


def make_webshop(**config: Any) -> WebShopEnv:
    """Build a :class:`WebShopEnv` from :class:`WebShopConfig` fields."""
    return WebShopEnv(WebShopConfig(**config))


register(
    "webshop",
    make_webshop,
    "WebShop: search a product catalog, pick options, buy what the instruction asks for.",
    config_class=WebShopConfig,
    skillrl_categories=SKILLRL_CATEGORIES,
    adapter=WebShopAgentAdapter(),
    distill_adapter=WebShopDistillAdapter(),
)

__all__ = ["WebShopAgentAdapter", "WebShopConfig", "WebShopEnv", "make_webshop"]

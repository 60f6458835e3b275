"""WebShop (Yao et al. 2022) in pure Python: ``envs.make("webshop", **WebShopConfig fields)``.

Its :class:`envs.spec.EnvSpec` is ``envs.webshop.spec.SPEC``.
"""

from __future__ import annotations

from envs.webshop.agent_adapter import WebShopAgentAdapter
from envs.webshop.config import WebShopConfig
from envs.webshop.env import WebShopEnv

__all__ = ["WebShopAgentAdapter", "WebShopConfig", "WebShopEnv"]

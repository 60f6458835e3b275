"""WebShop's task categories, and how SkillRL's skill-bank categories map onto them.

SkillRL's published WebShop bank files its task skills under its own product categories
(``apparel``, ``footwear``, ...), which never equal this environment's five (those of the
original WebShop: fashion, beauty, electronics, furniture, grocery), so imported task skills
would never be retrieved. ``skillrl skills import`` maps them through :data:`SKILLRL_CATEGORIES`
by default (``--category-map`` / ``--map-category`` replace or extend it); each imported entry
keeps its SkillRL category in its ``source`` and export restores it.
"""

from __future__ import annotations

CATEGORIES: tuple[str, ...] = ("beauty", "electronics", "fashion", "furniture", "grocery")
"""The task categories of WebShop goals (``info["category"]``)."""

SKILLRL_CATEGORIES: dict[str, str] = {
    # Clothing, shoes and bags are all WebShop "fashion" products.
    "apparel": "fashion",
    "footwear": "fashion",
    "accessories": "fashion",
    # Pillows, rugs and furniture sets: WebShop's "furniture" is its home category.
    "home_decor": "furniture",
    "electronics": "electronics",
    "beauty_health": "beauty",
    # SkillRL names no food category; its "other" skills are category-free shopping rules
    # (embed every constraint, confirm the category, set variants), so they serve the one
    # WebShop category that no SkillRL category covers.
    "other": "grocery",
}
"""SkillRL category -> WebShop category (the default table of ``skillrl skills import``)."""

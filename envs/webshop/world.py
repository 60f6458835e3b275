"""The data every WebShop env of one configuration shares: catalog, search index, goals.

Built once per data configuration and cached, so that a batch of 64 envs costs one index.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from envs.webshop.config import WebShopConfig
from envs.webshop.data import (
    EMBEDDED_ATTRIBUTES,
    EMBEDDED_PRODUCTS,
    Catalog,
    find_data_files,
    load_catalog,
)
from envs.webshop.goals import Goal, build_goals, split_bounds
from envs.webshop.search import SearchIndex
from skillrl_core.errors import DataFileError

logger = logging.getLogger(__name__)


@dataclass
class World:
    """Shared, read-only state of a WebShop configuration."""

    catalog: Catalog
    index: SearchIndex
    goals: list[Goal]
    goal_by_id: dict[str, int]

    def split(self, name: str) -> range:
        """Goal indices of ``test`` (0-499), ``eval`` (500-1499) or ``train`` (1500-)."""
        return split_bounds(name, len(self.goals))


def shared_world(config: WebShopConfig) -> World:
    """Return the (cached) world for ``config``'s data fields."""
    return _build_world(config.data_key)


@functools.lru_cache(maxsize=4)
def _build_world(key: tuple[object, ...]) -> World:
    data_dir, products_file, attributes_file, num_products, goal_source, seed, shuffle = key
    human_path = None
    if data_dir is None:
        products, attributes = EMBEDDED_PRODUCTS, EMBEDDED_ATTRIBUTES
    else:
        products, attributes, human_path = find_data_files(
            Path(str(data_dir)), products_file, attributes_file
        )
    use_human = goal_source == "human" or (goal_source == "auto" and human_path is not None)
    if goal_source == "human" and human_path is None:
        raise DataFileError(f"goals='human' needs items_human_ins.json in {data_dir or 'the data'}")
    catalog = load_catalog(
        products, attributes, human_path=human_path, num_products=num_products, seed=seed
    )
    goals = build_goals(catalog, human=use_human, seed=seed, shuffle_seed=shuffle)
    index = SearchIndex.from_products(catalog.products)
    logger.info("webshop: %d products, %d goals", len(catalog.products), len(goals))
    goal_by_id: dict[str, int] = {}
    for i, goal in enumerate(goals):
        goal_by_id.setdefault(goal.goal_id, i)
    return World(catalog=catalog, index=index, goals=goals, goal_by_id=goal_by_id)

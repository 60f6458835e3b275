"""``WebShopConfig``: every knob of the WebShop environment, validated on construction."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from skillrl_core.errors import ConfigError
from skillrl_core.validation import check_finite_fields

OBSERVATION_MODES = ("text", "text_rich")
GOAL_SOURCES = ("auto", "synthetic", "human")


@dataclass(frozen=True)
class WebShopConfig:
    """Configuration of :class:`envs.webshop.env.WebShopEnv` (hashable: it keys the data cache)."""

    data_dir: Path | str | None = None
    """Folder holding real WebShop files (``items_shuffle*.json``, ``items_ins_v2*.json``,
    optional ``items_human_ins.json``); ``None`` uses the embedded generated catalog."""
    products_file: str | None = None
    """Name of the product file in ``data_dir`` (needed when several ``items_shuffle*.json``)."""
    attributes_file: str | None = None
    """Name of the attribute file in ``data_dir`` (needed when several ``items_ins_v2*.json``)."""
    num_products: int | None = None
    """Keep only the first N product records (the original's ``num_products``); ``None``: all."""
    goals: str = "auto"
    """Goal source: ``synthetic`` (from instructions + option combinations), ``human`` (from
    ``items_human_ins.json``), or ``auto`` (human when that file is present, else synthetic)."""
    observation_mode: str = "text"
    """``text`` (`` [SEP] ``-joined visible texts) or ``text_rich`` (``[button] X [button_]``)."""
    max_turns: int = 15
    """Turn limit; reaching it without a purchase ends the episode with ``truncated=True``."""
    show_attrs: bool = False
    """Show the ``Attributes`` button on item pages (the original's ``show_attrs``)."""
    data_seed: int = 0
    """Seed for product prices drawn from price ranges and for goals' price upper bounds."""
    shuffle_seed: int = 233
    """Seed of the goal shuffle that fixes the splits (the original uses 233)."""

    def __post_init__(self) -> None:
        check_finite_fields(self)
        if self.observation_mode not in OBSERVATION_MODES:
            raise ConfigError(
                f"observation_mode ({self.observation_mode!r}) must be one of {OBSERVATION_MODES}"
            )
        if self.goals not in GOAL_SOURCES:
            raise ConfigError(f"goals ({self.goals!r}) must be one of {GOAL_SOURCES}")
        if self.max_turns < 1:
            raise ConfigError(f"max_turns ({self.max_turns}) must be at least 1")
        if self.num_products is not None and self.num_products < 1:
            raise ConfigError(f"num_products ({self.num_products}) must be positive or None")
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", Path(self.data_dir).expanduser())
        elif self.products_file or self.attributes_file:
            raise ConfigError("products_file/attributes_file need data_dir to be set")

    @property
    def data_key(self) -> tuple[object, ...]:
        """The fields that decide the shared data (catalog, index, goals), for caching."""
        return (
            str(self.data_dir) if self.data_dir else None,
            self.products_file,
            self.attributes_file,
            self.num_products,
            self.goals,
            self.data_seed,
            self.shuffle_seed,
        )

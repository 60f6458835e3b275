"""The category table of ``skillrl skills import``: the env's default, a file, or OLD=NEW pairs.

A SkillRL bank files task skills under SkillRL's categories; the import maps them to the
environment's (``memory.skillrl_format.import_skillrl``). The default table comes with the
environment (``envs.skillrl_categories``); ``--category-map FILE`` replaces it and
``--map-category OLD=NEW`` adds to or overrides whichever table is in use.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from skillrl_core.errors import ConfigError, DataFileError


def parse_category_pair(text: str) -> tuple[str, str]:
    """Split ``OLD=NEW`` (surrounding spaces ignored); anything else raises ConfigError."""
    old, sep, new = text.partition("=")
    old, new = old.strip(), new.strip()
    if not sep or not old or not new or "=" in new:
        raise ConfigError(f"--map-category {text!r} must be OLD=NEW (e.g. apparel=fashion)")
    return old, new


def category_map_from(data: Any, where: str) -> dict[str, str]:
    """Validate parsed file content as a mapping of category names (None: an empty table)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise DataFileError(f"{where}: expected a mapping of SkillRL category: env category")
    table: dict[str, str] = {}
    for old, new in data.items():
        names = (old, new)
        if not all(isinstance(name, str) and name.strip() for name in names):
            raise DataFileError(
                f"{where}: {old!r}: {new!r} is not a pair of non-empty category names"
            )
        table[old.strip()] = new.strip()
    return table


def load_category_map(path: Path) -> dict[str, str]:
    """Read a YAML (or JSON) mapping ``skillrl_category: env_category`` from ``path``."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise DataFileError(f"cannot read the category map {path}: {e}") from e
    return category_map_from(data, str(path))


def category_map_for(env_id: str, path: Path | None, pairs: Iterable[str]) -> dict[str, str]:
    """Return the table an import uses: ``path``'s or ``env_id``'s default, then ``pairs``."""
    if path is not None:
        table = load_category_map(path)
    else:
        import envs

        table = envs.skillrl_categories(env_id)
    table.update(parse_category_pair(pair) for pair in pairs)
    return table

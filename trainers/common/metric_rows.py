"""A metrics section as flat row keys, and back: the file form both trainers' metrics share.

A cycle's (:mod:`trainers.cycle.cycle_metrics`) and a cold-start round's
(:mod:`trainers.cold_start.round_metrics`) figures are dataclass sections written into one flat
row of ``metrics.jsonl`` as ``<section>.<field>`` keys. A section reads back only when every
field without a default is in the row: a row from before a field existed, or a phase that did
not run, leaves the section absent rather than half-filled.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, fields
from typing import Any


def section_keys(prefix: str, section: Any, *, drop_none: bool = False) -> dict[str, Any]:
    """Return ``section``'s fields as ``prefix.field`` row keys (``drop_none``: omit None ones)."""
    given = asdict(section).items()
    return {f"{prefix}.{k}": v for k, v in given if not (drop_none and v is None)}


def read_section(kind: type, prefix: str, row: dict[str, Any]) -> Any:
    """Return a ``kind`` read from the row's ``prefix.*`` keys (None: a required one is missing)."""
    given = {f.name: row[f"{prefix}.{f.name}"] for f in fields(kind) if f"{prefix}.{f.name}" in row}
    required = {f.name for f in fields(kind) if f.default is MISSING}
    return kind(**given) if required <= given.keys() else None

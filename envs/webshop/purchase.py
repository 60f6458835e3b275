"""``WebShopPurchase``: the purchase reward's breakdown as a typed record, with ``explain()``.

:func:`envs.webshop.reward.get_reward` writes the breakdown as JSON-able data (it is stored on
every episode record); :meth:`WebShopPurchase.from_dict` reads it back in exactly one place, so
that nothing else walks the dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value or ())


@dataclass(frozen=True)
class WebShopPurchase:
    """What the judge found about one purchase (see :mod:`envs.webshop.reward`)."""

    reward: float = 0.0
    r_type: float = 1.0
    """Type reward: 1.0 when the product is the requested kind, lower when not."""
    attributes_matched: tuple[str, ...] = ()
    attributes_missed: tuple[str, ...] = ()
    options_wanted: tuple[str, ...] = ()
    options_matched: tuple[str, ...] = ()
    options_missed: tuple[str, ...] = ()
    options_chosen: dict[str, str] = field(default_factory=dict)
    """Option name -> value clicked before buying."""
    price_ok: bool = True
    price_upper: float | None = None
    """The instruction's price bound (None when the goal has none)."""
    paid: float | None = None
    purchased_id: str = ""
    purchased_title: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WebShopPurchase:
        """Read ``get_reward``'s breakdown (missing parts take the defaults)."""
        options = data.get("options") or {}
        price = data.get("price") or {}
        goal = data.get("goal") or {}
        purchased = data.get("purchased") or {}
        attributes = data.get("attributes") or {}
        upper = goal.get("price_upper", price.get("upper_bound"))
        paid = price.get("paid", purchased.get("price"))
        return cls(
            reward=float(data.get("reward", 0.0)),
            r_type=float(data.get("r_type", 1.0)),
            attributes_matched=_strings(attributes.get("matched")),
            attributes_missed=_strings(attributes.get("missed")),
            options_wanted=_strings(options.get("wanted")),
            options_matched=_strings(options.get("matched")),
            options_missed=_strings(options.get("missed")),
            options_chosen={str(k): str(v) for k, v in (options.get("chosen") or {}).items()},
            price_ok=bool(price.get("ok", True)),
            price_upper=None if upper is None else float(upper),
            paid=None if paid is None else float(paid),
            purchased_id=str(purchased.get("asin", "")),
            purchased_title=str(purchased.get("title", "")),
        )

    @property
    def type_matched(self) -> bool:
        """Whether the product was the requested kind."""
        return self.r_type >= 1.0

    def explain(self) -> str:
        """Describe the judge's findings as lines, without ids or prices a reader could copy."""
        chosen = ", ".join(f"{k}={v}" for k, v in self.options_chosen.items()) or "none"
        return "\n".join(
            [
                f"- product type matched: {'yes' if self.type_matched else 'no'}",
                f"- options asked for: {', '.join(self.options_wanted) or 'none'}",
                f"- options chosen: {chosen}",
                f"- options missed: {', '.join(self.options_missed) or 'none'}",
                f"- attributes missed: {', '.join(self.attributes_missed) or 'none'}",
                f"- price within the bound: {'yes' if self.price_ok else 'no'}",
            ]
        )

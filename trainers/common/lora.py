"""The shape of a LoRA adapter, declared once for the two trainers that train one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skillrl_core.errors import ConfigError
from skillrl_core.option_fields import option
from skillrl_core.validation import check_finite_fields, check_number


@dataclass
class LoraSettings:
    """The shape of a LoRA adapter (peft's ``LoraConfig``): one declaration for every trainer.

    :class:`trainers.update.config.GRPOConfig` and
    :class:`trainers.cold_start.sft_config.ColdStartConfig` both train
    adapters, so both take these fields from here; a field keeps its name in their options and saved
    ``config.json`` files. (As a base dataclass, its fields come first in theirs.)
    """

    lora_r: int = option(16, help="LoRA rank.", low=1)
    lora_alpha: int = 32
    """LoRA scaling alpha (``skillrl train`` and ``skillrl sft`` set twice the rank)."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    """Module names that get LoRA adapters."""

    def __post_init__(self) -> None:
        # A subclass's __post_init__ calls this first: every field of the subclass gets checked.
        check_finite_fields(self)  # and the bounds and choices each option declares
        check_number("lora_dropout", self.lora_dropout, low=0.0, high=1.0, high_open=True)


def top_layers(model: Any, count: int | None) -> list[int] | None:
    """Return the indices of the top ``count`` decoder layers of ``model`` (None: all of them).

    peft's ``layers_to_transform`` takes the indices; a count larger than the model is refused.
    """
    if count is None:
        return None
    total = int(getattr(model.config, "num_hidden_layers", 0))
    if count > total:
        raise ConfigError(f"lora_layers ({count}) exceeds the model's {total} decoder layers")
    return list(range(total - count, total))

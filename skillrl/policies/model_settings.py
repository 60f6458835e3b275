"""The run settings a trained model carries, and the adapters shipped with the package.

A policy is trained under settings that its prompts depend on: whether each turn's prompt holds
retrieved skills, the prompt budget, constrained or free decoding. Played under others, the same
weights see prompts they were never trained on. So a cold-start checkpoint or adapter folder
holds ``skillrl.json`` (:class:`ModelSettings`), and ``skillrl run`` / ``skillrl eval`` use it
for every option the user left at its default.

The package ships the best cold-started WebShop policy as a LoRA adapter
(``skillrl/adapters/<env>/``: peft's ``adapter_config.json`` and ``adapter_model.safetensors``
over the embedded SmolLM2-135M-Instruct, plus ``skillrl.json`` with the command and figures that
made it); :func:`shipped_adapter` finds it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from skillrl_core.errors import ModelLoadError
from skillrl_core.files import atomic_write_text
from skillrl_core.validation import check_finite_fields

SETTINGS_FILE = "skillrl.json"
"""The settings file inside a checkpoint or adapter folder."""
ADAPTER_CONFIG = "adapter_config.json"
"""peft's file that marks a folder as a LoRA adapter."""
SHIPPED_ADAPTERS = Path(__file__).resolve().parent.parent / "adapters"
"""Where the package keeps its trained adapters, one folder per environment id."""


KIND_NAMES = {
    str: "a string",
    bool: "true or false",
    int: "an integer",
    float: "a number",
    dict: "an object",
}
"""How a refusal names each JSON type of ``skillrl.json``'s fields."""


@dataclass
class ModelSettings:
    """How a trained model was trained, so that it is played the same way."""

    env_id: str
    """Environment it was trained on."""
    skills: bool
    """Its prompts held the skills retrieved at each turn."""
    max_prompt_tokens: int
    """Prompt budget it was trained at."""
    constrained: bool = True
    """Trained on the constrained agent's targets (search words; scored clicks)."""
    temperature: float = 0.0
    """Decoding temperature it is meant to be played at (0: greedy)."""
    env_options: dict[str, Any] = field(default_factory=dict)
    """Environment options its episodes ran under (what the pages show, say); the turn cap is
    not one of them."""
    recipe: str = ""
    """The command that made it."""
    figures: dict[str, Any] = field(default_factory=dict)
    """What it measured when it was made (success on test goals, with its interval...)."""

    def save(self, folder: Path) -> Path:
        """Write ``skillrl.json`` into ``folder``; return its path."""
        path = Path(folder) / SETTINGS_FILE
        # Atomic: a checkpoint's settings are rewritten in place when its test figures come in.
        atomic_write_text(path, json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> ModelSettings | None:
        """Read ``folder``'s settings (None: not a folder, or none recorded there).

        A settings file that cannot be read fails with ModelLoadError naming it.
        """
        path = Path(folder).expanduser() / SETTINGS_FILE
        if not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError(f"it must hold a JSON object, not a {type(data).__name__}")
            known = {f.name for f in fields(cls)}
            required = [
                f.name
                for f in fields(cls)
                if f.default is MISSING and f.default_factory is MISSING and f.name not in data
            ]
            if required:
                raise ValueError(f"it lacks the key(s) {', '.join(map(repr, required))}")
            return cls(**{k: v for k, v in data.items() if k in known})
        except (OSError, ValueError, TypeError) as error:
            raise ModelLoadError(f"model settings {path} cannot be read: {error}") from error

    def __post_init__(self) -> None:
        """Check each field's type (a hand-written file reaches the commands through here)."""
        kinds: dict[str, tuple[type, ...]] = {
            "env_id": (str,),
            "skills": (bool,),
            "max_prompt_tokens": (int,),
            "constrained": (bool,),
            "temperature": (int, float),
            "env_options": (dict,),
            "recipe": (str,),
            "figures": (dict,),
        }
        for name, kind in kinds.items():
            value = getattr(self, name)
            wrong_bool = isinstance(value, bool) and bool not in kind
            if wrong_bool or not isinstance(value, kind):
                words = "a number" if float in kind else KIND_NAMES[kind[0]]
                raise ValueError(f"{name!r} ({value!r}) must be {words}")
        if self.max_prompt_tokens < 1:
            raise ValueError(f"'max_prompt_tokens' ({self.max_prompt_tokens}) must be >= 1")
        if not all(isinstance(key, str) for key in self.env_options):
            raise ValueError("'env_options' must map option names to values")
        check_finite_fields(self)  # a temperature of nan or inf

    def describe(self) -> str:
        """One line for the screen: the settings a run takes from the model."""
        skills = "skills in every prompt" if self.skills else "no skills"
        decoding = "constrained" if self.constrained else "free"
        options = "".join(f", {key}={value}" for key, value in sorted(self.env_options.items()))
        return f"{skills}, {self.max_prompt_tokens}-token prompts, {decoding} decoding{options}"


def is_adapter(folder: str | Path) -> bool:
    """Whether ``folder`` is a LoRA adapter (peft's ``adapter_config.json``)."""
    return (Path(folder).expanduser() / ADAPTER_CONFIG).is_file()


BASE_ADAPTER_FILE = "base_adapter.json"
"""Beside an adapter trained over another adapter: that adapter's weights' digest, so a load
onto a base adapter that changed since (a newer package's shipped one) is refused."""
ADAPTER_SAFETENSORS = "adapter_model.safetensors"


def adapter_digest(folder: str | Path) -> str:
    """Return the SHA-256 of an adapter folder's weights file (hex)."""
    digest = hashlib.sha256()
    with (Path(folder).expanduser() / ADAPTER_SAFETENSORS).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record_base_adapter(folder: Path, base: str) -> None:
    """Write :data:`BASE_ADAPTER_FILE` into ``folder`` when ``base`` is an adapter folder."""
    if not is_adapter(base) or not (Path(base).expanduser() / ADAPTER_SAFETENSORS).is_file():
        return
    record = {"base": str(base), "sha256": adapter_digest(base)}
    atomic_write_text(Path(folder) / BASE_ADAPTER_FILE, json.dumps(record, indent=2) + "\n")


def check_base_adapter(folder: str | Path, base: str | Path) -> None:
    """Refuse to load ``folder``'s adapter onto ``base`` when base's weights changed since.

    ModelLoadError names both. Nothing to check when ``folder`` records no base adapter.
    """
    path = Path(folder).expanduser() / BASE_ADAPTER_FILE
    if not path.is_file() or not is_adapter(base):
        return
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ModelLoadError(f"{path} is damaged: {error}") from error
    if adapter_digest(base) != recorded:
        raise ModelLoadError(
            f"the adapter {folder} was trained over the adapter {base} as it was then, and that "
            "adapter's weights have changed since (a newer skillrl ships another one?): loaded "
            "onto it, it would be another model. Start again from the new one, or keep the old "
            "adapter folder and point adapter_config.json's base_model_name_or_path at it"
        )


def shipped_adapter(env_id: str) -> Path | None:
    """Return the package's trained adapter for ``env_id`` (None: none ships for it)."""
    folder = SHIPPED_ADAPTERS / env_id
    return folder if is_adapter(folder) else None

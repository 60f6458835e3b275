"""The README's "From Python" example runs as written, with today's library.

Only the model is swapped: the example loads the embedded SmolLM2 (``model="embedded"``), and the
test hands it a tiny checkpoint of the same shape instead, so the example runs in seconds.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "trainers"))


def readme_python_example() -> str:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## From Python\n")[1]
    return section.split("```python\n")[1].split("```")[0]


def readme_training_example() -> str:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## From Python\n")[1]
    return section.split("```python\n")[2].split("```")[0]


def test_the_training_example_builds_the_settings_skillrl_train_would(tmp_path, monkeypatch):
    """The lines before ``train(settings)`` run; tests/skillrl_cli/test_library.py trains."""
    from skillrl_cli.library import TrainSettings

    monkeypatch.chdir(tmp_path)
    code = readme_training_example().split("result = train(")[0]
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102
    settings = scope["settings"]
    assert isinstance(settings, TrainSettings) and scope["train"].__name__ == "train"
    assert settings.cycle.env_id == "sokoban" and settings.grpo.use_peft
    assert settings.policy.workspace == tmp_path / ".skillrl" and not settings.resume


def test_every_name_the_example_imports_exists():
    imports = [line for line in readme_python_example().splitlines() if "import " in line]
    assert len(imports) >= 5
    exec("\n".join(imports), {})  # noqa: S102  (an ImportError names the missing one)


@pytest.mark.slow  # about 10 s: four expert and four model episodes, the bank opened
def test_the_from_python_example_plays_and_evaluates(tmp_path, monkeypatch, embedder, capsys):
    from tiny_checkpoint import write_tiny_checkpoint

    import skillrl.policies

    tiny = str(write_tiny_checkpoint(tmp_path / "tiny"))
    real_load = skillrl.policies.load_policy
    asked = []

    def load_tiny(config, *args, **kwargs):
        asked.append(config.model)
        return real_load(dataclasses.replace(config, model=tiny), *args, **kwargs)

    monkeypatch.setattr(skillrl.policies, "load_policy", load_tiny)
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    exec(compile(readme_python_example(), "README.md", "exec"), scope)  # noqa: S102

    assert asked == ["embedded"]
    assert [r.success for r in scope["records"]] == [True] * 4  # the expert solves them
    result = scope["result"]
    assert result.greedy.episodes == 4 and 0.0 <= result.greedy.success_rate <= 1.0
    assert result.skills  # the bank was opened and handed to the runner
    rate, interval = capsys.readouterr().out.split(" ", 1)
    assert float(rate) == result.greedy.success_rate and "(" in interval
    assert (tmp_path / ".skillrl").is_dir()  # the bank lives in the workspace it named

"""A rollout with skills off runs without the SQL stack (SQLAlchemy, Alembic) ever imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import memory

ROOT = Path(__file__).resolve().parents[2]

PLAY = """
import json, sys
from skillrl.agents.expert import ExpertAgent
from skillrl.rollout import EpisodeStart, RolloutConfig, RolloutEngine
from memory import BankConfig, RetrievalConfig, RetrievalQuery
engine = RolloutEngine(ExpertAgent(), config=RolloutConfig(max_turns=15))
records = engine.run([EpisodeStart("webshop", "test", i, seed=i) for i in range(2)])
print(json.dumps({
    "turns": [r.num_turns for r in records],
    "skills": [r.skills_enabled for r in records],
    "loaded": sorted(m for m in ("sqlalchemy", "alembic") if m in sys.modules),
}))
"""


def test_rollout_with_skills_off_never_imports_sqlalchemy_or_alembic():
    done = subprocess.run(
        [sys.executable, "-c", PLAY], cwd=ROOT, capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(turns >= 1 for turns in result["turns"]) and len(result["turns"]) == 2
    assert result["skills"] == [False, False]
    assert result["loaded"] == []


def test_skill_bank_is_still_importable_from_the_package():
    from memory.bank import SkillBank

    assert memory.SkillBank is SkillBank
    assert "SkillBank" in memory.__all__


def test_unknown_attribute_of_the_package_raises_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchThing"):
        memory.NoSuchThing  # noqa: B018

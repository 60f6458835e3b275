"""The CLI tests use the layers' test helpers; their fixtures come from ``tests/conftest.py``."""

from __future__ import annotations

import sys
from pathlib import Path

# A tiny checkpoint and a scripted policy (trainers), sample bank entries (memory), sample
# episodes and paired-run fakes (the distiller's), vLLM's LoRA endpoints (skillrl).
for helpers in ("trainers", "memory", "skillrl/distill", "skillrl"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / helpers))

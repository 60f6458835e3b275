"""The goal splits every layer agrees on: what trains, and what is only ever measured.

An environment may have more splits (WebShop's ``eval`` holds validation goals); these two have a
meaning the runtime and the trainers enforce.
"""

from __future__ import annotations

TRAIN_SPLIT = "train"
"""Goals a policy or the bank may learn from; the only split whose episodes count towards the
bank entries' usage statistics by default."""
TEST_SPLIT = "test"
"""Held-out goals: evaluated, never trained on, never evolved from."""

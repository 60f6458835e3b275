"""Fixtures shared by the trainer tests."""

from __future__ import annotations

import pytest

from trainers.common import tree_forward


@pytest.fixture
def tree_calls(monkeypatch):
    """How many batches ran as a prefix tree, and how many positions those trees held."""
    calls: list[int] = []
    real = tree_forward.tree_logits

    def counting(model, tree, wanted):
        calls.append(tree.num_positions)
        return real(model, tree, wanted)

    monkeypatch.setattr(tree_forward, "tree_logits", counting)
    return calls

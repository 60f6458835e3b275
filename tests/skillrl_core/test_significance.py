"""The exact McNemar (sign) test that evaluation and the paired utility of entries share."""

from __future__ import annotations

import pytest

from skillrl_core.errors import ConfigError
from skillrl_core.significance import mcnemar_exact


def test_mcnemar_by_hand():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)  # 5 goals all one way: 2 * (1/2)^5
    assert mcnemar_exact(3, 4) == 1.0
    assert mcnemar_exact(1, 9) == pytest.approx(2 * 11 / 1024)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)


def test_negative_counts_are_refused():
    with pytest.raises(ConfigError, match="lost=-1"):
        mcnemar_exact(-1, 2)

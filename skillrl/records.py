"""Moved to :mod:`skillrl_core.records` (the bottom layer); kept so old imports still work."""

from skillrl_core.records import *  # noqa: F403

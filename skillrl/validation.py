"""Moved to :mod:`skillrl_core.validation` (the bottom layer); kept so old imports still work."""

from skillrl_core.validation import *  # noqa: F403

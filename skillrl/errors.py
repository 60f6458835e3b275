"""Moved to :mod:`skillrl_core.errors` (the bottom layer); kept so old imports still work."""

from skillrl_core.errors import *  # noqa: F403

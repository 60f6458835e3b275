"""The bottom layer: errors, episode records and config checks shared by every package.

``envs``, ``memory``, ``skillrl`` and ``trainers`` all import it; it imports none of them (see
docs/ARCHITECTURE.md, "Layers").
"""

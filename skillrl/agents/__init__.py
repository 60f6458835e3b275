"""Agents that implement :class:`skillrl.agents.base.Agent` (LLM, scripted expert, human)."""

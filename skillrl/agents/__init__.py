"""Agents that implement :class:`skillrl.agent.Agent` (LLM, scripted expert, human)."""

"""GRPO with turn-level rewards and advantages, and the recursive improvement cycle.

Modules are imported on demand: ``trainers.rewards`` and ``trainers.advantages`` are pure Python;
``trainers.loss`` and ``trainers.grpo`` need torch; ``trainers.cycle`` drives everything.
"""

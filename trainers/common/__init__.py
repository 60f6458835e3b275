"""What the trainers share: checkpoints, phased runs and their state, rollouts, seeding, metrics.

Also the prefix-tree forward that the cold start's head-only loss and the update both run.
Imports no trainer (``tests/test_trainer_packages.py``).
"""

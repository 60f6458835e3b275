"""What the trainers share: checkpoints, the phased-run driver, rollouts, seeding, metrics.

Also the prefix-tree forward that the cold start's head-only loss and the update both run.
Imports no trainer (``tests/test_trainer_packages.py``).
"""

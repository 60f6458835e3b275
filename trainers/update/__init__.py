"""One GRPO/RFT update over recorded episodes: advantages, turn batches, the loss, the forward.

Imports only itself and :mod:`trainers.common`; the improvement cycle drives it
(``tests/test_trainer_packages.py``).
"""

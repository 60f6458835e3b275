"""Learning: the cold start, the GRPO/RFT update and the improvement cycle, a package each.

- ``cold_start/``: behaviour cloning, then DAgger rounds (``skillrl sft``);
- ``update/``: one GRPO/RFT update: advantages, turn batches, the loss and how a step's
  log-probs are forwarded;
- ``cycle/``: the improvement cycle behind ``skillrl train``, which drives the update, and its
  run folder;
- ``common/``: what the trainers share: checkpoints, the phased-run driver, the trainer's
  rollouts, seeding, the prefix-tree forward, episode metrics.

Beside them, ``evaluate`` (``skillrl eval``) and ``runs`` (a workspace's runs) serve the CLI.
A trainer never imports another's modules (``tests/test_trainer_packages.py``). Modules are
imported on demand: ``trainers.update.advantages`` and ``trainers.cycle.rewards`` are pure
Python; ``trainers.update.loss`` and ``trainers.update.grpo`` need torch;
``trainers.cycle.cycle`` drives everything.
"""

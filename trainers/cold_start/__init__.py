"""The cold start (``skillrl sft``): behaviour cloning, then DAgger rounds.

Fine-tunes with TRL's ``SFTTrainer``; imports only itself and :mod:`trainers.common`
(``tests/test_trainer_packages.py``).
"""

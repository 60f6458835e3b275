"""The recursive improvement cycle behind ``skillrl train``, and its run folder.

Rollouts and rewards, the update (:mod:`trainers.update`), evaluation, bank evolution and the
run's files; imports only itself, the update and :mod:`trainers.common`
(``tests/test_trainer_packages.py``).
"""

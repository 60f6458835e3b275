"""Trained adapters shipped with the package, one folder per environment id.

See :mod:`skillrl.policies.model_settings`.
"""

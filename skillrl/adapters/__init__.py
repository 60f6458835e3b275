"""Trained adapters shipped with the package, one folder per environment id (see skillrl.policies.model_settings)."""

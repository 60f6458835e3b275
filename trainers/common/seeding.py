"""One seeding of every generator a training run draws from: Python's, numpy's and torch's.

``skillrl sft`` and ``skillrl train`` both seed through :func:`seed_everything` (which is
``transformers.set_seed``), so a LoRA adapter's initialisation, dropout masks and anything else
drawn from the global generators repeat from run to run with the same seed. Rollouts and the
update's sample order draw from generators of their own, seeded per cycle.
"""

from __future__ import annotations

from skillrl_core.option_fields import SEED_MAX


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, numpy and torch (every device) with ``seed``.

    A derived seed larger than numpy accepts (``seed * k + cycle``) wraps into 0..SEED_MAX.
    """
    from transformers import set_seed

    set_seed(seed % (SEED_MAX + 1))

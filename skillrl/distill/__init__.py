"""The distiller: finished episodes become skills and counterfactual notes; the bank keeps itself.

- :class:`AnalyticDistiller` (no teacher: trajectory structure + reward breakdown) and
  :class:`TeacherDistiller` (any chat policy, JSON validated, retried, leak-checked), both
  :class:`Distiller`;
- :func:`distill_pending` writes what they propose through the bank, idempotently;
- :func:`upkeep` retires low-utility entries and enforces caps; :func:`evolve_from_validation`
  adds a few entries for weak categories from their failed training episodes;
- :func:`seed_bank_if_empty` gives a new workspace the shipped starting bank.
"""

from __future__ import annotations

from skillrl.distill.analytic import AnalyticConfig, AnalyticDistiller
from skillrl.distill.base import Distiller, DistillReport, Rejection
from skillrl.distill.evolve import EvolveConfig, EvolveReport, evolve_from_validation
from skillrl.distill.pipeline import PipelineConfig, distill_pending
from skillrl.distill.seeding import SeedReport, seed_bank_if_empty
from skillrl.distill.teacher import TeacherConfig, TeacherDistiller
from skillrl.distill.upkeep import UpkeepConfig, UpkeepReport, upkeep

__all__ = [
    "AnalyticConfig",
    "AnalyticDistiller",
    "DistillReport",
    "Distiller",
    "EvolveConfig",
    "EvolveReport",
    "PipelineConfig",
    "Rejection",
    "SeedReport",
    "TeacherConfig",
    "TeacherDistiller",
    "UpkeepConfig",
    "UpkeepReport",
    "distill_pending",
    "evolve_from_validation",
    "seed_bank_if_empty",
    "upkeep",
]

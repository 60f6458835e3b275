"""Entries keep their paired-rollout figures (with / withheld, same goal and seed).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

COUNTERS = ("paired_pairs", "paired_with_only", "paired_without_only")


def upgrade() -> None:
    """Add the paired counters and score sum to ``entries``, all zero (nothing measured yet)."""
    with op.batch_alter_table("entries") as batch:
        for name in COUNTERS:
            batch.add_column(sa.Column(name, sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(
            sa.Column("paired_score_delta_sum", sa.Float(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    """Drop the columns again, in place.

    Not in batch mode: on SQLite that copies ``entries`` into a new table and drops the old
    one, and with foreign keys on, dropping it deletes every revision and provenance row that
    references it (ON DELETE CASCADE). SQLite (3.35+) and PostgreSQL drop a column in place.
    """
    op.drop_column("entries", "paired_score_delta_sum")
    for name in reversed(COUNTERS):
        op.drop_column("entries", name)

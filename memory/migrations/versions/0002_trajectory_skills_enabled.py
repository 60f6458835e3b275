"""Trajectories record whether skills were on, so utility baselines can be counted in SQL.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``trajectories.skills_enabled`` and fill it from each stored record."""
    with op.batch_alter_table("trajectories") as batch:
        batch.add_column(
            sa.Column("skills_enabled", sa.Boolean(), nullable=False, server_default=sa.true())
        )
        batch.create_index("ix_trajectories_skills_enabled", ["skills_enabled"])
    table = sa.table(
        "trajectories",
        sa.column("episode_id", sa.String()),
        sa.column("record", sa.JSON()),
        sa.column("skills_enabled", sa.Boolean()),
    )
    connection = op.get_bind()
    off = [
        row.episode_id
        for row in connection.execute(sa.select(table.c.episode_id, table.c.record))
        if not (row.record or {}).get("skills_enabled", True)
    ]
    if off:
        connection.execute(
            table.update().where(table.c.episode_id.in_(off)).values(skills_enabled=False)
        )


def downgrade() -> None:
    """Drop the column again."""
    with op.batch_alter_table("trajectories") as batch:
        batch.drop_index("ix_trajectories_skills_enabled")
        batch.drop_column("skills_enabled")

"""Cases keep what their solution is known to come in (``offers``).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``offers`` to ``entries``, empty (not known) for every entry written before."""
    with op.batch_alter_table("entries") as batch:
        batch.add_column(sa.Column("offers", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    """Drop the column again, in place (see 0003 on why not in batch mode)."""
    op.drop_column("entries", "offers")

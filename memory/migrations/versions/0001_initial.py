"""Initial skill-bank schema: entries, revisions, provenance, trajectories, events, snapshots.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create every table of the first schema."""
    op.create_table(
        "entries",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False, index=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("principle", sa.Text(), nullable=False),
        sa.Column("when_to_apply", sa.Text(), nullable=False),
        sa.Column("env", sa.String(64), nullable=True, index=True),
        sa.Column("category", sa.String(128), nullable=True, index=True),
        sa.Column("failure_point", sa.Text(), nullable=False),
        sa.Column("flawed_action", sa.Text(), nullable=False),
        sa.Column("correction", sa.Text(), nullable=False),
        sa.Column("source", sa.String(128), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("external_id", sa.String(128), nullable=True),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("support_count", sa.Integer(), nullable=False),
        sa.Column("times_retrieved", sa.Integer(), nullable=False),
        sa.Column("episodes_retrieved", sa.Integer(), nullable=False),
        sa.Column("success_episodes", sa.Integer(), nullable=False),
        sa.Column("failure_episodes", sa.Integer(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
    )
    op.create_table(
        "entry_revisions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "entry_id",
            sa.String(32),
            sa.ForeignKey("entries.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        ),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("author", sa.String(128), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.UniqueConstraint("entry_id", "revision", name="uq_entry_revision"),
    )
    op.create_table(
        "provenance",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "entry_id",
            sa.String(32),
            sa.ForeignKey("entries.id", ondelete="CASCADE"),
            nullable=False,
            index=True,
        ),
        sa.Column("source", sa.String(128), nullable=False),
        sa.Column("author", sa.String(128), nullable=False),
        sa.Column("trajectory_ids", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("external_id", sa.String(128), nullable=True),
        sa.Column("similarity", sa.Float(), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "trajectories",
        sa.Column("episode_id", sa.String(64), primary_key=True),
        sa.Column("env", sa.String(64), nullable=False, index=True),
        sa.Column("split", sa.String(32), nullable=False, index=True),
        sa.Column("category", sa.String(128), nullable=False, index=True),
        sa.Column("goal_id", sa.String(128), nullable=False),
        sa.Column("success", sa.Boolean(), nullable=False, index=True),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("group_id", sa.String(64), nullable=True, index=True),
        sa.Column("agent", sa.String(256), nullable=False),
        sa.Column("num_turns", sa.Integer(), nullable=False),
        sa.Column("distilled", sa.Boolean(), nullable=False, index=True),
        sa.Column("distilled_by", sa.String(128), nullable=True),
        sa.Column("distilled_at", TZ, nullable=True),
        sa.Column("record", sa.JSON(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "retrieval_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("entry_id", sa.String(32), nullable=False, index=True),
        sa.Column("similarity", sa.Float(), nullable=False),
        sa.Column("env", sa.String(64), nullable=False),
        sa.Column("category", sa.String(128), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "snapshots",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("entry_count", sa.Integer(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
    )
    op.create_table(
        "bank_meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    """Drop every table of the first schema."""
    for table in (
        "bank_meta",
        "snapshots",
        "retrieval_events",
        "trajectories",
        "provenance",
        "entry_revisions",
        "entries",
    ):
        op.drop_table(table)

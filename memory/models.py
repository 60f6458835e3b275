"""SQLAlchemy ORM models: the skill bank's source of truth.

The schema is created and upgraded only by the Alembic migrations in ``memory/migrations``; a
test checks that these models and the migrated schema agree.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    """Return the current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    """Declarative base of every skill-bank table."""


class EntryRow(Base):
    """One skill or counterfactual note (its current revision) with its usage statistics."""

    __tablename__ = "entries"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    title: Mapped[str] = mapped_column(Text)
    principle: Mapped[str] = mapped_column(Text)
    when_to_apply: Mapped[str] = mapped_column(Text, default="")
    env: Mapped[str | None] = mapped_column(String(64), index=True)
    category: Mapped[str | None] = mapped_column(String(128), index=True)
    failure_point: Mapped[str] = mapped_column(Text, default="")
    flawed_action: Mapped[str] = mapped_column(Text, default="")
    correction: Mapped[str] = mapped_column(Text, default="")
    source: Mapped[str] = mapped_column(String(128), default="person")
    reason: Mapped[str] = mapped_column(Text, default="")
    external_id: Mapped[str | None] = mapped_column(String(128))
    offers: Mapped[str] = mapped_column(Text, default="")
    """case only: what its solution is known to come in (``memory.types.EntryDraft.offers``)."""
    status: Mapped[str] = mapped_column(String(16), index=True, default="active")
    revision: Mapped[int] = mapped_column(Integer, default=1)
    support_count: Mapped[int] = mapped_column(Integer, default=1)
    times_retrieved: Mapped[int] = mapped_column(Integer, default=0)
    episodes_retrieved: Mapped[int] = mapped_column(Integer, default=0)
    success_episodes: Mapped[int] = mapped_column(Integer, default=0)
    failure_episodes: Mapped[int] = mapped_column(Integer, default=0)
    paired_pairs: Mapped[int] = mapped_column(Integer, default=0)
    """Paired rollouts (with / withheld, same goal and seed) measured for it."""
    paired_with_only: Mapped[int] = mapped_column(Integer, default=0)
    paired_without_only: Mapped[int] = mapped_column(Integer, default=0)
    paired_score_delta_sum: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RevisionRow(Base):
    """A past or current version of an entry's content, with who changed it and why."""

    __tablename__ = "entry_revisions"
    __table_args__ = (UniqueConstraint("entry_id", "revision", name="uq_entry_revision"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    entry_id: Mapped[str] = mapped_column(ForeignKey("entries.id", ondelete="CASCADE"), index=True)
    revision: Mapped[int] = mapped_column(Integer)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    author: Mapped[str] = mapped_column(String(128))
    reason: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ProvenanceRow(Base):
    """One contribution to an entry: its creation or a merge of a near-duplicate into it."""

    __tablename__ = "provenance"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    entry_id: Mapped[str] = mapped_column(ForeignKey("entries.id", ondelete="CASCADE"), index=True)
    source: Mapped[str] = mapped_column(String(128))
    author: Mapped[str] = mapped_column(String(128))
    trajectory_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    reason: Mapped[str] = mapped_column(Text, default="")
    external_id: Mapped[str | None] = mapped_column(String(128))
    similarity: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TrajectoryRow(Base):
    """A stored episode: the full ``EpisodeRecord`` as JSON plus the columns it is queried by."""

    __tablename__ = "trajectories"

    episode_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    env: Mapped[str] = mapped_column(String(64), index=True)
    split: Mapped[str] = mapped_column(String(32), index=True)
    category: Mapped[str] = mapped_column(String(128), index=True)
    goal_id: Mapped[str] = mapped_column(String(128))
    success: Mapped[bool] = mapped_column(Boolean, index=True)
    score: Mapped[float] = mapped_column(Float)
    group_id: Mapped[str | None] = mapped_column(String(64), index=True)
    agent: Mapped[str] = mapped_column(String(256), default="")
    num_turns: Mapped[int] = mapped_column(Integer)
    distilled: Mapped[bool] = mapped_column(Boolean, index=True, default=False)
    skills_enabled: Mapped[bool] = mapped_column(Boolean, index=True, default=True)
    """Whether the episode retrieved skills (utility baselines count only those)."""
    distilled_by: Mapped[str | None] = mapped_column(String(128))
    distilled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    record: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RetrievalEventRow(Base):
    """One entry put into one turn's prompt (the source of ``times_retrieved``)."""

    __tablename__ = "retrieval_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    entry_id: Mapped[str] = mapped_column(String(32), index=True)
    similarity: Mapped[float] = mapped_column(Float)
    env: Mapped[str] = mapped_column(String(64))
    category: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SnapshotRow(Base):
    """A named copy of every entry's content and status at one moment."""

    __tablename__ = "snapshots"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    entry_count: Mapped[int] = mapped_column(Integer)
    data: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MetaRow(Base):
    """Bank-wide settings that must not change silently (e.g. which embedder built the index)."""

    __tablename__ = "bank_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)

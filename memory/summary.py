"""A bank-wide summary for people and scripts (``skillrl skills stats``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import case, func, select

from memory.db import read_session
from memory.models import EntryRow, SnapshotRow, TrajectoryRow

if TYPE_CHECKING:
    from memory.bank import SkillBank


def bank_summary(bank: SkillBank, *, top: int = 5) -> dict[str, Any]:
    """Entries per kind/status and per env/category, episodes, most retrieved, index check."""
    with read_session(bank.store.engine) as session:
        by_kind = session.execute(
            select(EntryRow.kind, EntryRow.status, func.count()).group_by(
                EntryRow.kind, EntryRow.status
            )
        ).all()
        by_category = session.execute(
            select(EntryRow.env, EntryRow.category, func.count())
            .where(EntryRow.status == "active", EntryRow.kind == "task")
            .group_by(EntryRow.env, EntryRow.category)
            .order_by(EntryRow.env, EntryRow.category)
        ).all()
        episodes = session.execute(
            select(
                func.count(),
                func.coalesce(func.sum(case((TrajectoryRow.success, 1), else_=0)), 0),
                func.coalesce(func.sum(case((TrajectoryRow.distilled, 1), else_=0)), 0),
            )
        ).one()
        most = session.execute(
            select(EntryRow.id, EntryRow.title, EntryRow.times_retrieved)
            .where(EntryRow.times_retrieved > 0)
            .order_by(EntryRow.times_retrieved.desc(), EntryRow.id)
            .limit(top)
        ).all()
        snapshots = session.scalar(select(func.count()).select_from(SnapshotRow))
    report = bank.check()
    return {
        "entries": {
            kind: {status: n for k, status, n in by_kind if k == kind}
            for kind in ("general", "task", "mistake")
        },
        "task_skills_by_category": [
            {"env": env, "category": category, "active": n} for env, category, n in by_category
        ],
        "episodes": {
            "total": int(episodes[0]),
            "successes": int(episodes[1]),
            "distilled": int(episodes[2]),
        },
        "most_retrieved": [{"id": i, "title": t, "times_retrieved": n} for i, t, n in most],
        "snapshots": int(snapshots or 0),
        "embedder": bank.config.embedder,
        "index": {
            "ok": report.ok,
            "sql_active": report.sql_active,
            "indexed": report.index_count,
            "missing": len(report.missing),
            "extra": len(report.extra),
            "stale": len(report.stale),
        },
    }

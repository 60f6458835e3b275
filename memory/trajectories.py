"""The trajectory store, ``bank.trajectories``: finished episodes, queried by env/split/success.

Episodes are kept as JSON and can also be filtered by group and by whether they were distilled.

Saving an episode also updates the per-entry episode statistics (``episodes_retrieved``,
``success_episodes``, ``failure_episodes``) of every entry retrieved in it, in the same
transaction, so the statistics always match the stored episodes.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta

from sqlalchemy import bindparam, case, func, select, update

from memory.db import read_session
from memory.models import EntryRow, TrajectoryRow, utcnow
from memory.store import BankStore
from skillrl_core.errors import BankError, SkillNotFoundError
from skillrl_core.records import EpisodeRecord


def _row(episode: EpisodeRecord, position: int) -> TrajectoryRow:
    record = episode.to_dict()
    try:
        json.dumps(record)
    except (TypeError, ValueError) as e:
        raise BankError(
            f"episode {episode.episode_id} cannot be stored: it holds data that is not JSON ({e})"
        ) from e
    return TrajectoryRow(
        episode_id=episode.episode_id,
        env=episode.env_id,
        split=episode.split,
        category=episode.category,
        goal_id=episode.goal_id,
        success=bool(episode.success),
        score=float(episode.score),
        group_id=episode.group_id,
        agent=episode.agent,
        num_turns=episode.num_turns,
        distilled=False,
        skills_enabled=bool(episode.skills_enabled),
        record=record,
        # Distinct, increasing times keep a batch's order when listing "oldest first".
        created_at=utcnow() + timedelta(microseconds=position),
    )


class TrajectoryStore:
    """Finished episodes of one bank, sharing its engine and write transaction."""

    def __init__(self, store: BankStore) -> None:
        self._store = store

    def save_episodes(self, episodes: list[EpisodeRecord]) -> None:
        """Store new episodes (ones already stored are skipped) and update entry statistics."""
        seen: set[str] = set()
        unique = [e for e in episodes if not (e.episode_id in seen or seen.add(e.episode_id))]
        if not unique:
            return
        rows = [_row(e, i) for i, e in enumerate(unique)]
        with self._store.transaction() as (session, _undo):
            stored = set(
                session.scalars(
                    select(TrajectoryRow.episode_id).where(
                        TrajectoryRow.episode_id.in_([e.episode_id for e in unique])
                    )
                )
            )
            new = [(e, r) for e, r in zip(unique, rows, strict=False) if e.episode_id not in stored]
            session.add_all([r for _e, r in new])
            retrieved, succeeded = Counter(), Counter()
            for episode, _r in new:
                ids = {i for turn in episode.turns for i in turn.retrieved_ids}
                retrieved.update(ids)
                if episode.success:
                    succeeded.update(ids)
            if not retrieved:
                return
            table = EntryRow.__table__
            bump = (
                update(table)
                .where(table.c.id == bindparam("b_id"))
                .values(
                    episodes_retrieved=table.c.episodes_retrieved + bindparam("b_n"),
                    success_episodes=table.c.success_episodes + bindparam("b_ok"),
                    failure_episodes=table.c.failure_episodes + bindparam("b_fail"),
                )
            )
            session.flush()
            session.connection().execute(
                bump,
                [
                    {"b_id": i, "b_n": n, "b_ok": succeeded[i], "b_fail": n - succeeded[i]}
                    for i, n in retrieved.items()
                ],
            )

    def episodes(
        self,
        *,
        env: str | None = None,
        split: str | None = None,
        success: bool | None = None,
        distilled: bool | None = None,
        group_id: str | None = None,
        episode_id: str | None = None,
        limit: int | None = None,
    ) -> list[EpisodeRecord]:
        """Return stored episodes matching every given filter, oldest first."""
        query = select(TrajectoryRow.record)
        for column, value in (
            (TrajectoryRow.episode_id, episode_id),
            (TrajectoryRow.env, env),
            (TrajectoryRow.split, split),
            (TrajectoryRow.success, success),
            (TrajectoryRow.distilled, distilled),
            (TrajectoryRow.group_id, group_id),
        ):
            if value is not None:
                query = query.where(column == value)
        query = query.order_by(TrajectoryRow.created_at, TrajectoryRow.episode_id)
        if limit is not None:
            query = query.limit(limit)
        with read_session(self._store.engine) as session:
            return [EpisodeRecord.from_dict(r) for r in session.scalars(query)]

    def stored_at(self) -> dict[str, datetime]:
        """Return when each stored episode was saved, by episode id (UTC)."""
        query = select(TrajectoryRow.episode_id, TrajectoryRow.created_at)
        with read_session(self._store.engine) as session:
            return {episode_id: at for episode_id, at in session.execute(query)}

    def mark_distilled(self, episode_ids: list[str], *, distiller: str) -> None:
        """Flag episodes as distilled by ``distiller``; unknown ids raise and change nothing."""
        ids = sorted(set(episode_ids))
        if not ids:
            return
        with self._store.transaction() as (session, _undo):
            found = set(
                session.scalars(
                    select(TrajectoryRow.episode_id).where(TrajectoryRow.episode_id.in_(ids))
                )
            )
            missing = [i for i in ids if i not in found]
            if missing:
                raise SkillNotFoundError(f"no stored episode has id {', '.join(missing[:5])}")
            session.execute(
                update(TrajectoryRow)
                .where(TrajectoryRow.episode_id.in_(ids))
                .values(distilled=True, distilled_by=distiller, distilled_at=utcnow())
            )

    def episode_totals(
        self, *, env: str | None = None, category: str | None = None, skills_only: bool = False
    ) -> tuple[int, int]:
        """``(episodes, successes)`` stored for ``env`` and ``category`` (all when None).

        ``skills_only`` counts only episodes that retrieved skills (the utility baseline).
        """
        successes = func.coalesce(func.sum(case((TrajectoryRow.success, 1), else_=0)), 0)
        query = select(func.count(), successes).select_from(TrajectoryRow)
        if skills_only:
            query = query.where(TrajectoryRow.skills_enabled.is_(True))
        if env is not None:
            query = query.where(TrajectoryRow.env == env)
        if category is not None:
            query = query.where(TrajectoryRow.category == category)
        with read_session(self._store.engine) as session:
            total, successes = session.execute(query).one()
        return int(total), int(successes)

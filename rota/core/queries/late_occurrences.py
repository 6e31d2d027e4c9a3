"""Statements on ``late_occurrences`` and on the schedules' deadline watermark.

The deadline check (``rota.scheduler.deadlines``) locks the schedules whose
next judgment is due with ``lock_deadline_due`` (``FOR UPDATE SKIP LOCKED`` on
PostgreSQL; on SQLite the ``BEGIN IMMEDIATE`` write lock serialises replicas),
reads what became of their occurrences (``jobs_of_occurrences``,
``skips_covering``, ``jobs_by_id``), records the late ones with
``insert_late_or_skip`` and moves the watermark with
``advance_deadlines_if_unchanged``, all in one transaction. The unique index on
(schedule, instant) makes a second record of the same occurrence a no-op, so
any number of replicas record each late occurrence once; the counter
``rota_schedule_deadline_missed_total`` is appended to for the rows actually
inserted, in the same transaction.

``prune_old_late`` bounds the table by age: the records of occurrences older
than the retention go, a batch at a time (``core.retention.LATE_RETAIN``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import (
    Connection,
    RowMapping,
    Select,
    and_,
    bindparam,
    delete,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from rota.core.metric_deltas import DEADLINE_MISSED, Deltas, delta
from rota.core.queries.metric_tables import append_metric_events
from rota.core.queries.schedules import CursorMoved
from rota.core.sqltime import UTCDateTime, now_or_db
from rota.core.states import LateReason, SkipReason
from rota.core.tables import jobs, late_occurrences, schedule_skips, schedules
from rota.core.timefmt import MANUAL_KEY_MARK


class DeadlineDue(NamedTuple):
    """A schedule whose next deadline judgment is due, locked by this transaction."""

    name: str
    definition_hash: str
    removed: bool
    paused: bool
    set_aside_reason: str | None
    cursor_at: datetime | None
    coalesce_from: datetime | None  # a coalesced range still being counted
    checked_through: datetime | None
    check_at: datetime


class DeadlineAdvance(NamedTuple):
    """How one locked schedule's watermark moves (``check_at`` None: nothing more to judge)."""

    name: str
    expected_check_at: datetime
    checked_through: datetime | None
    check_at: datetime | None


class OccurrenceJob(NamedTuple):
    job_id: uuid.UUID
    state: str
    finished_at: datetime | None


class SkipRange(NamedTuple):
    reason: SkipReason
    first_instant: datetime
    last_instant: datetime
    job_id: uuid.UUID | None


@dataclass(frozen=True)
class LateRecord:
    """One late occurrence: as judged (to insert), or as inserted (with ``detected_at``)."""

    schedule_name: str
    instant: datetime
    deadline: datetime
    reason: LateReason
    job_id: uuid.UUID | None
    detected_at: datetime


def lock_deadline_due(
    conn: Connection, now: datetime | None, limit: int
) -> tuple[list[DeadlineDue], datetime | None]:
    """Lock up to ``limit`` schedules whose ``deadline_check_at`` has come, soonest first.

    Returns the rows and the clock the statement used (None when none was due).
    Rows another replica holds are skipped: it is judging them.
    """
    clock = now_or_db(now)
    stmt = (
        select(
            schedules.c.name,
            schedules.c.definition_hash,
            schedules.c.removed,
            schedules.c.paused,
            schedules.c.set_aside_reason,
            schedules.c.cursor_at,
            schedules.c.coalesce_from,
            schedules.c.deadlines_checked_through,
            schedules.c.deadline_check_at,
            clock.label("clock"),
        )
        .where(schedules.c.deadline_check_at.is_not(None), schedules.c.deadline_check_at <= clock)
        .order_by(schedules.c.deadline_check_at)
        .limit(limit)
        .with_for_update(skip_locked=True, of=schedules)
    )
    rows = conn.execute(stmt).all()
    if not rows:
        return [], None
    return [DeadlineDue(*row[:9]) for row in rows], rows[0][9]


def earliest_deadline_check(conn: Connection) -> datetime | None:
    """The soonest ``deadline_check_at`` (via ``ix_schedules_deadline_due``): when a replica
    next has occurrences to judge."""
    soonest = conn.execute(
        select(func.min(schedules.c.deadline_check_at)).where(
            schedules.c.deadline_check_at.is_not(None)
        )
    ).scalar_one()
    if isinstance(soonest, str):  # SQLite: min() loses the column type
        soonest = UTCDateTime().process_result_value(soonest, conn.dialect)
    assert soonest is None or isinstance(soonest, datetime)
    return soonest


def jobs_of_occurrences(
    conn: Connection, wanted: Mapping[str, Sequence[datetime]]
) -> dict[tuple[str, datetime], OccurrenceJob]:
    """{(schedule, instant): its job} for regular occurrences that have one (``ix_jobs_schedule``).

    A manual run (``rota trigger``) is no occurrence, whatever its ``scheduled_for``.
    """
    conditions = [
        and_(jobs.c.schedule_name == name, jobs.c.scheduled_for.in_(list(instants)))
        for name, instants in wanted.items()
        if instants
    ]
    if not conditions:
        return {}
    rows = conn.execute(
        select(
            jobs.c.schedule_name,
            jobs.c.scheduled_for,
            jobs.c.dedup_key,
            jobs.c.job_id,
            jobs.c.state,
            jobs.c.finished_at,
        ).where(or_(*conditions))
    ).all()
    out: dict[tuple[str, datetime], OccurrenceJob] = {}
    for name, instant, key, job_id, state, finished_at in rows:
        if key is not None and MANUAL_KEY_MARK in key:
            continue
        out[(name, instant)] = OccurrenceJob(job_id, state, finished_at)
    return out


def jobs_by_id(conn: Connection, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, OccurrenceJob]:
    """The jobs that cover coalesced occurrences, by id."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = conn.execute(
        select(jobs.c.job_id, jobs.c.state, jobs.c.finished_at).where(jobs.c.job_id.in_(wanted))
    ).all()
    return {job_id: OccurrenceJob(job_id, state, finished) for job_id, state, finished in rows}


def skips_covering(
    conn: Connection, spans: Mapping[str, tuple[datetime, datetime]]
) -> dict[str, list[SkipRange]]:
    """{schedule: its ledger ranges that overlap [first, last]}.

    Found through ``ix_schedule_skips_schedule_last_instant``.
    """
    if not spans:
        return {}
    rows = conn.execute(
        select(
            schedule_skips.c.schedule_name,
            schedule_skips.c.reason,
            schedule_skips.c.first_instant,
            schedule_skips.c.last_instant,
            schedule_skips.c.job_id,
        ).where(
            or_(
                *(
                    and_(
                        schedule_skips.c.schedule_name == name,
                        schedule_skips.c.last_instant >= first,
                        schedule_skips.c.first_instant <= last,
                    )
                    for name, (first, last) in spans.items()
                )
            )
        )
    ).all()
    out: dict[str, list[SkipRange]] = {}
    for name, reason, first, last, job_id in rows:
        out.setdefault(name, []).append(SkipRange(SkipReason(reason), first, last, job_id))
    return out


def insert_late_or_skip(conn: Connection, records: Sequence[LateRecord]) -> list[LateRecord]:
    """Record late occurrences; those already recorded (by any replica) are left alone.

    One ``INSERT ... ON CONFLICT (schedule_name, instant) DO NOTHING RETURNING``.
    Returns the rows this call inserted, in the order given, and adds them to
    ``rota_schedule_deadline_missed_total`` in the same transaction.
    """
    if not records:
        return []
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = (
        insert(late_occurrences)
        .values(
            [
                {
                    "schedule_name": r.schedule_name,
                    "instant": r.instant,
                    "deadline": r.deadline,
                    "reason": r.reason.value,
                    "job_id": r.job_id,
                    "detected_at": r.detected_at,
                }
                for r in records
            ]
        )
        .on_conflict_do_nothing(index_elements=["schedule_name", "instant"])
        .returning(late_occurrences.c.schedule_name, late_occurrences.c.instant)
    )
    inserted = {(name, instant) for name, instant in conn.execute(stmt).all()}
    made = [r for r in records if (r.schedule_name, r.instant) in inserted]
    deltas: Deltas = {}
    for r in made:
        delta(DEADLINE_MISSED, (r.schedule_name, r.reason.value), 1, deltas)
    append_metric_events(conn, deltas)
    return made


def advance_deadlines_if_unchanged(conn: Connection, advances: Sequence[DeadlineAdvance]) -> None:
    """Move each watermark whose ``deadline_check_at`` is still what was read; all or nothing.

    Raises ``CursorMoved`` (the caller rolls back, late rows included) when a row
    did not match: another writer moved a row this transaction holds locked.
    """
    if not advances:
        return
    stmt = (
        update(schedules)
        .where(
            schedules.c.name == bindparam("v_name"),
            schedules.c.deadline_check_at == bindparam("v_expected", type_=UTCDateTime()),
        )
        .values(
            deadlines_checked_through=bindparam("v_through", type_=UTCDateTime()),
            deadline_check_at=bindparam("v_check_at", type_=UTCDateTime()),
        )
    )
    params = [
        {
            "v_name": a.name,
            "v_expected": a.expected_check_at,
            "v_through": a.checked_through,
            "v_check_at": a.check_at,
        }
        for a in advances
    ]
    matched = int(conn.execute(stmt, params).rowcount)
    if matched != len(advances):
        raise CursorMoved(f"{len(advances) - matched} deadline watermark(s) moved under a lock")


# -- reads --------------------------------------------------------------------


def _late_rows() -> Select[Any]:
    """Late rows with their job's end (``finished_at``: when it reached a final state)."""
    return select(
        late_occurrences.c.late_id,
        late_occurrences.c.schedule_name,
        late_occurrences.c.instant,
        late_occurrences.c.deadline,
        late_occurrences.c.reason,
        late_occurrences.c.job_id,
        late_occurrences.c.detected_at,
        jobs.c.finished_at,
    ).select_from(late_occurrences.outerjoin(jobs, jobs.c.job_id == late_occurrences.c.job_id))


def newest_late(
    conn: Connection,
    *,
    schedule: str | None = None,
    since: datetime | None = None,
    limit: int | None = None,
) -> Sequence[RowMapping]:
    """Late occurrences, newest instant first; of one schedule, at or after ``since``."""
    stmt = _late_rows().order_by(
        late_occurrences.c.instant.desc(), late_occurrences.c.late_id.desc()
    )
    if schedule is not None:
        stmt = stmt.where(late_occurrences.c.schedule_name == schedule)
    if since is not None:
        stmt = stmt.where(late_occurrences.c.instant >= since)
    if limit is not None:
        stmt = stmt.limit(limit)
    return conn.execute(stmt).mappings().all()


def last_late_by_schedule(
    conn: Connection, names: Sequence[str] | None = None
) -> dict[str, RowMapping]:
    """{schedule: its newest late occurrence}: one index probe per schedule, then the rows."""
    newest = (
        select(late_occurrences.c.late_id)
        .where(late_occurrences.c.schedule_name == schedules.c.name)
        .order_by(late_occurrences.c.instant.desc())
        .limit(1)
        .scalar_subquery()
    )
    stmt = select(newest).select_from(schedules)
    if names is not None:
        stmt = stmt.where(schedules.c.name.in_(list(names)))
    ids = [i for i in conn.execute(stmt).scalars() if i is not None]
    if not ids:
        return {}
    rows = conn.execute(_late_rows().where(late_occurrences.c.late_id.in_(ids))).mappings().all()
    return {r["schedule_name"]: r for r in rows}


def prune_old_late(
    conn: Connection, older_than: timedelta, *, limit: int, now: datetime | None = None
) -> int:
    """Delete up to ``limit`` late records of occurrences whose instant is before
    now - ``older_than`` (the database clock), oldest first; returns how many went.

    The deadline check never looks back past a schedule's watermark, so an
    occurrence whose record went is not judged, recorded or notified again.
    """
    clock = conn.execute(select(now_or_db(now))).scalar_one()
    t = late_occurrences
    oldest = (
        select(t.c.late_id)
        .where(t.c.instant < clock - older_than)
        .order_by(t.c.instant)
        .limit(limit)
    )
    return conn.execute(delete(t).where(t.c.late_id.in_(oldest.scalar_subquery()))).rowcount

"""Statements on ``notification_targets``, and the failed jobs a notice reports."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, delete, select, update

from rota.core.notifications import MAX_TARGETS, NotificationTarget
from rota.core.queries.sqlparams import read_id
from rota.core.sqltime import db_now, read_utc
from rota.core.states import JobState
from rota.core.tables import jobs, notification_targets

_LOAD = (
    select(notification_targets.c.definition)
    .order_by(notification_targets.c.name)
    .limit(MAX_TARGETS)  # a file holds at most this many: the read stays bounded
)


def load_notification_targets(conn: Connection) -> list[NotificationTarget]:
    """Every stored target, by name (at most ``MAX_TARGETS``)."""
    return [NotificationTarget.from_json(d) for d in conn.execute(_LOAD).scalars()]


def replace_notification_targets(
    conn: Connection, targets: Iterable[NotificationTarget]
) -> dict[str, str]:
    """Make the stored targets exactly ``targets``; {name: "added" | "changed" | "removed"}."""
    current = {t.name: t for t in load_notification_targets(conn)}
    wanted = {t.name: t for t in targets}
    changes: dict[str, str] = {}
    for name, target in wanted.items():
        old = current.get(name)
        if old == target:
            continue
        values = {"definition": target.to_json(), "updated_at": db_now()}
        if old is None:
            conn.execute(notification_targets.insert().values(name=name, **values))
            changes[name] = "added"
        else:
            conn.execute(
                update(notification_targets)
                .where(notification_targets.c.name == name)
                .values(**values)
            )
            changes[name] = "changed"
    gone = sorted(set(current) - set(wanted))
    if gone:
        conn.execute(delete(notification_targets).where(notification_targets.c.name.in_(gone)))
        changes.update(dict.fromkeys(gone, "removed"))
    return changes


@dataclass(frozen=True, slots=True)
class FailedJob:
    """What a ``job_failed`` notice says of a job, read as the job row stands."""

    job_id: uuid.UUID
    job_type: str
    schedule_name: str | None
    scheduled_for: datetime | None
    lease_generation: int
    error_code: str | None
    finished_at: datetime | None


def failed_jobs_among(conn: Connection, job_ids: Sequence[uuid.UUID]) -> list[FailedJob]:
    """The jobs of ``job_ids`` that are FAILED now (one statement, by primary key)."""
    if not job_ids:
        return []
    rows = conn.execute(
        select(
            jobs.c.job_id,
            jobs.c.job_type,
            jobs.c.schedule_name,
            jobs.c.scheduled_for,
            jobs.c.lease_generation,
            jobs.c.last_error_code,
            jobs.c.finished_at,
        ).where(jobs.c.job_id.in_(list(job_ids)), jobs.c.state == JobState.FAILED.value)
    ).all()
    return [
        FailedJob(read_id(r[0]), r[1], r[2], read_utc(r[3]), int(r[4]), r[5], read_utc(r[6]))
        for r in rows
    ]

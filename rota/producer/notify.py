"""Notifications: one delivery job per webhook target that wants an event.

``notify(conn, notice, now)`` enqueues, in the caller's transaction, one job
of the built-in type ``rota.notify`` per stored target whose ``events`` (and
``schedules`` / ``job_types`` filters) match the notice; the executors POST
them (``rota.executor.notify_delivery``). Calling it in the transaction that
records the event means no event is lost and none is notified that did not
happen. ``notify_failed_jobs`` does it for jobs that just reached FAILED
(``job_failed``, and ``needs_reconcile`` when the code is NEEDS_RECONCILE).

Each delivery's ``dedup_key`` is ``<target>/<notice key>``: notifying the
same event twice enqueues nothing new. A delivery job's own failure is never
notified (no loops). The body is fixed at enqueue time, so every retry sends
the same bytes with the same ``Rota-Delivery-Id`` (the delivery job's id).

The targets are read with one bounded query (at most ``MAX_TARGETS`` rows of
a small table), and only on the path of an event: a job that succeeds never
reads them.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import InterfaceError, OperationalError

from rota.core.config import DEFAULT_POOL, Backoff, JobTypeSpec
from rota.core.database import short_error
from rota.core.ids import new_job_id
from rota.core.notifications import DELIVERY_JOB_TYPE, NotificationEvent, NotificationTarget
from rota.core.queries.job_types import get_job_type
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.queries.notification_targets import failed_jobs_among, load_notification_targets
from rota.core.states import JobState
from rota.core.storable import ERROR_CODE_MAX, storable_text
from rota.core.timefmt import utc_key

__all__ = [
    "Notice",
    "delivery_job_type",
    "guarded",
    "notify",
    "notify_failed_jobs",
    "notify_many",
]

DELIVERY_HANDLER = "rota.executor.notify_delivery:deliver"
# 5 s, 10 s, ... doubling up to 5 min, then every 5 min: attempt 100 comes
# 7 h 50 min after the first (before jitter, which only adds), so a receiver
# down for an hour, or a night, loses nothing.
DELIVERY_MAX_ATTEMPTS = 100
DELIVERY_BACKOFF = Backoff(base=timedelta(seconds=5), max=timedelta(minutes=5))
DELIVERY_ATTEMPT_TIMEOUT = timedelta(minutes=1)

REASON_MAX = 2_000
_DEDUP_KEY_MAX = 400  # jobs.dedup_key
# The code of an ambiguous outcome no hook can reconcile (rota.executor.outcomes).
NEEDS_RECONCILE_CODE = "NEEDS_RECONCILE"
_FAILURE_EVENTS = {NotificationEvent.JOB_FAILED, NotificationEvent.NEEDS_RECONCILE}

log = logging.getLogger("rota.notify")


def delivery_job_type() -> JobTypeSpec:
    """How deliveries run, as `rota apply` stores it when a file has notifications."""
    return JobTypeSpec(
        name=DELIVERY_JOB_TYPE,
        handler=DELIVERY_HANDLER,
        pool=DEFAULT_POOL,
        timeout=DELIVERY_ATTEMPT_TIMEOUT,
        max_attempts=DELIVERY_MAX_ATTEMPTS,
        backoff=DELIVERY_BACKOFF,
        idempotent=True,  # the receiver deduplicates on Rota-Delivery-Id
    )


@dataclass(frozen=True)
class Notice:
    """One event to notify. ``key`` names this occurrence of the event uniquely
    (``job_failed``: the job and the generation that failed; ``deadline_missed``:
    the occurrence key ``schedule@instant``)."""

    event: NotificationEvent
    key: str
    schedule: str | None = None
    instant: datetime | None = None  # the occurrence's nominal instant, if any
    job_id: uuid.UUID | None = None
    job_type: str | None = None
    state: str | None = None
    error_code: str | None = None
    reason: str | None = None  # why it is late (deadline_missed), set aside, ...


def notify(conn: Connection, notice: Notice, now: datetime) -> list[uuid.UUID]:
    """Enqueue a delivery of ``notice`` to each matching target; the new deliveries' ids."""
    return notify_many(conn, [notice], now)


def notify_many(conn: Connection, notices: Sequence[Notice], now: datetime) -> list[uuid.UUID]:
    """``notify`` for several notices: the targets are read once."""
    return _enqueue(conn, notices, load_notification_targets(conn), now)


def notify_failed_jobs(
    conn: Connection, job_ids: Sequence[uuid.UUID], now: datetime
) -> list[uuid.UUID]:
    """``job_failed`` for those of ``job_ids`` that are FAILED now (in the caller's transaction).

    With no target for failures (the common case) this is one read of the
    targets; the jobs are read only when some target wants them.
    """
    targets = [t for t in load_notification_targets(conn) if _FAILURE_EVENTS & set(t.events)]
    if not job_ids or not targets:
        return []
    notices = []
    for j in failed_jobs_among(conn, job_ids):
        events = [NotificationEvent.JOB_FAILED]
        if j.error_code == NEEDS_RECONCILE_CODE:  # a person must check what the job did
            events.append(NotificationEvent.NEEDS_RECONCILE)
        notices += [
            Notice(
                event,
                key=f"{event.value}:{j.job_id}:{j.lease_generation}",
                schedule=j.schedule_name,
                instant=j.scheduled_for,
                job_id=j.job_id,
                job_type=j.job_type,
                state=JobState.FAILED.value,
                error_code=j.error_code,
            )
            for event in events
        ]
    return _enqueue(conn, notices, targets, now)


def guarded(conn: Connection, enqueue: Callable[[Connection], list[uuid.UUID]]) -> list[uuid.UUID]:
    """Run ``enqueue`` (a ``notify_*`` call) in a savepoint of ``conn``'s transaction.

    For rota's own events: the deliveries are then written with the event, but
    a delivery the database refuses (a bug of ours) is logged and dropped
    instead of rolling back the FAILED write or the scheduler's tick. A lost
    connection still raises: the whole transaction is retried.
    """
    try:
        with conn.begin_nested():
            return enqueue(conn)
    except (OperationalError, InterfaceError):
        raise
    except Exception as exc:
        error = short_error(exc)[:500]
        fields = {"error": error}
        log.error(
            "event=notify_refused error=%s",
            error,
            extra={"event": "notify_refused", "fields": fields},
        )
        return []


def _enqueue(
    conn: Connection,
    notices: Sequence[Notice],
    targets: Sequence[NotificationTarget],
    now: datetime,
) -> list[uuid.UUID]:
    notices = [n for n in notices if n.job_type != DELIVERY_JOB_TYPE]  # no loops
    pairs = [(n, t) for n in notices for t in targets if t.matches(n.event, n.schedule, n.job_type)]
    if not pairs:
        return []
    spec = get_job_type(conn, DELIVERY_JOB_TYPE) or delivery_job_type()
    new_jobs = [_delivery(spec, n, t, now) for n, t in pairs]
    inserted = insert_jobs_or_skip(conn, new_jobs)
    return [j.job_id for j in new_jobs if j.job_id in inserted]


def _delivery(spec: JobTypeSpec, n: Notice, t: NotificationTarget, now: datetime) -> NewJob:
    delivery_id = new_job_id()
    return NewJob.of_type(
        spec,
        job_id=delivery_id,
        pool=t.pool,
        dedup_key=_dedup_key(t.name, n.key),
        args={
            "target": t.name,
            "url": t.url,
            "secret_env": t.secret_env,
            "insecure": t.insecure,
            "timeout_seconds": t.timeout.total_seconds(),
            "body": body(n, t.name, delivery_id, now),
        },
    )


def body(n: Notice, target: str, delivery_id: uuid.UUID, now: datetime) -> dict[str, Any]:
    """The JSON body every attempt of a delivery POSTs (as ``notify_delivery`` encodes it)."""
    return {
        "event": n.event.value,
        "schedule": n.schedule,
        "instant": utc_key(n.instant) if n.instant is not None else None,
        "job_id": str(n.job_id) if n.job_id is not None else None,
        "job_type": n.job_type,
        "state": n.state,
        "error_code": (
            storable_text(n.error_code, ERROR_CODE_MAX) if n.error_code is not None else None
        ),
        "reason": storable_text(n.reason, REASON_MAX) if n.reason is not None else None,
        # The job in rota's HTTP API, relative to where `rota serve` listens.
        "job_url": f"/jobs/{n.job_id}" if n.job_id is not None else None,
        "target": target,
        "delivery_id": str(delivery_id),
        "occurred_at": utc_key(now),
    }


def _dedup_key(target: str, key: str) -> str:
    """``<target>/<key>``, or the key's hash when it is too long or not storable as is."""
    whole = f"{target}/{key}"
    if storable_text(whole, _DEDUP_KEY_MAX) == whole:
        return whole
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{target}/sha256:{digest}"

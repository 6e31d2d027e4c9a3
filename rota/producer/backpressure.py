"""Backpressure and load shedding for producers: refuse a submission past a job type's limits.

A job type may set (schedule file, under ``job_types``):

* ``max_queued``: at most this many jobs waiting (QUEUED or RETRY_WAIT);
* ``max_queue_age``: the oldest due job waiting may be at most this old;
* ``shed_below_priority``: once the queue is past ``SHED_AT`` (half) of either
  limit, a submission whose ``priority`` number is greater than this (it would
  run later: 0 runs first) is refused, before the limit itself is reached.

A refused submission raises ``QueueFull`` (exported as ``rota.QueueFull``) and
creates nothing: the HTTP API answers 429 with ``Retry-After``, ``rota
enqueue`` exits 1. ``retry_after`` is estimated from the job type's recent
completion rate (the ``rota_end_to_end_seconds`` counts of the last
``RATE_WINDOW``): the jobs that must finish before the submission fits,
divided by that rate.

Scheduled occurrences are never refused (the scheduler does not go through
``enqueue``): they are keyed and bounded by their rules, and they count toward
the depth like any waiting job. A submission whose ``dedup_key`` names an
existing job creates nothing, so it is never refused either. Job types
without a limit cost nothing here: no statement runs for them.

Concurrent producers: ``max_queued`` is a count followed by an insert, so
the check first holds the job type's row until the producer's transaction
ends (``lock_job_type_for_count``); the next producer of that type counts
only after it, and sees its jobs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Connection

from rota.core.config import JobTypeSpec
from rota.core.metric_deltas import END_TO_END, decode_labels
from rota.core.queries.job_types import lock_job_type_for_count
from rota.core.queries.jobs_gauges import QueuePressure, count_overdue, queue_pressure
from rota.core.queries.jobs_read import database_now
from rota.core.queries.metric_tables import read_minutes

SHED_AT = 0.5  # shedding of low-priority submissions starts at half of a limit
RATE_WINDOW = timedelta(minutes=5)
DEFAULT_RETRY_AFTER = 60  # seconds, when nothing of the type completed recently
MAX_RETRY_AFTER = 3600
OVERDUE_COUNT_CAP = 10_000


class QueueFull(RuntimeError):
    """A submission refused by backpressure; nothing was created.

    ``reason`` is ``max_queued``, ``max_queue_age`` or ``shed`` (a low-priority
    submission refused first); ``retry_after`` is a whole number of seconds.
    """

    def __init__(self, job_type: str, reason: str, detail: str, retry_after: int) -> None:
        super().__init__(
            f"job type {job_type!r} is refusing submissions: {detail}; retry after {retry_after} s"
        )
        self.job_type = job_type
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True)
class Submission:
    """What the check needs of the new jobs of one type in a call."""

    count: int  # jobs that would be created (existing dedup keys left out)
    max_priority: int  # the largest priority number among them (the least urgent)


def check_backpressure(
    conn: Connection, spec: JobTypeSpec, sub: Submission, *, schema: str | None = None
) -> None:
    """Raise ``QueueFull`` if ``sub`` must be refused; cheap, and only for limited types.

    ``schema``: rota's PostgreSQL schema, when ``conn`` does not search it.
    """
    if not spec.has_limits or sub.count <= 0:
        return
    if spec.max_queued is not None:
        # Serialises the count and the insert that follows it with other producers.
        lock_job_type_for_count(conn, spec.name, schema=schema)
    cap = None if spec.max_queued is None else 2 * spec.max_queued + sub.count
    pressure = queue_pressure(
        conn, spec.name, count_cap=cap, age=spec.max_queue_age is not None, schema=schema
    )
    _check(conn, spec, sub, pressure, 1.0, ("max_queued", "max_queue_age"), schema)
    if spec.shed_below_priority is not None and sub.max_priority > spec.shed_below_priority:
        _check(conn, spec, sub, pressure, SHED_AT, ("shed", "shed"), schema)


def _check(
    conn: Connection,
    spec: JobTypeSpec,
    sub: Submission,
    p: QueuePressure,
    share: float,
    reasons: tuple[str, str],
    schema: str | None,
) -> None:
    count_reason, age_reason = reasons
    shed = share < 1.0
    prefix = (
        f"priority {sub.max_priority} is below shed_below_priority {spec.shed_below_priority} "
        f"and the queue is past {share:.0%} of its limit: "
        if shed
        else ""
    )
    if spec.max_queued is not None:
        allowed = math.floor(spec.max_queued * share)
        if p.depth + sub.count > allowed:
            needed = p.depth + sub.count - allowed
            detail = f"{p.depth} waiting, max_queued {spec.max_queued}"
            wait = _retry_after(conn, spec.name, needed, schema)
            raise QueueFull(spec.name, count_reason, prefix + detail, wait)
    if spec.max_queue_age is not None:
        limit = spec.max_queue_age * share
        age = p.oldest_age_seconds
        if p.oldest_due is not None and age > limit.total_seconds():
            needed = count_overdue(conn, spec.name, p.now - limit, OVERDUE_COUNT_CAP, schema=schema)
            detail = (
                f"the oldest waiting job is {age:.0f} s old, "
                f"max_queue_age {spec.max_queue_age.total_seconds():g} s"
            )
            wait = _retry_after(conn, spec.name, needed, schema)
            raise QueueFull(spec.name, age_reason, prefix + detail, wait)


def completion_rate(conn: Connection, job_type: str, schema: str | None = None) -> float:
    """Jobs of ``job_type`` that reached a terminal state per second, over ``RATE_WINDOW``."""
    now = database_now(conn)
    rows = read_minutes(conn, now - RATE_WINDOW, [END_TO_END.name], schema=schema)
    done = sum(int(r["n"]) for r in rows if decode_labels(r["labels"])[0] == job_type)
    return done / RATE_WINDOW.total_seconds()


def _retry_after(conn: Connection, job_type: str, needed: int, schema: str | None) -> int:
    rate = completion_rate(conn, job_type, schema)
    if rate <= 0:
        return DEFAULT_RETRY_AFTER
    return max(1, min(MAX_RETRY_AFTER, math.ceil(max(1, needed) / rate)))

"""One scheduler transaction: lock a batch of due schedules, make their jobs, move their cursors.

Per batch, not per schedule: the due rows are locked in one SELECT, every job
goes in one multi-row ``INSERT ... ON CONFLICT DO NOTHING RETURNING``, the
ledger rows in one INSERT, and the cursors in one UPDATE, all in one
transaction. Events are logged after the commit, so a rolled-back batch logs
nothing it did not do.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from rota.scheduler.compiled import CompiledSchedules
from rota.scheduler.jitter import run_after
from rota.scheduler.misfire import Plan, PlannedJob, PlannedSkip, plan_due
from rota.scheduler.overlap import decide_overlap
from rota.shared.config.model import JobTypeSpec, OverlapPolicy, ScheduleSpec
from rota.shared.events import emit
from rota.shared.metrics import SCHEDULER_DELAY, MetricsRecorder
from rota.shared.queries.job_types import load_job_types
from rota.shared.queries.jobs_control import request_cancel
from rota.shared.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.shared.queries.jobs_read import unfinished_jobs_of_schedules
from rota.shared.queries.schedule_skips import SkipRecord, record_skips
from rota.shared.queries.schedules import (
    CursorAdvance,
    DueSchedule,
    advance_cursors_if_unchanged,
    load_definitions,
    lock_due_schedules,
)
from rota.shared.states import SkipReason
from rota.shared.timefmt import occurrence_key, utc_key

log = logging.getLogger("rota.scheduler")

DEFAULT_BATCH_SCHEDULES = 500
DEFAULT_BATCH_JOBS = 500
_TINY = timedelta(microseconds=1)
RETRY_BROKEN = timedelta(minutes=1)  # a schedule whose evaluation failed is looked at again


@dataclass
class TickResult:
    """What one or more batches did."""

    created: int = 0
    conflicts: int = 0
    skipped: int = 0
    coalesced: int = 0
    cancel_requested: int = 0
    schedules_advanced: int = 0
    batches: int = 0
    more_due: bool = False  # the last batch may have left due work (a limit was reached)

    def add(self, other: TickResult) -> None:
        self.created += other.created
        self.conflicts += other.conflicts
        self.skipped += other.skipped
        self.coalesced += other.coalesced
        self.cancel_requested += other.cancel_requested
        self.schedules_advanced += other.schedules_advanced
        self.batches += other.batches
        self.more_due = other.more_due


@dataclass
class _Work:
    """Everything one batch writes, and the events to log once it commits.

    ``jobs`` and ``planned`` run in parallel: the row to insert and the plan it came from.
    """

    jobs: list[NewJob] = field(default_factory=list)
    planned: list[PlannedJob] = field(default_factory=list)
    skips: list[SkipRecord] = field(default_factory=list)
    advances: list[CursorAdvance] = field(default_factory=list)
    cancel: list[uuid.UUID] = field(default_factory=list)
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)

    def event(self, name: str, level: int = logging.INFO, **fields: Any) -> None:
        self.events.append((name, level, fields))


def materialize_batch(
    conn: Connection,
    compiled: CompiledSchedules,
    *,
    now: datetime | None,
    max_schedules: int = DEFAULT_BATCH_SCHEDULES,
    max_jobs: int = DEFAULT_BATCH_JOBS,
    names: Sequence[str] | None = None,
    skip_reason: SkipReason = SkipReason.MISFIRE,
    metrics: MetricsRecorder | None = None,
) -> tuple[TickResult, Callable[[], None]]:
    """Handle one batch of due schedules inside ``conn``'s transaction.

    Returns what was done and a function that logs its events (call it after
    the commit); it also records each created occurrence's scheduler delay
    (created minus scheduled instant) in ``metrics``.
    """
    due, clock = lock_due_schedules(conn, now, max_schedules, names)
    result = TickResult(batches=1)
    if not due:
        return result, lambda: None
    assert clock is not None
    result.more_due = len(due) >= max_schedules  # maybe more rows than the batch took
    work = _Work()
    budget = max_jobs
    planned: list[tuple[DueSchedule, ScheduleSpec, Plan]] = []
    definitions = load_definitions(
        conn, [r.name for r in due if not compiled.knows(r.definition_hash)]
    )
    for row in due:
        if budget <= 0:
            result.more_due = True
            break
        try:
            definition = definitions.get(row.name)
            if definition is None and not compiled.knows(row.definition_hash):
                definition = load_definitions(conn, [row.name]).get(row.name)  # evicted since
            spec, rule = compiled.get(row.definition_hash, definition)
            first = compiled.first_due(
                row.definition_hash, rule, _cursor_of(row), row.next_fire_at
            )
            plan = plan_due(rule, spec, first, clock, budget, skip_reason=skip_reason)
        except Exception as exc:  # a stored definition this rota cannot evaluate
            _postpone(work, row, clock, exc)
            continue
        compiled.remember_next(row.definition_hash, plan.next)
        budget -= len(plan.jobs)
        if plan.next is not None and plan.next.instant <= clock:
            result.more_due = True
        planned.append((row, spec, plan))

    overlap_names = [
        r.name for r, s, p in planned if p.jobs and s.overlap is not OverlapPolicy.ALLOW
    ]
    unfinished = unfinished_jobs_of_schedules(conn, overlap_names)
    job_types = load_job_types(conn)
    for row, spec, plan in planned:
        _plan_rows(work, row, spec, plan, unfinished.get(row.name, []), job_types)

    inserted = insert_jobs_or_skip(conn, work.jobs)
    last_job: dict[str, uuid.UUID] = {}
    for job, pj in zip(work.jobs, work.planned, strict=True):
        assert job.schedule_name is not None
        made = job.job_id in inserted
        if made:
            last_job[job.schedule_name] = job.job_id
        if pj.covers_from is not None:
            folded = pj.folded()
            if folded is not None:
                work.skips.append(_record(job.schedule_name, folded, job.job_id if made else None))
    result.created = len(inserted)
    result.conflicts = len(work.jobs) - len(inserted)
    # The replaced runs: same statement and requester semantics as `rota cancel`.
    result.cancel_requested = sum(request_cancel(conn, j, now=now).changed for j in work.cancel)
    record_skips(conn, work.skips)
    advances = [
        a._replace(last_job_id=last_job[a.name]) if a.name in last_job else a
        for a in work.advances
    ]
    advance_cursors_if_unchanged(conn, advances)
    result.schedules_advanced = len(advances)
    result.skipped = sum(s.count for s in work.skips if s.reason is not SkipReason.COALESCED)
    result.coalesced = sum(s.count for s in work.skips if s.reason is SkipReason.COALESCED)

    def log_events() -> None:
        if metrics is not None:
            for job in work.jobs:
                if job.job_id in inserted and job.scheduled_for is not None:
                    late = (clock - job.scheduled_for).total_seconds()
                    metrics.observe(SCHEDULER_DELAY, (str(job.schedule_name),), late)
        for name, level, fields in work.events:
            emit(log, name, level, **fields)
        if log.isEnabledFor(logging.INFO):  # one event per occurrence, built only when logged
            for job, pj in zip(work.jobs, work.planned, strict=True):
                _log_occurrence(job, pj, job.job_id in inserted)

    return result, log_events


def _log_occurrence(job: NewJob, pj: PlannedJob, made: bool) -> None:
    folded = pj.folded()
    if not made:
        emit(log, "occurrence_conflict", schedule=job.schedule_name, dedup_key=job.dedup_key)
    elif folded is not None:
        emit(
            log,
            "occurrences_coalesced",
            schedule=job.schedule_name,
            job_id=job.job_id,
            dedup_key=job.dedup_key,
            covers_from=utc_key(folded.first),
            covers_count=pj.covers_count,
        )
    else:
        emit(
            log,
            "occurrence_created",
            schedule=job.schedule_name,
            job_id=job.job_id,
            dedup_key=job.dedup_key,
            run_after=job.run_after.isoformat() if job.run_after else None,
        )


def _plan_rows(
    work: _Work,
    row: DueSchedule,
    spec: ScheduleSpec,
    plan: Plan,
    unfinished: Sequence[uuid.UUID],
    job_types: Mapping[str, JobTypeSpec],
) -> None:
    decision = decide_overlap(spec.overlap, plan.jobs, unfinished)
    work.cancel.extend(decision.cancel)
    if decision.cancel:
        work.event(
            "overlap_replaced", schedule=row.name, cancel_requested=len(decision.cancel)
        )
    job_type = job_types.get(spec.job_type)
    if job_type is None:
        work.event(
            "job_type_missing", logging.WARNING, schedule=row.name, job_type=spec.job_type
        )
        job_type = JobTypeSpec(name=spec.job_type)
    name = row.name
    lease_seconds = job_type.lease.total_seconds()
    newest_made: datetime | None = None
    coalesced = 0
    for pj in decision.make:
        instant = pj.instant
        work.jobs.append(
            NewJob(
                job_type=job_type.name,
                pool=job_type.pool,
                max_attempts=job_type.max_attempts,
                lease_seconds=lease_seconds,
                idempotent=job_type.idempotent,
                priority=job_type.priority,
                payload_ref=spec.payload_ref,
                args=spec.args,
                dedup_key=occurrence_key(name, instant),
                run_after=run_after(name, instant, spec.jitter) if spec.jitter else instant,
                schedule_name=name,
                scheduled_for=instant,
                covers_from=pj.covers_from,
                covers_count=pj.covers_count,
            )
        )
        work.planned.append(pj)
        if newest_made is None or instant > newest_made:
            newest_made = instant
        if pj.covers_count:
            coalesced += pj.covers_count - 1
    skipped = 0
    for skip in (*plan.skips, *decision.skips):
        skipped += skip.count
        work.skips.append(_record(name, skip, None))
        work.event(
            "occurrences_skipped",
            schedule=name,
            reason=skip.reason,
            first=utc_key(skip.first),
            last=utc_key(skip.last),
            count=skip.count,
        )
    work.advances.append(
        CursorAdvance(
            name,
            row.next_fire_at,
            plan.cursor if plan.cursor is not None else _cursor_of(row),
            plan.next.instant if plan.next is not None else None,
            newest_made,
            None,
            skipped,
            coalesced,
        )
    )


def _postpone(work: _Work, row: DueSchedule, clock: datetime, exc: Exception) -> None:
    """Keep the cursor, look again after ``RETRY_BROKEN``: one bad row never stalls the rest."""
    work.event(
        "schedule_failed",
        logging.ERROR,
        schedule=row.name,
        error=f"{type(exc).__name__}: {exc}",
        retry_in=f"{RETRY_BROKEN.total_seconds():.0f}s",
    )
    work.advances.append(
        CursorAdvance(
            name=row.name,
            expected_next_fire_at=row.next_fire_at,
            cursor_at=_cursor_of(row),
            next_fire_at=clock + RETRY_BROKEN,
        )
    )


def _cursor_of(row: DueSchedule) -> datetime:
    return row.cursor_at if row.cursor_at is not None else row.next_fire_at - _TINY


def _record(name: str, skip: PlannedSkip, job_id: uuid.UUID | None) -> SkipRecord:
    return SkipRecord(name, skip.reason, skip.first, skip.last, skip.count, job_id)

"""One scheduler transaction: lock a batch of due schedules, make their jobs, move their cursors.

Per batch, not per schedule: the due rows are locked in one SELECT, every job
goes in one multi-row ``INSERT ... ON CONFLICT DO NOTHING RETURNING``, the
ledger rows in one INSERT, and the cursors in one UPDATE, all in one
transaction. Events are logged after the commit, so a rolled-back batch logs
nothing it did not do.

One bad schedule never stops the others. A schedule whose stored definition
cannot be evaluated, whose rows cannot be built, or whose jobs the database
refuses (a value written around ``rota check``) is *set aside*: its cursor
stays, its reason is stored on the row (``rota schedules`` shows it), it is
logged once (``schedule_failed``), and it is looked at again after
``RETRY_BROKEN``. The insert runs in a savepoint; when the database refuses
the batch, each schedule's jobs are inserted in a savepoint of their own, so
the healthy ones still commit. The next advance that works clears the reason.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import InterfaceError, OperationalError

from rota.core.config import JobTypeSpec, OverlapPolicy, ScheduleSpec
from rota.core.metric_deltas import MetricsRecorder
from rota.core.notifications import NotificationEvent
from rota.core.queries.job_types import load_job_types
from rota.core.queries.jobs_control import request_cancel
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.queries.jobs_read import unfinished_jobs_of_schedules
from rota.core.queries.schedule_skips import SkipRecord, record_skips
from rota.core.queries.schedules import (
    CursorAdvance,
    DueSchedule,
    advance_cursors_if_unchanged,
    load_definitions,
    lock_due_schedules,
)
from rota.core.states import SkipReason
from rota.core.timefmt import occurrence_key, utc_key
from rota.producer.notify import Notice, guarded, notify_many
from rota.scheduler.compiled import CompiledSchedules
from rota.scheduler.jitter import run_after
from rota.scheduler.misfire import Coalescing, Plan, PlannedJob, PlannedSkip, plan_due
from rota.scheduler.overlap import decide_overlap
from rota.scheduler.tick_log import log_batch

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
    cancel: list[tuple[str, uuid.UUID]] = field(default_factory=list)  # (schedule, job)
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    # Webhook notices, enqueued in the batch's transaction (schedules set aside).
    notices: list[Notice] = field(default_factory=list)

    def event(self, name: str, level: int = logging.INFO, **fields: Any) -> None:
        self.events.append((name, level, fields))

    def mark(self) -> tuple[int, ...]:
        return tuple(len(part) for part in self._parts())

    def undo(self, mark: tuple[int, ...]) -> None:
        """Forget what was added since ``mark``."""
        for part, length in zip(self._parts(), mark, strict=True):
            del part[length:]

    def drop(self, names: set[str]) -> None:
        """Forget everything of these schedules."""
        keep = [i for i, j in enumerate(self.jobs) if j.schedule_name not in names]
        self.jobs[:] = [self.jobs[i] for i in keep]
        self.planned[:] = [self.planned[i] for i in keep]
        self.skips[:] = [r for r in self.skips if r.schedule_name not in names]
        self.advances[:] = [a for a in self.advances if a.name not in names]
        self.cancel[:] = [c for c in self.cancel if c[0] not in names]
        self.events[:] = [e for e in self.events if e[2].get("schedule") not in names]

    def _parts(self) -> tuple[list[Any], ...]:
        return (self.jobs, self.planned, self.skips, self.advances, self.cancel, self.events)


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
    planned, more_due = _plan_schedules(conn, compiled, due, clock, max_jobs, skip_reason, work)
    result.more_due = result.more_due or more_due

    overlap_names = [
        r.name for r, s, p in planned if p.jobs and s.overlap is not OverlapPolicy.ALLOW
    ]
    unfinished = unfinished_jobs_of_schedules(conn, overlap_names)
    job_types = load_job_types(conn)
    for row, spec, plan in planned:
        mark = work.mark()
        try:
            _plan_rows(work, row, spec, plan, unfinished.get(row.name, []), job_types)
        except Exception as exc:  # a stored value that cannot make a row (huge jitter...)
            work.undo(mark)
            _set_aside(work, row, clock, exc)

    inserted = _insert(conn, work, {r.name: r for r in due}, clock)
    _record_batch(conn, work, inserted, now, result)
    if work.notices:
        notices = work.notices
        guarded(conn, lambda c: notify_many(c, notices, clock))
    return result, lambda: log_batch(work.jobs, work.planned, work.events, inserted, clock, metrics)


def _plan_schedules(
    conn: Connection,
    compiled: CompiledSchedules,
    due: Sequence[DueSchedule],
    clock: datetime,
    budget: int,
    skip_reason: SkipReason,
    work: _Work,
) -> tuple[list[tuple[DueSchedule, ScheduleSpec, Plan]], bool]:
    """Each due schedule's plan, until ``budget`` jobs are planned; True: more is due.

    A schedule whose stored definition cannot be evaluated is set aside in ``work``.
    """
    more_due = False
    planned: list[tuple[DueSchedule, ScheduleSpec, Plan]] = []
    definitions = load_definitions(
        conn, [r.name for r in due if not compiled.knows(r.definition_hash)]
    )
    for row in due:
        if budget <= 0:
            more_due = True
            break
        try:
            definition = definitions.get(row.name)
            if definition is None and not compiled.knows(row.definition_hash):
                definition = load_definitions(conn, [row.name]).get(row.name)  # evicted since
            spec, rule = compiled.get(row.definition_hash, definition)
            first = compiled.first_due(row.definition_hash, rule, _cursor_of(row), row.next_fire_at)
            plan = plan_due(
                rule,
                spec,
                first,
                clock,
                budget,
                skip_reason=skip_reason,
                carried=Coalescing(row.coalesce_from, row.coalesce_count),
                last_counted=_cursor_of(row),
            )
        except Exception as exc:  # a stored definition this rota cannot evaluate
            _set_aside(work, row, clock, exc)
            continue
        compiled.remember_next(row.definition_hash, plan.next)
        budget -= len(plan.jobs)
        if plan.next is not None and plan.next.instant <= clock:
            more_due = True
        planned.append((row, spec, plan))
    return planned, more_due


def _record_batch(
    conn: Connection,
    work: _Work,
    inserted: set[uuid.UUID],
    now: datetime | None,
    result: TickResult,
) -> None:
    """After the insert: the ledger (a coalesced range names its job if it was made),
    the replaced runs' cancels, the cursors (with each schedule's newest job), and the
    counts in ``result``."""
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
    result.cancel_requested = sum(request_cancel(conn, j, now=now).changed for _, j in work.cancel)
    record_skips(conn, work.skips)
    advances = [
        a._replace(last_job_id=last_job[a.name]) if a.name in last_job else a for a in work.advances
    ]
    advance_cursors_if_unchanged(conn, advances)
    result.schedules_advanced = len(advances)
    result.skipped = sum(s.count for s in work.skips if s.reason is not SkipReason.COALESCED)
    result.coalesced = sum(s.count for s in work.skips if s.reason is SkipReason.COALESCED)


def _plan_rows(
    work: _Work,
    row: DueSchedule,
    spec: ScheduleSpec,
    plan: Plan,
    unfinished: Sequence[uuid.UUID],
    job_types: Mapping[str, JobTypeSpec],
) -> None:
    decision = decide_overlap(spec.overlap, plan.jobs, unfinished)
    work.cancel.extend((row.name, j) for j in decision.cancel)
    if decision.cancel:
        work.event("overlap_replaced", schedule=row.name, cancel_requested=len(decision.cancel))
    job_type = job_types.get(spec.job_type)
    if job_type is None:
        work.event("job_type_missing", logging.WARNING, schedule=row.name, job_type=spec.job_type)
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
            coalesce_from=plan.coalescing.first,
            coalesce_count=plan.coalescing.count,
        )
    )
    if row.set_aside_reason is not None:
        work.event("schedule_set_aside_cleared", schedule=name)


def _insert(
    conn: Connection, work: _Work, rows: Mapping[str, DueSchedule], clock: datetime
) -> set[uuid.UUID]:
    """Insert the batch's jobs; when the database refuses them, each schedule's apart.

    A schedule whose own jobs are refused is set aside; the others go in.
    Losing the connection is no value's fault: that propagates.
    """
    if not work.jobs:
        return set()
    try:
        with conn.begin_nested():
            return insert_jobs_or_skip(conn, work.jobs)
    except (OperationalError, InterfaceError):
        raise
    except Exception:  # some schedule's value was refused: find which, below
        pass
    by_schedule: dict[str, list[NewJob]] = {}
    for job in work.jobs:
        assert job.schedule_name is not None
        by_schedule.setdefault(job.schedule_name, []).append(job)
    inserted: set[uuid.UUID] = set()
    refused: dict[str, Exception] = {}
    for name, jobs in by_schedule.items():
        try:
            with conn.begin_nested():
                inserted |= insert_jobs_or_skip(conn, jobs)
        except (OperationalError, InterfaceError):
            raise
        except Exception as exc:  # this schedule's values: set it aside
            refused[name] = exc
    work.drop(set(refused))
    for name, error in refused.items():
        _set_aside(work, rows[name], clock, error)
    return inserted


MAX_REASON = 1_000


def _set_aside(work: _Work, row: DueSchedule, clock: datetime, exc: Exception) -> None:
    """Keep the cursor, store why, look again after ``RETRY_BROKEN``; log it once.

    One bad row never stalls the rest. The reason is logged when it is new,
    not on every retry.
    """
    reason = _reason(exc)
    if reason != row.set_aside_reason:
        work.event(
            "schedule_failed",
            logging.ERROR,
            schedule=row.name,
            error=reason,
            retry_in=f"{RETRY_BROKEN.total_seconds():.0f}s",
        )
        work.notices.append(
            Notice(
                NotificationEvent.SCHEDULE_SET_ASIDE,
                key=f"schedule_set_aside:{row.name}@{utc_key(clock)}",
                schedule=row.name,
                reason=reason,
            )
        )
    work.advances.append(
        CursorAdvance(
            name=row.name,
            expected_next_fire_at=row.next_fire_at,
            cursor_at=_cursor_of(row),
            next_fire_at=clock + RETRY_BROKEN,
            set_aside_reason=reason,
            coalesce_from=row.coalesce_from,
            coalesce_count=row.coalesce_count,
        )
    )


def _reason(exc: BaseException) -> str:
    """``Type: message``, first line, storable (no NUL, no lone surrogate), bounded."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    reason = f"{type(exc).__name__}: {text[0] if text else ''}"
    reason = reason.replace("\x00", "\\0").encode("utf-8", "replace").decode("utf-8")
    return reason[: MAX_REASON - 3] + "..." if len(reason) > MAX_REASON else reason


def _cursor_of(row: DueSchedule) -> datetime:
    return row.cursor_at if row.cursor_at is not None else row.next_fire_at - _TINY


def _record(name: str, skip: PlannedSkip, job_id: uuid.UUID | None) -> SkipRecord:
    return SkipRecord(name, skip.reason, skip.first, skip.last, skip.count, job_id)

"""Deadlines: record each occurrence that was not SUCCEEDED within its schedule's ``deadline``.

A schedule with ``deadline: D`` expects each occurrence's job to succeed by
``instant + D`` (the occurrence's *deadline*). Once that instant has passed,
a replica judges the occurrence, as of the deadline:

* its job SUCCEEDED by the deadline: on time, nothing is recorded;
* its job FAILED or was CANCELLED by the deadline: ``failed``, ``cancelled``;
* its job exists but had not finished by the deadline (queued, waiting for a
  retry, running, or finished later): ``not_finished``;
* a folded (``coalesced``) occurrence is judged by the job that covers it,
  ``skipped:coalesced`` when that job was never made;
* the skip ledger accounts for it: ``skipped:<reason>`` (``misfire``, ``dst``,
  ``overlap``), or ``paused`` for a range dropped on resume;
* the scheduler never reached it because the schedule is paused (``paused``)
  or set aside (``set_aside``);
* the scheduler is still behind it (a catch-up in progress): judged later,
  when the scheduler has handled it;
* nothing at all (its job was pruned, or the rule changed since): not judged.

Bounded work: ``schedules.deadlines_checked_through`` is the watermark (every
occurrence at or before it was judged) and ``deadline_check_at`` when the next
occurrence's deadline passes; a tick locks the schedules whose check is due
(``ix_schedules_deadline_due``) and judges at most ``max_occurrences``
occurrences per transaction, the expected instants coming from the compiled
rule between the watermark and ``now - deadline``. A replica that comes back
after a long outage catches up batch by batch.

Exactly once: the late rows go in with ``INSERT ... ON CONFLICT DO NOTHING``
on (schedule, instant) and the watermarks move in the same transaction,
guarded by the ``deadline_check_at`` read; the event line, the counter and the
returned records are for the rows this replica inserted only.

``SETTLE`` is a small margin after each deadline before judging, so an outcome
written by a transaction that began just before the deadline is seen.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection

from rota.core.notifications import NotificationEvent
from rota.core.queries.late_occurrences import (
    DeadlineAdvance,
    DeadlineDue,
    LateRecord,
    OccurrenceJob,
    SkipRange,
    advance_deadlines_if_unchanged,
    insert_late_or_skip,
    jobs_by_id,
    jobs_of_occurrences,
    lock_deadline_due,
    skips_covering,
)
from rota.core.queries.schedules import load_definitions
from rota.core.states import JobState, LateReason, SkipReason
from rota.core.timefmt import as_utc, occurrence_key, utc_key
from rota.producer.notify import Notice, guarded, notify_many
from rota.runtime.events import emit
from rota.scheduler.compiled import CompiledSchedules
from rota.scheduler.rules import Rule

log = logging.getLogger("rota.scheduler")

DEFAULT_BATCH_SCHEDULES = 200
DEFAULT_BATCH_OCCURRENCES = 500
SETTLE = timedelta(seconds=1)
# A schedule whose definition cannot be evaluated is looked at again after this
# (the materialiser sets it aside and says why).
RETRY_UNREADABLE = timedelta(minutes=1)


@dataclass
class DeadlineResult:
    """What one transaction of the deadline check did."""

    recorded: list[LateRecord] = field(default_factory=list)  # inserted by this replica
    judged: int = 0  # occurrences judged (on time or late)
    more_due: bool = False  # the batch limit was reached: more may be due now


@dataclass
class _Batch:
    """The occurrences one transaction judges, per schedule."""

    rows: dict[str, DeadlineDue] = field(default_factory=dict)
    deadline: dict[str, timedelta] = field(default_factory=dict)
    instants: dict[str, list[datetime]] = field(default_factory=dict)
    job_type: dict[str, str] = field(default_factory=dict)
    advances: list[DeadlineAdvance] = field(default_factory=list)


def record_late_occurrences(
    conn: Connection,
    compiled: CompiledSchedules,
    *,
    now: datetime | None,
    max_schedules: int = DEFAULT_BATCH_SCHEDULES,
    max_occurrences: int = DEFAULT_BATCH_OCCURRENCES,
) -> DeadlineResult:
    """Judge the occurrences whose deadline has passed, inside ``conn``'s transaction.

    Returns the late records this call inserted (none that another replica
    recorded first); log them with ``log_late`` after the commit.
    """
    due, clock = lock_deadline_due(conn, now, max_schedules)
    result = DeadlineResult(more_due=len(due) >= max_schedules)
    if not due:
        return result
    assert clock is not None
    batch = _plan(conn, compiled, due, clock, max_occurrences, result)
    late = _judge(conn, batch, clock)
    result.recorded = insert_late_or_skip(conn, late)
    advance_deadlines_if_unchanged(conn, batch.advances)
    if result.recorded:  # committed with the records they report, or not at all
        notices = [_notice(r, batch.job_type.get(r.schedule_name)) for r in result.recorded]
        guarded(conn, lambda c: notify_many(c, notices, clock))
    return result


def _notice(record: LateRecord, job_type: str | None) -> Notice:
    return Notice(
        NotificationEvent.DEADLINE_MISSED,
        key=f"{NotificationEvent.DEADLINE_MISSED.value}:"
        f"{occurrence_key(record.schedule_name, record.instant)}",
        schedule=record.schedule_name,
        instant=record.instant,
        job_id=record.job_id,
        job_type=job_type,
        reason=record.reason.value,
    )


def log_late(records: Sequence[LateRecord]) -> None:
    """One ``deadline_missed`` line per record (call after the commit)."""
    for r in records:
        emit(
            log,
            "deadline_missed",
            logging.WARNING,
            schedule=r.schedule_name,
            instant=utc_key(r.instant),
            reason=r.reason.value,
            deadline=utc_key(r.deadline),
            job_id=str(r.job_id) if r.job_id is not None else None,
        )


def late_json(row: Mapping[Any, Any]) -> dict[str, Any]:
    """A late occurrence (a ``newest_late`` row) as ``GET /late`` and ``rota late --json`` write it.

    ``finished_at``: when its job reached a final state (SUCCEEDED, FAILED,
    CANCELLED), null while it has not (or without a job).
    """
    return {
        "schedule": row["schedule_name"],
        "instant": _iso(row["instant"]),
        "deadline": _iso(row["deadline"]),
        "reason": row["reason"],
        "job_id": str(row["job_id"]) if row["job_id"] is not None else None,
        "detected_at": _iso(row["detected_at"]),
        "finished_at": _iso(row["finished_at"]),
    }


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return as_utc(value).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _plan(
    conn: Connection,
    compiled: CompiledSchedules,
    due: Sequence[DeadlineDue],
    clock: datetime,
    budget: int,
    result: DeadlineResult,
) -> _Batch:
    """Each due schedule's instants to judge now, and its next watermark and check."""
    batch = _Batch()
    definitions = load_definitions(
        conn, [r.name for r in due if not compiled.knows(r.definition_hash)]
    )
    for row in due:
        if row.removed:  # a removed schedule fires no more: nothing more to judge
            batch.advances.append(
                DeadlineAdvance(row.name, row.check_at, row.checked_through, None)
            )
            continue
        if budget <= 0:
            result.more_due = True
            continue  # left locked and unchanged: due again at the next batch
        try:
            spec, rule = compiled.get(row.definition_hash, definitions.get(row.name))
            if spec.deadline is None:
                batch.advances.append(DeadlineAdvance(row.name, row.check_at, None, None))
                continue
            start = row.checked_through or row.cursor_at or clock
            instants, through, check_at = _due_instants(
                rule, row, start, clock, spec.deadline, budget
            )
        except Exception:  # a definition or rule this rota cannot evaluate: the
            # materialiser sets the schedule aside and says why; one bad row
            # never stops the others' judgments.
            retry = clock + RETRY_UNREADABLE
            batch.advances.append(
                DeadlineAdvance(row.name, row.check_at, row.checked_through, retry)
            )
            continue
        budget -= len(instants)
        if budget <= 0 and check_at is not None and check_at <= clock:
            result.more_due = True
        batch.rows[row.name] = row
        batch.deadline[row.name] = spec.deadline
        batch.job_type[row.name] = spec.job_type
        batch.instants[row.name] = instants
        batch.advances.append(DeadlineAdvance(row.name, row.check_at, through, check_at))
    result.judged = sum(len(v) for v in batch.instants.values())
    return batch


def _waits_for_scheduler(row: DeadlineDue, instant: datetime) -> bool:
    """True while the scheduler has not handled ``instant`` yet and will.

    Instants in a coalesced range still being counted wait for its job. A
    paused or set-aside schedule's instants past its cursor wait for nothing:
    no job was made for them by their deadline.
    """
    cursor = row.cursor_at
    if (
        row.coalesce_from is not None
        and cursor is not None
        and row.coalesce_from <= instant <= cursor
    ):
        return True
    if row.paused or row.set_aside_reason is not None:
        return False
    return cursor is None or instant > cursor


def _due_instants(
    rule: Rule,
    row: DeadlineDue,
    after: datetime,
    clock: datetime,
    deadline: timedelta,
    limit: int,
) -> tuple[list[datetime], datetime, datetime | None]:
    """Instants after ``after`` whose deadline (plus ``SETTLE``) has passed, up to ``limit``.

    Stops at the first instant the scheduler has not handled yet. Returns the
    instants, the new watermark, and when the next check is due (None: the
    rule has no further instant).
    """
    until = clock - deadline - SETTLE
    instants: list[datetime] = []
    through = after
    occ = rule.next_after(after)
    while occ is not None and occ.instant <= until and len(instants) < limit:
        if _waits_for_scheduler(row, occ.instant):
            return instants, through, clock + SETTLE  # look again soon
        instants.append(occ.instant)
        through = occ.instant
        occ = rule.next_after(occ.instant)
    return instants, through, None if occ is None else occ.instant + deadline + SETTLE


def _judge(conn: Connection, batch: _Batch, clock: datetime) -> list[LateRecord]:
    """The late records of the batch's instants, oldest first per schedule."""
    wanted = {name: v for name, v in batch.instants.items() if v}
    found = jobs_of_occurrences(conn, wanted)
    spans = {name: (v[0], v[-1]) for name, v in wanted.items()}
    ledger = skips_covering(
        conn, {n: s for n, s in spans.items() if _unaccounted(n, wanted, found)}
    )
    covering = jobs_by_id(
        conn,
        (s.job_id for ranges in ledger.values() for s in ranges if s.job_id is not None),
    )
    late: list[LateRecord] = []
    for name, instants in wanted.items():
        row = batch.rows[name]
        for instant in instants:
            deadline_at = instant + batch.deadline[name]
            verdict = _verdict(
                row,
                instant,
                deadline_at,
                found.get((name, instant)),
                ledger.get(name, []),
                covering,
            )
            if verdict is not None:
                reason, job_id = verdict
                late.append(LateRecord(name, instant, deadline_at, reason, job_id, clock))
    return late


def _unaccounted(
    name: str,
    wanted: Mapping[str, Sequence[datetime]],
    found: Mapping[tuple[str, datetime], OccurrenceJob],
) -> bool:
    return any((name, i) not in found for i in wanted[name])


Verdict = tuple[LateReason, uuid.UUID | None] | None


def _verdict(
    row: DeadlineDue,
    instant: datetime,
    deadline_at: datetime,
    job: OccurrenceJob | None,
    ranges: Sequence[SkipRange],
    covering: Mapping[uuid.UUID, OccurrenceJob],
) -> Verdict:
    """Late or not, and why: the rules of the module's docstring, in that order."""
    if job is not None:
        return _judge_job(job, deadline_at)
    skip = next((s for s in ranges if s.first_instant <= instant <= s.last_instant), None)
    if skip is not None:
        if skip.reason is SkipReason.COALESCED and skip.job_id is not None:
            cover = covering.get(skip.job_id)
            return None if cover is None else _judge_job(cover, deadline_at)
        return LateReason.skipped(skip.reason), skip.job_id
    if row.cursor_at is None or instant > row.cursor_at:  # never made: see _waits_for_scheduler
        return (LateReason.PAUSED if row.paused else LateReason.SET_ASIDE), None
    return None  # handled, but nothing left to say how (pruned, or the rule changed since)


def _judge_job(job: OccurrenceJob, deadline_at: datetime) -> Verdict:
    """A job's verdict as of ``deadline_at``; a job that ended later was not finished then."""
    ended = job.finished_at is not None and job.finished_at <= deadline_at
    if ended and job.state == JobState.SUCCEEDED:
        return None
    if ended and job.state == JobState.FAILED:
        return LateReason.FAILED, job.job_id
    if ended and job.state == JobState.CANCELLED:
        return LateReason.CANCELLED, job.job_id
    return LateReason.NOT_FINISHED, job.job_id

"""Operator actions on one schedule: pause, resume, trigger, backfill.

* pause: the schedule stops materialising; jobs already made are untouched.
* resume: in the same transaction, the schedule's misfire policy is applied
  to what fell due while it was paused, with skipped ranges recorded as
  ``paused`` (``catch_up``: the occurrences within ``catch_up_window`` run;
  ``coalesce``: one job covers them; ``skip``: none runs). Then it goes on.
* trigger: one manual run now, keyed ``"<name>@manual:<UTC now, microseconds>Z"``,
  which cannot equal a regular key (those have no ``manual:``). It does not
  move the cursor. The schedule's overlap policy applies to it as to an
  occurrence (``rota.scheduler.overlap``, with the schedule row locked, as the
  tick holds it): ``forbid`` refuses it while a run is unfinished
  (``OverlapForbidden``, and nothing is recorded); ``replace`` asks the
  unfinished runs to cancel, with the scheduler's statement, then makes it;
  ``allow`` makes it beside them. A paused schedule can be triggered; a
  removed one cannot. Its operator action names the job it made and the runs
  it replaced (``detail``).
* backfill: every occurrence in ``[from, to)`` with its regular key, in batches
  of ``batch`` per transaction; existing keys are counted, not duplicated, so
  running it twice makes nothing new. The cursor does not move. The range is
  counted first, without making a row (by arithmetic for ``every:`` rules, so
  a century of seconds is one division): more than ``limit`` occurrences
  (default ``BACKFILL_LIMIT``) or a ``to`` later than now is refused, and
  nothing is created. Occurrences at or before the schedule's
  ``pruned_through`` (the newest one whose job was pruned by retention) are
  not made again: they are counted as ``pruned``. Each batch reads the
  watermark with the schedule row held FOR SHARE, so a prune running
  meanwhile cannot slip between the read and the insert. Its one operator
  action (the range and the number of occurrences in ``detail``) is written
  with the first batch, so a backfill stopped half-way is on record.

Each action given an ``ActionNote`` records it in ``operator_actions``
(``rota.core.queries.operator_actions``) in its own transaction; pause and
resume only when they changed the schedule.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine, RowMapping

from rota.core.config import JobTypeSpec, OverlapPolicy, ScheduleSpec
from rota.core.names import close_names
from rota.core.operator_notes import ActionNote, OperatorAction
from rota.core.queries.job_types import get_job_type
from rota.core.queries.jobs_control import request_cancel
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.queries.jobs_prune import pruned_through_for_share
from rota.core.queries.jobs_read import unfinished_jobs_of_schedules, unfinished_runs
from rota.core.queries.operator_actions import record_schedule_action
from rota.core.queries.schedules import (
    get_schedule,
    notify_schedules_changed,
    pause_if_active,
    read_clock,
    record_manual_fire,
    resume_if_paused,
    schedule_names,
)
from rota.core.states import SkipReason
from rota.core.timefmt import MANUAL_KEY_MARK, occurrence_key, utc_key
from rota.runtime.events import emit
from rota.scheduler.compiled import CompiledSchedules
from rota.scheduler.jitter import run_after
from rota.scheduler.misfire import PlannedJob, repeat_period, scan
from rota.scheduler.overlap import decide_overlap
from rota.scheduler.rules import compile_rule
from rota.scheduler.tick import TickResult, materialize_batch

log = logging.getLogger("rota.scheduler")

BACKFILL_BATCH = 500
BACKFILL_LIMIT = 10_000


KNOWN_LISTED = 10  # beyond this many schedules, an unknown name gets close matches only


class UnknownSchedule(LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        shown = repr(name if len(name) <= 80 else name[:80] + "...")
        if not known:
            hint = "; no schedules yet: run `rota apply FILE` first"
        elif len(known) <= KNOWN_LISTED:
            close = close_names(name, known)
            maybe = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
            hint = f"{maybe} (known schedules: {', '.join(known)})"
        else:
            close = close_names(name, known)
            hint = (
                f"; did you mean {' or '.join(map(repr, close))}?"
                if close
                else f" among the {len(known)} schedules (`rota schedules` lists them)"
            )
        super().__init__(f"unknown schedule {shown}{hint}")
        self.name = name
        self.known = known


class ScheduleRemoved(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"schedule {name!r} was removed from the schedule file; add it back and "
            "`rota apply` to use it"
        )


@dataclass(frozen=True)
class ResumeResult:
    was_paused: bool
    tick: TickResult


@dataclass(frozen=True)
class TriggerResult:
    job_id: uuid.UUID
    dedup_key: str
    scheduled_for: datetime
    replaced: tuple[uuid.UUID, ...] = ()  # ``overlap: replace``: the runs asked to cancel


class OverlapForbidden(RuntimeError):
    """A trigger refused by ``overlap: forbid``: a run of the schedule is unfinished."""

    def __init__(self, name: str, running: list[tuple[uuid.UUID, str | None, str]]) -> None:
        job_id, key, state = running[0]
        more = f" and {len(running) - 1} more" if len(running) > 1 else ""
        super().__init__(
            f"schedule {name!r} has overlap: forbid and its run {key or job_id} "
            f"(job {job_id}, {state}){more} is unfinished: wait for it to end, or cancel it "
            "first; nothing was triggered"
        )
        self.name = name
        self.running = [r[0] for r in running]


@dataclass(frozen=True)
class BackfillResult:
    created: int
    existing: int
    dst_skipped: int
    pruned: int = 0  # at or before ``pruned_through``: created once, pruned, never again
    pruned_through: datetime | None = None


@dataclass(frozen=True)
class BackfillCount:
    """The occurrences of ``[from, to)``, counted without making any."""

    count: int  # regular occurrences; with ``exact`` False: at least this many
    exact: bool
    first_key: str | None
    last_key: str | None  # None when not counted that far
    dst_skipped: int
    # Of ``count``: at or before the schedule's ``pruned_through`` (the real run leaves
    # them out); with ``pruned_exact`` False, at least this many.
    pruned: int = 0
    pruned_through: datetime | None = None
    pruned_exact: bool = True


class BackfillRefused(ValueError):
    """A backfill that would be too large, or reach past now: nothing was created."""


def _require(conn: Connection, name: str, *, lock: bool = False) -> RowMapping:
    row = get_schedule(conn, name, lock=lock)
    if row is None:
        raise UnknownSchedule(name, schedule_names(conn))
    return row


def pause(
    engine: Engine, name: str, now: datetime | None = None, note: ActionNote | None = None
) -> bool:
    """Pause ``name``; False when it was already paused (then ``note`` is not recorded)."""
    with engine.begin() as conn:
        _require(conn, name, lock=True)
        changed = pause_if_active(conn, name, now)
        if changed:
            if note is not None:
                record_schedule_action(conn, OperatorAction.PAUSE, name, note, now)
            notify_schedules_changed(conn)
    if changed:
        emit(
            log,
            "schedule_paused",
            schedule=name,
            actor=note.actor if note else None,
            reason=note.reason if note else None,
        )
    return changed


def resume(
    engine: Engine, name: str, now: datetime | None = None, note: ActionNote | None = None
) -> ResumeResult:
    """Resume ``name`` and apply its misfire policy to what the pause missed."""
    with engine.begin() as conn:
        _require(conn, name, lock=True)
        was_paused = resume_if_paused(conn, name)
        if was_paused and note is not None:
            record_schedule_action(conn, OperatorAction.RESUME, name, note, now)
        tick, log_events = materialize_batch(
            conn,
            CompiledSchedules(),
            now=now,
            max_schedules=1,
            names=[name],
            skip_reason=SkipReason.PAUSED,
        )
        notify_schedules_changed(conn)
    log_events()
    if was_paused:
        emit(
            log,
            "schedule_resumed",
            schedule=name,
            created=tick.created,
            skipped=tick.skipped,
            actor=note.actor if note else None,
            reason=note.reason if note else None,
        )
    return ResumeResult(was_paused, tick)


def trigger(
    engine: Engine, name: str, now: datetime | None = None, note: ActionNote | None = None
) -> TriggerResult:
    """Make one manual run of ``name`` now, as its overlap policy allows; the event
    line names ``note``'s actor. Raises ``OverlapForbidden`` and records nothing when
    ``overlap: forbid`` refuses it."""
    with engine.begin() as conn:
        row = _require(conn, name, lock=True)
        if row["removed"]:
            raise ScheduleRemoved(name)
        spec = ScheduleSpec.from_json(row["definition"])
        clock = read_clock(conn, now)
        replaced = _apply_overlap(conn, name, spec, clock, now)
        key = f"{name}{MANUAL_KEY_MARK}{clock:%Y-%m-%dT%H:%M:%S.%f}Z"
        job = NewJob.of_type(
            _job_type(conn, spec),
            payload_ref=spec.payload_ref,
            args=spec.args,
            dedup_key=key,
            run_after=clock,
            schedule_name=name,
            scheduled_for=clock,
        )
        insert_jobs_or_skip(conn, [job])
        record_manual_fire(conn, name, job.job_id, clock)
        if note is not None:
            detail = f"job {job.job_id}"
            if replaced:
                detail += ", replacing " + ", ".join(str(j) for j in replaced)
            record_schedule_action(conn, OperatorAction.TRIGGER, name, note, now, detail=detail)
        notify_schedules_changed(conn)
    if replaced:
        emit(log, "overlap_replaced", schedule=name, cancel_requested=len(replaced))
    emit(
        log,
        "occurrence_triggered",
        schedule=name,
        job_id=job.job_id,
        dedup_key=key,
        actor=note.actor if note else None,
        reason=note.reason if note else None,
    )
    return TriggerResult(job.job_id, key, clock, replaced)


def _apply_overlap(
    conn: Connection, name: str, spec: ScheduleSpec, clock: datetime, now: datetime | None
) -> tuple[uuid.UUID, ...]:
    """The scheduler's overlap decision for one manual run; the runs it asked to cancel."""
    if spec.overlap is OverlapPolicy.ALLOW:
        return ()
    unfinished = unfinished_jobs_of_schedules(conn, [name]).get(name, [])
    decision = decide_overlap(spec.overlap, [PlannedJob(clock)], unfinished)
    if not decision.make:
        raise OverlapForbidden(name, unfinished_runs(conn, unfinished))
    # The replaced runs: the statement and requester semantics of the tick's.
    return tuple(j for j in decision.cancel if request_cancel(conn, j, now=now).changed)


def count_backfill(
    engine: Engine,
    name: str,
    start: datetime,
    end: datetime,
    limit: int = BACKFILL_LIMIT,
    now: datetime | None = None,
    *,
    count_pruned: bool = True,
) -> BackfillCount:
    """Count the occurrences of ``name`` in ``[start, end)``, walking at most ``limit + 1``.

    With ``count_pruned``, also those at or before the schedule's
    ``pruned_through`` (``BackfillCount.pruned``). Raises ``BackfillRefused``
    when ``end`` is later than now (the database clock).
    """
    with engine.begin() as conn:
        row = _require(conn, name)
        if row["removed"]:
            raise ScheduleRemoved(name)
        spec = ScheduleSpec.from_json(row["definition"])
        watermark = row["pruned_through"]
        clock = read_clock(conn, now)
    if end > clock:
        raise BackfillRefused(
            f"--to {utc_key(end)} is later than now ({utc_key(clock)}): backfill makes "
            "past occurrences; the scheduler makes the future ones"
        )
    rule = compile_rule(spec)
    step = spec.every if spec.every is not None and not spec.exclude_dates else None
    first = rule.next_after(start - timedelta(microseconds=1))
    span = scan(rule, first, end, step, repeat_period(spec), limit=limit + 1)
    exact = span.next is None or span.next.instant >= end
    pruned, pruned_exact = 0, True
    if count_pruned and watermark is not None and span.first is not None:
        if span.last is not None and span.last <= watermark:
            # Every occurrence counted lies at or before it: no second walk; if the
            # count stopped short of one after it, more may.
            pruned = span.count
            pruned_exact = exact or (span.next is not None and span.next.instant > watermark)
        elif span.first <= watermark:
            # It falls inside the counted span: a shorter walk (which may stop at
            # ``limit`` where the first was counted by period).
            below = watermark + timedelta(microseconds=1)
            part = scan(rule, first, below, step, repeat_period(spec), limit=limit + 1)
            pruned = part.count
            pruned_exact = part.next is None or part.next.instant >= below
    return BackfillCount(
        count=span.count,
        exact=exact,
        first_key=occurrence_key(name, span.first) if span.first else None,
        last_key=occurrence_key(name, span.last) if span.last and exact else None,
        dst_skipped=span.dst_count,
        pruned=pruned,
        pruned_through=watermark,
        pruned_exact=pruned_exact,
    )


def backfill(
    engine: Engine,
    name: str,
    start: datetime,
    end: datetime,
    batch: int = BACKFILL_BATCH,
    *,
    limit: int = BACKFILL_LIMIT,
    now: datetime | None = None,
    note: ActionNote | None = None,
) -> BackfillResult:
    """Make every occurrence of ``name`` in ``[start, end)`` that has no job yet.

    Refused (``BackfillRefused``, nothing created) past ``limit`` occurrences
    or with ``end`` later than now. With ``note``, one operator action is
    recorded, in the first transaction that writes.
    """
    # The chunks below leave out what lies at or before the watermark, read as
    # each one commits: that count is not needed here.
    counted = count_backfill(engine, name, start, end, limit, now, count_pruned=False)
    if not counted.exact or counted.count > limit:
        raise BackfillRefused(
            f"{name} [{utc_key(start)}, {utc_key(end)}) has "
            f"{'more than ' if not counted.exact else ''}{counted.count:,} occurrences, "
            f"more than the limit of {limit:,}: nothing was created; give --max N to raise it"
        )
    with engine.begin() as conn:
        row = _require(conn, name)
        if row["removed"]:
            raise ScheduleRemoved(name)
        spec = ScheduleSpec.from_json(row["definition"])
        job_type = _job_type(conn, spec)
    rule = compile_rule(spec)
    created = existing = dst_skipped = pruned = 0
    watermark: datetime | None = None
    detail = f"[{utc_key(start)}, {utc_key(end)}): {counted.count:,} occurrence(s)"
    unrecorded = note  # until the first transaction that writes records it
    occ = rule.next_after(start - timedelta(microseconds=1))
    while occ is not None and occ.instant < end:
        chunk: list[NewJob] = []
        while occ is not None and occ.instant < end and len(chunk) < batch:
            if occ.skipped:
                dst_skipped += 1
            else:
                chunk.append(
                    NewJob.of_type(
                        job_type,
                        payload_ref=spec.payload_ref,
                        args=spec.args,
                        dedup_key=occurrence_key(name, occ.instant),
                        run_after=run_after(name, occ.instant, spec.jitter),
                        schedule_name=name,
                        scheduled_for=occ.instant,
                    )
                )
            occ = rule.next_after(occ.instant)
        with engine.begin() as conn:
            watermark = pruned_through_for_share(conn, name)
            if watermark is not None:
                fresh = [j for j in chunk if j.scheduled_for is None or j.scheduled_for > watermark]
                pruned += len(chunk) - len(fresh)
                chunk = fresh
            inserted = insert_jobs_or_skip(conn, chunk)
            if unrecorded is not None:
                record_schedule_action(
                    conn, OperatorAction.BACKFILL, name, unrecorded, now, detail=detail
                )
                unrecorded = None
        created += len(inserted)
        existing += len(chunk) - len(inserted)
    if unrecorded is not None:  # a range without occurrences: asked for all the same
        with engine.begin() as conn:
            record_schedule_action(
                conn, OperatorAction.BACKFILL, name, unrecorded, now, detail=detail
            )
    emit(
        log,
        "schedule_backfilled",
        schedule=name,
        created=created,
        existing=existing,
        pruned=pruned,
        actor=note.actor if note else None,
        reason=note.reason if note else None,
    )
    return BackfillResult(created, existing, dst_skipped, pruned, watermark)


def _job_type(conn: Connection, spec: ScheduleSpec) -> JobTypeSpec:
    return get_job_type(conn, spec.job_type) or JobTypeSpec(name=spec.job_type)

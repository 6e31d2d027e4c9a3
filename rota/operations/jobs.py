"""What an operator does to jobs, from any front end: cancel or replay one job, or many.

Each function owns its transactions and logs one event per job it changed,
after the commit (``job_cancelled``, ``job_cancel_requested``,
``job_replayed``, with the actor and the reason).

One job: ``cancel_job`` / ``replay_job`` take the id or a unique prefix of it
(``rota.core.queries.job_ids``) and resolve it in the same transaction.

Many jobs: ``bulk_cancel`` / ``bulk_replay`` walk the jobs matching a
``JobFilter`` in primary-key order, ``batch`` ids per transaction: each batch
is chosen and changed by the same guarded statement as the single form
(``rota.core.queries.jobs_control``), then committed, so a million matching
jobs make a thousand short transactions, never one that holds SQLite's write
lock (or PostgreSQL row locks) for the whole run. A job that moved on between
batches is left alone by the guard. ``count_matching`` answers a dry run.

On SQLite the write lock is not handed over fairly: a writer waiting for it
polls (every 100 ms at worst, SQLite's busy handler), and a loop that begins
its next transaction right after a commit would win every time, starving
producers and executors until the bulk operation ends. So between batches it
leaves the lock free for as long as the batch held it, at most
``SQLITE_YIELD_MAX``: the bulk operation takes at most about half of the
write lock's time while others wait for it.

A filter that names a job type or schedule stored nowhere is refused before
anything is counted or changed (``check_names``): a typo must not look like
"no jobs".

A batch that fails (the database went away, a deadlock with an executor)
raises ``BulkInterrupted`` with what the committed batches did: running the
same operation again goes on from there, since the jobs already changed no
longer match.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from rota.core.names import close_names
from rota.core.operator_notes import ActionNote
from rota.core.queries.job_ids import NoSuchJob, resolve_job_id
from rota.core.queries.job_types import get_job_types, load_job_types
from rota.core.queries.jobs_control import (
    CANCELLABLE,
    REPLAYABLE,
    ControlResult,
    cancel_jobs,
    replay_failed,
    replay_jobs,
    request_cancel,
)
from rota.core.queries.jobs_read import JobFilter, count_by_state, count_matches, job_ids_after
from rota.core.queries.schedules import get_schedule, schedule_names
from rota.core.states import JobState
from rota.runtime.events import emit

log = logging.getLogger("rota.operator")

BULK_BATCH = 1000
SQLITE_YIELD_MAX = 0.1  # seconds: the slowest poll of a writer waiting in SQLite's busy handler

_EVENTS = {
    JobState.CANCELLED: "job_cancelled",
    JobState.CANCEL_REQUESTED: "job_cancel_requested",
    JobState.QUEUED: "job_replayed",
}


class StateNotAllowed(ValueError):
    """A bulk filter names states the operation cannot apply to (bad input)."""


class UnknownName(LookupError):
    """A filter names a job type or schedule that is stored nowhere (bad input)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field  # "job_type" or "schedule"


def check_names(conn: Connection, where: JobFilter) -> None:
    """Raise ``UnknownName`` for the first job type or schedule of ``where`` stored
    nowhere, with the close names."""
    stored = get_job_types(conn, where.job_types) if where.job_types else {}
    for name in where.job_types:
        if name not in stored:
            close = close_names(name, sorted(load_job_types(conn)))
            hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise UnknownName("job_type", f"unknown job type {name[:80]!r}{hint}")
    for name in where.schedules:
        if get_schedule(conn, name) is None:
            # Only on this error path: the schedules module brings the scheduler's rules.
            from rota.operations.schedules import UnknownSchedule

            raise UnknownName("schedule", str(UnknownSchedule(name, schedule_names(conn))))


@dataclass(frozen=True)
class BulkResult:
    """How many jobs reached each state, in how many transactions."""

    changed: Mapping[JobState, int]
    batches: int

    @property
    def total(self) -> int:
        return sum(self.changed.values())


class BulkInterrupted(RuntimeError):
    """A batch failed; ``done`` is what the batches committed before it did."""

    def __init__(self, done: BulkResult, cause: SQLAlchemyError) -> None:
        super().__init__(str(cause))
        self.done = done
        self.cause = cause


@dataclass(frozen=True)
class JobControl:
    """The job a reference resolved to, and what the request did to it."""

    job_id: uuid.UUID
    changed: bool
    state: JobState


def cancel_job(engine: Engine, ref: str, note: ActionNote | None = None) -> JobControl:
    """Cancel the job ``ref`` names (a ``JobRefError`` when it names no single job)."""
    return _one(engine, ref, lambda conn, job_id: request_cancel(conn, job_id, note=note), note)


def replay_job(engine: Engine, ref: str, note: ActionNote | None = None) -> JobControl:
    """Replay the FAILED job ``ref`` names; ``changed`` is False when it is not FAILED."""
    return _one(engine, ref, lambda conn, job_id: replay_failed(conn, job_id, note=note), note)


def _one(
    engine: Engine,
    ref: str,
    request: Callable[[Connection, uuid.UUID], ControlResult],
    note: ActionNote | None,
) -> JobControl:
    with engine.begin() as conn:
        job_id = resolve_job_id(conn, ref)
        result = request(conn, job_id)
    if result.state is None:  # deleted (pruned) between the lookup and the request
        raise NoSuchJob(f"no job {job_id}")
    if result.changed:
        _emit(job_id, result.state, note)
    return JobControl(job_id, result.changed, result.state)


def cancel_states(where: JobFilter) -> tuple[str, ...]:
    """The states a bulk cancel applies to: the filter's (all cancellable ones if none)."""
    return _allowed(where, CANCELLABLE, "cancelled")


def replay_states(where: JobFilter) -> tuple[str, ...]:
    return _allowed(where, REPLAYABLE, "replayed")


def _allowed(where: JobFilter, allowed: tuple[str, ...], verb: str) -> tuple[str, ...]:
    wrong = [s for s in where.states if s not in allowed]
    if wrong:
        raise StateNotAllowed(
            f"jobs in state {', '.join(wrong)} cannot be {verb}; only {', '.join(allowed)} can"
        )
    return tuple(s for s in allowed if not where.states or s in where.states)


def count_matching(conn: Connection, where: JobFilter) -> dict[str, int]:
    """{state: how many jobs match} for a dry run (one grouped count)."""
    return count_by_state(conn, where)


def count_up_to(conn: Connection, where: JobFilter, cap: int) -> int:
    """How many jobs match ``where``, counted no further than ``cap + 1`` (more than ``cap``)."""
    return count_matches(conn, where, cap + 1)


def bulk_cancel(
    engine: Engine,
    where: JobFilter,
    note: ActionNote | None = None,
    *,
    batch: int = BULK_BATCH,
    now: datetime | None = None,
    limit: int | None = None,
) -> BulkResult:
    """Cancel every job matching ``where`` (its states within QUEUED, RETRY_WAIT, RUNNING)."""
    states = cancel_states(where)
    return _bulk(
        engine,
        replace(where, states=states),
        lambda conn, ids: cancel_jobs(conn, ids, states=states, note=note, now=now),
        note,
        batch,
        limit,
    )


def bulk_replay(
    engine: Engine,
    where: JobFilter,
    note: ActionNote | None = None,
    *,
    batch: int = BULK_BATCH,
    now: datetime | None = None,
    limit: int | None = None,
) -> BulkResult:
    """Replay every FAILED job matching ``where``."""
    return _bulk(
        engine,
        replace(where, states=replay_states(where)),
        lambda conn, ids: replay_jobs(conn, ids, note=note, now=now),
        note,
        batch,
        limit,
    )


def _bulk(
    engine: Engine,
    where: JobFilter,
    apply: Callable[[Connection, list[uuid.UUID]], dict[uuid.UUID, JobState]],
    note: ActionNote | None,
    batch: int,
    limit: int | None,
) -> BulkResult:
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    counts: Counter[JobState] = Counter()
    batches = 0
    seen = 0
    after: uuid.UUID | None = None
    sqlite = engine.dialect.name == "sqlite"
    while limit is None or seen < limit:
        take = batch if limit is None else min(batch, limit - seen)
        started = time.monotonic()
        try:
            with engine.begin() as conn:
                ids = job_ids_after(conn, where, after, take)
                changed = apply(conn, ids) if ids else {}
        except SQLAlchemyError as exc:
            raise BulkInterrupted(BulkResult(dict(counts), batches), exc) from exc
        if not ids:
            break
        batches += 1
        seen += len(ids)
        for job_id, state in changed.items():
            counts[state] += 1
            _emit(job_id, state, note)
        if len(ids) < take:
            break
        after = ids[-1]
        if sqlite:  # let waiting writers have the lock (see the module's docstring)
            time.sleep(min(time.monotonic() - started, SQLITE_YIELD_MAX))
    return BulkResult(dict(counts), batches)


def _emit(job_id: uuid.UUID, state: JobState, note: ActionNote | None) -> None:
    emit(
        log,
        _EVENTS.get(state, "job_controlled"),
        job_id=job_id,
        state=state.value,
        actor=note.actor if note else None,
        reason=note.reason if note else None,
    )

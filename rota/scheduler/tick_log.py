"""What a committed scheduler batch logs and observes.

Each occurrence a tick makes is one event line (``occurrence_created``,
``occurrence_conflict``, ``occurrences_coalesced``) and one scheduler-delay
observation. A burst, more than ``OCCURRENCE_LINES`` occurrences of one
schedule in one batch (a catch-up after a day down), is one
``occurrences_created`` line for that schedule with its count and its first
and last instant, so a backlog never floods the log; DEBUG keeps every
occurrence's own line. Called only after the batch commits: a rolled-back
batch logs nothing it did not do.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rota.core.metric_deltas import SCHEDULER_DELAY, MetricsRecorder
from rota.core.queries.jobs_insert import NewJob
from rota.core.timefmt import utc_key
from rota.runtime.events import emit
from rota.scheduler.misfire import PlannedJob

log = logging.getLogger("rota.scheduler")

# Past this many occurrences of one schedule in one batch, one line sums them up.
OCCURRENCE_LINES = 10


def log_batch(
    jobs: Sequence[NewJob],
    planned: Sequence[PlannedJob],
    events: Sequence[tuple[str, int, dict[str, Any]]],
    inserted: set[uuid.UUID],
    clock: datetime,
    metrics: MetricsRecorder | None,
) -> None:
    """The batch's delays and events, once it has committed."""
    if metrics is not None:
        for job in jobs:
            if job.job_id in inserted and job.scheduled_for is not None:
                late = (clock - job.scheduled_for).total_seconds()
                metrics.observe(SCHEDULER_DELAY, (), late)
    for name, level, fields in events:
        emit(log, name, level, **fields)
    if not log.isEnabledFor(logging.INFO):
        return
    per_schedule: dict[str | None, int] = {}
    for job in jobs:
        per_schedule[job.schedule_name] = per_schedule.get(job.schedule_name, 0) + 1
    # A burst (a catch-up after a day down) is one line per schedule and batch; a
    # normal tick is one line per occurrence. DEBUG keeps every occurrence's line.
    burst = {s for s, n in per_schedule.items() if n > OCCURRENCE_LINES}
    debug = log.isEnabledFor(logging.DEBUG)
    for job, pj in zip(jobs, planned, strict=True):
        if job.schedule_name not in burst:
            _log_occurrence(job, pj, job.job_id in inserted, logging.INFO)
        elif debug:
            _log_occurrence(job, pj, job.job_id in inserted, logging.DEBUG)
    for schedule in burst:
        _log_burst(schedule, [j for j in jobs if j.schedule_name == schedule], inserted)


def _log_burst(schedule: str | None, jobs: Sequence[NewJob], inserted: set[uuid.UUID]) -> None:
    """One line for a schedule's occurrences in one batch: made, and already there."""
    made = [j for j in jobs if j.job_id in inserted]
    instants = [j.scheduled_for for j in made if j.scheduled_for is not None]
    emit(
        log,
        "occurrences_created",
        schedule=schedule,
        count=len(made),
        conflicts=len(jobs) - len(made),
        first=min(instants).isoformat() if instants else None,
        last=max(instants).isoformat() if instants else None,
    )


def _log_occurrence(job: NewJob, pj: PlannedJob, made: bool, level: int) -> None:
    folded = pj.folded()
    if not made:
        emit(
            log,
            "occurrence_conflict",
            level,
            schedule=job.schedule_name,
            dedup_key=job.dedup_key,
        )
    elif folded is not None:
        emit(
            log,
            "occurrences_coalesced",
            level,
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
            level,
            schedule=job.schedule_name,
            job_id=job.job_id,
            dedup_key=job.dedup_key,
            run_after=job.run_after.isoformat() if job.run_after else None,
        )

"""What an executor observes for the operations metrics: in-memory increments only.

Called from the claim loop, the sweeper and the outcome writer's callback;
the process's ``MetricsFlusher`` writes the deltas once per interval
(``rota.core.metric_deltas``). Durations are measured on the database clock where
the database gave the instants (claim, sweep), and by the monotonic clock for
how long an attempt ran since its claim.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import timedelta

from rota.core.claimed import ClaimedJob
from rota.core.metric_deltas import (
    ATTEMPTS_PER_SUCCESS,
    CANCEL_LATENCY,
    END_TO_END,
    EXECUTION,
    EXPIRED_LEASES,
    QUEUE_WAIT,
    MetricsRecorder,
)
from rota.core.queries.jobs_lease import Swept
from rota.core.queries.jobs_outcome import Finish
from rota.core.states import TERMINAL, JobState
from rota.executor.lease import HeldJob


def observe_claim(metrics: MetricsRecorder, c: ClaimedJob) -> None:
    """Queue wait: due (``run_after``) to claimed, for the first attempt of a job."""
    if c.attempt == 1 and c.run_after is not None and c.started_at is not None:
        metrics.observe(QUEUE_WAIT, (c.job_type,), (c.started_at - c.run_after).total_seconds())


def observe_swept(metrics: MetricsRecorder, swept: Iterable[Swept]) -> None:
    for s in swept:
        metrics.inc(EXPIRED_LEASES, (s.job_type,))
        if s.state.value in TERMINAL and s.finished_at is not None and s.created_at is not None:
            lived = (s.finished_at - s.created_at).total_seconds()
            metrics.observe(END_TO_END, (s.job_type, s.state.value), lived)
            if s.state is JobState.CANCELLED and s.cancel_requested_at is not None:
                waited = (s.finished_at - s.cancel_requested_at).total_seconds()
                metrics.observe(CANCEL_LATENCY, (s.job_type,), waited)


def observe_written(
    metrics: MetricsRecorder, held: HeldJob, finish: Finish, state: JobState | None
) -> None:
    """One attempt's outcome was written (``state`` None: the lease was lost, nothing counts)."""
    if state is None:
        return
    c = held.claimed
    ran = max(0.0, time.monotonic() - held.started_at)
    outcome = JobState.CANCELLED.value if state is JobState.CANCELLED else finish.outcome.value
    metrics.observe(EXECUTION, (c.job_type, outcome), ran)
    if state is JobState.SUCCEEDED:
        metrics.observe(ATTEMPTS_PER_SUCCESS, (c.job_type,), c.attempt)
    if state is JobState.CANCELLED:
        metrics.cancelled(c.job_id)  # latency and end-to-end read from the row at the flush
    elif state.value in TERMINAL and c.started_at is not None and c.created_at is not None:
        # The database's claim instant plus the monotonic time since: no clock skew.
        finished = c.started_at + timedelta(seconds=ran)
        lived = (finished - c.created_at).total_seconds()
        metrics.observe(END_TO_END, (c.job_type, state.value), lived)

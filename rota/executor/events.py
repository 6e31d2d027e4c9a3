"""One log event per job transition in the executor, with stable keys.

Every event carries ``job_id`` and the lease ``generation``, so an operator
can follow one attempt with one grep (``event=lease_lost``) and tests can
assert on it. The two lines of a job's normal life, ``claimed`` and
``succeeded``, are DEBUG: at thousands of jobs a second they would halve the
rate and flood the log, so at INFO ``executor.summary`` counts them once per
interval. Everything else stays one line per job at INFO or above.

``written`` maps what the outcome writer wrote to its event:

* SUCCEEDED: ``succeeded`` (DEBUG), or ``reconciled`` when the reconcile hook said so;
* RETRY_WAIT: ``retry_scheduled``, with the code and the delay;
* FAILED: ``failed`` (WARNING), with the code;
* CANCELLED: ``cancelled``;
* QUEUED (released: at shutdown, or its handler does not import here): ``released``;
* nothing, the fence matched no row: ``lease_lost`` (WARNING).

The executor's own events (``executor_started``, ``draining``...) are logged
where they happen.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from rota.core.claimed import ClaimedJob
from rota.core.queries.jobs_lease import Swept
from rota.core.queries.jobs_outcome import Finish
from rota.core.states import AttemptOutcome, JobState
from rota.runtime.events import emit

log = logging.getLogger("rota.executor")


def claimed(c: ClaimedJob) -> None:
    emit(
        log,
        "claimed",
        logging.DEBUG,
        job_id=c.job_id,
        job_type=c.job_type,
        generation=c.lease_generation,
        attempt=c.attempt,
    )


def written(c: ClaimedJob, finish: Finish, state: JobState | None) -> None:
    """The event of an outcome the writer wrote: ``state`` is None when its fence failed."""
    if state is None:
        lease_lost(c, "outcome write matched no row")
        return
    fields: dict[str, Any] = {"job_id": c.job_id, "generation": c.lease_generation}
    if state is JobState.SUCCEEDED:
        if finish.outcome is AttemptOutcome.RECONCILED:
            emit(log, "reconciled", **fields)
        else:
            emit(log, "succeeded", logging.DEBUG, **fields)
    elif state is JobState.RETRY_WAIT:
        emit(
            log,
            "retry_scheduled",
            **fields,
            code=finish.error_code,
            delay_seconds=round(finish.delay_seconds or 0.0, 3),
        )
    elif state is JobState.FAILED:
        emit(log, "failed", logging.WARNING, code=finish.error_code, **fields)
    elif state is JobState.CANCELLED:
        emit(log, "cancelled", **fields)
    elif state is JobState.QUEUED:
        emit(log, "released", **fields)


def lease_lost(c: ClaimedJob, reason: str) -> None:
    emit(
        log,
        "lease_lost",
        logging.WARNING,
        job_id=c.job_id,
        generation=c.lease_generation,
        reason=reason,
    )


def timed_out(c: ClaimedJob) -> None:
    emit(log, "timed_out", logging.WARNING, job_id=c.job_id, generation=c.lease_generation)


def release_withheld(c: ClaimedJob) -> None:
    emit(
        log,
        "release_withheld",
        logging.WARNING,
        job_id=c.job_id,
        generation=c.lease_generation,
        reason="the handler did not stop; the job is taken back after its lease",
    )


def lease_expired(swept: Iterable[Swept]) -> None:
    """One event per lease the sweeper took back (any executor's)."""
    for s in swept:
        emit(
            log,
            "lease_expired",
            logging.WARNING,
            job_id=s.job_id,
            generation=s.generation,
            state=s.state,
            attempt_count=s.attempt_count,
        )

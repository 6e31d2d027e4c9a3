"""Turning how an attempt ended into the fenced write that records it.

Policy, per attempt ``n`` of ``max_attempts``:

* success -> SUCCEEDED (``needs_reconcile`` cleared);
* ``PermanentError`` -> FAILED at once;
* ``RetryableError`` or any other exception -> RETRY_WAIT after
  ``retry_delay_seconds`` (full jitter), or FAILED when ``n >= max_attempts``;
* ambiguous (``AmbiguousError``, an execution timeout) -> ``needs_reconcile``
  set and never a blind rerun: with a ``reconcile`` hook, RETRY_WAIT (the hook
  decides at the next attempt) or FAILED when no attempt is left; without one,
  FAILED with code NEEDS_RECONCILE: a person checks, then ``rota replay``.
"""

from __future__ import annotations

import random
import traceback

from rota.executor.backoff import retry_delay_seconds
from rota.executor.errors import AmbiguousError, HandlerError, PermanentError
from rota.shared.config.model import Backoff, JobTypeSpec
from rota.shared.queries.jobs_claim import ClaimedJob
from rota.shared.queries.jobs_outcome import Finish
from rota.shared.states import AttemptOutcome, JobState

NEEDS_RECONCILE = "NEEDS_RECONCILE"
TIMEOUT = "TIMEOUT"
_DETAIL_LIMIT = 4000


def succeeded(
    c: ClaimedJob, *, reconciled: bool = False, result_ref: str | None = None
) -> Finish:
    outcome = AttemptOutcome.RECONCILED if reconciled else AttemptOutcome.SUCCEEDED
    return Finish(
        c.job_id,
        c.lease_generation,
        JobState.SUCCEEDED,
        outcome,
        needs_reconcile=False,
        result_ref=result_ref,
    )


def cancelled(c: ClaimedJob) -> Finish:
    return Finish(c.job_id, c.lease_generation, JobState.CANCELLED, AttemptOutcome.CANCELLED)


def released(c: ClaimedJob) -> Finish:
    return Finish(
        c.job_id,
        c.lease_generation,
        JobState.QUEUED,
        AttemptOutcome.RELEASED,
        delay_seconds=0.0,
        refund=True,
    )


def describe(exc: BaseException) -> tuple[str, str]:
    """(code, detail): the handler's code or the exception class name, and a traceback tail."""
    code = exc.code if isinstance(exc, HandlerError) else type(exc).__name__
    detail = "".join(traceback.format_exception(exc)).strip()
    return code, detail[-_DETAIL_LIMIT:]


def failed(
    c: ClaimedJob,
    spec: JobTypeSpec | None,
    exc: BaseException,
    rng: random.Random,
    *,
    reconciling: bool = False,
) -> Finish:
    code, detail = describe(exc)
    if isinstance(exc, AmbiguousError):
        return ambiguous(c, spec, code, detail, rng)
    # A fresh run decided the outcome, so an earlier ambiguity is settled.
    keep = None if reconciling else False
    if isinstance(exc, PermanentError) or c.attempt >= c.max_attempts:
        return Finish(
            c.job_id,
            c.lease_generation,
            JobState.FAILED,
            AttemptOutcome.FAILED,
            code,
            detail,
            needs_reconcile=keep,
        )
    return Finish(
        c.job_id,
        c.lease_generation,
        JobState.RETRY_WAIT,
        AttemptOutcome.RETRY,
        code,
        detail,
        delay_seconds=_delay(spec, c.attempt, rng),
        needs_reconcile=keep,
    )


def ambiguous(
    c: ClaimedJob, spec: JobTypeSpec | None, code: str, detail: str, rng: random.Random
) -> Finish:
    if spec is None or spec.reconcile is None:
        why = (
            f"the outcome of attempt {c.attempt} is unknown ({code}) and job type "
            f"{c.job_type!r} has no reconcile hook: check whether the work happened, then "
            f"`rota replay {c.job_id}` if it must run again.\n{detail}"
        )
        return Finish(
            c.job_id,
            c.lease_generation,
            JobState.FAILED,
            AttemptOutcome.AMBIGUOUS,
            NEEDS_RECONCILE,
            why[:_DETAIL_LIMIT],
            needs_reconcile=True,
        )
    if c.attempt >= c.max_attempts:
        return Finish(
            c.job_id,
            c.lease_generation,
            JobState.FAILED,
            AttemptOutcome.AMBIGUOUS,
            code,
            detail,
            needs_reconcile=True,
        )
    return Finish(
        c.job_id,
        c.lease_generation,
        JobState.RETRY_WAIT,
        AttemptOutcome.AMBIGUOUS,
        code,
        detail,
        delay_seconds=_delay(spec, c.attempt, rng),
        needs_reconcile=True,
    )


def unreconcilable(c: ClaimedJob) -> Finish:
    """A job flagged ``needs_reconcile`` whose type has no hook: a person must decide."""
    why = (
        f"an earlier attempt ended with an unknown outcome ({c.last_error_code}) and job type "
        f"{c.job_type!r} has no reconcile hook: check whether the work happened, then "
        f"`rota replay {c.job_id}` if it must run again"
    )
    return Finish(
        c.job_id,
        c.lease_generation,
        JobState.FAILED,
        AttemptOutcome.FAILED,
        NEEDS_RECONCILE,
        why,
        needs_reconcile=True,
    )


def timed_out(c: ClaimedJob, spec: JobTypeSpec | None, rng: random.Random) -> Finish:
    limit = spec.timeout.total_seconds() if spec is not None and spec.timeout else 0.0
    detail = f"attempt {c.attempt} overran the execution timeout of {limit:g}s"
    return ambiguous(c, spec, TIMEOUT, detail, rng)


def _delay(spec: JobTypeSpec | None, attempts_made: int, rng: random.Random) -> float:
    backoff = spec.backoff if spec is not None else Backoff()
    return retry_delay_seconds(backoff, attempts_made, rng)

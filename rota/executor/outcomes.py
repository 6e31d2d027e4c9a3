"""Turning how an attempt ended into the fenced write that records it.

Policy, per attempt ``n`` of ``max_attempts``:

* success -> SUCCEEDED (``needs_reconcile`` cleared);
* ``PermanentError`` -> FAILED at once;
* ``RetryableError`` or any other exception -> RETRY_WAIT after
  ``retry_delay_seconds`` (jitter on top), or FAILED when ``n >= max_attempts``;
* ambiguous (``AmbiguousError``, an execution timeout): with a ``reconcile``
  hook, ``needs_reconcile`` is set and the job goes to RETRY_WAIT (the hook
  decides at the next attempt) or FAILED when no attempt is left; without a
  hook, an ``idempotent: true`` job is simply retried like a retryable error
  (repeating it is safe), and an ``idempotent: false`` one goes to FAILED with
  code NEEDS_RECONCILE: a person checks, then ``rota replay``.

Every value a handler controls is made storable here (``core.storable``):
the code is cut to its column, the detail (a traceback) keeps its first and
last lines within ``ERROR_DETAIL_MAX``; NUL and lone surrogates are replaced.
A handler's result must be None or a string reference of at most
``RESULT_REF_MAX`` characters without NUL: anything else fails the job with
RESULT_INVALID (permanent: the handler returned, so its work may be done, and
running it again would not change what it returns).
"""

from __future__ import annotations

import random

from rota.core.claimed import ClaimedJob
from rota.core.config import Backoff, JobTypeSpec
from rota.core.database import short_error
from rota.core.queries.jobs_outcome import Finish
from rota.core.states import AttemptOutcome, JobState
from rota.core.storable import (
    ERROR_DETAIL_MAX,
    storable_text,
)
from rota.executor.backoff import retry_delay_seconds
from rota.executor.errors import AmbiguousError, PermanentError
from rota.executor.returned import describe

NEEDS_RECONCILE = "NEEDS_RECONCILE"
TIMEOUT = "TIMEOUT"
OUTCOME_UNSTORABLE = "OUTCOME_UNSTORABLE"
EXECUTOR_ERROR = "EXECUTOR_ERROR"


def succeeded(c: ClaimedJob, *, reconciled: bool = False, result_ref: str | None = None) -> Finish:
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
    hook = spec is not None and spec.reconcile is not None
    if not hook and c.idempotent:
        # Safe to repeat: retry within max_attempts, no person needed.
        state = JobState.FAILED if c.attempt >= c.max_attempts else JobState.RETRY_WAIT
        return Finish(
            c.job_id,
            c.lease_generation,
            state,
            AttemptOutcome.AMBIGUOUS,
            code,
            detail,
            delay_seconds=None if state is JobState.FAILED else _delay(spec, c.attempt, rng),
            needs_reconcile=False,
        )
    if not hook:
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
            storable_text(why, ERROR_DETAIL_MAX, keep="middle"),
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


def crashed(c: ClaimedJob, exc: BaseException) -> Finish:
    """The outcome when the executor's own code around a handler failed (a bug of ours).

    Retried after a minute while attempts are left: the job is not to blame.
    Built from fixed values only, so that building it cannot fail too.
    """
    state = JobState.FAILED if c.attempt >= c.max_attempts else JobState.RETRY_WAIT
    return Finish(
        c.job_id,
        c.lease_generation,
        state,
        AttemptOutcome.FAILED if state is JobState.FAILED else AttemptOutcome.RETRY,
        EXECUTOR_ERROR,
        f"the executor failed around the handler ({type(exc).__name__}): see its log",
        delay_seconds=None if state is JobState.FAILED else 60.0,
    )


def unstorable(finish: Finish, refusal: BaseException) -> Finish:
    """The outcome to write when the database refused ``finish`` for what it held.

    Same state and attempt outcome, none of the handler's values (nor its output): our own code,
    and a detail saying what was refused and why. It is fenced like any other.
    """
    detail = (
        f"the outcome of this attempt (state {finish.state.value}, code "
        f"{storable_text(finish.error_code, 200)!r}) was refused by the database and "
        f"replaced by this one: {storable_text(short_error(refusal), 2000)}"
    )
    return finish._replace(
        error_code=OUTCOME_UNSTORABLE,
        error_detail=storable_text(detail, ERROR_DETAIL_MAX),
        result_ref=None,
        output=None,
        output_dropped=0,
        progress_stage=None,
        progress_done=None,
        progress_total=None,
    )


def _delay(spec: JobTypeSpec | None, attempts_made: int, rng: random.Random) -> float:
    backoff = spec.backoff if spec is not None else Backoff()
    return retry_delay_seconds(backoff, attempts_made, rng)

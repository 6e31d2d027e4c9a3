r"""The executor: claim jobs, run their handlers, and record what happened, safely.

Job states (see ``core.states`` for the diagram)::

    QUEUED / RETRY_WAIT --claim--> RUNNING --success--> SUCCEEDED
                                   RUNNING --error, attempts left--> RETRY_WAIT
                                   RUNNING --error, none left / permanent--> FAILED
                                   RUNNING --release at shutdown (attempt refunded)--> QUEUED
                                   RUNNING --cancel requested--> CANCEL_REQUESTED
                          CANCEL_REQUESTED --worker acknowledges / lease expires--> CANCELLED
                          RUNNING --lease expires (sweeper)--> RETRY_WAIT or FAILED

Invariants:

* A claim is one statement (PostgreSQL: ``FOR UPDATE SKIP LOCKED``; SQLite:
  ``UPDATE ... WHERE job_id IN (SELECT ... LIMIT n) RETURNING`` under the write
  lock). It raises ``lease_generation`` and ``attempt_count`` by one, sets the
  lease from the database clock, and opens one ``job_attempts`` row. On
  PostgreSQL, with no ``tenant_limit`` and no keyed job waiting, it takes no
  lock and runs in autocommit (``claim_unkeyed_jobs``); otherwise it runs in a
  transaction after the claim advisory lock, so key and tenant counts are never
  read stale by two claimers. Priority order is kept: the lock-free claim runs
  only when no keyed job could be claimed (a keyed job that becomes claimable
  during it waits for the next round).
* Each loop (claim + sweep, outcome writer, heartbeat) holds one connection;
  on PostgreSQL its single-statement writes run in autocommit (each statement
  is atomic, every fence is inside it). An error drops the connection; the
  next tick reconnects.
* Every later write (outcome, heartbeat, progress, cancel acknowledgement,
  release) is fenced on job id + leased state + owner + ``lease_generation`` in
  the same statement. Zero rows matched means the lease was lost: the worker
  stops that job, reports nothing more for it and logs ``event=lease_lost``.
  The attempt row is closed in the same transaction as the job write.
* At most one RUNNING job per ``concurrency_key`` and, with ``tenant_limit``,
  at most that many per tenant: checked inside the claim statement.
* ``attempt_count`` never exceeds ``max_attempts`` (a CHECK constraint too);
  the last error code and a detail stay on the row.

Failure handling:

* A handler raises ``RetryableError`` (or any exception: the class name is the
  code) -> RETRY_WAIT after ``min(max, base * 2^(n-1))`` seconds plus up to
  ``backoff.jitter`` (default 0.2) of that on top (n = attempts made; never
  sooner), FAILED once ``max_attempts`` is reached; ``PermanentError`` ->
  FAILED at once. A handler returns None or a result reference (a string of
  at most 2,000 characters, no NUL); anything else is RESULT_INVALID (FAILED).
* Ambiguous outcomes (``AmbiguousError``, an execution timeout, an expired lease
  of an ``idempotent: false`` job type): with a ``reconcile`` hook,
  ``needs_reconcile`` is set and the next attempt runs the hook first (True:
  SUCCEEDED, attempt outcome RECONCILED; False: the handler runs). Without a
  hook, an ``idempotent: true`` job is retried within ``max_attempts`` like a
  retryable error (repeating it is safe); an ``idempotent: false`` one goes to
  FAILED with code NEEDS_RECONCILE: a person decides, then ``rota replay``.
* What a handler says is made storable before it is written
  (``core.storable.storable_text``: cut to its column with a marker, NUL and
  lone surrogates replaced; ``ctx.progress`` refuses wrong types). A batch of
  outcomes or renewals the database refuses for its values is split down to
  the row at fault (``writer``, ``heartbeat``): the others are written; that
  row gets an OUTCOME_UNSTORABLE fallback, or is given up to the sweeper.
* Every claimed job reaches an outcome whatever fails around its handler:
  args that are not a JSON object (BAD_ARGS), a job type that cannot be loaded
  right after the claim (JOB_TYPE_UNAVAILABLE, retried), a bug of ours in the
  worker slot (EXECUTOR_ERROR, retried).
* A worker that dies holds its leases until they expire; the sweeper (every
  executor runs it) moves them to RETRY_WAIT / FAILED / CANCELLED with
  LEASE_EXPIRED, in one guarded statement that re-checks expiry itself.
* A worker that cannot renew (database unreachable) fences itself: after
  ``LOCAL_LEASE_SHARE`` of the lease without a confirmed renewal, measured on
  the monotonic clock, its handlers' ``ctx.checkpoint()`` raises ``LeaseLost``.
* An attempt that overruns its job type's ``timeout`` stops being renewed and is
  written off as ambiguous (TIMEOUT); a Python thread cannot be killed, so its
  ``ctx.checkpoint()`` raises ``JobTimedOut`` and its result is ignored; a
  ``command:`` handler's or an ``isolation: process`` handler's process group
  is killed (``isolation``). Every child dies with the executor
  (``processes``: PR_SET_PDEATHSIG), and so does what it started (a watcher
  per command run, one forked by each isolated child, kills the group).
* Cancellation is cooperative: ``rota cancel`` sets CANCEL_REQUESTED, the
  heartbeat brings it to the worker, ``ctx.checkpoint()`` raises
  ``JobCancelled``, and the worker acknowledges with a fenced write.
* Graceful shutdown (SIGTERM/SIGINT): stop claiming, let running handlers
  finish for the drain timeout (a second signal ends it), interrupt the rest
  (``ctx.checkpoint()`` raises, children are killed), and release each job
  (fenced: QUEUED again, the attempt refunded, the attempt row RELEASED) only
  once its handler has returned; a handler still running after a short grace
  keeps its lease, and the sweeper takes the job back after the process exits.

Wake-up: an idle executor claims within milliseconds of a new job: on
PostgreSQL it LISTENs on ``rota_jobs`` (an insert trigger, releases, sweeps and
replays notify); on SQLite it watches ``PRAGMA data_version`` for commits of
other connections. Polling (``poll_interval``) is the fallback, and what finds
jobs whose ``run_after`` has just passed.

Coroutine handlers (``async def``, or any handler returning an awaitable) run
on one event loop per executor, in a thread of its own (``aio``); the slot
that called the handler waits for the task and cancels it on timeout,
release or lost lease (on a cancellation request, after a short grace for
``ctx.checkpoint()`` to raise first).

Limits: ``concurrency`` slots (threads) per executor process; pools served
are chosen per executor; ``tenant_limit`` (``rota executor --tenant-limit N``)
is an executor option, counted over all running jobs of the tenant in the
database, so every executor should be given the same value.

Execution is at least once with fenced bookkeeping: a stale worker cannot
change a job's recorded state, but it may have done the work; side effects
are made safe by idempotent handlers (``ctx.idempotency_key(op)``) and
reconciliation, not by the lease.

May import: ``rota.producer``, ``rota.runtime``, ``rota.migrations`` and
``rota.core``; never ``rota.scheduler`` (its sibling) or anything above.
"""

from __future__ import annotations

from rota.executor.context import Covers, JobContext
from rota.executor.errors import (
    AmbiguousError,
    HandlerError,
    JobCancelled,
    JobInterrupted,
    JobReleased,
    JobTimedOut,
    LeaseLost,
    PermanentError,
    RetryableError,
)

__all__ = [
    "AmbiguousError",
    "Covers",
    "HandlerError",
    "JobCancelled",
    "JobContext",
    "JobInterrupted",
    "JobReleased",
    "JobTimedOut",
    "LeaseLost",
    "PermanentError",
    "RetryableError",
]

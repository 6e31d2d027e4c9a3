"""Running one claimed job in a worker slot: reconcile if needed, then the handler.

The result is a ``Finish`` to write, or ``None`` when there is nothing to
report (the lease was lost, the job timed out or was released meanwhile).
Everything logged meanwhile in this context (the handler's own log lines, a
command's output) carries the job's id, type, attempt and schedule.
"""

from __future__ import annotations

import random

from rota.executor import outcomes
from rota.executor.command import run_command
from rota.executor.context import JobContext
from rota.executor.errors import JobCancelled, JobInterrupted, PermanentError
from rota.executor.handlers import HandlerRegistry
from rota.executor.lease import HeldJob
from rota.shared.logcontext import job_log_context
from rota.shared.queries.jobs_outcome import Finish


def run_held_job(held: HeldJob, registry: HandlerRegistry, rng: random.Random) -> Finish | None:
    c = held.claimed
    with job_log_context(c.job_id, c.job_type, c.attempt, c.schedule_name):
        return _run(held, registry, rng)


def _run(held: HeldJob, registry: HandlerRegistry, rng: random.Random) -> Finish | None:
    c = held.claimed
    spec = held.spec
    ctx = JobContext.for_job(held)
    in_hook = False
    result_ref: str | None = None
    try:
        if spec is None:
            raise PermanentError(
                "UNKNOWN_JOB_TYPE",
                f"job type {c.job_type!r} is not stored: declare it and run `rota apply`",
            )
        if c.needs_reconcile:
            if spec.reconcile is None:
                return outcomes.unreconcilable(c)
            in_hook = True
            done = registry.resolve(spec.reconcile)(ctx) is True
            in_hook = False
            if done:
                return outcomes.succeeded(c, reconciled=True)
        if spec.command is not None:
            run_command(spec.command, ctx, held)
        else:
            assert spec.handler is not None, "a job type has a handler or a command"
            returned = registry.resolve(spec.handler)(ctx)
            if isinstance(returned, str) and returned:
                # A handler may return where its result lives (e.g. s3://bucket/key).
                result_ref = returned
    except JobCancelled:
        if held.stop is not None:
            return None
        return outcomes.cancelled(c)
    except JobInterrupted:
        return None
    except BaseException as exc:  # a handler's failure of any kind is the job's, not ours
        if held.stop is not None:
            return None
        return outcomes.failed(c, spec, exc, rng, reconciling=in_hook)
    return outcomes.succeeded(c, result_ref=result_ref)

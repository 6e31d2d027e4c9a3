"""Running one claimed job in a worker slot: reconcile if needed, then the handler.

The result is a ``Finish`` to write, or ``None`` when there is nothing to
report (the lease was lost, the job timed out or was released meanwhile).
Everything logged meanwhile in this context (the handler's own log lines, a
command's output) carries the job's id, type, attempt and schedule, and what
the handler writes is kept in the attempt's own output (``output``).

``run_held_job`` never raises: whatever fails, the handler or anything around
it (building the context, a job type that could not be loaded, our own code),
becomes the job's outcome.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from typing import Any

from rota.core.config import Isolation
from rota.core.queries.jobs_outcome import Finish
from rota.executor import outcomes
from rota.executor.aio import EventLoopThread, TaskStopped
from rota.executor.context import JobContext
from rota.executor.errors import (
    JobCancelled,
    JobInterrupted,
    PermanentError,
    RetryableError,
)
from rota.executor.handlers import HandlerRegistry
from rota.executor.lease import HeldJob
from rota.executor.output import OutputTail, capturing
from rota.executor.returned import result_ref_of
from rota.runtime.logcontext import job_log_context

JOB_TYPE_UNAVAILABLE = "JOB_TYPE_UNAVAILABLE"


def run_held_job(
    held: HeldJob, registry: HandlerRegistry, rng: random.Random, aio: EventLoopThread
) -> Finish | None:
    c = held.claimed
    held.output = tail = OutputTail()
    with job_log_context(c.job_id, c.job_type, c.attempt, c.schedule_name), capturing(tail):
        return _run(held, registry, rng, aio)


def _run(  # noqa: C901 - a job's whole run in one try: type missing, reconcile hook, command, process or thread, each ending
    held: HeldJob, registry: HandlerRegistry, rng: random.Random, aio: EventLoopThread
) -> Finish | None:
    c = held.claimed
    spec = held.spec
    in_hook = False
    result_ref: str | None = None
    try:
        if spec is None:
            if held.load_error is not None:
                raise RetryableError(
                    JOB_TYPE_UNAVAILABLE,
                    f"job type {c.job_type!r} could not be loaded: {held.load_error}",
                )
            raise PermanentError(
                "UNKNOWN_JOB_TYPE",
                f"job type {c.job_type!r} is not stored: declare it and run `rota apply`",
            )
        ctx = JobContext.for_job(held)
        if c.needs_reconcile:
            if spec.reconcile is not None:
                in_hook = True
                if spec.isolation is Isolation.PROCESS:
                    # Imported here: multiprocessing and the child's code serve only these types.
                    from rota.executor.isolation import run_isolated

                    done = run_isolated(spec.reconcile, "reconcile", ctx, held) is True
                else:
                    done = _call(registry.resolve(spec.reconcile), ctx, held, aio) is True
                in_hook = False
                if done:
                    return outcomes.succeeded(c, reconciled=True)
            elif not c.idempotent:
                return outcomes.unreconcilable(c)
            # idempotent without a hook: repeating the work is safe, run it
        if spec.command is not None:
            from rota.executor.command import run_command  # only command: types (not at start)

            run_command(spec.command, ctx, held)
        elif spec.isolation is Isolation.PROCESS:
            assert spec.handler is not None, "a job type has a handler or a command"
            # Imported here: multiprocessing and the child's code serve only these types.
            from rota.executor.isolation import run_isolated

            result_ref = result_ref_of(run_isolated(spec.handler, "handler", ctx, held))
        else:
            assert spec.handler is not None, "a job type has a handler or a command"
            returned = _call(registry.resolve(spec.handler), ctx, held, aio)
            # A handler may return where its result lives (e.g. s3://bucket/key).
            result_ref = result_ref_of(returned)
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


def _call(fn: Callable[[Any], Any], ctx: JobContext, held: HeldJob, aio: EventLoopThread) -> Any:
    """Call a handler or hook; an awaitable it returns runs on the executor's event loop."""
    returned = fn(ctx)
    if returned is None or isinstance(returned, str) or not inspect.isawaitable(returned):
        return returned
    try:
        return aio.run(
            returned,
            stop_now=lambda: held.stop is not None,
            stop_soon=lambda: held.cancel_requested,
        )
    except TaskStopped:
        ctx.checkpoint()  # raises why the job stopped: lost, timed out, released, cancelled
        raise JobCancelled(f"job {held.claimed.job_id}: its task was cancelled") from None

"""Graceful shutdown's drain: let handlers finish, then release what is left.

Once claiming has stopped:

1. the prefetched jobs no slot has started go back to the queue at once;
2. the running handlers get ``drain_timeout`` seconds to finish (``hurry``, a
   second SIGTERM/SIGINT, ends the wait at once);
3. every unfinished handler is interrupted (``ctx.checkpoint()`` raises
   ``JobReleased``; commands and process-isolated handlers are killed) while
   its lease is still renewed, and its job is released (fenced: QUEUED again,
   the attempt refunded) once the handler has returned;
4. a handler still running ``STOP_GRACE_SECONDS`` later (a thread that never
   checks in) keeps its lease: nothing is written for it, the process goes
   away, and the sweeper takes the job back once the lease has expired. A job
   is never released while its handler may still run, or another executor
   could run it at the same time.
"""

from __future__ import annotations

import logging
import threading

from rota.executor import events
from rota.executor.held import HeldJobs
from rota.executor.lease import StopReason
from rota.executor.slots import Slots
from rota.runtime.events import emit

log = logging.getLogger("rota.executor")

# Inside Kubernetes' default 30 s grace period (terminationGracePeriodSeconds),
# with room for STOP_GRACE_SECONDS and the release writes before its SIGKILL.
DEFAULT_DRAIN_TIMEOUT = 25.0
# After the drain: how long interrupted handlers get to stop before their jobs are
# released. A handler still running then keeps its lease.
STOP_GRACE_SECONDS = 2.0
DRAIN_CHECK_SECONDS = 0.05  # the drain looks again this often, for ``hurry``
WRITE_SECONDS = 10.0  # how long the releases and last outcomes get to be written


def drain(
    jobs: HeldJobs,
    slots: Slots,
    worker_id: str,
    timeout: float,
    hurry: threading.Event | None = None,
) -> None:
    """Drain for up to ``timeout`` seconds, release the rest, and wait for the writes."""
    slots.release_waiting()
    running = sum(1 for h in jobs.all() if not h.settled)
    emit(log, "draining", worker_id=worker_id, running=running, drain_timeout=timeout)
    drained = slots.wait_until(
        lambda: all(h.settled for h in jobs.all()), timeout, hurry, step=DRAIN_CHECK_SECONDS
    )
    if not drained and hurry is not None and hurry.is_set():
        emit(log, "drain_cut_short", logging.WARNING, worker_id=worker_id)
    release_after_stop(jobs, slots, STOP_GRACE_SECONDS)
    jobs.writer.wait_idle(WRITE_SECONDS)


def release_after_stop(jobs: HeldJobs, slots: Slots, grace: float) -> None:
    """Interrupt every unfinished handler; release each job once its handler returned."""
    for held in jobs.all():
        if not held.settled:
            held.interrupt(StopReason.RELEASED)  # the heartbeat still renews it
    still_running = slots.still_running_after(grace)
    for held in jobs.all():
        if held.settled:
            continue
        if held in still_running:
            held.settle()  # keeps its lease: nothing is written, the sweeper recovers it
            events.release_withheld(held.claimed)
        else:
            jobs.release(held)

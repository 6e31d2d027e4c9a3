"""The jobs one executor holds a lease on, from the claim until their outcome is written.

A job enters at its claim and leaves once the outcome writer has written its
outcome (or found its lease gone), so the heartbeat renews its lease until
then. Whatever ends a hold goes through ``HeldJob.settle()`` first, so one
outcome at most is written per attempt:

* ``finish``: the handler's outcome (or a release), handed to the writer;
* ``lost``: the lease is gone; nothing more is written, the job leaves now;
* ``timed_out``: past its execution timeout, written off as ambiguous.

A written outcome carries what the attempt's handler wrote so far
(``HeldJob.output``), so its output is kept under the same fence.

Each transition logs its event (``executor.events``) and counts in the
process's metrics and its log summary (``executor.summary``) once written.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable

from rota.core.metric_deltas import MetricsRecorder
from rota.core.queries.jobs_outcome import Finish
from rota.core.states import AttemptOutcome, JobState
from rota.executor import events, outcomes
from rota.executor.lease import HeldJob, StopReason
from rota.executor.observations import observe_written
from rota.executor.summary import JobSummary
from rota.executor.transactions import LoopConnection
from rota.executor.writer import OutcomeWriter
from rota.runtime.outage import Outage


class HeldJobs:
    def __init__(
        self,
        db: LoopConnection,
        owner: str,
        metrics: MetricsRecorder,
        rng: random.Random,
        *,
        linger_batch: int,
        outage: Outage,
        summary: JobSummary,
    ) -> None:
        self.summary = summary
        # The heartbeat's ``due_by``: told of each job's first deadline as it enters.
        self.watch: Callable[[float], None] | None = None
        self._held: dict[uuid.UUID, HeldJob] = {}
        self._lock = threading.Lock()
        self._metrics = metrics
        self._rng = rng  # the backoff jitter of a timed-out attempt's retry
        self.writer = OutcomeWriter(
            db, owner, self._written, self.forget, linger_batch=linger_batch, outage=outage
        )

    def start(self) -> None:
        self.writer.start()

    def stop(self, timeout: float = 0.0) -> None:
        """Stop the writer, after trying ``timeout`` seconds more to write what is pending."""
        self.writer.stop(timeout=timeout)

    def add(self, held: HeldJob) -> None:
        watch = held.watch = self.watch
        with self._lock:
            self._held[held.claimed.job_id] = held
        if watch is not None:
            watch(min(held.renewal_due(), held.timeout_at()))

    def all(self) -> list[HeldJob]:
        with self._lock:
            return list(self._held.values())

    def forget(self, held: HeldJob) -> None:
        with self._lock:
            if self._held.get(held.claimed.job_id) is held:
                del self._held[held.claimed.job_id]

    def wait_written(self, timeout: float) -> bool:
        """Wait until every settled job's outcome is written (or its lease found gone)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.writer.wait_idle(max(0.0, deadline - time.monotonic())):
                return False
            with self._lock:
                if not any(h.settled for h in self._held.values()):
                    return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    # -- the ends of a hold ------------------------------------------------------

    def finish(self, held: HeldJob, finish: Finish) -> None:
        """Write ``finish`` as the job's outcome, unless something settled it first."""
        if held.settle():
            self.writer.submit(held, _with_output(held, finish))

    def release(self, held: HeldJob) -> None:
        """Hand the job back to the queue (QUEUED, the attempt refunded)."""
        self.finish(held, outcomes.released(held.claimed))

    def lost(self, held: HeldJob, why: str) -> None:
        held.interrupt(StopReason.LOST)
        held.settle()
        self.forget(held)
        self.summary.lease_lost()
        events.lease_lost(held.claimed, why)

    def timed_out(self, held: HeldJob) -> None:
        held.interrupt(StopReason.TIMED_OUT)
        if held.settle():
            c = held.claimed
            events.timed_out(c)
            finish = outcomes.timed_out(c, held.spec, self._rng)
            self.writer.submit(held, _with_output(held, finish))

    def _written(self, held: HeldJob, finish: Finish, state: JobState | None) -> None:
        self.forget(held)
        observe_written(self._metrics, held, finish, state)
        self.summary.written(state, finish.outcome is AttemptOutcome.RECONCILED)
        events.written(held.claimed, finish, state)


def _with_output(held: HeldJob, finish: Finish) -> Finish:
    """``finish`` carrying what the attempt's handler wrote, if it wrote anything."""
    tail = held.output
    kept = None if tail is None else tail.snapshot()
    if kept is None:
        return finish
    return finish._replace(output=kept.text, output_dropped=kept.dropped_bytes)

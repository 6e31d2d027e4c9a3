"""Worker slots: ``concurrency`` threads running handlers, fed claimed jobs by a queue.

The claim loop puts each claimed job in the queue (``put``); a free slot takes
it, runs it (``runner.run_held_job``) and hands the outcome to the held set,
which has it written. A slot is busy from the ``put`` until its job's handler
has returned, so the claim loop claims no more than there is room for
(``room``). Coroutine handlers run on one event loop shared by the slots
(``aio``), started on first use.

Prefetch: a claim takes up to ``concurrency + prefetch`` jobs at once (fewer,
larger transactions); the jobs beyond the free slots wait in the queue for
one. Their leases run while they wait, so the heartbeat renews them like the
others, and graceful shutdown hands them back at once, attempt refunded
(``release_waiting``). Only short jobs are prefetched: the prefetch in use is
cut so that a prefetched job waits about ``PREFETCH_WAIT_SECONDS`` at most, by
the mean run time of this process's recent jobs (none until a first job has
run), so long jobs stay in the database for idle executors to take. A mean
learnt on short jobs says nothing of the next batch's: when a prefetched job
has waited ``PREFETCH_MAX_WAIT_SECONDS`` for a slot (the jobs running turned
out long), every job still waiting is handed back the same way, and nothing
more is prefetched until a job has ended (``hand_back_stale``).
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable

from rota.executor import outcomes
from rota.executor.aio import EventLoopThread
from rota.executor.handlers import HandlerRegistry
from rota.executor.held import HeldJobs
from rota.executor.lease import HeldJob, StopReason
from rota.executor.runner import run_held_job
from rota.runtime.startstop import BackgroundLoop

log = logging.getLogger("rota.executor")

DEFAULT_CONCURRENCY = 32  # slots of an executor started without --concurrency
DEFAULT_PREFETCH = None  # None: PREFETCH_PER_SLOT jobs per slot, HELD_AT_LEAST held in all
# The prefetch when none is given, per slot. The claim statements and the outcome
# batches cost the database and the executor much the same whatever their size,
# so the jobs of a larger claim cost less each: two executors of 32 slots
# draining no-op jobs did 12,700 jobs/s claiming up to 48 (a prefetch of 16), and
# 16,300 (64) to 18,600 (160), with a third less PostgreSQL CPU per job (A/B in
# one run). A prefetched job still waits about PREFETCH_WAIT_SECONDS at most.
PREFETCH_PER_SLOT = 4
# And never fewer jobs held at once (slots and prefetch) than an executor at the
# default concurrency holds (160): a claim costs the same whatever the
# process's slots, so an executor of few slots claiming for them alone pays it for
# a handful of jobs. 48 executors of 4 slots through PgBouncer drained 4,800
# no-op jobs/s with a prefetch of 16, 10,800 with 64 and 12,600 with 128 (one run
# each, the same hour), the database's CPU per job falling from 0.21 to 0.07 ms.
HELD_AT_LEAST = DEFAULT_CONCURRENCY * (1 + PREFETCH_PER_SLOT)
PREFETCH_WAIT_SECONDS = 0.5
# A prefetched job that has waited this long for a slot is handed back (see above).
PREFETCH_MAX_WAIT_SECONDS = 4 * PREFETCH_WAIT_SECONDS
_RUN_TIME_WEIGHT = 0.1  # of the newest job in the moving mean of run times
# A busy executor waits this long for more slots to free before claiming a small
# batch: fewer, larger claims under load, at most this much added latency.
CLAIM_LINGER_SECONDS = 0.002


def default_prefetch(concurrency: int) -> int:
    """The prefetch of an executor of ``concurrency`` slots started without one."""
    return max(HELD_AT_LEAST - concurrency, PREFETCH_PER_SLOT * concurrency)


class Slots(BackgroundLoop):
    def __init__(
        self,
        concurrency: int,
        prefetch: int,
        rng: random.Random,
        jobs: HeldJobs,
    ) -> None:
        # stop() does not wait for the slots: a handler may never return.
        super().__init__("rota-slot", join_seconds=0.0, threads=concurrency)
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.handlers = HandlerRegistry()  # each handler imported once per process
        self._rng = rng
        self._jobs = jobs
        self._aio = EventLoopThread()  # coroutine handlers' loop, started on first use
        self._queue: queue.SimpleQueue[HeldJob | None] = queue.SimpleQueue()
        self._busy = 0  # jobs put and not yet done with (under _cond)
        self._running: set[HeldJob] = set()  # jobs a slot has taken up (under _cond)
        # Jobs put and no slot has taken yet, with when they were put (under _cond),
        # in the order they were put: the first is the one that has waited longest.
        self._waiting: dict[HeldJob, float] = {}
        self._cond = threading.Condition()  # notified whenever a slot frees
        self._mean_run_seconds: float | None = None  # moving mean of handler run times

    # -- room ------------------------------------------------------------------

    @property
    def free(self) -> int:
        return self.concurrency - self._busy

    @property
    def capacity(self) -> int:
        """Jobs this process may hold at once: running, plus prefetched ones waiting."""
        return self.concurrency + self._prefetch_now()

    def room(self) -> int:
        """How many more jobs may be put now (a claim asks for no more)."""
        return self.capacity - self._busy

    def _prefetch_now(self) -> int:
        """The prefetch, cut so a waiting job waits about PREFETCH_WAIT_SECONDS at most."""
        mean = self._mean_run_seconds
        if mean is None or self.prefetch == 0:
            return 0
        if mean <= 0:
            return self.prefetch
        return min(self.prefetch, int(PREFETCH_WAIT_SECONDS * self.concurrency / mean))

    def _ran_for(self, seconds: float) -> None:
        mean = self._mean_run_seconds  # a lost update between slots is harmless
        self._mean_run_seconds = (
            seconds if mean is None else mean + _RUN_TIME_WEIGHT * (seconds - mean)
        )

    # -- putting and waiting -----------------------------------------------------

    def put(self, held: HeldJob) -> None:
        """Queue a claimed job for the next free slot."""
        with self._cond:
            self._busy += 1
            self._waiting[held] = time.monotonic()
        self._queue.put(held)

    def wait_for_room(self, stop: threading.Event, until: float, max_batch: int) -> None:
        """Wait until a good batch of slots is free (or a short linger passes with some)."""
        want = max(1, min(max_batch, self.capacity // 2))
        linger_end: float | None = None
        with self._cond:
            while not stop.is_set() and time.monotonic() < until:
                free = self.capacity - self._busy
                if free >= want:
                    return
                if free > 0:
                    linger_end = linger_end or time.monotonic() + CLAIM_LINGER_SECONDS
                    left = linger_end - time.monotonic()
                    if left <= 0:
                        return
                    self._cond.wait(left)
                else:
                    self._cond.wait(max(0.0, until - time.monotonic()))

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no job is queued or running."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._busy > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def wait_until(
        self,
        done: Callable[[], bool],
        timeout: float,
        hurry: threading.Event | None = None,
        step: float | None = None,
    ) -> bool:
        """Wait until ``done()``, checked each time a slot frees (and every ``step``);
        False once ``timeout`` has passed or ``hurry`` is set."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0 or (hurry is not None and hurry.is_set()):
                    return False
                self._cond.wait(left if step is None else min(left, step))
        return True

    def still_running_after(self, grace: float) -> set[HeldJob]:
        """Wait up to ``grace`` for the running jobs to settle; the ones whose slot still runs."""
        deadline = time.monotonic() + grace
        with self._cond:
            while any(not h.settled for h in self._running):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return set(self._running)

    def notify(self) -> None:
        """Wake every waiter (``wait_for_room``, ``wait_until``) to look again."""
        with self._cond:
            self._cond.notify_all()

    def release_waiting(self) -> None:
        """Hand back at once the prefetched jobs no slot has started (attempt refunded)."""
        while True:
            try:
                held = self._queue.get_nowait()
            except queue.Empty:
                return
            if held is None:  # a slot's stop signal: leave it for the slots
                self._queue.put(None)
                return
            held.interrupt(StopReason.RELEASED)
            self._jobs.release(held)
            with self._cond:
                self._waiting.pop(held, None)
                self._busy -= 1
                self._cond.notify_all()

    def hand_back_stale(self, max_wait: float = PREFETCH_MAX_WAIT_SECONDS) -> int:
        """Hand back every waiting job once one has waited ``max_wait`` for a slot.

        The jobs stay in the slots' queue, stopped (a slot skips them, which frees
        their room); their leases go back at once, attempt refunded. The mean run
        time is forgotten, so nothing is prefetched until a job has ended.
        Returns how many were handed back.
        """
        now = time.monotonic()
        with self._cond:
            if not self._waiting or now - next(iter(self._waiting.values())) < max_wait:
                return 0
            stale = list(self._waiting)
            self._waiting.clear()
            self._mean_run_seconds = None
            for held in stale:  # under the lock: a slot taking one now sees it stopped
                held.interrupt(StopReason.RELEASED)
        for held in stale:
            self._jobs.release(held)
        return len(stale)

    # -- the slots ---------------------------------------------------------------

    def stop(self) -> None:
        """Stop the coroutine handlers' loop, then let each slot end once it is free."""
        self._aio.stop()
        super().stop()

    def _interrupt(self) -> None:
        for _ in self._threads:
            self._queue.put(None)

    def _run(self) -> None:
        while True:
            held = self._queue.get()
            if held is None:
                return
            with self._cond:
                self._running.add(held)  # before the check: shutdown relies on the order
                self._waiting.pop(held, None)
            try:
                if held.settled or held.stop is not None:  # lost, timed out or released
                    continue
                held.start()
                try:
                    finish = run_held_job(held, self.handlers, self._rng, self._aio)
                except BaseException as exc:  # our bug: the job still gets an outcome
                    log.exception("worker slot failed on job %s", held.claimed.job_id)
                    finish = outcomes.crashed(held.claimed, exc)
                self._ran_for(time.monotonic() - held.started_at)
                if finish is not None:
                    self._jobs.finish(held, finish)
                elif held.stop is None:
                    # The handler stopped on its own local lease deadline.
                    self._jobs.lost(held, "not renewed in time")
            except Exception:
                log.exception("worker slot failed on job %s", held.claimed.job_id)
            finally:
                with self._cond:
                    self._running.discard(held)
                    self._busy -= 1
                    self._cond.notify_all()

"""The executor service: claim, run, renew, report, sweep, shut down gracefully.

::

    stop = threading.Event()
    Executor(engine, pools=("default",), concurrency=8).run(stop)   # until stop is set

Threads: the caller's (claim loop + sweeper), ``concurrency`` worker slots
running handlers, the heartbeat, the outcome writer and, on PostgreSQL, the
LISTEN connection. Tests drive ticks by hand instead: ``start()`` the
background threads, then ``claim_once()``, ``sweep_once()``,
``heartbeat_once()``, ``wait_idle()``, and ``shutdown()``.
"""

from __future__ import annotations

import logging
import math
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Engine

from rota.core.database import short_error
from rota.core.metric_deltas import DEFAULT_FLUSH_SECONDS, MetricsRecorder
from rota.core.queries.jobs_claim import ClaimedJob
from rota.core.queries.jobs_lease import Swept, sweep_expired_leases
from rota.core.queries.jobs_notify import notify_claimable
from rota.core.queries.jobs_outcome import Finish
from rota.core.states import AttemptOutcome, JobState, WorkerKind
from rota.executor import outcomes
from rota.executor.aio import EventLoopThread
from rota.executor.claim import ScanStarts, claim_jobs
from rota.executor.handlers import HandlerRegistry
from rota.executor.heartbeat import Heartbeat
from rota.executor.importable import ImportCheck
from rota.executor.job_type_cache import JobTypeCache
from rota.executor.lease import HeldJob, StopReason
from rota.executor.listener import Listener
from rota.executor.observations import observe_claim, observe_swept, observe_written
from rota.executor.pruner import DEFAULT_PRUNE_INTERVAL, Pruner
from rota.executor.reindexer import DEFAULT_FIRST_CHECK, DEFAULT_REINDEX_INTERVAL, Reindexer
from rota.executor.runner import run_held_job
from rota.executor.sqlite_watch import SqliteWatcher
from rota.executor.transactions import LoopConnection
from rota.executor.writer import OutcomeWriter
from rota.runtime.events import emit
from rota.runtime.identity import new_worker_id
from rota.runtime.liveness import Liveness
from rota.runtime.metrics_flush import MetricsFlusher
from rota.runtime.outage import Outage, describe, is_database_error
from rota.runtime.registry import DEFAULT_INTERVAL_SECONDS, Registration

log = logging.getLogger("rota.executor")
T = TypeVar("T")

DEFAULT_POOLS = ("default",)
DEFAULT_CONCURRENCY = 32
# Jobs claimed beyond the free slots, waiting in the process for one: a claim
# takes up to ``concurrency + prefetch`` at once (fewer, larger transactions).
# Their leases run while they wait, so the heartbeat renews them like the
# others; graceful shutdown hands them back at once, attempt refunded. Only
# short jobs are prefetched: the prefetch in use is cut so that a prefetched
# job waits about PREFETCH_WAIT_SECONDS at most, by the mean run time of this
# process's recent jobs (none until a first job has run), so long jobs stay in
# the database for idle executors to take.
DEFAULT_PREFETCH = None  # None: concurrency // 2 (see Executor.prefetch)
PREFETCH_WAIT_SECONDS = 0.5
_RUN_TIME_WEIGHT = 0.1  # of the newest job in the moving mean of run times
DEFAULT_POLL_INTERVAL = 1.0
DEFAULT_SWEEP_INTERVAL = 5.0
# Inside Kubernetes' default 30 s grace period (terminationGracePeriodSeconds),
# with room for STOP_GRACE_SECONDS and the release writes before its SIGKILL.
DEFAULT_DRAIN_TIMEOUT = 25.0
MAX_CLAIM_BATCH = 200
# After the drain: how long interrupted handlers get to stop before their jobs are
# released. A handler still running then keeps its lease (see ``shutdown``).
STOP_GRACE_SECONDS = 2.0
# A busy executor waits this long for more slots to free before claiming a small
# batch: fewer, larger claims under load, at most this much added latency.
CLAIM_LINGER_SECONDS = 0.002


class Executor:
    def __init__(
        self,
        engine: Engine,
        pools: Sequence[str] = DEFAULT_POOLS,
        concurrency: int = DEFAULT_CONCURRENCY,
        *,
        tenant_limit: int | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        max_claim_batch: int = MAX_CLAIM_BATCH,
        prefetch: int | None = DEFAULT_PREFETCH,
        prune_interval: float | None = DEFAULT_PRUNE_INTERVAL,
        reindex_interval: float | None = DEFAULT_REINDEX_INTERVAL,
        reindex_first_check: float = DEFAULT_FIRST_CHECK,
        listen: bool = True,
        worker_id: str | None = None,
        rng: random.Random | None = None,
        liveness_interval: float = DEFAULT_INTERVAL_SECONDS,
        metrics_interval: float = DEFAULT_FLUSH_SECONDS,
        outage: Outage | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not pools:
            raise ValueError("an executor serves at least one pool")
        self.engine = engine
        self.pools = tuple(pools)
        self.concurrency = concurrency
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must not be negative")
        self.prefetch = concurrency // 2 if prefetch is None else prefetch
        self._mean_run_seconds: float | None = None  # moving mean of handler run times
        self.tenant_limit = tenant_limit
        self.poll_interval = poll_interval
        self.sweep_interval = sweep_interval
        self.drain_timeout = drain_timeout
        self.max_claim_batch = max_claim_batch
        self.worker_id = worker_id or new_worker_id()
        # The database's faults, seen by every loop of this process: an outage is
        # logged once (and retried with backoff), a permanent fault stops the executor.
        # ``outage``: shared with the other services of this process (``rota run``).
        secret_url = engine.url.render_as_string(hide_password=False)  # scrubbed from logs
        self._outage = outage or Outage(log, secret_url=secret_url)
        self._rng = rng or random.Random()
        self._types = JobTypeCache(engine)
        self._handlers = HandlerRegistry()
        # Job types of these pools whose handler does not import here: never claimed.
        self._imports = ImportCheck(self._handlers, self.pools)
        self._imports_of = -1  # the JobTypeCache.version last checked
        self._aio = EventLoopThread()  # coroutine handlers' loop, started on first use
        self._held: dict[uuid.UUID, HeldJob] = {}
        self._held_lock = threading.Lock()
        self._busy = 0
        self._busy_cond = threading.Condition()
        self._slots: queue.SimpleQueue[HeldJob | None] = queue.SimpleQueue()
        self._slot_threads: list[threading.Thread] = []
        self._running: set[HeldJob] = set()  # jobs a slot has taken up (under _busy_cond)
        self._wake = threading.Event()
        self._draining = False
        self._started = False
        self.claim_rounds = 0  # claim statements run so far (tests wait on it)
        self.metrics = MetricsRecorder()  # in memory; flushed once per interval
        self._metrics_flusher = MetricsFlusher(
            engine, self.metrics, metrics_interval, outage=self._outage
        )
        # One held connection per loop; on SQLite they queue on one process lock.
        sqlite_lock = threading.Lock()
        self._claim_db = LoopConnection(engine, sqlite_lock)
        self._scan_starts = ScanStarts()  # claims skip the dead head of the queue index
        # Retention: the claim loop prunes a bounded step when nothing is due, or between
        # claims once a pass is overdue (None: never).
        self._pruner = Pruner(
            self._claim_db, self._types.all, prune_interval or 0.0, outage=self._outage
        )
        self._prunes = prune_interval is not None
        # Index upkeep (PostgreSQL): a thread that rebuilds bloated job-table indexes
        # while this executor is idle (None: never).
        self._idle = False  # the last claim found nothing due
        self._reindexer: Reindexer | None = None
        if reindex_interval is not None and engine.dialect.name == "postgresql":
            self._reindexer = Reindexer(
                engine,
                lambda: self._idle and not self._draining,
                interval=reindex_interval,
                first_check=reindex_first_check,
                secret_url=secret_url,
            )
        self._writer = OutcomeWriter(
            LoopConnection(engine, sqlite_lock),
            self.worker_id,
            self._on_written,
            self._forget,
            linger_batch=max(1, (concurrency + self.prefetch) // 2),
            outage=self._outage,
        )
        # The worker registry row and --health-port's view of the loops, both
        # kept by the loops' own passes (one registry write per interval).
        self.liveness = Liveness()
        self._registration = Registration(
            WorkerKind.EXECUTOR,
            self.worker_id,
            interval_seconds=liveness_interval,
            pools=self.pools,
            concurrency=concurrency,
            outage=self._outage,
        )
        self._heartbeat_db = LoopConnection(engine, sqlite_lock)
        self._heartbeat = Heartbeat(
            self._heartbeat_db,
            self.worker_id,
            self.held_jobs,
            self._on_lost,
            self._on_timeout,
            on_pass=self._heartbeat_passed,
            outage=self._outage,
        )
        self._listener: Listener | SqliteWatcher | None = None
        if listen and engine.dialect.name == "postgresql":
            self._listener = Listener(engine, self._wake, self._outage)
        elif listen and engine.dialect.name == "sqlite":
            self._listener = SqliteWatcher(engine, self._wake)

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start the background threads (slots, heartbeat, writer, listener)."""
        if self._started:
            return
        self._started = True
        try:
            self.reload_job_types()
        except Exception as exc:  # the claim loop reads them again (they are stale)
            self._outage.failed(exc, "claim")
        for i in range(self.concurrency):
            t = threading.Thread(target=self._slot_loop, name=f"rota-slot-{i}", daemon=True)
            t.start()
            self._slot_threads.append(t)
        self._writer.start()
        self._registration.start(self._claim_db.statement)
        self.liveness.watch("heartbeat", self._registration.interval)
        self._heartbeat.start()
        if self._listener is not None:
            self._listener.start()
        self._metrics_flusher.start()
        if self._reindexer is not None:
            self._reindexer.start()
        emit(
            log,
            "executor_started",
            worker_id=self.worker_id,
            pools=",".join(self.pools),
            concurrency=self.concurrency,
        )

    def run(self, stop: threading.Event, hurry: threading.Event | None = None) -> None:
        """Claim and run jobs until ``stop`` is set, then drain and release (graceful).

        ``hurry`` (a second SIGTERM/SIGINT) ends the drain at once; handlers are
        still stopped before their jobs are released. Raises ``DatabaseUnusable``
        (after shutting down) when the database can never serve it: read-only, not
        migrated, refusing this user. One line said why.
        """
        # The loop waits at most a poll interval (or a second, when busy) per pass.
        self.liveness.watch("claim", max(self._registration.interval, self.poll_interval))

        def wake_on_stop() -> None:
            stop.wait()
            self._wake.set()
            with self._busy_cond:
                self._busy_cond.notify_all()

        threading.Thread(target=wake_on_stop, name="rota-stop", daemon=True).start()
        next_sweep = 0.0
        try:
            self.start()
            while not stop.is_set():
                self._outage.check()  # a permanent fault, met by any loop: stop
                self.liveness.passed("claim")
                if time.monotonic() >= next_sweep:
                    self._guarded(self.sweep_once)
                    next_sweep = time.monotonic() + self.sweep_interval
                self._wake.clear()
                asked = self._claim_limit()
                claimed = self._guarded(self.claim_once) or 0
                self._idle = asked > 0 and claimed == 0
                if not self._idle and self._prunes and self._pruner.overdue():
                    # A busy spell (every claim found work) has made a pruning pass
                    # overdue: one bounded step between claims, until the pass is done.
                    self._pruner.step()  # never raises: upkeep (see rota.executor.pruner)
                self._guarded(self._reload_if_stale)
                if asked == 0 or claimed == asked:
                    # Busy, or more may be due: claim again once enough slots are free.
                    self._wait_for_slots(stop, min(next_sweep, time.monotonic() + 1.0))
                    continue
                # The queue is drained for now: sleep until NOTIFY, a poll or a sweep.
                # When the claim found nothing at all (not merely fewer rows than asked,
                # which SKIP LOCKED gives while other executors claim too), first take
                # one bounded pruning step if a pass is due, then claim again.
                wait = min(
                    self.poll_interval,
                    max(0.0, next_sweep - time.monotonic()),
                    self._scan_starts.until_head_scan(),
                )
                if claimed == 0 and self._prunes and self._pruner.due() and self._pruner.step():
                    wait = 0.0
                self._wake.wait(wait)
        finally:
            self.shutdown(hurry=hurry)

    def _wait_for_slots(self, stop: threading.Event, until: float) -> None:
        """Wait until a good batch of slots is free (or a short linger passes with some)."""
        want = max(1, min(self.max_claim_batch, self._capacity // 2))
        linger_end: float | None = None
        with self._busy_cond:
            while not stop.is_set() and time.monotonic() < until:
                free = self._capacity - self._busy
                if free >= want:
                    return
                if free > 0:
                    linger_end = linger_end or time.monotonic() + CLAIM_LINGER_SECONDS
                    left = linger_end - time.monotonic()
                    if left <= 0:
                        return
                    self._busy_cond.wait(left)
                else:
                    self._busy_cond.wait(max(0.0, until - time.monotonic()))

    def shutdown(
        self, drain_timeout: float | None = None, hurry: threading.Event | None = None
    ) -> None:
        """Stop claiming, let handlers finish for ``drain_timeout``, release the rest.

        A job is never released while its handler may still run, or another
        executor could run it at the same time: after the drain (cut short by
        ``hurry``), the remaining handlers are interrupted (``ctx.checkpoint()``
        raises JobReleased; commands and process-isolated handlers are killed),
        their leases still renewed, and each job is released once its handler
        has returned. A handler still running after ``STOP_GRACE_SECONDS`` (a
        thread that never checks in) keeps its lease: nothing is written for it,
        the process goes away, and the sweeper takes the job back once the lease
        has expired.
        """
        if not self._started or self._draining:
            return
        self._draining = True
        if self._reindexer is not None:
            self._reindexer.stop()  # a rebuild under way is cancelled: it holds no job
        self.liveness.unwatch("claim")  # claiming has ended on purpose
        self._release_waiting()
        timeout = self.drain_timeout if drain_timeout is None else drain_timeout
        running = sum(1 for h in self.held_jobs() if not h.settled)
        emit(log, "draining", worker_id=self.worker_id, running=running, drain_timeout=timeout)
        if not self._wait_drained(timeout, hurry) and hurry is not None and hurry.is_set():
            emit(log, "drain_cut_short", logging.WARNING, worker_id=self.worker_id)
        self._release_after_stop(STOP_GRACE_SECONDS)
        self._writer.wait_idle(10.0)
        self._heartbeat.stop()
        self.liveness.unwatch("heartbeat")
        self._registration.stop(self._claim_db.statement)
        self._writer.stop(timeout=0.0)
        self._metrics_flusher.stop()
        self._aio.stop()
        if self._listener is not None:
            self._listener.stop()
        for _ in self._slot_threads:
            self._slots.put(None)
        self._claim_db.close()
        emit(log, "executor_stopped", worker_id=self.worker_id)

    # -- ticks -----------------------------------------------------------------

    @property
    def free_slots(self) -> int:
        return self.concurrency - self._busy

    @property
    def _capacity(self) -> int:
        """Jobs this process may hold at once: running, plus prefetched ones waiting."""
        return self.concurrency + self._prefetch_now()

    def _prefetch_now(self) -> int:
        """The prefetch, cut so a waiting job waits about PREFETCH_WAIT_SECONDS at most."""
        mean = self._mean_run_seconds
        if mean is None or self.prefetch == 0:
            return 0
        if mean <= 0:
            return self.prefetch
        return min(self.prefetch, int(PREFETCH_WAIT_SECONDS * self.concurrency / mean))

    def _claim_limit(self) -> int:
        if self._draining:
            return 0
        return max(0, min(self._capacity - self._busy, self.max_claim_batch))

    def claim_once(self, now: datetime | None = None) -> int:
        """Claim as many due jobs as there are free slots (plus prefetch) and queue them."""
        limit = self._claim_limit()
        if limit <= 0:
            return 0
        sent_at = time.monotonic()
        claimed = claim_jobs(
            self._claim_db,
            owner=self.worker_id,
            pools=self.pools,
            limit=limit,
            tenant_limit=self.tenant_limit,
            now=now,
            excluded_types=self._imports.unrunnable(),
            starts=self._scan_starts,
        )
        self.claim_rounds += 1
        self._outage.ok()  # the database answered: an outage (if any) is over
        unrunnable = self._types_applied_since(claimed)
        for c in claimed:  # nothing in here may raise: these jobs are RUNNING already
            # started_at: not yet; the execution timeout counts from the handler's start.
            held = HeldJob(c, None, renewed_at=sent_at, started_at=math.inf)
            try:
                held.spec = self._types.get(c.job_type)
            except Exception as exc:  # the handler slot turns it into the job's outcome
                held.load_error = f"{type(exc).__name__}: {exc}"
            with self._held_lock:
                self._held[c.job_id] = held
            if held.spec is not None and c.job_type in unrunnable:
                # A type applied after our last check, whose handler does not import
                # here: hand it back at once (attempt refunded) for an executor that can.
                held.interrupt(StopReason.RELEASED)
                if held.settle():
                    self._writer.submit(held, outcomes.released(c))
                continue
            with self._busy_cond:
                self._busy += 1
            emit(
                log,
                "claimed",
                job_id=c.job_id,
                job_type=c.job_type,
                generation=c.lease_generation,
                attempt=c.attempt,
            )
            self._slots.put(held)
            observe_claim(self.metrics, c)
        return len(claimed)

    def reload_job_types(self) -> None:
        """Read the job types now and check that their handlers import (retrying changed ones)."""
        self._types.refresh()
        self._check_imports()

    def unrunnable_types(self) -> set[str]:
        """Job types of this executor's pools it does not claim: their handler does not import."""
        return set(self._imports.unrunnable())

    def _reload_if_stale(self) -> None:
        self._types.refresh_if_stale()
        self._check_imports()

    def _check_imports(self) -> None:
        version = self._types.version
        if version != self._imports_of:
            self._imports.update(self._types.all())
            self._imports_of = version

    def _types_applied_since(self, claimed: Sequence[ClaimedJob]) -> frozenset[str]:
        """The unrunnable types, after reading any type of ``claimed`` not seen before."""
        try:
            self._types.ensure(c.job_type for c in claimed)
            self._check_imports()
        except Exception as exc:  # the jobs are claimed: the slots report what fails
            log.warning("could not read job types: %s", short_error(exc))
        return self._imports.unrunnable()

    def sweep_once(self, now: datetime | None = None) -> list[Swept]:
        """Take back expired leases (any executor's); safe to run concurrently."""
        with self._claim_db.statement() as conn:
            swept = sweep_expired_leases(conn, now=now)
        self._outage.ok()
        if any(s.state is JobState.RETRY_WAIT for s in swept):
            try:
                with self._claim_db.statement() as conn:
                    notify_claimable(conn)
            except Exception as exc:  # idle executors poll; the sweep stands
                log.warning("could not notify idle executors: %s", exc)
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
        observe_swept(self.metrics, swept)
        return swept

    def heartbeat_once(self, now: datetime | None = None) -> int:
        """Renew every held lease now (the heartbeat thread does this on its own)."""
        return self._heartbeat.beat_once(force=True, now=now)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until no handler runs and every outcome is written."""
        deadline = time.monotonic() + timeout
        if not self._wait_handlers(timeout):
            return False
        while True:
            if not self._writer.wait_idle(max(0.0, deadline - time.monotonic())):
                return False
            with self._held_lock:
                if not any(h.settled for h in self._held.values()):
                    return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def flush_metrics(self) -> int:
        """Write the metrics observed so far now (the flusher does this every interval)."""
        return self._metrics_flusher.flush_once()

    def held_jobs(self) -> list[HeldJob]:
        with self._held_lock:
            return list(self._held.values())

    # -- internals -------------------------------------------------------------

    def _wait_drained(self, timeout: float, hurry: threading.Event | None = None) -> bool:
        """Wait until every held job has an outcome (a timed-out thread may still run)."""
        deadline = time.monotonic() + timeout
        with self._busy_cond:
            while any(not h.settled for h in self.held_jobs()):
                left = deadline - time.monotonic()
                if left <= 0 or (hurry is not None and hurry.is_set()):
                    return False
                self._busy_cond.wait(min(left, 0.05))
        return True

    def _release_after_stop(self, grace: float) -> None:
        """Interrupt every unfinished handler; release each job once its handler returned."""
        for held in self.held_jobs():
            if not held.settled:
                held.interrupt(StopReason.RELEASED)  # the heartbeat still renews it
        deadline = time.monotonic() + grace
        with self._busy_cond:
            while any(not h.settled for h in self._running):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._busy_cond.wait(left)
            still_running = set(self._running)
        for held in self.held_jobs():
            if held.settled:
                continue
            if held in still_running:
                held.settle()  # keeps its lease: nothing is written, the sweeper recovers it
                c = held.claimed
                emit(
                    log,
                    "release_withheld",
                    logging.WARNING,
                    job_id=c.job_id,
                    generation=c.lease_generation,
                    reason="the handler did not stop; the job is taken back after its lease",
                )
            elif held.settle():
                self._writer.submit(held, outcomes.released(held.claimed))

    def _wait_handlers(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._busy_cond:
            while self._busy > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._busy_cond.wait(left)
        return True

    def _guarded(self, fn: Callable[[], T]) -> T | None:
        try:
            done = fn()
        except Exception as exc:  # an outage: logged once, retried with backoff
            if not is_database_error(exc):  # a bug of ours: say so each time, go on
                emit(log, "tick_failed", logging.WARNING, error=describe(exc))
                self._wake.wait(min(self.poll_interval, 1.0))
                return None
            delay = self._outage.failed(exc, "claim")
            self._outage.check()  # a database that can never work: stop
            self._wake.wait(delay)
            return None
        return done

    def _slot_loop(self) -> None:
        while True:
            held = self._slots.get()
            if held is None:
                return
            with self._busy_cond:
                self._running.add(held)  # before the check: shutdown relies on the order
            try:
                if held.settled or held.stop is not None:  # lost, timed out or released
                    continue
                held.started_at = time.monotonic()
                try:
                    finish = run_held_job(held, self._handlers, self._rng, self._aio)
                except BaseException as exc:  # our bug: the job still gets an outcome
                    log.exception("worker slot failed on job %s", held.claimed.job_id)
                    finish = outcomes.crashed(held.claimed, exc)
                self._ran_for(time.monotonic() - held.started_at)
                if finish is not None:
                    if held.settle():
                        self._writer.submit(held, finish)
                elif held.stop is None:
                    # The handler stopped on its own local lease deadline.
                    self._on_lost(held, "not renewed in time")
            except Exception:
                log.exception("worker slot failed on job %s", held.claimed.job_id)
            finally:
                with self._busy_cond:
                    self._running.discard(held)
                    self._busy -= 1
                    self._busy_cond.notify_all()

    def _heartbeat_passed(self) -> None:
        self._registration.tick(self._heartbeat_db.statement)
        self.liveness.passed("heartbeat")

    def _ran_for(self, seconds: float) -> None:
        mean = self._mean_run_seconds  # a lost update between slots is harmless
        self._mean_run_seconds = (
            seconds if mean is None else mean + _RUN_TIME_WEIGHT * (seconds - mean)
        )

    def _release_waiting(self) -> None:
        """Hand back at once the prefetched jobs no slot has started (attempt refunded)."""
        while True:
            try:
                held = self._slots.get_nowait()
            except queue.Empty:
                return
            if held is None:  # a slot's stop signal: leave it for the slots
                self._slots.put(None)
                return
            held.interrupt(StopReason.RELEASED)
            if held.settle():
                self._writer.submit(held, outcomes.released(held.claimed))
            with self._busy_cond:
                self._busy -= 1
                self._busy_cond.notify_all()

    def _forget(self, held: HeldJob) -> None:
        with self._held_lock:
            if self._held.get(held.claimed.job_id) is held:
                del self._held[held.claimed.job_id]

    def _on_lost(self, held: HeldJob, why: str) -> None:
        held.interrupt(StopReason.LOST)
        held.settle()
        self._forget(held)
        c = held.claimed
        emit(
            log,
            "lease_lost",
            logging.WARNING,
            job_id=c.job_id,
            generation=c.lease_generation,
            reason=why,
        )

    def _on_timeout(self, held: HeldJob) -> None:
        held.interrupt(StopReason.TIMED_OUT)
        if held.settle():
            c = held.claimed
            emit(log, "timed_out", logging.WARNING, job_id=c.job_id, generation=c.lease_generation)
            self._writer.submit(held, outcomes.timed_out(c, held.spec, self._rng))

    def _on_written(self, held: HeldJob, finish: Finish, state: JobState | None) -> None:
        self._forget(held)
        observe_written(self.metrics, held, finish, state)
        c = held.claimed
        if state is None:
            emit(
                log,
                "lease_lost",
                logging.WARNING,
                job_id=c.job_id,
                generation=c.lease_generation,
                reason="outcome write matched no row",
            )
            return
        fields: dict[str, Any] = {"job_id": c.job_id, "generation": c.lease_generation}
        if state is JobState.SUCCEEDED:
            reconciled = finish.outcome is AttemptOutcome.RECONCILED
            emit(log, "reconciled" if reconciled else "succeeded", **fields)
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

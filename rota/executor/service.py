"""The executor service: claim, run, renew, report, sweep, shut down gracefully.

::

    stop = threading.Event()
    Executor(engine, pools=("default",), concurrency=8).run(stop)   # until stop is set

The ``Executor`` wires its parts and starts and stops them in order; each
part is a module of its own:

* ``claim_loop``: the caller's thread: sweeps, claims (``claimer``), prunes,
  sleeps until woken (``listener``, ``sqlite_watch``); index upkeep beside it;
* ``slots``: ``concurrency`` worker threads running handlers, and prefetch;
* ``held``: the jobs held, until the outcome writer (``writer``) has written
  their outcome; one log event per transition (``events``), the normal ones
  at DEBUG, counted in an INFO line per interval (``summary``);
* ``heartbeat``: renews every held lease, watches timeouts and cancellations;
* ``drain``: graceful shutdown's drain and release.

Tests drive ticks by hand instead of ``run``: ``start()`` the background
threads, then ``claim_once()``, ``sweep_once()``, ``heartbeat_once()``,
``wait_idle()``, and ``shutdown()``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from rota.core.database import DEFAULT_POOL_SIZE, EnginePool
from rota.core.metric_deltas import DEFAULT_FLUSH_SECONDS, MetricsRecorder
from rota.core.queries.jobs_lease import Swept
from rota.core.states import WorkerKind
from rota.executor import output
from rota.executor.claim import ScanStarts
from rota.executor.claim_loop import DEFAULT_POLL_INTERVAL, DEFAULT_SWEEP_INTERVAL, ClaimLoop
from rota.executor.claimer import MAX_CLAIM_BATCH
from rota.executor.drain import DEFAULT_DRAIN_TIMEOUT, drain
from rota.executor.heartbeat import IDLE_TICK_SECONDS, Heartbeat
from rota.executor.held import HeldJobs
from rota.executor.lease import HeldJob
from rota.executor.slots import DEFAULT_CONCURRENCY, DEFAULT_PREFETCH, Slots, default_prefetch
from rota.executor.summary import DEFAULT_SUMMARY_INTERVAL, JobSummary, SummaryLoop, log_summary
from rota.executor.transactions import LoopConnection
from rota.executor.upkeep import (
    DEFAULT_FIRST_CHECK,
    DEFAULT_PRUNE_INTERVAL,
    DEFAULT_REINDEX_INTERVAL,
)
from rota.executor.writer import OutcomeWriter
from rota.runtime.events import emit
from rota.runtime.identity import new_worker_id
from rota.runtime.liveness import Liveness
from rota.runtime.metrics_flush import MetricsFlusher
from rota.runtime.outage import Outage
from rota.runtime.registry import DEFAULT_INTERVAL_SECONDS, Registration

if TYPE_CHECKING:  # made by the claim loop after its first claim, not imported at start
    from rota.executor.pruner import Pruner
    from rota.executor.reindexer import Reindexer

log = logging.getLogger("rota.executor")

DEFAULT_POOLS = ("default",)
# The loops that hold a connection of the engine's pool for good: the claim
# loop, the outcome writer and the heartbeat (``LoopConnection``; LISTEN has a
# connection of its own, outside the pool).
LOOP_CONNECTIONS = 3
# The engine's pool for an executor keeps one idle connection, for what reads
# or writes now and then (the metrics flush, the job types' refresh, the
# listener's probe, index upkeep), beside the loops' three, which are never
# given back. The pool keeps up to its size idle, so the default (5) kept a
# second spare for good once two of those overlapped; one more at once is now
# opened and closed.
ENGINE_POOL = EnginePool(size=1, overflow=LOOP_CONNECTIONS + DEFAULT_POOL_SIZE)

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_POOLS",
    "DEFAULT_SWEEP_INTERVAL",
    "ENGINE_POOL",
    "LOOP_CONNECTIONS",
    "Executor",
]


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
        summary_interval: float | None = DEFAULT_SUMMARY_INTERVAL,
        outage: Outage | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not pools:
            raise ValueError("an executor serves at least one pool")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must not be negative")
        self.engine = engine
        self.pools = tuple(pools)
        self.concurrency = concurrency
        self.prefetch = default_prefetch(concurrency) if prefetch is None else prefetch
        self.drain_timeout = drain_timeout
        self.worker_id = worker_id or new_worker_id()
        self._started = False
        rng = rng or random.Random()
        # The database's faults, seen by every loop of this process: an outage is
        # logged once (and retried with backoff), a permanent fault stops the executor.
        # ``outage``: shared with the other services of this process (``rota run``).
        secret_url = engine.url.render_as_string(hide_password=False)  # scrubbed from logs
        self._outage = outage or Outage(log, secret_url=secret_url)
        self.metrics = MetricsRecorder()  # in memory; flushed once per interval
        self._metrics_flusher = MetricsFlusher(
            engine, self.metrics, metrics_interval, outage=self._outage
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
            unavailable=self.unrunnable_types,
        )
        # The INFO line of the jobs' normal life, once per interval (None: by hand only).
        self.summary = JobSummary()
        self._summary_loop = (
            None
            if summary_interval is None
            else SummaryLoop(self.summary, self.worker_id, summary_interval)
        )
        # One held connection per loop; on SQLite they queue on one process lock.
        sqlite_lock = threading.Lock()
        self._jobs = HeldJobs(
            LoopConnection(engine, sqlite_lock),
            self.worker_id,
            self.metrics,
            rng,
            linger_batch=max(1, (concurrency + self.prefetch) // 2),
            outage=self._outage,
            summary=self.summary,
        )
        self._slots = Slots(concurrency, self.prefetch, rng, self._jobs)
        self._loop = ClaimLoop(
            engine,
            LoopConnection(engine, sqlite_lock),
            self.worker_id,
            self.pools,
            self._jobs,
            self._slots,
            self._outage,
            self.metrics,
            self.liveness,
            tenant_limit=tenant_limit,
            max_claim_batch=max_claim_batch,
            poll_interval=poll_interval,
            sweep_interval=sweep_interval,
            prune_interval=prune_interval,
            reindex_interval=reindex_interval,
            reindex_first_check=reindex_first_check,
            listen=listen,
            secret_url=secret_url,
        )
        self._heartbeat = Heartbeat(
            LoopConnection(engine, sqlite_lock),
            self.worker_id,
            self._jobs.all,
            self._jobs.lost,
            self._jobs.timed_out,
            on_pass=self._heartbeat_passed,
            outage=self._outage,
            idle_tick=min(IDLE_TICK_SECONDS, self._registration.interval / 3),
        )
        self._jobs.watch = self._heartbeat.due_by  # it sleeps until the nearest deadline

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start the background threads (slots, writer, heartbeat, wake-ups; index upkeep: run)."""
        if self._started:
            return
        self._started = True
        output.install()  # handlers' log records go to their attempt's output too
        try:
            self.reload_job_types()
        except Exception as exc:  # the claim loop reads them again (they are stale)
            self._outage.failed(exc, "claim")
        self._slots.start()
        self._jobs.start()
        # Watched before the row is written: a process seen in the registry has
        # its heartbeat in /healthz's loops already.
        self.liveness.watch("heartbeat", self._registration.interval)
        self._registration.start(self._loop.claimer.db.statement)
        self._heartbeat.start()
        self._metrics_flusher.start()
        if self._summary_loop is not None:
            self._summary_loop.start()
        self._loop.start()
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
        try:
            self.start()
            self._loop.run(stop)
        finally:
            self.shutdown(hurry=hurry)

    def shutdown(
        self, drain_timeout: float | None = None, hurry: threading.Event | None = None
    ) -> None:
        """Stop claiming, let handlers finish for ``drain_timeout``, release the rest.

        A job is never released while its handler may still run (see ``drain``):
        a handler still running after the drain and a short grace keeps its
        lease, and the sweeper takes the job back once the lease has expired.
        """
        if not self._started or not self._loop.claimer.claiming:
            return
        self._loop.stop_claiming()
        self.liveness.unwatch("claim")  # claiming has ended on purpose
        timeout = self.drain_timeout if drain_timeout is None else drain_timeout
        drain(self._jobs, self._slots, self.worker_id, timeout, hurry)
        self._heartbeat.stop()
        self.liveness.unwatch("heartbeat")
        self._registration.stop(self._loop.claimer.db.statement)
        self._jobs.stop()  # the drain has waited for the writes already
        self._metrics_flusher.stop()
        if self._summary_loop is not None:
            self._summary_loop.stop()  # logs what the last interval did
        self._slots.stop()
        self._loop.stop()
        emit(log, "executor_stopped", worker_id=self.worker_id)

    def _heartbeat_passed(self) -> None:
        self._registration.tick(self._heartbeat.db.statement)
        self.liveness.passed("heartbeat")

    # -- ticks by hand ---------------------------------------------------------

    def claim_once(self, now: datetime | None = None) -> int:
        """Claim as many due jobs as there are free slots (plus prefetch) and queue them."""
        return self._loop.claimer.claim_once(now)

    def sweep_once(self, now: datetime | None = None) -> list[Swept]:
        """Take back expired leases (any executor's); safe to run concurrently."""
        return self._loop.claimer.sweep_once(now)

    def heartbeat_once(self, now: datetime | None = None) -> int:
        """Renew every held lease now (the heartbeat thread does this on its own)."""
        return self._heartbeat.beat_once(force=True, now=now)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until no handler runs and every outcome is written."""
        deadline = time.monotonic() + timeout
        if not self._slots.wait_idle(timeout):
            return False
        return self._jobs.wait_written(max(0.0, deadline - time.monotonic()))

    def log_summary(self, now: float | None = None) -> dict[str, Any] | None:
        """Log the jobs' summary of the interval ending ``now`` (monotonic); its fields,
        or None when nothing happened (then nothing is logged)."""
        return log_summary(self.summary, self.worker_id, now)

    def flush_metrics(self) -> int:
        """Write the metrics observed so far now (the flusher does this every interval)."""
        return self._metrics_flusher.flush_once()

    def reload_job_types(self) -> None:
        """Read the job types now and check that their handlers import (retrying changed ones)."""
        self._loop.claimer.types.reload()

    def unrunnable_types(self) -> set[str]:
        """Job types of this executor's pools it does not claim: their handler does not import."""
        return set(self._loop.claimer.types.unrunnable())

    def held_jobs(self) -> list[HeldJob]:
        return self._jobs.all()

    # -- state and settings, read through the parts that hold them --------------

    @property
    def free_slots(self) -> int:
        return self._slots.free

    @property
    def claim_rounds(self) -> int:
        """Claim statements run so far (tests wait on it)."""
        return self._loop.claimer.rounds

    @property
    def tenant_limit(self) -> int | None:
        return self._loop.claimer.tenant_limit

    @property
    def max_claim_batch(self) -> int:
        return self._loop.claimer.max_batch

    @property
    def poll_interval(self) -> float:
        return self._loop.poll_interval

    @property
    def sweep_interval(self) -> float:
        return self._loop.sweep_interval

    # The parts tests reach into, to turn a knob or break a connection.

    @property
    def _claim_db(self) -> LoopConnection:
        return self._loop.claimer.db

    @property
    def _scan_starts(self) -> ScanStarts:
        return self._loop.claimer.scan_starts

    @property
    def _writer(self) -> OutcomeWriter:
        return self._jobs.writer

    @property
    def _pruner(self) -> Pruner:
        return self._loop.pruner

    @property
    def _reindexer(self) -> Reindexer | None:
        return self._loop.reindexer

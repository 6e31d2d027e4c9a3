"""One scheduler replica: ticks until stopped.

::

    service = SchedulerService(engine)
    service.run_once(now=...)      # tests: one tick at an injected instant
    service.run(stop_event)        # production: until stop_event is set

A tick runs batches (``scheduler.tick.materialize_batch``), each in its own
transaction, until nothing is due. Between ticks the replica sleeps until the
earliest ``next_fire_at`` (at most ``max_sleep``) or until a NOTIFY wakes it.
A transient database error (the server down or restarting, a lock conflict)
is logged once per outage and retried with backoff; a permanent one (a
read-only database, missing tables, a refused login) is logged once and stops
the replica: ``run`` raises ``DatabaseUnusable`` (``rota.runtime.outage``).
"""

from __future__ import annotations

import gc
import logging
import threading
from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from rota.core.database import DatabaseError
from rota.core.metric_deltas import MetricsRecorder
from rota.core.queries.late_occurrences import LateRecord, earliest_deadline_check
from rota.core.queries.schedules import CursorMoved, earliest_next_fire
from rota.core.states import WorkerKind
from rota.runtime.events import emit
from rota.runtime.identity import new_worker_id
from rota.runtime.liveness import Liveness
from rota.runtime.metrics_flush import MetricsFlusher
from rota.runtime.outage import Outage
from rota.runtime.registry import DEFAULT_INTERVAL_SECONDS, Registration
from rota.scheduler.compiled import CompiledSchedules
from rota.scheduler.deadlines import log_late, record_late_occurrences
from rota.scheduler.tick import (
    DEFAULT_BATCH_JOBS,
    DEFAULT_BATCH_SCHEDULES,
    TickResult,
    materialize_batch,
)
from rota.scheduler.wakeup import Wakeup

log = logging.getLogger("rota.scheduler")

DEFAULT_MAX_SLEEP = 1.0
ERROR_PAUSE_SECONDS = 1.0
# A tick stops after this many batches and lets the loop come back, so a huge
# backlog never keeps a replica from seeing a stop request.
MAX_BATCHES_PER_TICK = 1000
# Compiled rules are many long-lived objects, and the cyclic GC traverses all
# of them in every full collection (~70 ms with 10,000 compiled rules, about
# once per tick of 10,000 occurrences). Once this many rules were compiled
# since the last time, they are collected once and frozen out of its reach.
FREEZE_AFTER_COMPILED = 1000


class SchedulerService:
    def __init__(
        self,
        engine: Engine,
        *,
        batch_schedules: int = DEFAULT_BATCH_SCHEDULES,
        batch_jobs: int = DEFAULT_BATCH_JOBS,
        max_sleep: float = DEFAULT_MAX_SLEEP,
        liveness_interval: float = DEFAULT_INTERVAL_SECONDS,
        outage: Outage | None = None,
    ) -> None:
        self.engine = engine
        self.batch_schedules = batch_schedules
        self.batch_jobs = batch_jobs
        self.max_sleep = max_sleep
        self._compiled = CompiledSchedules()
        self._frozen_at = 0
        self.worker_id = new_worker_id()  # fresh per process start
        # The database's faults, for every loop of this replica (and, in ``rota run``,
        # of the executor beside it): logged once per outage.
        self._outage = outage or Outage(
            log, secret_url=engine.url.render_as_string(hide_password=False)
        )
        # The worker registry row and --health-port's view of the tick loop.
        self.liveness = Liveness()
        self._registration = Registration(
            WorkerKind.SCHEDULER,
            self.worker_id,
            interval_seconds=liveness_interval,
            outage=self._outage,
        )
        self._looping = False  # run() is on: passes count for liveness and the registry
        self.metrics = MetricsRecorder()  # scheduler delay; flushed by run() once per interval

    def run_once(
        self, now: datetime | None = None, stop: threading.Event | None = None
    ) -> TickResult:
        """Materialise everything due at ``now`` (default: the database clock)."""
        total = TickResult()
        for _ in range(MAX_BATCHES_PER_TICK):
            with self.engine.begin() as conn:
                result, log_events = materialize_batch(
                    conn,
                    self._compiled,
                    now=now,
                    max_schedules=self.batch_schedules,
                    max_jobs=self.batch_jobs,
                    metrics=self.metrics,
                )
            log_events()
            total.add(result)
            self._passed()  # a long catch-up is many batches, not a stuck loop
            if not result.more_due:
                break
            if stop is not None and stop.is_set():
                break
        if self._compiled.compiled_count - self._frozen_at >= FREEZE_AFTER_COMPILED:
            self._freeze_compiled()
        return total

    def check_deadlines(
        self, now: datetime | None = None, stop: threading.Event | None = None
    ) -> list[LateRecord]:
        """Record the occurrences whose deadline passed unmet; the records this replica made.

        One transaction per batch (``scheduler.deadlines``); each batch's
        ``deadline_missed`` lines are logged after its commit.
        """
        recorded: list[LateRecord] = []
        for _ in range(MAX_BATCHES_PER_TICK):
            with self.engine.begin() as conn:
                result = record_late_occurrences(conn, self._compiled, now=now)
            log_late(result.recorded)
            recorded += result.recorded
            self._passed()
            if not result.more_due or (stop is not None and stop.is_set()):
                break
        return recorded

    def _freeze_compiled(self) -> None:
        """Move the long-lived heap (the compiled rules) out of the cyclic GC's full passes.

        One collection first, so no cyclic garbage is frozen; frozen objects
        are still freed as usual when their last reference goes.
        """
        gc.collect()
        gc.freeze()
        self._frozen_at = self._compiled.compiled_count

    def seconds_until_due(self) -> float:
        with self.engine.begin() as conn:
            soonest, clock = earliest_next_fire(conn)
            check = earliest_deadline_check(conn)
        if check is not None and (soonest is None or check < soonest):
            soonest = check  # a deadline passes before the next fire
        if soonest is None:
            return self.max_sleep
        return min(self.max_sleep, max(0.0, (soonest - clock).total_seconds()))

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set; ``DatabaseUnusable`` when the database never can serve."""
        wakeup = Wakeup(self.engine, self._outage)
        flusher = MetricsFlusher(self.engine, self.metrics, outage=self._outage)
        flusher.start()
        emit(log, "scheduler_started", worker_id=self.worker_id)
        self._registration.start(self.engine.begin)
        interval = self._registration.interval
        self.liveness.watch("tick", interval)
        self._looping = True
        try:
            while not stop.is_set():
                self._outage.check()  # a permanent fault, met by any loop: stop
                self._passed()
                try:
                    result = self.run_once(stop=stop)
                    self.check_deadlines(stop=stop)  # after the tick: it judges what it made
                    self._outage.ok()
                    if result.more_due:
                        continue
                    sleep_s = self.seconds_until_due()
                except CursorMoved as exc:
                    emit(log, "tick_failed", logging.WARNING, error=_short(exc))
                    sleep_s = ERROR_PAUSE_SECONDS
                except (DBAPIError, DatabaseError) as exc:  # once per outage, with backoff
                    sleep_s = self._outage.failed(exc, "tick")
                    self._outage.check()
                except Exception as exc:  # a bug must not stop the replica; log it whole
                    log.exception("event=tick_failed error=%s", _short(exc))
                    sleep_s = ERROR_PAUSE_SECONDS
                if sleep_s > 0:
                    wakeup.wait(min(sleep_s, interval), stop)
        finally:
            self._looping = False
            self.liveness.unwatch("tick")
            wakeup.close()
            flusher.stop()
            self._registration.stop(self.engine.begin)
            emit(log, "scheduler_stopped", worker_id=self.worker_id)

    def _passed(self) -> None:
        """The loop came round: tell --health-port, and refresh the registry row when due."""
        if self._looping:
            self._registration.tick(self.engine.begin)
            self.liveness.passed("tick")


def _short(exc: BaseException) -> str:
    return str(getattr(exc, "orig", exc)).strip().splitlines()[0]

"""The flusher: one thread per process that writes its recorder's deltas once per interval."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from datetime import datetime

from sqlalchemy import Connection, Engine

from rota.core.database import short_error
from rota.core.metric_deltas import DEFAULT_FLUSH_SECONDS, MINUTES_KEPT, Deltas, MetricsRecorder
from rota.core.queries.jobs_read import database_now
from rota.core.queries.metric_tables import (
    add_aggregates,
    cancel_deltas,
    drain_inbox,
    minute_of,
    prune_minutes,
)
from rota.runtime.outage import Outage
from rota.runtime.startstop import BackgroundLoop

log = logging.getLogger("rota.metrics")

PRUNE_EVERY_SECONDS = 300.0


class MetricsFlusher(BackgroundLoop):
    """Flushes ``recorder`` into the database every ``interval`` seconds, and once at stop.

    It runs in a thread of its own (``runtime.startstop.BackgroundLoop``);
    ``flush_once`` is one flush in the caller's thread, for tests to drive by hand.
    """

    def __init__(
        self,
        engine: Engine,
        recorder: MetricsRecorder,
        interval: float = DEFAULT_FLUSH_SECONDS,
        outage: Outage | None = None,
    ) -> None:
        super().__init__("rota-metrics", join_seconds=5.0)
        self._engine = engine
        self._outage = outage  # a database outage is logged once, by whoever meets it first
        self._recorder = recorder
        self._interval = interval
        self._pruned_at = 0.0
        self._lock = threading.Lock()  # one flush at a time (the thread, a caller, stop)

    def _after_stop(self) -> None:
        if self._outage is not None and self._outage.fatal is not None:
            return  # the database can never take them: already said why, once
        try:
            self.flush_once()
        except Exception as exc:  # the process is stopping: say what was lost
            log.warning("could not write the last metrics: %s", short_error(exc))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.flush_once()
            except Exception as exc:  # kept in memory, written at the next flush
                if self._outage is not None:
                    self._outage.failed(exc, "metrics")
                else:
                    log.warning("could not write metrics, will retry: %s", short_error(exc))

    def flush_once(self) -> int:
        """Write what was observed since the last flush, and fold in what other
        transactions appended to the inbox; returns how many observations' rows it added to.
        """
        with self._lock:
            deltas, cancelled = self._recorder.take()
            try:
                with self._engine.begin() as conn:
                    written = self._write(conn, deltas, cancelled)
            except BaseException:
                self._recorder.put_back(deltas, cancelled)  # the inbox rows stay: rolled back
                raise
            return written

    def _write(self, conn: Connection, own: Deltas, cancelled: list[uuid.UUID]) -> int:
        deltas: Deltas = {k: list(v) for k, v in own.items()}
        cancel_deltas(conn, cancelled, deltas)
        now = database_now(conn)
        minutes: dict[datetime, Deltas] = {minute_of(now): {k: list(v) for k, v in deltas.items()}}
        totals: Deltas = {k: list(v) for k, v in deltas.items()}
        events = drain_inbox(conn)
        for e in events:
            for target in (totals, minutes.setdefault(e.minute, {})):
                cell = target.setdefault(e.key, [0.0, 0.0])
                cell[0] += e.n
                cell[1] += e.total
        add_aggregates(conn, totals, minutes)
        if self._prune_due():
            prune_minutes(conn, now - MINUTES_KEPT)
            self._pruned_at = time.monotonic()
        return len(deltas) + len(events)

    def _prune_due(self) -> bool:
        return time.monotonic() - self._pruned_at >= PRUNE_EVERY_SECONDS

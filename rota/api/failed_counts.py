"""The FAILED counts of ``/metrics`` and the dashboard: exact, at a bounded cost.

Unfinished jobs are counted at every read: they are what waits and runs, few
in a healthy system. FAILED jobs are history: they stay until a person
replays them or retention prunes them (30 days unless the job type says
otherwise), so a busy deployment keeps hundreds of thousands, and counting
them all at every scrape and at every refresh of every open dashboard would
be the one read of these pages whose cost grows with the history kept (about
a tenth of a second per million FAILED jobs, per reader, every few seconds).
So:

* Up to ``EXACT_UP_TO`` FAILED jobs (a read of that many index entries, a few
  milliseconds), every read counts them: the figure is fresh.
* Past that, the full count runs again only once ``COST_FACTOR`` times as long
  as it last took has passed since it began, so counting takes at most
  1/``COST_FACTOR`` of one database connection's time per ``rota serve``
  process, however many readers and however often they read. The reads
  between are given the kept count and its age (the gauge
  ``rota_failed_count_age_seconds``, a line under the dashboard's queues):
  until it is taken again, jobs that failed since are not in it, and jobs
  replayed since by another process are in it (a replay through this app
  forgets it: ``forget``). One thread counts; the others are given the kept
  count, or, before the first count, wait for it.
* A count the database refuses (a ``statement_timeout``, a recovery conflict
  on a standby) is retried after ``COST_FACTOR`` times the time it took to
  fail; the reads between are given the kept count, if there is one, else
  the error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection
from sqlalchemy.exc import SQLAlchemyError

from rota.core.queries.jobs_gauges import StateCount, failed_at_most, failed_by_type

EXACT_UP_TO = 10_000
COST_FACTOR = 100.0

log = logging.getLogger("rota.api")


@dataclass(frozen=True)
class FailedCount:
    counts: list[StateCount]  # per (job type, pool); state FAILED
    age_seconds: float  # 0: counted by this read


@dataclass(frozen=True)
class _Kept:
    counts: list[StateCount]
    started: float  # clock when the count began: it shows the jobs as of then


class FailedCounts:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        exact_up_to: int = EXACT_UP_TO,
        cost_factor: float = COST_FACTOR,
        count: Callable[[Connection], list[StateCount]] = failed_by_type,
    ) -> None:
        self._clock = clock
        self._exact_up_to = exact_up_to
        self._cost_factor = cost_factor
        self._count = count
        self._lock = threading.Lock()  # guards _kept and _due
        self._counting = threading.Lock()  # held by the one thread counting
        self._kept: _Kept | None = None
        self._due = 0.0  # clock from which the next read counts again

    def forget(self) -> None:
        """Drop the kept count (after this app moved jobs out of FAILED)."""
        with self._lock:
            self._kept, self._due = None, 0.0

    def read(self, conn: Connection) -> FailedCount:
        if failed_at_most(conn, self._exact_up_to + 1) <= self._exact_up_to:
            self.forget()  # below the cap again: a kept count would only mislead later
            return FailedCount(self._count(conn), 0.0)
        kept = self._kept_count(even_if_due=False)
        if kept is not None:
            return kept
        # Due: one thread counts; the others are given the kept count, or wait for one.
        if not self._counting.acquire(blocking=False):
            kept = self._kept_count(even_if_due=True)
            if kept is not None:
                return kept
            self._counting.acquire()
        try:
            # Counted by another thread while this one waited?
            kept = self._kept_count(even_if_due=False)
            if kept is not None:
                return kept
            return self._count_now(conn)
        finally:
            self._counting.release()

    def _count_now(self, conn: Connection) -> FailedCount:
        started = self._clock()
        try:
            with conn.begin_nested():  # a refused count leaves the caller's transaction usable
                counts = self._count(conn)
        except SQLAlchemyError as exc:
            took = max(0.0, self._clock() - started)
            with self._lock:
                self._due = self._clock() + took * self._cost_factor
            kept = self._kept_count(even_if_due=True)
            if kept is None:
                raise
            log.warning(
                "counting the FAILED jobs failed (%s): giving the count of %.0f s ago",
                type(exc).__name__,
                kept.age_seconds,
            )
            return kept
        took = max(0.0, self._clock() - started)
        with self._lock:
            self._kept = _Kept(counts, started)
            self._due = started + took * self._cost_factor
        return FailedCount(counts, 0.0)

    def _kept_count(self, *, even_if_due: bool) -> FailedCount | None:
        """The kept count with its age; None when none is kept, or it is due and not wanted."""
        with self._lock:
            kept = self._kept
            now = self._clock()
            due = now >= self._due
        if kept is None or (due and not even_if_due):
            return None
        return FailedCount(kept.counts, max(0.0, now - kept.started))

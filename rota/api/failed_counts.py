"""The FAILED counts of ``/metrics`` and the dashboard: exact, and cheap however many are kept.

Unfinished jobs are counted at every read: they are what waits and runs, few
in a healthy system. FAILED jobs are history: they stay until a person
replays them or retention prunes them (30 days unless the job type says
otherwise), so a busy deployment keeps hundreds of thousands, and counting
them all at every scrape and every dashboard refresh would be the one read of
these pages whose cost grows with the history kept (a tenth of a second per
million FAILED jobs, for each reader, every few seconds). So:

* Up to ``EXACT_UP_TO`` FAILED jobs (a read of that many index entries, a few
  milliseconds), every read counts them: the figure is fresh.
* Past that, the full count runs at most once every ``COST_FACTOR`` times as
  long as it last took, and at least every ``LONGEST_AGE`` seconds; the reads
  between are given that count and its age, which the metric
  ``rota_failed_count_age_seconds`` and the dashboard show. The count costs
  the database at most 1/``COST_FACTOR`` of one connection's time, per
  ``rota serve`` process, whatever the scrape rate.

One ``FailedCounts`` per app: the threads serving requests share it, and one
of them counts while the others are given the previous count.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

from rota.shared.queries.jobs_gauges import StateCount, failed_at_most, failed_by_type

EXACT_UP_TO = 10_000
COST_FACTOR = 100.0
LONGEST_AGE = 300.0


@dataclass(frozen=True)
class FailedCount:
    counts: list[StateCount]  # per (job type, pool); state FAILED
    age_seconds: float  # 0: counted by this read


@dataclass(frozen=True)
class _Kept:
    counts: list[StateCount]
    started: float  # clock when the count began: it shows the jobs as of then
    good_for: float  # seconds from ``started`` before the next read recounts


class FailedCounts:
    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        exact_up_to: int = EXACT_UP_TO,
        cost_factor: float = COST_FACTOR,
        longest_age: float = LONGEST_AGE,
    ) -> None:
        self._clock = clock
        self._exact_up_to = exact_up_to
        self._cost_factor = cost_factor
        self._longest_age = longest_age
        self._lock = threading.Lock()
        self._kept: _Kept | None = None
        self._counting = False

    def read(self, conn: Connection) -> FailedCount:
        if failed_at_most(conn, self._exact_up_to + 1) <= self._exact_up_to:
            return FailedCount(failed_by_type(conn), 0.0)
        with self._lock:
            kept = self._kept
            if kept is not None:
                age = max(0.0, self._clock() - kept.started)
                if age < kept.good_for or self._counting:
                    return FailedCount(kept.counts, age)
            self._counting = True
        try:
            started = self._clock()
            counts = failed_by_type(conn)
            took = max(0.0, self._clock() - started)
            good_for = min(took * self._cost_factor, self._longest_age)
            with self._lock:
                self._kept = _Kept(counts, started, good_for)
        finally:
            with self._lock:
                self._counting = False
        return FailedCount(counts, 0.0)

"""One INFO line per interval for the jobs of a normal life, instead of two per job.

At thousands of jobs a second, a ``claimed`` and a ``succeeded`` line per job
would cost about half the executor's rate and flood any log pipeline, so those
two are DEBUG, and ``executor_summary`` says what the process did over the
interval (only when it did something)::

    event=executor_summary worker_id=... interval_seconds=10.0 claimed=41230
    succeeded=41200 reconciled=0 retried=25 failed=3 cancelled=2 lease_lost=0
    released=0 queue_wait_p50=0.004 queue_wait_p99=0.031

Every event that needs someone's attention (failed, retry_scheduled,
cancelled, lease_lost, released, reconciled, timed_out) still has its own
line with its ``job_id`` (``executor.events``); the summary only counts them.

Queue wait is due (``run_after``) to claimed, on the database clock, for the
first attempt of a job, as in the ``queue_wait`` metric. The counters are
in memory; ``take(now)`` reads and resets them with the monotonic instant
passed in, so tests drive an interval by hand.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from rota.core.claimed import ClaimedJob
from rota.core.states import JobState
from rota.runtime.events import emit
from rota.runtime.startstop import BackgroundLoop

log = logging.getLogger("rota.executor")

DEFAULT_SUMMARY_INTERVAL = 10.0
# Queue waits kept per interval for the percentiles: beyond it, a uniform sample.
WAIT_SAMPLE = 10_000

COUNTS = (
    "claimed",
    "succeeded",
    "reconciled",
    "retried",
    "failed",
    "cancelled",
    "lease_lost",
    "released",
)
_BY_STATE = {
    JobState.RETRY_WAIT: "retried",
    JobState.FAILED: "failed",
    JobState.CANCELLED: "cancelled",
    JobState.QUEUED: "released",
}


@dataclass
class _Interval:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    waits: list[float] = field(default_factory=list)
    waits_seen: int = 0


class JobSummary:
    """What this process's jobs did since the last ``take``; thread-safe, cheap per job."""

    def __init__(self, now: float | None = None, rng: random.Random | None = None) -> None:
        self._lock = threading.Lock()
        self._current = _Interval()
        self._since = time.monotonic() if now is None else now
        self._rng = rng or random.Random()

    def claimed(self, c: ClaimedJob) -> None:
        wait = None
        if c.attempt == 1 and c.run_after is not None and c.started_at is not None:
            wait = (c.started_at - c.run_after).total_seconds()
        with self._lock:
            cur = self._current
            cur.counts["claimed"] += 1
            if wait is not None:
                cur.waits_seen += 1
                if len(cur.waits) < WAIT_SAMPLE:
                    cur.waits.append(wait)
                else:  # reservoir sampling: every wait equally likely to be kept
                    i = self._rng.randrange(cur.waits_seen)
                    if i < WAIT_SAMPLE:
                        cur.waits[i] = wait

    def written(self, state: JobState | None, reconciled: bool = False) -> None:
        """An outcome was written (``state`` None: its fence found the lease gone)."""
        if state is None:
            name = "lease_lost"
        elif state is JobState.SUCCEEDED:
            name = "reconciled" if reconciled else "succeeded"
        else:
            name = _BY_STATE.get(state, "")
            if not name:
                return
        with self._lock:
            self._current.counts[name] += 1

    def lease_lost(self) -> None:
        with self._lock:
            self._current.counts["lease_lost"] += 1

    def take(self, now: float | None = None) -> dict[str, Any] | None:
        """The fields of the interval ending ``now`` (monotonic), and start the next one;
        None when nothing happened in it."""
        now = time.monotonic() if now is None else now
        with self._lock:
            cur, self._current = self._current, _Interval()
            since, self._since = self._since, now
        if not any(cur.counts.values()):
            return None
        fields: dict[str, Any] = {"interval_seconds": round(now - since, 1), **cur.counts}
        if cur.waits:
            waits = sorted(cur.waits)
            fields["queue_wait_p50"] = round(_percentile(waits, 0.50), 4)
            fields["queue_wait_p99"] = round(_percentile(waits, 0.99), 4)
        return fields


def _percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty list."""
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def log_summary(
    summary: JobSummary, worker_id: str, now: float | None = None
) -> dict[str, Any] | None:
    """Log the interval ending ``now`` as ``executor_summary``, if anything happened in it."""
    fields = summary.take(now)
    if fields is None:
        return None
    fields = {"worker_id": worker_id, **fields}
    emit(log, "executor_summary", **fields)
    return fields


class SummaryLoop(BackgroundLoop):
    """Logs the summary every ``interval`` seconds, and the last part at stop."""

    def __init__(self, summary: JobSummary, worker_id: str, interval: float) -> None:
        super().__init__("rota-summary", join_seconds=1.0)
        self._summary = summary
        self._worker_id = worker_id
        self._interval = interval

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            log_summary(self._summary, self._worker_id)

    def _after_stop(self) -> None:
        log_summary(self._summary, self._worker_id)

"""Operations metrics that every process contributes to and every ``rota serve`` reads.

The histograms and counters of ``GET /metrics`` must be the same truth on every
``serve`` instance, whichever executor or scheduler did the work, so they live
in the database, not in one process's memory:

* a process that does the work (an executor, a scheduler) observes into a
  ``MetricsRecorder``: an in-memory increment of one bucket, nothing per job
  on the database;
* a ``MetricsFlusher`` thread adds the deltas to ``metric_totals`` (cumulative)
  and ``metric_minutes`` (per minute, kept ``MINUTES_KEPT``) once per
  interval: one statement per table per flush, whatever the number of jobs;
* rare events written by a short-lived process (an operator's cancel of a
  waiting job, a skipped occurrence) add their deltas in the transaction that
  does the work (``rota.core.queries.metric_tables.add_metric_deltas``).

Gauges (jobs per state, oldest runnable age, stuck RUNNING, live workers) are
not here: ``rota serve`` counts them from indexes at scrape time.

A histogram is stored as one row per (metric, label values, bucket) with the
number of observations that fell in that bucket (not cumulative) and their
sum; a counter is a histogram with the single bucket ``+Inf``.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from functools import lru_cache

log = logging.getLogger("rota.metrics")

DEFAULT_FLUSH_SECONDS = 10.0  # below a 15 s scrape interval
MINUTES_KEPT = timedelta(hours=2)  # the dashboard shows the last hour

# Seconds, from a few milliseconds (queue wait of an idle executor) to a day.
DURATION_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
)  # fmt: skip
ATTEMPT_BUCKETS: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 10.0, 15.0, 20.0, 50.0, 100.0)
INF = float("inf")


class Kind(StrEnum):
    HISTOGRAM = "histogram"
    COUNTER = "counter"


@dataclass(frozen=True)
class Metric:
    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()
    # Every bucket bound as text, +Inf last: made once (observed for every job).
    _les: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_les", (*(format_le(b) for b in self.buckets), "+Inf"))

    def bucket_of(self, value: float) -> str:
        """The ``le`` of the bucket ``value`` falls in (``+Inf`` for a counter)."""
        if self.kind is Kind.COUNTER:
            return "+Inf"
        return self._les[bisect.bisect_left(self.buckets, value)]

    def les(self) -> list[str]:
        """Every bucket bound in order, ``+Inf`` last."""
        return list(self._les)


def format_le(bound: float) -> str:
    """A bucket bound as Prometheus writes it (``0.005``, ``1.0``, ``+Inf``)."""
    return "+Inf" if bound == INF else repr(float(bound))


def parse_le(le: str) -> float:
    return INF if le == "+Inf" else float(le)


QUEUE_WAIT = Metric(
    "rota_queue_wait_seconds",
    Kind.HISTOGRAM,
    ("job_type",),
    "Due to claimed, first attempt of each job.",
    DURATION_BUCKETS,
)
EXECUTION = Metric(
    "rota_execution_seconds",
    Kind.HISTOGRAM,
    ("job_type", "outcome"),
    "Run time of one attempt, by how it ended.",
    DURATION_BUCKETS,
)
END_TO_END = Metric(
    "rota_end_to_end_seconds",
    Kind.HISTOGRAM,
    ("job_type", "state"),
    "Created to terminal state (SUCCEEDED, FAILED, CANCELLED).",
    DURATION_BUCKETS,
)
ATTEMPTS_PER_SUCCESS = Metric(
    "rota_attempts_per_success",
    Kind.HISTOGRAM,
    ("job_type",),
    "Attempts a job took until it succeeded.",
    ATTEMPT_BUCKETS,
)
EXPIRED_LEASES = Metric(
    "rota_expired_leases_total",
    Kind.COUNTER,
    ("job_type",),
    "Leases the sweeper took back because no report came before they expired.",
)
# No schedule label: one series per schedule made a scrape of 100,000 schedules
# 219 MB (each schedule's lateness has rota_schedule_* gauges of its own).
SCHEDULER_DELAY = Metric(
    "rota_scheduler_delay_seconds",
    Kind.HISTOGRAM,
    (),
    "Occurrence job created minus its scheduled instant.",
    DURATION_BUCKETS,
)
SCHEDULE_SKIPPED = Metric(
    "rota_schedule_skipped_total",
    Kind.COUNTER,
    ("schedule", "reason"),
    "Occurrences that got no job of their own, by reason.",
)
DEADLINE_MISSED = Metric(
    "rota_schedule_deadline_missed_total",
    Kind.COUNTER,
    ("schedule", "reason"),
    "Occurrences not SUCCEEDED by their schedule's deadline, by reason.",
)
CANCEL_LATENCY = Metric(
    "rota_cancel_latency_seconds",
    Kind.HISTOGRAM,
    ("job_type",),
    "Cancel requested to CANCELLED.",
    DURATION_BUCKETS,
)

STORED_METRICS: tuple[Metric, ...] = (
    QUEUE_WAIT,
    EXECUTION,
    END_TO_END,
    ATTEMPTS_PER_SUCCESS,
    EXPIRED_LEASES,
    SCHEDULER_DELAY,
    SCHEDULE_SKIPPED,
    CANCEL_LATENCY,
    DEADLINE_MISSED,
)
BY_NAME: Mapping[str, Metric] = {m.name: m for m in STORED_METRICS}


def encode_labels(values: Iterable[str]) -> str:
    """The label values in the metric's label order, as stored (compact JSON)."""
    return _encoded(values if type(values) is tuple else tuple(values))


@lru_cache(maxsize=4096)  # label sets are few (job types, schedules, states): encode once
def _encoded(values: tuple[str, ...]) -> str:
    return json.dumps([str(v) for v in values], separators=(",", ":"), ensure_ascii=False)


def decode_labels(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text))


# (metric name, encoded label values, le) -> [observations, sum]
Key = tuple[str, str, str]
Deltas = dict[Key, list[float]]


def delta(metric: Metric, labels: Iterable[str], value: float, deltas: Deltas) -> None:
    """Add one observation (a histogram) or an increment of ``value`` (a counter)."""
    key = (metric.name, encode_labels(labels), metric.bucket_of(value))
    cell = deltas.get(key)
    n = value if metric.kind is Kind.COUNTER else 1.0
    if cell is None:
        deltas[key] = [n, value]
    else:
        cell[0] += n
        cell[1] += value


class MetricsRecorder:
    """In-memory deltas since the last flush; thread-safe; one lock, one dict update."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deltas: Deltas = {}
        self._cancelled: list[uuid.UUID] = []

    def observe(self, metric: Metric, labels: Iterable[str], value: float) -> None:
        value = max(0.0, float(value))
        with self._lock:
            delta(metric, labels, value, self._deltas)

    def inc(self, metric: Metric, labels: Iterable[str], amount: float = 1.0) -> None:
        with self._lock:
            delta(metric, labels, float(amount), self._deltas)

    def cancelled(self, job_id: uuid.UUID) -> None:
        """A worker acknowledged a cancel: its latency is read from the row at the flush.

        (The worker does not know when the cancel was requested; cancels are
        rare, so reading those few rows by primary key once per flush is cheap.)
        """
        with self._lock:
            self._cancelled.append(job_id)

    def take(self) -> tuple[Deltas, list[uuid.UUID]]:
        with self._lock:
            deltas, self._deltas = self._deltas, {}
            cancelled, self._cancelled = self._cancelled, []
        return deltas, cancelled

    def put_back(self, deltas: Deltas, cancelled: list[uuid.UUID]) -> None:
        """A flush failed: keep its deltas for the next one (nothing is lost or doubled)."""
        with self._lock:
            for key, (n, total) in deltas.items():
                cell = self._deltas.setdefault(key, [0.0, 0.0])
                cell[0] += n
                cell[1] += total
            self._cancelled.extend(cancelled)

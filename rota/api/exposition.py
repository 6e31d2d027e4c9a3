"""``GET /metrics``: the Prometheus text format, computed from the database at each scrape.

Every ``rota serve`` instance reports the same numbers, whichever process did
the work: histograms and counters are the cumulative rows of
``metric_totals`` (written by executors and schedulers, ``rota.core.metric_deltas``),
gauges are counted from partial indexes of waiting and running jobs
(``rota.core.queries.jobs_gauges``), and the health of schedules, workers and
handlers is read from one row per schedule and per process
(``rota.api.health_metrics``). A scrape reads a few small index ranges
and a table of one row per label set and bucket: never the job history (past
ten thousand FAILED jobs their count is taken less often: ``rota.api.failed_counts``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy import Engine

from rota.api.failed_counts import FailedCounts
from rota.api.health_metrics import health_families, schedule_text
from rota.core.metric_deltas import BY_NAME, Kind, decode_labels
from rota.core.queries.job_types import load_job_types
from rota.core.queries.jobs_gauges import (
    oldest_due_by_pool,
    oldest_running_by_pool,
    stuck_by_pool,
    unfinished_by_state,
)
from rota.core.queries.jobs_read import database_now
from rota.core.queries.metric_tables import read_totals
from rota.core.queries.schedule_outcomes import schedule_health
from rota.core.queries.workers import list_workers
from rota.core.states import UNFINISHED, JobState

GAUGE_STATES = (*UNFINISHED, JobState.FAILED.value)


class DatabaseCollector(Collector):
    def __init__(self, engine: Engine, failed: FailedCounts) -> None:
        self._engine = engine
        self._failed = failed

    def collect(self) -> Iterator[Metric]:
        with self._engine.connect() as conn:
            now = database_now(conn)
            types = load_job_types(conn)
            failed = self._failed.read(conn)
            counts = [*unfinished_by_state(conn), *failed.counts]
            oldest = oldest_due_by_pool(conn, now)
            stuck = stuck_by_pool(conn, now)
            totals = read_totals(conn)
            live = [w for w in list_workers(conn, now=now) if w.live]
            running = oldest_running_by_pool(conn)
        jobs = GaugeMetricFamily(
            "rota_jobs",
            "Jobs per state (waiting, running, and FAILED ones waiting for a person).",
            labels=["state", "job_type", "pool"],
        )
        values: dict[tuple[str, str, str], int] = {}
        for spec in types.values():  # every known type shows zeros rather than nothing
            for state in GAUGE_STATES:
                values[(state, spec.name, spec.pool)] = 0
        for c in counts:
            values[(c.state, c.job_type, c.pool)] = (
                values.get((c.state, c.job_type, c.pool), 0) + c.count
            )
        for labels, n in sorted(values.items()):
            jobs.add_metric(list(labels), n)
        yield jobs
        yield GaugeMetricFamily(
            "rota_failed_count_age_seconds",
            "Age of the FAILED counts in rota_jobs: 0 when counted at this scrape. Past "
            "10,000 FAILED jobs a count is kept for 100 times as long as it took.",
            value=failed.age_seconds,
        )
        pools = sorted(
            {spec.pool for spec in types.values()}
            | set(oldest)
            | set(stuck)
            | {c.pool for c in counts}
        )
        age = GaugeMetricFamily(
            "rota_oldest_runnable_age_seconds",
            "Age of the job that has been due and waiting longest, per pool (0: none waits).",
            labels=["pool"],
        )
        stuck_family = GaugeMetricFamily(
            "rota_stuck_running_jobs",
            "Leased jobs (RUNNING, CANCEL_REQUESTED) past lease expiry, not yet swept.",
            labels=["pool"],
        )
        for pool in pools:
            due = oldest.get(pool)
            age.add_metric([pool], 0.0 if due is None else max(0.0, (now - due).total_seconds()))
            stuck_family.add_metric([pool], stuck.get(pool, 0))
        yield age
        yield stuck_family
        yield from health_families(types, live, running, now)
        yield from stored_families(totals)


def stored_families(rows: Sequence[Any]) -> Iterator[Metric]:
    """Histograms and counters from the cumulative rows (one per metric, labels, bucket)."""
    grouped: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        if r["metric"] in BY_NAME:
            grouped[r["metric"]][r["labels"]][r["le"]] = [float(r["n"]), float(r["total"])]
    for name, metric in BY_NAME.items():
        series = grouped.get(name, {})
        family: HistogramMetricFamily | CounterMetricFamily
        if metric.kind is Kind.COUNTER:
            family = CounterMetricFamily(name, metric.help, labels=list(metric.labels))
            for labels, cells in sorted(series.items()):
                family.add_metric(list(decode_labels(labels)), sum(n for n, _ in cells.values()))
        else:
            family = HistogramMetricFamily(name, metric.help, labels=list(metric.labels))
            for labels, cells in sorted(series.items()):
                cumulative = 0.0
                buckets: list[tuple[str, float]] = []
                for le in metric.les():
                    cumulative += cells.get(le, [0.0, 0.0])[0]
                    buckets.append((le, cumulative))
                # Bounds no longer in the metric's list still count (in +Inf and the sum).
                stray = sum(n for le, (n, _) in cells.items() if le not in metric.les())
                buckets[-1] = ("+Inf", buckets[-1][1] + stray)
                total = sum(t for _, t in cells.values())
                family.add_metric(list(decode_labels(labels)), buckets, total)
        yield family


def exposition(engine: Engine, failed: FailedCounts) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(engine, failed))
    text = generate_latest(registry)
    with engine.connect() as conn:
        schedules = schedule_health(conn)
    return text + schedule_text(schedules)

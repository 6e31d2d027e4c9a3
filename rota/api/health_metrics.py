"""The health gauges of ``GET /metrics``: schedules, workers by pool, long runs, handlers.

Per schedule (one series each, so 100,000 schedules make half a million
lines): the newest success and outcome (``schedule_outcomes``, kept by the
statements that end jobs, never counted from the history), the next fire,
paused and set aside. These are written straight to the text format:
``prometheus_client`` builds an object per sample and takes ten times as long.
Schedules marked removed are left out.

Per pool and job type: live processes (``rota_workers``, executors in each
pool they serve), the longest-running attempt, and the job types a live
executor cannot import (``workers.unavailable_job_types``, rewritten with each
refresh of the executor's row, so the series drops to 0 once the handler is
fixed or the executor is gone).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric

from rota.core.config import JobTypeSpec
from rota.core.queries.schedule_outcomes import ScheduleHealth
from rota.core.queries.workers import WorkerRow, live_by_pool, unavailable_handlers

DEFAULT_POOL = "default"

# (name, help) of each per-schedule family, in the order they are written.
LAST_SUCCESS = (
    "rota_schedule_last_success_timestamp_seconds",
    "Scheduled instant of the newest occurrence that SUCCEEDED (absent: none yet).",
)
LAST_OUTCOME = (
    "rota_schedule_last_outcome_timestamp_seconds",
    "Scheduled instant of the newest occurrence that ended, labelled with how it ended.",
)
NEXT_FIRE = (
    "rota_schedule_next_fire_timestamp_seconds",
    "When the schedule fires next (absent while paused, or when its rule has no more).",
)
PAUSED = ("rota_schedule_paused", "1 while the schedule is paused.")
SET_ASIDE = (
    "rota_schedule_set_aside",
    "1 while the scheduler has set the schedule aside (it cannot evaluate or insert it).",
)


def _label(value: str) -> str:
    """A label value as the text format quotes it."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return value


def _header(name: str, help_text: str) -> str:
    return f"# HELP {name} {help_text}\n# TYPE {name} gauge\n"


def schedule_text(rows: Sequence[ScheduleHealth]) -> bytes:
    """The per-schedule families in the Prometheus text format (0.0.4)."""
    quoted = [(_label(r[0]), r) for r in rows]
    name = LAST_SUCCESS[0]
    out = [_header(*LAST_SUCCESS)]
    out += [f'{name}{{schedule="{q}"}} {r[6]}\n' for q, r in quoted if r[6] is not None]
    name = LAST_OUTCOME[0]
    out.append(_header(*LAST_OUTCOME))
    out += [  # the state is one of the terminal states: nothing to quote
        f'{name}{{schedule="{q}",state="{r[4]}"}} {r[5]}\n' for q, r in quoted if r[5] is not None
    ]
    name = NEXT_FIRE[0]
    out.append(_header(*NEXT_FIRE))
    out += [
        f'{name}{{schedule="{q}"}} {r[3]}\n' for q, r in quoted if r[3] is not None and not r[1]
    ]
    for (name, help_text), column in ((PAUSED, 1), (SET_ASIDE, 2)):
        out.append(_header(name, help_text))
        out += [f'{name}{{schedule="{q}"}} {r[column]}\n' for q, r in quoted]
    return "".join(out).encode()


def health_families(
    types: Mapping[str, JobTypeSpec],
    live: Sequence[WorkerRow],
    oldest_running: Mapping[str, datetime],
    now: datetime,
) -> Iterator[Metric]:
    """``rota_workers`` by kind and pool, the oldest running age, unavailable handlers."""
    pools = {spec.pool for spec in types.values()} | {DEFAULT_POOL}
    workers = GaugeMetricFamily(
        "rota_workers",
        "Live scheduler and executor processes (refreshed within three of their intervals); "
        "executors in each pool they serve, schedulers with no pool.",
        labels=["kind", "pool"],
    )
    for (kind, pool), n in sorted(live_by_pool(live, pools).items()):
        workers.add_metric([kind.value, pool], n)
    yield workers
    running = GaugeMetricFamily(
        "rota_oldest_running_age_seconds",
        "How long the longest-running attempt of a leased job has run, per pool (0: none runs).",
        labels=["pool"],
    )
    for pool in sorted(pools | set(oldest_running)):
        started = oldest_running.get(pool)
        running.add_metric(
            [pool], 0.0 if started is None else max(0.0, (now - started).total_seconds())
        )
    yield running
    unavailable = GaugeMetricFamily(
        "rota_handler_unavailable",
        "Live executors that cannot import the job type's handler (they do not claim its jobs).",
        labels=["job_type"],
    )
    counts = unavailable_handlers(live)
    for job_type in sorted(set(types) | set(counts)):
        unavailable.add_metric([job_type], counts.get(job_type, 0))
    yield unavailable

"""The numbers of GET /metrics are right: known jobs run, fail, are cancelled and expire,
then the exposition is read from running servers (two of them, which must agree)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError

from rota.core.database import make_engine
from rota.core.metric_deltas import DURATION_BUCKETS, QUEUE_WAIT, MetricsRecorder
from rota.core.queries.jobs_control import request_cancel
from rota.core.queries.jobs_read import database_now
from rota.core.queries.schedule_skips import totals_by_reason
from rota.executor.service import Executor
from rota.runtime.metrics_flush import MetricsFlusher
from rota.scheduler.apply import apply_schedule_file
from rota.scheduler.schedule_file.loader import load_schedule_text
from rota.scheduler.service import SchedulerService
from tests.support import loopback
from tests.support.api_support import running_api
from tests.support.executor_support import (
    add_jobs,
    claim_as,
    job_row,
    job_type,
    store_types,
    wait_for,
)

H = "tests.handlers.plain"

SCHEDULES = """
job_types:
  tick:
    handler: tests.handlers.plain:noop
schedules:
  every-10s:
    job_type: tick
    every: 10s
  skipper:
    job_type: tick
    every: 10s
    misfire: skip
"""


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(all_samples: Iterable[Sample], name: str, **labels: str) -> float:
    found = [s.value for s in all_samples if s.name == name and s.labels == labels]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def stored(text: str) -> list[Sample]:
    """The samples that come from the aggregate tables (the gauges move with the clock)."""
    gauges = (
        "rota_jobs",
        "rota_oldest_runnable_age_seconds",
        "rota_stuck_running_jobs",
        "rota_failed_count_age_seconds",
    )
    return sorted(
        (s for s in samples(text) if s.name not in gauges),
        key=lambda s: (s.name, sorted(s.labels.items())),
    )


def test_metrics_count_known_jobs(engine: Engine) -> None:
    ok = job_type("ok")
    bad = job_type("bad", handler=f"{H}:permanent")
    slow = job_type("slow", handler=f"{H}:until_stopped")
    dead = job_type("dead", lease=timedelta(seconds=0.3), max_attempts=3)
    store_types(engine, ok, bad, slow, dead)
    add_jobs(engine, ok, 3)
    add_jobs(engine, bad, 2)
    (slow_id,) = add_jobs(engine, slow)
    (waiting,) = add_jobs(engine, ok, run_after=None, priority=9)  # cancelled before it runs
    with engine.begin() as conn:
        assert request_cancel(conn, waiting).state is not None
    assert job_row(engine, waiting)["state"] == "CANCELLED"

    ex = Executor(engine, concurrency=8, listen=False, metrics_interval=3600)
    ex.start()
    try:
        assert ex.claim_once() == 6
        wait_for(lambda: job_row(engine, slow_id)["state"] == "RUNNING", what="slow running")
        wait_for(
            lambda: (
                sum(
                    job_row(engine, j)["state"] in ("SUCCEEDED", "FAILED")
                    for j in _ids(engine, "ok", "bad")
                )
                == 5
            ),
            what="five outcomes",
        )
        with engine.begin() as conn:
            request_cancel(conn, slow_id)
        wait_for(lambda: job_row(engine, slow_id)["state"] == "CANCELLED", what="cancel ack")
        assert ex.wait_idle(10)
        # A worker that dies holding a lease: stuck until a sweeper takes it back.
        (dead_id,) = add_jobs(engine, dead)
        (claimed,) = claim_as(engine, "gone-worker", 1)
        assert claimed.job_id == dead_id
        time.sleep(0.5)
        with running_api(engine) as base, loopback.Client(base_url=base) as client:
            before = samples(client.get("/metrics").text)
            assert value(before, "rota_stuck_running_jobs", pool="default") == 1
            assert value(before, "rota_jobs", state="RUNNING", job_type="dead", pool="default") == 1
            assert value(before, "rota_workers", kind="executor", pool="default") == 1
            assert value(before, "rota_workers", kind="scheduler", pool="") == 0
            data = client.get("/dashboard/data").json()
            assert [w["worker_id"] for w in data["workers"]] == [ex.worker_id]
        (swept,) = ex.sweep_once()
        assert swept.job_id == dead_id and swept.state.value == "RETRY_WAIT"
        assert ex.flush_metrics() > 0
    finally:
        ex.shutdown(drain_timeout=0)

    # The scheduler's delay and skips, by an injected clock.
    with engine.connect() as conn:
        now = database_now(conn)
    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"), now=now)
    scheduler = SchedulerService(engine)
    tick = scheduler.run_once(now=now + timedelta(seconds=25))
    MetricsFlusher(engine, scheduler.metrics).flush_once()
    late = scheduler.run_once(now=now + timedelta(hours=1))  # misfire: skip drops most
    MetricsFlusher(engine, scheduler.metrics).flush_once()
    with engine.connect() as conn:
        skips = totals_by_reason(conn)

    with (
        running_api(engine) as one,
        running_api(engine) as two,
        loopback.Client(base_url=one) as a,
        loopback.Client(base_url=two) as b,
    ):
        response = a.get("/metrics")
        text_b = b.get("/metrics").text
        page = a.get("/dashboard/data")
    assert page.status_code == 200, page.text
    (delay,) = page.json()["latency"]["scheduler_delay"].values()  # every schedule's, as one
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    s = samples(text)
    assert stored(text) == stored(text_b)  # every serve reports the same truth

    # gauges
    assert value(s, "rota_jobs", state="FAILED", job_type="bad", pool="default") == 2
    assert value(s, "rota_jobs", state="QUEUED", job_type="ok", pool="default") == 0
    assert value(s, "rota_jobs", state="RETRY_WAIT", job_type="dead", pool="default") == 1
    assert value(s, "rota_stuck_running_jobs", pool="default") == 0
    assert value(s, "rota_oldest_runnable_age_seconds", pool="default") >= 0
    # queue wait: every first attempt (the dead job's claim was not by an executor)
    assert value(s, "rota_queue_wait_seconds_count", job_type="ok") == 3
    assert value(s, "rota_queue_wait_seconds_count", job_type="bad") == 2
    assert value(s, "rota_queue_wait_seconds_count", job_type="slow") == 1
    assert value(s, "rota_queue_wait_seconds_bucket", job_type="ok", le="+Inf") == 3
    # execution time by outcome
    assert value(s, "rota_execution_seconds_count", job_type="ok", outcome="SUCCEEDED") == 3
    assert value(s, "rota_execution_seconds_count", job_type="bad", outcome="FAILED") == 2
    assert value(s, "rota_execution_seconds_count", job_type="slow", outcome="CANCELLED") == 1
    # created -> terminal, by state
    assert value(s, "rota_end_to_end_seconds_count", job_type="ok", state="SUCCEEDED") == 3
    assert value(s, "rota_end_to_end_seconds_count", job_type="bad", state="FAILED") == 2
    assert value(s, "rota_end_to_end_seconds_count", job_type="slow", state="CANCELLED") == 1
    assert value(s, "rota_end_to_end_seconds_count", job_type="ok", state="CANCELLED") == 1
    # attempts per success: three jobs, one attempt each
    assert value(s, "rota_attempts_per_success_count", job_type="ok") == 3
    assert value(s, "rota_attempts_per_success_sum", job_type="ok") == 3
    assert value(s, "rota_attempts_per_success_bucket", job_type="ok", le="1.0") == 3
    # cancels: the waiting one at once, the running one through the worker
    assert value(s, "rota_cancel_latency_seconds_count", job_type="ok") == 1
    assert value(s, "rota_cancel_latency_seconds_sum", job_type="ok") == 0
    assert value(s, "rota_cancel_latency_seconds_count", job_type="slow") == 1
    assert value(s, "rota_cancel_latency_seconds_sum", job_type="slow") > 0
    # the sweeper
    assert value(s, "rota_expired_leases_total", job_type="dead") == 1
    # the scheduler: one delay per created occurrence; skips as in the ledger
    created = tick.created + late.created
    assert created >= 2
    delays = [x for x in s if x.name == "rota_scheduler_delay_seconds_count"]
    # One histogram for every schedule: a series per schedule made big scrapes.
    assert [(x.labels, x.value) for x in delays] == [({}, created)]
    assert delay["count"] == created
    assert skips["skipper"]["misfire"] > 300
    assert (
        value(s, "rota_schedule_skipped_total", schedule="skipper", reason="misfire")
        == skips["skipper"]["misfire"]
    )
    # buckets are cumulative and end at +Inf == count
    bounds = [
        value(s, "rota_queue_wait_seconds_bucket", job_type="ok", le=repr(b))
        for b in DURATION_BUCKETS
    ]
    assert bounds == sorted(bounds) and bounds[-1] <= 3


def _ids(engine: Engine, *types: str) -> list[uuid.UUID]:
    from sqlalchemy import select

    from rota.core.tables import jobs

    with engine.connect() as conn:
        return list(conn.execute(select(jobs.c.job_id).where(jobs.c.job_type.in_(types))).scalars())


def test_a_failed_flush_keeps_its_deltas(engine: Engine, tmp_path: Path) -> None:
    recorder = MetricsRecorder()
    recorder.observe(QUEUE_WAIT, ("t",), 0.2)
    unmigrated = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        with pytest.raises(OperationalError):
            MetricsFlusher(unmigrated, recorder).flush_once()
    finally:
        unmigrated.dispose()
    recorder.observe(QUEUE_WAIT, ("t",), 0.2)
    flusher = MetricsFlusher(engine, recorder)
    assert flusher.flush_once() == 1
    assert flusher.flush_once() == 0
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
        s = samples(client.get("/metrics").text)
    assert value(s, "rota_queue_wait_seconds_count", job_type="t") == 2
    assert value(s, "rota_queue_wait_seconds_bucket", job_type="t", le="0.25") == 2
    assert value(s, "rota_queue_wait_seconds_bucket", job_type="t", le="0.1") == 0


def test_observations_made_in_other_transactions_count_once(engine: Engine) -> None:
    from rota.core.queries.schedule_skips import SkipRecord, record_skips
    from rota.core.states import SkipReason

    apply_schedule_file(engine, load_schedule_text(SCHEDULES, "s.yaml"))
    with engine.begin() as conn:
        now = database_now(conn)
        record_skips(conn, [SkipRecord("skipper", SkipReason.OVERLAP, now, now, 3)])
    with engine.begin() as conn:
        record_skips(conn, [SkipRecord("skipper", SkipReason.OVERLAP, now, now, 2)])
        conn.rollback()  # a rolled-back transaction counts nothing
    with running_api(engine) as base, loopback.Client(base_url=base) as client:

        def skipped() -> float:
            s = samples(client.get("/metrics").text)
            return value(s, "rota_schedule_skipped_total", schedule="skipper", reason="overlap")

        assert skipped() == 3  # still in the inbox: read from there
        assert MetricsFlusher(engine, MetricsRecorder()).flush_once() == 1
        assert skipped() == 3  # folded into the totals, counted once
        assert MetricsFlusher(engine, MetricsRecorder()).flush_once() == 0
        assert skipped() == 3

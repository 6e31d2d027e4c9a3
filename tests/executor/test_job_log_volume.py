"""A job's normal life logs nothing per job at INFO: one summary per interval does.

Failures, retries, cancellations and lost leases still log one line per job
with its ``job_id``; DEBUG brings back the per-job ``claimed`` and ``succeeded``.
The summary is driven by hand (``log_summary(now)``), with no summary thread.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from rota.core.queries.jobs_control import request_cancel
from rota.executor.service import Executor
from tests.support.executor_support import (
    SLOW_RETRY,
    add_jobs,
    job_type,
    lines,
    states,
    store_types,
    wait_for,
)

H = "tests.handlers.plain"


def _of(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == event]


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = record.fields  # type: ignore[attr-defined]
    return fields


def _run_all(ex: Executor, engine: Engine, expected: int) -> None:
    """Claim by hand until every job has reached an outcome (nothing left RUNNING)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ex.claim_once()
        assert ex.wait_idle(10)
        done = [s for s in states(engine).values() if s not in ("QUEUED", "RUNNING")]
        if len(done) >= expected:
            return
    raise AssertionError("the jobs did not all run")


def test_at_info_jobs_log_one_summary_and_no_line_each(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rota.executor")
    quick = job_type("quick")
    flaky = job_type("flaky", handler=f"{H}:retryable", backoff=SLOW_RETRY)
    bad = job_type("bad", handler=f"{H}:permanent")
    store_types(engine, quick, flaky, bad)
    add_jobs(engine, quick, 25)
    flaky_ids = add_jobs(engine, flaky, 2)
    (bad_id,) = add_jobs(engine, bad)
    ex = Executor(engine, concurrency=4, listen=False, summary_interval=None)
    ex.start()
    try:
        _run_all(ex, engine, 28)
        assert _of(caplog, "claimed") == [] and _of(caplog, "succeeded") == []
        retries = _of(caplog, "retry_scheduled")
        assert sorted(_fields(r)["job_id"] for r in retries) == sorted(flaky_ids)
        assert all(r.levelno == logging.INFO for r in retries)
        (failed,) = _of(caplog, "failed")
        assert _fields(failed)["job_id"] == bad_id and failed.levelno == logging.WARNING

        line = ex.log_summary(now=time.monotonic() + 10)
        (summary,) = _of(caplog, "executor_summary")
        assert summary.levelno == logging.INFO
        got = _fields(summary)
        assert line is not None and got == line
        assert got["worker_id"] == ex.worker_id
        counts = {k: got[k] for k in ("claimed", "succeeded", "retried", "failed")}
        assert counts == {"claimed": 28, "succeeded": 25, "retried": 2, "failed": 1}
        assert (got["cancelled"], got["lease_lost"], got["released"]) == (0, 0, 0)
        assert 0 <= got["queue_wait_p50"] <= got["queue_wait_p99"]
        assert got["interval_seconds"] >= 10

        # Nothing happened since: no line at all.
        assert ex.log_summary(now=time.monotonic() + 20) is None
        assert len(_of(caplog, "executor_summary")) == 1
    finally:
        ex.shutdown(drain_timeout=0)


def test_cancel_and_lost_lease_log_per_job_and_count_in_the_summary(
    engine: Engine, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.INFO, logger="rota.executor")
    long = job_type("long", handler=f"{H}:until_stopped")
    store_types(engine, long)
    out1, out2 = tmp_path / "one.txt", tmp_path / "two.txt"
    (cancel_id,) = add_jobs(engine, long, args={"file": str(out1)})
    ex = Executor(engine, concurrency=2, listen=False, summary_interval=None)
    ex.start()
    try:
        assert ex.claim_once() == 1
        wait_for(lambda: lines(out1), what="the handler to start")
        with engine.begin() as conn:
            request_cancel(conn, cancel_id)
        ex.heartbeat_once()
        assert ex.wait_idle(10)
        (cancelled,) = _of(caplog, "cancelled")
        assert _fields(cancelled)["job_id"] == cancel_id and cancelled.levelno >= logging.INFO

        (lost_id,) = add_jobs(engine, long, args={"file": str(out2)})
        assert ex.claim_once() == 1
        wait_for(lambda: lines(out2), what="the handler to start")
        ex.sweep_once(now=datetime.now(UTC) + timedelta(hours=1))
        ex.heartbeat_once()
        wait_for(lambda: _of(caplog, "lease_lost"), what="lease_lost")
        (lost,) = _of(caplog, "lease_lost")
        assert _fields(lost)["job_id"] == lost_id and lost.levelno >= logging.INFO

        got = ex.log_summary(now=time.monotonic())
        assert got is not None
        assert (got["claimed"], got["cancelled"], got["lease_lost"]) == (2, 1, 1)
        assert _of(caplog, "claimed") == []
    finally:
        ex.shutdown(drain_timeout=0)


def test_debug_brings_back_the_per_job_lines(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rota.executor")
    quick = job_type("quick")
    store_types(engine, quick)
    ids = add_jobs(engine, quick, 5)
    ex = Executor(engine, concurrency=4, listen=False, summary_interval=None)
    ex.start()
    try:
        _run_all(ex, engine, 5)
        for event in ("claimed", "succeeded"):
            got = _of(caplog, event)
            assert sorted(_fields(r)["job_id"] for r in got) == sorted(ids)
            assert all(r.levelno == logging.DEBUG for r in got)
    finally:
        ex.shutdown(drain_timeout=0)

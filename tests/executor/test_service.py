"""The executor in-process, on both backends: handlers, errors, retries, reconcile,
timeouts, commands, cancellation, progress, lost leases, shutdown, wake-up."""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text, update
from sqlalchemy.exc import DBAPIError, OperationalError

from rota.core.config import JobTypeSpec
from rota.core.queries.jobs_control import request_cancel
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.queries.jobs_lease import sweep_expired_leases
from rota.core.tables import jobs
from rota.executor.service import Executor
from tests.support.executor_support import (
    FAST_RETRY,
    SLOW_RETRY,
    StartExecutor,
    add_jobs,
    attempt_rows,
    claim_as,
    job_row,
    job_type,
    lines,
    state_is,
    states,
    stop_once_started,
    store_types,
    wait_for,
)

H = "tests.handlers.plain"


def events(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [getattr(r, "event", "") for r in caplog.records]


def test_success_gives_the_handler_its_context(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rota.executor")  # claimed, succeeded: DEBUG
    out = tmp_path / "ctx.jsonl"
    spec = job_type("ctx", handler=f"{H}:context_dump")
    store_types(engine, spec)
    instant = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
    (job_id,) = add_jobs(
        engine,
        spec,
        payload_ref="s3://b/k",
        args={"file": str(out), "n": 1},
        schedule_name="s",
        scheduled_for=instant,
        covers_from=instant - timedelta(hours=2),
        covers_count=3,
    )
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    (seen,) = [json.loads(x) for x in lines(out)]
    assert seen == {
        "job_id": str(job_id),
        "job_type": "ctx",
        "attempt": 1,
        "payload_ref": "s3://b/k",
        "args": {"file": str(out), "n": 1},
        "scheduled_for": "2026-03-01T02:00:00+00:00",
        "covers": ["2026-03-01T00:00:00+00:00", "2026-03-01T02:00:00+00:00", 3],
        "key": f"rota:{job_id}:charge",
    }
    (att,) = attempt_rows(engine, job_id)
    assert att["outcome"] == "SUCCEEDED" and att["ended_at"] is not None
    wait_for(lambda: "succeeded" in events(caplog), what="succeeded event")
    assert "claimed" in events(caplog)


def test_a_returned_string_is_stored_as_the_result_ref(
    engine: Engine, start_executor: StartExecutor
) -> None:
    spec = job_type("result", handler=f"{H}:returns_result_ref")
    plain = job_type("plain", handler=f"{H}:noop")
    store_types(engine, spec, plain)
    (job_id,) = add_jobs(engine, spec)
    (plain_id,) = add_jobs(engine, plain)
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    wait_for(state_is(engine, plain_id, "SUCCEEDED"), what="SUCCEEDED")
    assert job_row(engine, job_id)["result_ref"] == f"s3://results/{job_id}.csv"
    assert job_row(engine, plain_id)["result_ref"] is None


@pytest.mark.parametrize(
    ("handler", "state", "code"),
    [
        ("retryable", "RETRY_WAIT", "FLAKY"),
        ("permanent", "FAILED", "BAD_INPUT"),
        ("generic", "RETRY_WAIT", "KeyError"),
    ],
)
def test_error_kinds(
    engine: Engine, start_executor: StartExecutor, handler: str, state: str, code: str
) -> None:
    spec = job_type("e", handler=f"{H}:{handler}", backoff=SLOW_RETRY)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, state), what=state)
    row = job_row(engine, job_id)
    assert row["last_error_code"] == code
    assert handler in row["last_error_detail"]  # the traceback tail names the handler
    if state == "RETRY_WAIT":
        delay = (row["run_after"] - row["updated_at"]).total_seconds()
        assert 3600 - 1 <= delay <= 3600 * 1.2 + 1  # never sooner; jitter on top


def test_retries_until_attempts_run_out(engine: Engine, start_executor: StartExecutor) -> None:
    spec = job_type("r", handler=f"{H}:retryable", max_attempts=3, backoff=FAST_RETRY)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "FAILED"), what="FAILED")
    row = job_row(engine, job_id)
    assert row["attempt_count"] == 3 and row["last_error_code"] == "FLAKY"
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["RETRY", "RETRY", "FAILED"]


def test_ambiguous_without_hook_waits_for_a_person(
    engine: Engine, start_executor: StartExecutor
) -> None:
    spec = job_type("a", handler=f"{H}:ambiguous", backoff=FAST_RETRY, idempotent=False)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "FAILED"), what="FAILED")
    row = job_row(engine, job_id)
    assert row["last_error_code"] == "NEEDS_RECONCILE" and row["needs_reconcile"] is True
    assert "MAYBE_CHARGED" in row["last_error_detail"]
    assert row["attempt_count"] == 1
    assert attempt_rows(engine, job_id)[0]["outcome"] == "AMBIGUOUS"


def test_ambiguous_idempotent_job_without_hook_is_retried(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    """Safe to repeat: no person needed, the next attempt simply runs."""
    out = tmp_path / "runs.txt"
    spec = job_type("a", handler=f"{H}:ambiguous_first", backoff=FAST_RETRY)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    row = job_row(engine, job_id)
    assert row["needs_reconcile"] is False and row["attempt_count"] == 2
    assert lines(out) == ["ran 2"]
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["AMBIGUOUS", "SUCCEEDED"]
    assert attempt_rows(engine, job_id)[0]["error_code"] == "MAYBE_CHARGED"


def test_ambiguous_idempotent_job_fails_with_its_code_when_attempts_run_out(
    engine: Engine, start_executor: StartExecutor
) -> None:
    spec = job_type("a", handler=f"{H}:ambiguous", backoff=FAST_RETRY, max_attempts=2)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "FAILED"), what="FAILED")
    row = job_row(engine, job_id)
    assert row["last_error_code"] == "MAYBE_CHARGED" and row["needs_reconcile"] is False
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["AMBIGUOUS", "AMBIGUOUS"]


def test_a_flagged_idempotent_job_without_hook_simply_runs(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    """needs_reconcile without a hook stops only idempotent: false jobs (e.g. a flag
    left by an older version, or by a job type that was not idempotent then)."""
    out = tmp_path / "runs.txt"
    spec = job_type("i", handler=f"{H}:record")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    with engine.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.job_id == job_id).values(needs_reconcile=True))
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    assert len(lines(out)) == 1 and job_row(engine, job_id)["needs_reconcile"] is False


@pytest.mark.parametrize("already_done", [True, False])
def test_reconcile_hook_decides_the_next_attempt(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path, already_done: bool
) -> None:
    out = tmp_path / "runs.txt"
    hook = "reconcile_done" if already_done else "reconcile_not_done"
    spec = job_type(
        "a", handler=f"{H}:ambiguous_first", reconcile=f"{H}:{hook}", backoff=FAST_RETRY
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    row = job_row(engine, job_id)
    assert row["needs_reconcile"] is False and row["attempt_count"] == 2
    outcomes = [a["outcome"] for a in attempt_rows(engine, job_id)]
    if already_done:
        assert lines(out) == ["reconcile 2"]  # never blindly rerun
        assert outcomes == ["AMBIGUOUS", "RECONCILED"]
    else:
        assert lines(out) == ["reconcile 2", "ran 2"]
        assert outcomes == ["AMBIGUOUS", "SUCCEEDED"]


def test_expired_lease_of_non_idempotent_job_is_not_rerun_blindly(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    spec = job_type("pay", handler=f"{H}:record", idempotent=False)
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    claim_as(engine, "dead:1:x", 1)  # a worker claims it and dies
    with engine.begin() as conn:
        conn.execute(update(jobs).values(lease_expires_at=datetime(2000, 1, 1, tzinfo=UTC)))
    with engine.begin() as conn:
        sweep_expired_leases(conn)
    assert job_row(engine, job_id)["needs_reconcile"] is True
    start_executor()
    wait_for(state_is(engine, job_id, "FAILED"), what="FAILED")
    assert job_row(engine, job_id)["last_error_code"] == "NEEDS_RECONCILE"
    assert lines(out) == []


def test_python_timeout_is_ambiguous_and_its_late_result_is_dropped(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    spec = job_type(
        "slow",
        handler=f"{H}:sleep_blind",
        timeout=timedelta(milliseconds=300),
        lease=timedelta(seconds=2),
        idempotent=False,
    )
    store_types(engine, spec)
    out = tmp_path / "woke.txt"
    (job_id,) = add_jobs(engine, spec, args={"seconds": 1.5, "file": str(out)})
    start_executor()
    wait_for(state_is(engine, job_id, "FAILED"), what="FAILED")
    assert lines(out) == []  # written off at the timeout, while the thread still sleeps
    row = job_row(engine, job_id)
    assert row["last_error_code"] == "NEEDS_RECONCILE" and "TIMEOUT" in row["last_error_detail"]
    wait_for(lambda: lines(out) == ["woke"], what="the thread to finish")
    assert job_row(engine, job_id)["state"] == "FAILED"  # its late result was dropped


def test_timeout_of_an_idempotent_job_without_hook_is_retried(
    engine: Engine, start_executor: StartExecutor
) -> None:
    spec = job_type(
        "slow", handler=f"{H}:sleep_blind", timeout=timedelta(milliseconds=200), backoff=SLOW_RETRY
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"seconds": 1.0})
    start_executor()
    wait_for(state_is(engine, job_id, "RETRY_WAIT"), what="RETRY_WAIT")
    row = job_row(engine, job_id)
    assert row["last_error_code"] == "TIMEOUT" and row["needs_reconcile"] is False
    assert attempt_rows(engine, job_id)[0]["outcome"] == "AMBIGUOUS"


def test_timeout_with_hook_goes_to_retry_wait(
    engine: Engine, start_executor: StartExecutor
) -> None:
    spec = job_type(
        "slow",
        handler=f"{H}:sleep_blind",
        timeout=timedelta(milliseconds=200),
        reconcile=f"{H}:reconcile_done",
        backoff=SLOW_RETRY,
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"seconds": 1.0})
    start_executor()
    wait_for(state_is(engine, job_id, "RETRY_WAIT"), what="RETRY_WAIT")
    row = job_row(engine, job_id)
    assert row["last_error_code"] == "TIMEOUT" and row["needs_reconcile"] is True


def test_command_handler_gets_its_job_in_env(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "env.txt"
    script = (
        'printf "%s|%s|%s|%s|%s" "$ROTA_JOB_ID" "$ROTA_ATTEMPT" "$ROTA_ARGS" '
        f'"$ROTA_PAYLOAD_REF" "$ROTA_SCHEDULED_FOR" > {out}'
    )
    spec = JobTypeSpec(name="cmd", command=("sh", "-c", script))
    store_types(engine, spec)
    instant = datetime(2026, 1, 1, tzinfo=UTC)
    (job_id,) = add_jobs(engine, spec, args={"x": 1}, payload_ref="p", scheduled_for=instant)
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    assert out.read_text() == f'{job_id}|1|{{"x": 1}}|p|2026-01-01T00:00:00Z'


def test_command_exit_status_is_a_retryable_code(
    engine: Engine, start_executor: StartExecutor
) -> None:
    spec = JobTypeSpec(
        name="cmd", command=("sh", "-c", "echo broken >&2; exit 3"), backoff=SLOW_RETRY
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "RETRY_WAIT"), what="RETRY_WAIT")
    row = job_row(engine, job_id)
    assert row["last_error_code"] == "EXIT_3" and "broken" in row["last_error_detail"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_command_timeout_kills_the_process_group(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 30 & echo $! > {pidfile}; wait"
    spec = JobTypeSpec(
        name="cmd",
        command=("sh", "-c", script),
        timeout=timedelta(milliseconds=500),
        idempotent=False,
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "FAILED"), what="FAILED")
    assert "TIMEOUT" in job_row(engine, job_id)["last_error_detail"]
    child = int(wait_for(lambda: pidfile.exists() and pidfile.read_text().strip()))
    wait_for(lambda: not _alive(child), what="the grandchild to be killed")


def test_cancel_running_python_handler(
    engine: Engine,
    start_executor: StartExecutor,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="rota.executor")
    out = tmp_path / "log.txt"
    spec = job_type("long", handler=f"{H}:until_stopped", lease=timedelta(seconds=1))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(lambda: lines(out), what="the handler to start")
    # Progress reaches the row with the heartbeat.
    wait_for(lambda: job_row(engine, job_id)["progress_stage"] == "WORKING", what="progress")
    row = job_row(engine, job_id)
    assert (row["progress_done"], row["progress_total"]) == (1, 3)
    with engine.begin() as conn:
        request_cancel(conn, job_id)
    wait_for(state_is(engine, job_id, "CANCELLED"), what="CANCELLED")
    assert lines(out)[-1].startswith("stopped JobCancelled")
    assert attempt_rows(engine, job_id)[-1]["outcome"] == "CANCELLED"
    wait_for(lambda: "cancelled" in events(caplog), what="cancelled event")


def test_cancel_reaches_the_handler_long_before_the_next_renewal(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    """A one-hour lease is renewed after 20 minutes; the cancel poll does not wait for it."""
    out = tmp_path / "log.txt"
    spec = job_type("long", handler=f"{H}:checkpoints_only", lease=timedelta(hours=1))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(lambda: lines(out), what="the handler to start")
    time.sleep(1.5)  # past the first cancel poll: the next one must find the request
    with engine.begin() as conn:
        request_cancel(conn, job_id)
    wait_for(state_is(engine, job_id, "CANCELLED"), timeout=10, what="CANCELLED")
    assert lines(out)[-1].startswith("stopped JobCancelled")


def test_cancel_running_command(engine: Engine, start_executor: StartExecutor) -> None:
    spec = JobTypeSpec(name="cmd", command=("sleep", "30"), lease=timedelta(seconds=1))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    start_executor()
    wait_for(state_is(engine, job_id, "RUNNING"), what="RUNNING")
    with engine.begin() as conn:
        request_cancel(conn, job_id)
    wait_for(state_is(engine, job_id, "CANCELLED"), timeout=5, what="CANCELLED")


def test_lost_lease_stops_the_handler_and_reports_nothing(
    engine: Engine,
    start_executor: StartExecutor,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="rota.executor")
    out = tmp_path / "log.txt"
    spec = job_type("long", handler=f"{H}:until_stopped", lease=timedelta(seconds=1))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor(sweep_interval=60)
    wait_for(lambda: lines(out), what="the handler to start")
    with engine.begin() as conn:  # another worker took the job over
        conn.execute(
            update(jobs)
            .where(jobs.c.job_id == job_id)
            .values(lease_owner="thief:1:x", lease_generation=jobs.c.lease_generation + 1)
        )
    wait_for(lambda: lines(out)[-1].startswith("stopped LeaseLost"), what="LeaseLost")
    wait_for(lambda: "lease_lost" in events(caplog), what="lease_lost event")
    row = job_row(engine, job_id)
    assert row["state"] == "RUNNING" and row["lease_owner"] == "thief:1:x"
    assert attempt_rows(engine, job_id)[0]["ended_at"] is None  # the thief's to close


def test_executor_that_cannot_renew_fences_itself(
    engine: Engine,
    start_executor: StartExecutor,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unreachable(*_a: Any, **_k: Any) -> Any:
        raise OperationalError("renew", {}, Exception("connection refused"))

    monkeypatch.setattr("rota.executor.heartbeat.renew_leases_if_held", unreachable)
    out = tmp_path / "log.txt"
    lease = 1.5
    spec = job_type("long", handler=f"{H}:until_stopped", lease=timedelta(seconds=lease))
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor(sweep_interval=60)
    wait_for(lambda: lines(out)[-1:] and lines(out)[-1].startswith("stopped"), what="a stop")
    stopped = lines(out)[-1].split()
    assert stopped[1] == "LeaseLost"
    row = job_row(engine, job_id)
    assert row["state"] == "RUNNING"  # nothing reported: the sweeper will take it back
    # The handler stopped before the lease (never renewed) could pass to anyone.
    # Same host, so the database clock and time.time() agree.
    assert float(stopped[3]) < row["lease_expires_at"].timestamp()


def test_shutdown_releases_what_does_not_finish(
    engine: Engine,
    start_executor: StartExecutor,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="rota.executor")
    out = tmp_path / "log.txt"
    spec = job_type("long", handler=f"{H}:until_stopped")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    stop_once_started(engine, out, drain_timeout=0.2)
    row = job_row(engine, job_id)
    assert row["state"] == "QUEUED" and row["attempt_count"] == 0 and row["lease_owner"] is None
    assert attempt_rows(engine, job_id)[0]["outcome"] == "RELEASED"
    wait_for(lambda: lines(out)[-1].startswith("stopped JobReleased"), what="JobReleased")
    assert "released" in events(caplog)


def test_shutdown_lets_running_jobs_finish_within_the_drain_timeout(
    engine: Engine, tmp_path: Path
) -> None:
    out = tmp_path / "log.txt"
    spec = job_type("s", handler=f"{H}:finish_after")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"seconds": 0.5, "file": str(out)})
    stop_once_started(engine, out, drain_timeout=10)
    assert job_row(engine, job_id)["state"] == "SUCCEEDED"


def test_new_job_wakes_an_idle_executor(engine: Engine, start_executor: StartExecutor) -> None:
    """LISTEN/NOTIFY on PostgreSQL, PRAGMA data_version on SQLite: not the 30 s poll."""
    spec = job_type("t")
    store_types(engine, spec)
    ex = start_executor(poll_interval=30, sweep_interval=30)
    wait_for(lambda: ex.claim_rounds >= 1, what="the executor to go idle")
    t0 = time.monotonic()
    (job_id,) = add_jobs(engine, spec)
    wait_for(state_is(engine, job_id, "SUCCEEDED"), timeout=5, what="SUCCEEDED")
    assert time.monotonic() - t0 < 5


def test_a_job_due_before_where_the_claims_start_waits_no_poll(
    engine: Engine, start_executor: StartExecutor
) -> None:
    """PostgreSQL claims scan from where the last one began (ScanStarts): a job due a
    minute ago, enqueued with one due now, lies before that place. Having claimed fewer
    jobs than it asked for, the executor claims again from the head when the interval
    between head scans is up (here a fixed 3 s: ``rescan`` above ``longest``), not at the
    30 s poll."""
    spec = job_type("t")
    store_types(engine, spec)
    ex = start_executor(concurrency=4, poll_interval=30, sweep_interval=30)
    ex._scan_starts.rescan = 3.0  # wide enough that the enqueue below lands inside it
    wait_for(lambda: ex.claim_rounds >= 1, what="the executor to go idle")
    (first,) = add_jobs(engine, spec)
    wait_for(state_is(engine, first, "SUCCEEDED"), timeout=5, what="the first job")
    now = datetime.now(UTC)
    new = [NewJob.of_type(spec, run_after=now - timedelta(minutes=1)), NewJob.of_type(spec)]
    with engine.begin() as conn:
        insert_jobs_or_skip(conn, new)
    early, late = (j.job_id for j in new)
    wait_for(state_is(engine, early, "SUCCEEDED"), timeout=10, what="the early job")
    if engine.dialect.name == "postgresql":
        # The start hid it: the later job went first, or both went in one head scan
        # when the 3 s interval ended just as they were inserted; never the early one first.
        assert job_row(engine, late)["started_at"] <= job_row(engine, early)["started_at"]


def test_ticks_can_be_driven_by_hand(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "log.txt"
    quick = job_type("quick")
    long = job_type("long", handler=f"{H}:until_stopped")
    store_types(engine, quick, long)
    (q,) = add_jobs(engine, quick)
    ex = Executor(engine, concurrency=2, listen=False)
    ex.start()
    try:
        assert ex.claim_once() == 1
        assert ex.wait_idle(10)
        assert job_row(engine, q)["state"] == "SUCCEEDED"
        (lj,) = add_jobs(engine, long, args={"file": str(out)})
        assert ex.claim_once() == 1
        wait_for(lambda: lines(out), what="the handler to start")
        assert ex.heartbeat_once() == 1
        # An hour from now by the injected clock the lease has expired: the sweeper
        # takes the job back, and the worker learns it lost the lease.
        later = datetime.now(UTC) + timedelta(hours=1)
        (swept,) = ex.sweep_once(now=later)
        assert swept.job_id == lj and swept.state.value == "RETRY_WAIT"
        assert ex.heartbeat_once() == 0
        wait_for(lambda: lines(out)[-1].startswith("stopped LeaseLost"), what="LeaseLost")
    finally:
        ex.shutdown(drain_timeout=0)


def _drop_loop_connections(engine: Engine, ex: Executor) -> None:
    """What a database restart does to the executor's held connections."""
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            conn.commit()
        return
    for db in (ex._claim_db, ex._writer._db):
        held = db._conn
        assert held is not None
        held.connection.dbapi_connection.close()  # type: ignore[union-attr]


def test_loops_reconnect_after_losing_their_connections(engine: Engine) -> None:
    quick = job_type("quick")
    store_types(engine, quick)
    ex = Executor(engine, concurrency=4, listen=False)
    ex.start()
    try:
        add_jobs(engine, quick)
        assert ex.claim_once() == 1
        assert ex.wait_idle(10)
        _drop_loop_connections(engine, ex)
        ids = add_jobs(engine, quick, 3)
        with pytest.raises(DBAPIError):
            ex.claim_once()  # the dead connection fails once and is dropped
        assert ex.claim_once() == 3  # a new one
        assert ex.wait_idle(10)  # the writer's first try failed too; it retried
        assert set(states(engine, ids).values()) == {"SUCCEEDED"}
    finally:
        ex.shutdown(drain_timeout=0)

"""``async def`` handlers, on both backends: they really run, on one event loop per
executor, with the same context, timeout, cancellation and outcomes as plain ones."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine

from rota.core.queries.jobs_control import request_cancel
from tests.support.executor_support import (
    FAST_RETRY,
    SLOW_RETRY,
    StartExecutor,
    add_jobs,
    attempt_rows,
    job_row,
    job_type,
    lines,
    state_is,
    states,
    stop_once_started,
    store_types,
    wait_for,
)

A = "tests.handlers.coroutines"


def test_coroutine_handlers_run_on_one_event_loop_with_their_context(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "ran.jsonl"
    spec = job_type("co", handler=f"{A}:record_context")
    store_types(engine, spec)
    ids = [
        add_jobs(engine, spec, args={"file": str(out), "n": n, "sleep": 0.2})[0] for n in range(4)
    ]
    start_executor(concurrency=4)
    wait_for(lambda: set(states(engine, ids).values()) == {"SUCCEEDED"}, what="SUCCEEDED")
    seen = [json.loads(x) for x in lines(out)]
    assert sorted(s["args_n"] for s in seen) == [0, 1, 2, 3]  # each ran, once
    assert {s["job_id"] for s in seen} == {str(i) for i in ids}
    assert {s["attempt"] for s in seen} == {1}
    assert {s["thread"] for s in seen} == {"rota-asyncio"}
    assert len({s["loop"] for s in seen}) == 1  # one loop, not one per job
    assert [a["outcome"] for a in attempt_rows(engine, ids[0])] == ["SUCCEEDED"]


def test_coroutine_outcomes_are_those_of_plain_handlers(
    engine: Engine, start_executor: StartExecutor
) -> None:
    result = job_type("result", handler=f"{A}:result_ref")
    flaky = job_type("flaky", handler=f"{A}:retryable", backoff=SLOW_RETRY)
    wrong = job_type("wrong", handler=f"{A}:returns_a_dict")
    returns_coro = job_type("coro", handler="tests.handlers.hostile:sync_returning_a_coroutine")
    store_types(engine, result, flaky, wrong, returns_coro)
    (r_id,) = add_jobs(engine, result)
    (f_id,) = add_jobs(engine, flaky)
    (w_id,) = add_jobs(engine, wrong)
    (c_id,) = add_jobs(engine, returns_coro)
    start_executor()
    wait_for(state_is(engine, r_id, "SUCCEEDED"), what="SUCCEEDED")
    assert job_row(engine, r_id)["result_ref"] == f"s3://results/{r_id}.json"
    wait_for(state_is(engine, c_id, "SUCCEEDED"), what="the returned coroutine awaited")
    assert job_row(engine, c_id)["result_ref"] == f"s3://results/{c_id}"
    wait_for(state_is(engine, f_id, "RETRY_WAIT"), what="RETRY_WAIT")
    row = job_row(engine, f_id)
    assert row["last_error_code"] == "ASYNC_FLAKY" and "retryable" in row["last_error_detail"]
    wait_for(state_is(engine, w_id, "FAILED"), what="FAILED")
    row = job_row(engine, w_id)
    assert row["last_error_code"] == "RESULT_INVALID" and "dict" in row["last_error_detail"]


def test_a_timed_out_coroutine_is_cancelled(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "log.txt"
    spec = job_type(
        "slow",
        handler=f"{A}:awaits_forever",
        timeout=timedelta(milliseconds=300),
        backoff=SLOW_RETRY,
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(state_is(engine, job_id, "RETRY_WAIT"), what="RETRY_WAIT")
    assert job_row(engine, job_id)["last_error_code"] == "TIMEOUT"
    wait_for(lambda: lines(out) == ["started", "cancelled"], what="the task cancelled")


@pytest.mark.parametrize(
    ("handler", "last_line"),
    [("awaits_forever", "cancelled"), ("checkpoints", "stopped JobCancelled")],
)
def test_cancelling_a_running_coroutine(
    engine: Engine,
    start_executor: StartExecutor,
    tmp_path: Path,
    handler: str,
    last_line: str,
) -> None:
    out = tmp_path / "log.txt"
    spec = job_type("long", handler=f"{A}:{handler}")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(lambda: lines(out), what="the handler to start")
    with engine.begin() as conn:
        request_cancel(conn, job_id)
    wait_for(state_is(engine, job_id, "CANCELLED"), what="CANCELLED")
    assert lines(out)[-1] == last_line
    assert attempt_rows(engine, job_id)[-1]["outcome"] == "CANCELLED"


def test_shutdown_cancels_and_releases_a_running_coroutine(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "log.txt"
    spec = job_type("long", handler=f"{A}:awaits_forever")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    stop_once_started(engine, out, drain_timeout=0.2)
    row = job_row(engine, job_id)
    assert row["state"] == "QUEUED" and row["attempt_count"] == 0
    assert attempt_rows(engine, job_id)[0]["outcome"] == "RELEASED"
    wait_for(lambda: lines(out)[-1] == "cancelled", what="the task cancelled")
    assert not any(th.name == "rota-asyncio" and th.is_alive() for th in threading.enumerate())


def test_a_coroutine_reconcile_hook_is_awaited(
    engine: Engine, start_executor: StartExecutor, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    spec = job_type(
        "a",
        handler="tests.handlers.plain:ambiguous_first",
        reconcile=f"{A}:reconcile_done",
        backoff=FAST_RETRY,
        idempotent=False,
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    start_executor()
    wait_for(state_is(engine, job_id, "SUCCEEDED"), what="SUCCEEDED")
    assert lines(out) == ["reconcile 2"]
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["AMBIGUOUS", "RECONCILED"]

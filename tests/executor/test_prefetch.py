"""Prefetch: jobs claimed ahead of a free slot wait in the process, safely.

A claim takes up to ``concurrency + prefetch`` jobs; the extra ones wait in
the process for a slot (RUNNING in the database, leases renewed). Graceful
shutdown hands them back at once with no attempt spent, their execution
timeout counts from their handler's start, and long jobs are not prefetched.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from rota.core.config import JobTypeSpec
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.executor.service import DEFAULT_CONCURRENCY
from rota.executor.slots import default_prefetch
from tests.support.executor_support import (
    InThread,
    attempt_rows,
    job_row,
    job_type,
    lines,
    run_in_thread,
    store_types,
    wait_for,
)

H = "tests.handlers.prefetch"


@pytest.fixture
def running(engine: Engine) -> Iterator[list[InThread]]:
    started: list[InThread] = []
    yield started
    for _, stop, _ in started:
        stop.set()
    for _, _, t in started:
        t.join(15)


def start(engine: Engine, running: list[InThread], **kwargs: Any) -> InThread:
    running.append(run_in_thread(engine, poll_interval=0.05, **kwargs))
    return running[-1]


def insert_at_once(
    engine: Engine, *jobs: tuple[JobTypeSpec, dict[str, str], float]
) -> list[uuid.UUID]:
    """One transaction (one wake-up); claim order by ``run_after``, seconds ago."""
    now = datetime.now(UTC)
    new = [
        NewJob.of_type(spec, args=args, run_after=now - timedelta(seconds=ago))
        for spec, args, ago in jobs
    ]
    with engine.begin() as conn:
        insert_jobs_or_skip(conn, new)
    return [j.job_id for j in new]


def warm_up(engine: Engine, spec: JobTypeSpec, log: Path) -> None:
    """Run one short job first: the executor then knows its jobs are short."""
    (job,) = insert_at_once(engine, (spec, {"log": str(log)}, 0.0))
    wait_for(lambda: job_row(engine, job)["state"] == "SUCCEEDED", what="the warm-up job")


def test_shutdown_hands_prefetched_jobs_back_at_once_with_no_attempt_spent(
    engine: Engine,
    tmp_path: Path,
    running: list[InThread],
) -> None:
    log, go = tmp_path / "log.txt", tmp_path / "go"
    long = job_type("long", handler=f"{H}:until_file")
    quick = job_type("quick", handler=f"{H}:note")
    store_types(engine, long, quick)
    _ex, stop, thread = start(engine, running, concurrency=1, prefetch=2, drain_timeout=30)
    warm_up(engine, quick, log)
    args = {"log": str(log), "go": str(go)}
    first, *waiting = insert_at_once(
        engine, (long, args, 3.0), (quick, args, 2.0), (quick, args, 1.0)
    )
    wait_for(lambda: f"started {first}" in lines(log), what="the long job to start")
    # the two quick jobs were claimed with it: they wait in the process for the slot
    wait_for(
        lambda: all(job_row(engine, j)["state"] == "RUNNING" for j in waiting),
        what="the quick jobs to be prefetched",
    )
    stop.set()  # graceful shutdown, 30 s of drain for the running job
    wait_for(
        lambda: all(job_row(engine, j)["state"] == "QUEUED" for j in waiting),
        what="the prefetched jobs to be handed back",
    )
    assert job_row(engine, first)["state"] == "RUNNING"  # still draining meanwhile
    for j in waiting:
        row = job_row(engine, j)
        assert row["attempt_count"] == 0 and row["lease_owner"] is None
        assert [a["outcome"] for a in attempt_rows(engine, j)] == ["RELEASED"]
    go.touch()
    thread.join(15)
    assert job_row(engine, first)["state"] == "SUCCEEDED"
    assert not any(
        line.startswith("ran") and line.split()[1] in map(str, waiting) for line in lines(log)
    )


def test_a_prefetched_jobs_timeout_counts_from_its_handlers_start(
    engine: Engine,
    tmp_path: Path,
    running: list[InThread],
) -> None:
    log, go = tmp_path / "log.txt", tmp_path / "go"
    long = job_type("long", handler=f"{H}:until_file")
    timed = job_type("timed", handler=f"{H}:note", timeout=timedelta(milliseconds=300))
    store_types(engine, long, timed)
    start(engine, running, concurrency=1, prefetch=1)
    warm_up(engine, timed, log)
    args = {"log": str(log), "go": str(go)}
    first, second = insert_at_once(engine, (long, args, 2.0), (timed, args, 1.0))
    wait_for(lambda: f"started {first}" in lines(log), what="the long job to start")
    wait_for(lambda: job_row(engine, second)["state"] == "RUNNING", what="the prefetch")
    # it waits longer than its own timeout before a slot is free
    wait_for(lambda: job_row(engine, second)["heartbeat_at"] is not None, what="a lease")
    threading.Event().wait(0.6)  # longer than the 300 ms timeout, on purpose
    go.touch()
    wait_for(lambda: job_row(engine, second)["state"] == "SUCCEEDED", what="the timed job to run")
    assert f"ran {second}" in lines(log)


def test_long_jobs_are_not_prefetched(
    engine: Engine,
    tmp_path: Path,
    running: list[InThread],
) -> None:
    log, go = tmp_path / "log.txt", tmp_path / "go"
    long = job_type("long", handler=f"{H}:until_file")
    store_types(engine, long)
    start(engine, running, concurrency=1, prefetch=4)
    args = {"log": str(log), "go": str(go)}
    # the first job runs a second: this executor's jobs are long now
    (warm,) = insert_at_once(engine, (long, args, 0.0))
    wait_for(lambda: f"started {warm}" in lines(log), what="the first job to start")
    threading.Event().wait(1.0)
    go.touch()
    wait_for(lambda: job_row(engine, warm)["state"] == "SUCCEEDED", what="the first job")
    go.unlink()
    first, *rest = insert_at_once(engine, (long, args, 3.0), (long, args, 2.0), (long, args, 1.0))
    wait_for(lambda: f"started {first}" in lines(log), what="the next job to start")
    # with the slot busy for about a second per job, nothing more is taken
    assert [job_row(engine, j)["state"] for j in rest] == ["QUEUED", "QUEUED"]
    go.touch()


def test_prefetched_jobs_go_back_when_the_jobs_running_turn_out_long(
    engine: Engine,
    tmp_path: Path,
    running: list[InThread],
) -> None:
    """Short jobs so far, so the executor prefetches; the next batch is long. The
    first takes the one slot and the others, prefetched, would wait for it: once
    one has waited PREFETCH_MAX_WAIT_SECONDS they go back to the queue (attempt
    refunded), where another executor can take them, and this one prefetches
    nothing more until a job has ended."""
    log, go = tmp_path / "log.txt", tmp_path / "go"
    quick = job_type("quick", handler=f"{H}:note")
    long = job_type("long", handler=f"{H}:until_file")
    store_types(engine, quick, long)
    start(engine, running, concurrency=1, prefetch=4)
    warm_up(engine, quick, log)
    args = {"log": str(log), "go": str(go)}
    first, *rest = insert_at_once(engine, (long, args, 3.0), (long, args, 2.0), (long, args, 1.0))
    wait_for(lambda: f"started {first}" in lines(log), what="the first long job to start")
    assert [job_row(engine, j)["state"] for j in rest] == ["RUNNING", "RUNNING"]  # prefetched
    wait_for(
        lambda: [job_row(engine, j)["state"] for j in rest] == ["QUEUED", "QUEUED"],
        timeout=10,
        what="the prefetched jobs to be handed back",
    )
    assert [job_row(engine, j)["attempt_count"] for j in rest] == [0, 0]
    assert job_row(engine, first)["state"] == "RUNNING"  # the slot the others waited for
    go.touch()
    every = [first, *rest]
    wait_for(
        lambda: all(job_row(engine, j)["state"] == "SUCCEEDED" for j in every),
        what="every long job",
    )
    assert [r["outcome"] for r in attempt_rows(engine, rest[0])] == ["RELEASED", "SUCCEEDED"]


@pytest.mark.parametrize("concurrency", [1, 4, 31, 32])
def test_an_executor_of_few_slots_holds_as_many_jobs_as_one_of_the_default_concurrency(
    concurrency: int,
) -> None:
    """A claim costs the same whatever the slots: a small executor's is as large."""
    default = DEFAULT_CONCURRENCY + default_prefetch(DEFAULT_CONCURRENCY)
    assert concurrency + default_prefetch(concurrency) == default == 160


def test_an_executor_of_many_slots_prefetches_four_a_slot() -> None:
    assert default_prefetch(64) == 4 * 64

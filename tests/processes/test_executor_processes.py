"""Real executor processes and real signals, on both backends.

* several ``rota executor`` processes share 2,000 jobs: each runs exactly once;
* an executor freezes its start-up heap before it claims;
* SIGKILL an executor holding jobs: they are claimed again after the lease;
* a handler that SIGKILLs its own process every time ends FAILED after
  ``max_attempts`` with LEASE_EXPIRED kept;
* SIGTERM drains and releases: the running job goes back to QUEUED, its
  attempt refunded and recorded as RELEASED;
* executors SIGKILLed at random while 1,000 jobs run: every job succeeds once,
  at its current lease generation, within its attempt budget.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from rota.core.tables import job_attempts, jobs
from tests.support.executor_support import (
    Executors,
    add_jobs,
    attempt_rows,
    job_row,
    job_type,
    states,
    store_types,
    wait_for,
)

pytestmark = pytest.mark.slow

H = "tests.handlers.plain"


def test_several_processes_run_every_job_exactly_once(
    engine: Engine, executors: Executors, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    spec = job_type("rec", handler=f"{H}:record")
    store_types(engine, spec)
    procs = [
        executors.start("--concurrency", "8", "--poll-interval", "0.1", ready=True)
        for _ in range(3)
    ]
    # 5 ms a job: one process (8 slots) needs 1.25 s or more for all 2000, so the
    # others, polling every 0.1 s, always claim some; instant jobs on a loaded
    # machine were once all taken by the first process to wake.
    ids = add_jobs(engine, spec, 2000, args={"file": str(out), "sleep": 0.005})
    try:
        wait_for(
            lambda: set(states(engine).values()) == {"SUCCEEDED"},
            timeout=90,
            what="every job to succeed",
        )
    except AssertionError:
        print(executors.logs())
        raise
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        assert p.wait(30) == 0
    runs = [line.split() for line in out.read_text().splitlines()]
    counts = Counter(r[0] for r in runs)
    assert len(counts) == len(ids) and set(counts.values()) == {1}  # none lost, none twice
    assert {r[1] for r in runs} == {"1"}
    assert len({r[2] for r in runs}) >= 2  # the work was shared between processes
    assert all(job_row(engine, ids[0])[k] is None for k in ("lease_owner", "lease_expires_at"))


def test_an_executor_freezes_its_start_up_heap_before_its_loop(
    engine: Engine, executors: Executors, tmp_path: Path
) -> None:
    """The modules, engine and service made at start-up are out of the collector's
    full passes (``rota.runtime.heap``): a handler in the process sees them frozen."""
    out = tmp_path / "frozen.txt"
    spec = job_type("heap", handler=f"{H}:heap_frozen")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    proc = executors.start(ready=True)
    wait_for(lambda: states(engine)[job_id] == "SUCCEEDED", timeout=30, what="the job")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    # An executor makes some tens of thousands of objects as it starts.
    assert int(out.read_text()) > 10_000


def test_sigkilled_executors_jobs_are_claimed_again_after_the_lease(
    engine: Engine, executors: Executors, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    spec = job_type("s", handler=f"{H}:slow_first_attempt", lease=timedelta(seconds=2))
    store_types(engine, spec)
    ids = add_jobs(engine, spec, 4, args={"file": str(out)})
    victim = executors.start("--concurrency", "8", "--poll-interval", "0.1")
    wait_for(
        lambda: set(states(engine, ids).values()) == {"RUNNING"},
        timeout=20,
        what="the victim to hold every job",
    )
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    killed_at = time.monotonic()
    executors.start("--concurrency", "8", "--poll-interval", "0.1", "--sweep-interval", "0.3")
    wait_for(
        lambda: set(states(engine, ids).values()) == {"SUCCEEDED"},
        timeout=20,
        what="every job to succeed",
    )
    assert time.monotonic() - killed_at < 2 + 0.3 + 5  # lease + sweep interval + startup
    for job_id in ids:
        assert job_row(engine, job_id)["attempt_count"] == 2
        assert [a["outcome"] for a in attempt_rows(engine, job_id)] == [
            "LEASE_EXPIRED",
            "SUCCEEDED",
        ]
    assert sorted(out.read_text().split()) == sorted([str(i) for i in ids] + ["2"] * 4)


def test_handler_that_kills_its_process_fails_after_max_attempts(
    engine: Engine, executors: Executors
) -> None:
    spec = job_type(
        "suicide", handler=f"{H}:kill_own_process", max_attempts=3, lease=timedelta(seconds=1)
    )
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec)
    options = ("--concurrency", "2", "--poll-interval", "0.1", "--sweep-interval", "0.2")
    proc = executors.start(*options)
    deadline = time.monotonic() + 60
    while job_row(engine, job_id)["state"] != "FAILED":
        assert time.monotonic() < deadline, "the job never reached FAILED"
        if proc.poll() is not None:
            assert proc.returncode == -signal.SIGKILL
            proc = executors.start(*options)  # a supervisor restarts the dead executor
        time.sleep(0.05)
    row = job_row(engine, job_id)
    assert row["attempt_count"] == 3 == row["max_attempts"]
    assert row["last_error_code"] == "LEASE_EXPIRED"
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["LEASE_EXPIRED"] * 3


def test_sigterm_drains_then_releases_the_running_job(
    engine: Engine, executors: Executors, tmp_path: Path
) -> None:
    out = tmp_path / "log.txt"
    spec = job_type("long", handler=f"{H}:until_stopped")
    store_types(engine, spec)
    (job_id,) = add_jobs(engine, spec, args={"file": str(out)})
    proc = executors.start("--drain-timeout", "0.5", "--poll-interval", "0.1")
    wait_for(
        lambda: out.exists() and "started" in out.read_text(),
        timeout=20,
        what="the handler to start",
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    row = job_row(engine, job_id)
    assert row["state"] == "QUEUED" and row["attempt_count"] == 0
    assert row["lease_owner"] is None
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["RELEASED"]
    assert "stopped JobReleased" in out.read_text()


def test_random_sigkills_lose_nothing_and_never_complete_a_stale_generation(
    engine: Engine, executors: Executors, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    spec = job_type("rec", handler=f"{H}:record", lease=timedelta(seconds=1), max_attempts=10)
    store_types(engine, spec)
    ids = add_jobs(engine, spec, 1000, args={"file": str(out), "sleep": 0.1})
    options = ("--concurrency", "8", "--poll-interval", "0.1", "--sweep-interval", "0.3")
    live = [executors.start(*options) for _ in range(3)]
    rng = random.Random(11)
    deadline = time.monotonic() + 300  # a hang guard: it takes ~25 s on a quiet machine

    def holds_running_jobs(proc: subprocess.Popen[bytes]) -> bool:
        with engine.connect() as conn:
            return bool(
                conn.execute(
                    select(jobs.c.job_id)
                    .where(jobs.c.state == "RUNNING", jobs.c.lease_owner.like(f"%:{proc.pid}:%"))
                    .limit(1)
                ).first()
            )

    kills = 0
    while set(states(engine, ids).values()) - {"SUCCEEDED"}:
        assert time.monotonic() < deadline, executors.logs()[-3000:]
        if kills < 8:
            # Kill a process while it runs jobs, so every kill strands leases.
            holders = [p for p in rng.sample(live, len(live)) if holds_running_jobs(p)]
            if not holders:
                time.sleep(0.02)
                continue
            victim = holders[0]
            live.remove(victim)
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            kills += 1
            live.append(executors.start(*options))  # a supervisor restarts it
        else:
            time.sleep(0.1)
    for p in live:
        p.send_signal(signal.SIGTERM)
    for p in live:
        # A replacement may still be starting up (no handler yet): then SIGTERM kills it.
        assert p.wait(30) in (0, -signal.SIGTERM)
    assert kills == 8
    with engine.connect() as conn:
        rows = conn.execute(
            select(jobs.c.job_id, jobs.c.lease_generation, jobs.c.attempt_count)
        ).all()
        attempts = conn.execute(
            select(job_attempts.c.job_id, job_attempts.c.lease_generation, job_attempts.c.outcome)
        ).all()
    current = {r[0]: r[1] for r in rows}
    assert all(r[2] <= 10 for r in rows)
    succeeded = [(a[0], a[1]) for a in attempts if a[2] == "SUCCEEDED"]
    assert sorted(succeeded) == sorted(current.items())  # one success each, at the current gen
    assert {a[2] for a in attempts} <= {"SUCCEEDED", "LEASE_EXPIRED"}
    assert any(a[2] == "LEASE_EXPIRED" for a in attempts)  # the kills did hit running jobs
    assert len(Counter(line.split()[0] for line in out.read_text().splitlines())) == len(ids)

"""An idle executor's poll asks whether any job is due before it claims (PostgreSQL).

Behind a transaction pooler there is no LISTEN: every idle executor polls. A
poll that finds nothing due runs a small EXISTS instead of a claim, and a job
that becomes due is still claimed by the next poll.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, event, update

from rota.core.queries import jobs_claim
from rota.core.queries.jobs_insert import NewJob, insert_jobs_or_skip
from rota.core.tables import jobs
from rota.executor.heartbeat import Heartbeat
from rota.executor.listener import Listener
from rota.executor.transactions import LoopConnection
from tests.support.executor_support import (
    add_jobs,
    job_type,
    running_executors,
    state_is,
    store_types,
    wait_for,
)

CLAIM = jobs_claim.CLAIM_UNKEYED.name  # the lock-free claim, called by its name
PROBE = jobs_claim.ANY_DUE.name  # the idle poll's question, called by its name


@pytest.fixture
def statements(pg_engine: Engine) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        seen.append(statement)

    event.listen(pg_engine, "before_cursor_execute", record)
    yield seen
    event.remove(pg_engine, "before_cursor_execute", record)


def count(statements: list[str], piece: str) -> int:
    return sum(piece in s for s in list(statements))


def test_an_idle_executor_polls_with_a_read_and_claims_what_becomes_due(
    pg_engine: Engine, statements: list[str]
) -> None:
    spec = job_type("t")
    store_types(pg_engine, spec)
    with running_executors(pg_engine) as start:
        start(poll_interval=0.05, sweep_interval=60, listen=False)
        wait_for(lambda: count(statements, CLAIM) >= 1, what="the first claim")
        wait_for(lambda: count(statements, PROBE) >= 20, what="twenty idle polls")
        # The first claim found nothing; no poll since has claimed.
        assert count(statements, CLAIM) == 1
        (job_id,) = add_jobs(pg_engine, spec)  # no LISTEN here: a poll must find it
        wait_for(state_is(pg_engine, job_id, "SUCCEEDED"), timeout=5, what="SUCCEEDED")
        assert count(statements, CLAIM) >= 2


def test_after_a_batch_the_polls_keep_their_interval(
    pg_engine: Engine, statements: list[str]
) -> None:
    """A claim that took jobs leaves a place to start the next one from, and the
    scan from the head that it schedules (``ScanStarts``) comes due while the
    executor idles. A poll that found nothing due ran no claim, so that scan
    stayed due and every pass asked again at once: a loop of thousands of
    questions a second, which put 48 idle executors at 14% of a core."""
    spec = job_type("t")
    store_types(pg_engine, spec)
    with running_executors(pg_engine) as start:
        start(poll_interval=0.05, sweep_interval=60, listen=False)
        wait_for(lambda: count(statements, CLAIM) >= 1, what="the first claim")
        (job_id,) = add_jobs(pg_engine, spec)
        wait_for(state_is(pg_engine, job_id, "SUCCEEDED"), timeout=5, what="SUCCEEDED")
        # Idle past the longest interval between scans from the head (2 s), then
        # count the questions of one second: one per poll (about 20), not a loop.
        wait_for(lambda: count(statements, PROBE) >= 60, what="three seconds of polls")
        before = count(statements, PROBE)
        time.sleep(1.0)  # the window the polls are counted in, not a wait for a state
        assert count(statements, PROBE) - before <= 40


SWEEP = "WITH expired AS"
SWEEP_QUESTION = "SELECT EXISTS (SELECT 1 FROM jobs WHERE state IN ('RUNNING'"


def test_a_sweep_asks_first_and_still_takes_back_an_expired_lease(
    pg_engine: Engine, statements: list[str]
) -> None:
    """Every executor sweeps every few seconds, and almost every sweep finds nothing:
    it asks first (a small read) and runs the sweep only for an expired lease."""
    spec = job_type("t")
    store_types(pg_engine, spec)
    with running_executors(pg_engine) as start:
        start(poll_interval=0.05, sweep_interval=0.05, listen=False)
        wait_for(lambda: count(statements, SWEEP_QUESTION) >= 20, what="twenty sweeps asked")
        assert count(statements, SWEEP) == 0
        (job_id,) = add_jobs(pg_engine, spec)
        with pg_engine.begin() as conn:  # a worker that vanished holding it
            conn.execute(
                update(jobs)
                .where(jobs.c.job_id == job_id)
                .values(
                    state="RUNNING",
                    lease_owner="ghost:1:gone",
                    lease_expires_at=datetime(2000, 1, 1, tzinfo=UTC),
                    lease_generation=1,
                    attempt_count=1,
                )
            )
        wait_for(state_is(pg_engine, job_id, "SUCCEEDED"), timeout=10, what="swept and run")
        assert count(statements, SWEEP) >= 1


def test_without_notifications_a_lone_executor_polls_often_but_not_for_a_job_it_cannot_take(
    pg_engine: Engine, statements: list[str]
) -> None:
    """Behind a transaction pooler (no notifications; tests/processes/test_pgbouncer.py
    runs a real one) a lone executor polls every tenth of a second
    (``ClaimLoop.poll_wait``). A due job it cannot take, its key held by a running
    job, would make each of those polls a claim: after one it waits the poll interval."""
    spec = job_type("t")
    store_types(pg_engine, spec)
    with running_executors(pg_engine) as start:
        executor = start(poll_interval=1.0, sweep_interval=60, listen=True)
        wakeups = executor._loop._wakeups
        assert isinstance(wakeups, Listener)
        wait_for(lambda: wakeups.delivering is True, what="the listener's probe")
        wakeups.delivering = False  # what its probe finds behind a transaction pooler
        asked = count(statements, PROBE)
        wait_for(lambda: count(statements, PROBE) >= asked + 10, timeout=3, what="10 polls")
        held, waiting = (NewJob.of_type(spec, concurrency_key="k") for _ in range(2))
        with pg_engine.begin() as conn:  # one commit: the key is held from the start
            insert_jobs_or_skip(conn, [held, waiting])
            conn.execute(
                update(jobs)
                .where(jobs.c.job_id == held.job_id)
                .values(
                    state="RUNNING",
                    lease_owner="other:1:w",
                    lease_expires_at=datetime(2100, 1, 1, tzinfo=UTC),
                    lease_generation=1,
                    attempt_count=1,
                )
            )
        time.sleep(0.5)  # lets the wake-up's claim and the first poll's pass
        claims = count(statements, CLAIM)
        time.sleep(2.0)  # the window the claims are counted in, not a wait for a state
        # A claim a poll interval (a second), not one every tenth of a second.
        assert count(statements, CLAIM) - claims <= 3
        assert state_is(pg_engine, waiting.job_id, "QUEUED")()


def test_an_idle_heartbeat_ticks_once_a_second_and_at_once_when_a_deadline_is_sooner(
    pg_engine: Engine,
) -> None:
    """With no job held the heartbeat has nothing to watch: it ticked every 50 ms, twenty
    wake-ups a second in every idle executor. Now it ticks once a second, and at once
    when a held job's deadline is sooner than its next pass (``due_by``)."""
    passes: list[float] = []
    hb = Heartbeat(
        LoopConnection(pg_engine),
        "w:1:idle",
        list,
        lambda held, why: None,
        lambda held: None,
        on_pass=lambda: passes.append(time.monotonic()),
    )
    hb.start()
    try:
        time.sleep(2.0)  # the window the ticks are counted in, not a wait for a state
        assert 1 <= len(passes) <= 3, passes
        before, nudged_at = len(passes), time.monotonic()
        hb.due_by(time.monotonic())
        wait_for(lambda: len(passes) > before, timeout=0.5, what="a tick after the nudge")
        assert passes[before] - nudged_at < 0.2
    finally:
        hb.stop()

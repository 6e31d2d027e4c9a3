"""``schedule_outcomes``: every statement that ends a scheduled job keeps its schedule's row.

The rule: the newest occurrence (by scheduled instant) that ended is the last
outcome, whatever order the occurrences end in; the newest that SUCCEEDED is
the last success. Written by the outcome batch (plain successes and mixed),
the sweeper and an operator's cancel, in the same statement or transaction.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, update

from rota.core.database import make_engine
from rota.core.queries.jobs_control import replay_jobs, request_cancel
from rota.core.queries.jobs_lease import sweep_expired_leases
from rota.core.queries.jobs_outcome import Finish, complete_if_lease_held, finish_if_lease_held
from rota.core.queries.jobs_read import database_now
from rota.core.queries.schedule_outcomes import (
    ScheduleOutcome,
    outcome_of_schedule,
    schedule_outcomes,
)
from rota.core.states import AttemptOutcome, JobState
from rota.core.tables import jobs
from rota.core.timefmt import occurrence_key
from rota.migrations.runner import upgrade
from tests.support.executor_support import add_jobs, claim_as, job_type, store_types

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
SPEC = job_type("nightly")


def at(n: int) -> datetime:
    return T0 + timedelta(days=n)


def occurrence(engine: Engine, n: int, schedule: str = "s", **kwargs: Any) -> uuid.UUID:
    (job_id,) = add_jobs(
        engine,
        SPEC,
        schedule_name=schedule,
        scheduled_for=at(n),
        dedup_key=occurrence_key(schedule, at(n)),
        **kwargs,
    )
    return job_id


def claim(engine: Engine, n: int) -> dict[uuid.UUID, int]:
    return {c.job_id: c.lease_generation for c in claim_as(engine, "w", n)}


def end(engine: Engine, gens: dict[uuid.UUID, int], *states: tuple[uuid.UUID, JobState]) -> None:
    outcome = {
        JobState.SUCCEEDED: AttemptOutcome.SUCCEEDED,
        JobState.FAILED: AttemptOutcome.FAILED,
        JobState.RETRY_WAIT: AttemptOutcome.RETRY,
    }
    finishes = [Finish(j, gens[j], s, outcome[s], error_code="E") for j, s in states]
    with engine.begin() as conn:
        written = finish_if_lease_held(conn, owner="w", finishes=finishes)
    assert all(w.__class__.__name__ == "Finished" for w in written)


def row(engine: Engine, schedule: str = "s") -> ScheduleOutcome | None:
    with engine.connect() as conn:
        return outcome_of_schedule(conn, schedule)


def test_the_newest_occurrence_is_the_last_outcome_whatever_order_they_end_in(
    engine: Engine,
) -> None:
    store_types(engine, SPEC)
    one, two = occurrence(engine, 1), occurrence(engine, 2)
    assert row(engine) is None
    gens = claim(engine, 2)
    with engine.begin() as conn:  # a plain success: PostgreSQL's two-array statement
        complete_if_lease_held(conn, owner="w", job_id=two, generation=gens[two])
    got = row(engine)
    assert got is not None
    assert (got.state, got.instant, got.success_instant) == (JobState.SUCCEEDED, at(2), at(2))
    end(engine, gens, (one, JobState.FAILED))  # older, ends later: changes nothing
    got = row(engine)
    assert got is not None
    assert (got.state, got.instant, got.success_instant) == (JobState.SUCCEEDED, at(2), at(2))

    # One batch ending a success and a newer failure of one schedule, and a retry.
    three, four, five = occurrence(engine, 3), occurrence(engine, 4), occurrence(engine, 5)
    gens = claim(engine, 3)
    end(
        engine,
        gens,
        (three, JobState.SUCCEEDED),
        (four, JobState.FAILED),
        (five, JobState.RETRY_WAIT),  # not an outcome of the occurrence yet
    )
    got = row(engine)
    assert got is not None
    assert (got.state, got.instant, got.success_instant) == (JobState.FAILED, at(4), at(3))
    assert got.finished_at is not None


def test_the_sweeper_and_a_cancel_record_the_end_too(engine: Engine) -> None:
    store_types(engine, SPEC)
    swept = occurrence(engine, 1, max_attempts=1)
    waiting = occurrence(engine, 2, schedule="other")
    claim(engine, 1)
    with engine.connect() as conn:
        later = database_now(conn) + timedelta(hours=1)
    with engine.begin() as conn:
        (s,) = sweep_expired_leases(conn, now=later)
    assert s.job_id == swept and s.state is JobState.FAILED
    got = row(engine)
    assert got is not None
    assert (got.state, got.instant, got.success_instant) == (JobState.FAILED, at(1), None)

    with engine.begin() as conn:
        assert request_cancel(conn, waiting).state is JobState.CANCELLED
        assert replay_jobs(conn, [swept]) == {swept: JobState.QUEUED}
    with engine.connect() as conn:
        rows = schedule_outcomes(conn)
    assert rows["other"].state is JobState.CANCELLED and rows["other"].instant == at(2)
    # A replayed occurrence keeps its last outcome until it ends again...
    assert rows["s"].state is JobState.FAILED
    gens = claim(engine, 1)
    end(engine, gens, (swept, JobState.SUCCEEDED))
    got = row(engine)
    assert got is not None  # ...and then its new one replaces it (the same instant)
    assert (got.state, got.instant, got.success_instant) == (JobState.SUCCEEDED, at(1), at(1))


def test_ad_hoc_jobs_record_nothing(engine: Engine) -> None:
    store_types(engine, SPEC)
    (job_id,) = add_jobs(engine, SPEC)
    gens = claim(engine, 1)
    end(engine, gens, (job_id, JobState.SUCCEEDED))
    with engine.connect() as conn:
        assert schedule_outcomes(conn) == {}


def test_the_migration_fills_the_rows_from_the_jobs_already_ended(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    try:
        upgrade(engine, "0012")
        store_types(engine, SPEC)
        ids = {n: occurrence(engine, n) for n in (1, 2, 3, 4)}
        ended = {1: "SUCCEEDED", 2: "SUCCEEDED", 3: "FAILED"}  # 4 still waits
        with engine.begin() as conn:
            for n, state in ended.items():
                conn.execute(
                    update(jobs)
                    .where(jobs.c.job_id == ids[n])
                    .values(state=state, finished_at=at(n) + timedelta(minutes=1))
                )
        upgrade(engine)
        got = row(engine)
        assert got is not None
        assert (got.state, got.instant, got.finished_at, got.success_instant) == (
            JobState.FAILED,
            at(3),
            at(3) + timedelta(minutes=1),
            at(2),
        )
    finally:
        engine.dispose()

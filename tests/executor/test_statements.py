"""Each job-state statement and each fence, on both backends.

A stale worker in these tests has the SAME owner name as the current one and
only an older ``lease_generation``: the generation alone must reject it.
"""

from __future__ import annotations

import re
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select, text, update

from rota.core.claimed import ClaimedJob, Renewal
from rota.core.config import JobTypeSpec
from rota.core.queries.jobs_claim_scan import MAX_MERGED_POOLS
from rota.core.queries.jobs_control import replay_failed, request_cancel
from rota.core.queries.jobs_lease import renew_leases_if_held, sweep_expired_leases
from rota.core.queries.jobs_outcome import (
    Finish,
    Finished,
    LeaseLost,
    complete_if_lease_held,
    finish_if_lease_held,
)
from rota.core.states import AttemptOutcome, JobState
from rota.core.tables import jobs
from rota.executor.claim import ScanStarts
from tests.support.executor_support import (
    add_jobs,
    attempt_rows,
    claim_as,
    job_row,
    job_type,
    renew_as,
    store_types,
)

OWNER = "host:1:abc"
FAR_FUTURE = datetime(2100, 1, 1, tzinfo=UTC)


@pytest.fixture
def spec(engine: Engine) -> JobTypeSpec:
    s = job_type("t", max_attempts=3)
    store_types(engine, s)
    return s


def claim(
    engine: Engine, n: int = 1, owner: str = OWNER, now: datetime | None = None
) -> list[ClaimedJob]:
    return claim_as(engine, owner, n, now=now)


def finish(engine: Engine, *fs: Finish, owner: str = OWNER) -> set[uuid.UUID]:
    with engine.begin() as conn:
        results = finish_if_lease_held(conn, owner=owner, finishes=fs)
    return {r.job_id for r in results if isinstance(r, Finished)}


def success(c: ClaimedJob, gen: int | None = None) -> Finish:
    return Finish(
        c.job_id,
        c.lease_generation if gen is None else gen,
        JobState.SUCCEEDED,
        AttemptOutcome.SUCCEEDED,
    )


def expire_all(engine: Engine) -> None:
    """Make every lease run out (in the past), then sweep by the database clock."""
    with engine.begin() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.state.in_(["RUNNING", "CANCEL_REQUESTED"]))
            .values(lease_expires_at=datetime(2000, 1, 1, tzinfo=UTC))
        )
    with engine.begin() as conn:
        sweep_expired_leases(conn)


def test_claim_moves_to_running_with_lease_attempt_and_attempt_row(
    engine: Engine, spec: JobTypeSpec
) -> None:
    (job_id,) = add_jobs(engine, spec, payload_ref="s3://x", args={"a": 1})
    (c,) = claim(engine)
    assert c.job_id == job_id and c.lease_generation == 1 and c.attempt == 1
    assert c.args == {"a": 1} and c.payload_ref == "s3://x"
    row = job_row(engine, job_id)
    assert row["state"] == "RUNNING" and row["lease_owner"] == OWNER
    assert row["lease_expires_at"] > row["started_at"]
    lease = (row["lease_expires_at"] - row["started_at"]).total_seconds()
    assert 59 <= lease <= 61
    (att,) = attempt_rows(engine, job_id)
    assert att["lease_generation"] == 1 and att["attempt"] == 1 and att["worker_id"] == OWNER
    assert att["ended_at"] is None
    assert claim(engine) == []


def test_claim_order_priority_then_run_after_then_created(
    engine: Engine, spec: JobTypeSpec
) -> None:
    now = datetime.now(UTC)
    late = add_jobs(engine, spec, priority=0, run_after=now - timedelta(seconds=1))
    early = add_jobs(engine, spec, priority=0, run_after=now - timedelta(seconds=5))
    low = add_jobs(engine, spec, priority=5, run_after=now - timedelta(seconds=60))
    future = add_jobs(engine, spec, priority=0, run_after=now + timedelta(hours=1))
    got = [c.job_id for c in claim(engine, 10)]
    assert got == early + late + low
    assert future[0] not in got


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "limited"])
def test_a_claim_passes_over_a_row_another_transaction_holds_without_waiting(
    pg_engine: Engine, keyed: bool
) -> None:
    """FOR UPDATE SKIP LOCKED, in the unkeyed claim and in the limited one: a row
    another transaction has locked (another claimer's) is passed over at once, never
    waited for. PostgreSQL only: a SQLite claim runs under the database's one write
    lock. (Without SKIP LOCKED the generation guard still prevents a double claim,
    so no other test notices: the claimers queue behind each other instead.)"""
    spec = job_type("t")
    store_types(pg_engine, spec)
    now = datetime.now(UTC)
    (held,) = add_jobs(
        pg_engine,
        spec,
        run_after=now - timedelta(seconds=5),
        concurrency_key="a" if keyed else None,
    )
    (free,) = add_jobs(
        pg_engine,
        spec,
        run_after=now - timedelta(seconds=1),
        concurrency_key="b" if keyed else None,
    )
    claimed: list[ClaimedJob] = []
    with pg_engine.connect() as holder:
        holder.execute(select(jobs.c.job_id).where(jobs.c.job_id == held).with_for_update())
        claimer = threading.Thread(
            target=lambda: claimed.extend(claim_as(pg_engine, OWNER, 1)), daemon=True
        )
        claimer.start()
        claimer.join(10)  # a guard: an unblocked claim takes milliseconds
        waited = claimer.is_alive()
        holder.rollback()
    claimer.join(10)
    assert not waited, "the claim waited for the row another transaction holds"
    assert [c.job_id for c in claimed] == [free]
    assert job_row(pg_engine, held)["state"] == "QUEUED"


def test_a_claim_scans_from_where_the_last_began_and_from_the_head_within_rescan(
    engine: Engine, spec: JobTypeSpec
) -> None:
    """PostgreSQL: the next claim starts at the last one's first job (its dead head skipped);
    a job of that priority made claimable before that place waits for a scan from the head:
    ``rescan`` seconds after the last, or at once when nothing follows the start. A lower
    priority number is read from the head always. SQLite: strict order."""
    clock = [0.0]
    starts = ScanStarts(rescan=0.25, clock=lambda: clock[0])
    now = datetime.now(UTC)
    low = add_jobs(engine, spec, 3, priority=5, run_after=now - timedelta(seconds=60))
    seen: list[uuid.UUID] = []

    def claimed(n: int = 1) -> list[uuid.UUID]:
        ids = [c.job_id for c in claim_as(engine, OWNER, n, starts=starts)]
        seen.extend(ids)
        return ids

    def add(priority: int, ago: float) -> uuid.UUID:
        (job_id,) = add_jobs(
            engine, spec, priority=priority, run_after=now - timedelta(seconds=ago)
        )
        return job_id

    pg = engine.dialect.name == "postgresql"
    assert claimed()[0] in low  # from the head: nothing to start from yet
    early = add(5, 120)
    if pg:
        assert claimed()[0] in low  # from the first one's place: the early job lies before it
        clock[0] += 0.25
        assert claimed() == [early]  # rescan seconds on: from the head
    else:
        assert claimed() == [early]
    urgent = add(0, 0)
    assert claimed() == [urgent]  # a lower priority number: read from the head, start or not
    assert claimed()[0] in low
    earlier = add(5, 180)
    if pg:  # nothing after the start (the last low job): the same claim goes on from the head
        assert claimed(5) == [earlier]
    else:
        rest = [j for j in low if j not in seen]
        assert claimed(5) == [earlier, *rest]
    assert claimed(5) == []
    assert len(seen) == len(set(seen)) == len(low) + 3  # each once, none lost


def test_head_scans_come_less_often_while_they_find_nothing_hidden(pg_engine: Engine) -> None:
    """Each scan from the head reads the dead entries of every job claimed since the
    last VACUUM. While such scans find nothing the start hid, the next comes twice as
    late (up to ``longest``); one that finds a hidden job, or claims nothing, brings
    the interval back to ``rescan``. Every job is claimed once, none lost."""
    spec = job_type("t")
    store_types(pg_engine, spec)
    clock = [0.0]
    starts = ScanStarts(clock=lambda: clock[0])  # the defaults: 0.25 s doubling to 2 s
    now = datetime.now(UTC)
    backlog = add_jobs(pg_engine, spec, 12, run_after=now - timedelta(seconds=60))
    seen: list[uuid.UUID] = []

    def claimed(n: int = 1) -> list[uuid.UUID]:
        ids = [c.job_id for c in claim_as(pg_engine, OWNER, n, starts=starts)]
        seen.extend(ids)
        return ids

    def head_scan_after(n: int = 1) -> float:
        """Claims once the next claim scans from the head; the seconds waited for it."""
        waited = starts.until_head_scan()
        clock[0] += waited
        assert starts.next() is None  # due now: this claim reads from the head
        assert claimed(n)
        assert starts.next() is not None  # and the next from its start
        return waited

    assert claimed()  # the first claim reads from the head: nothing to start from
    assert starts.until_head_scan() == 0.25
    assert [head_scan_after() for _ in range(5)] == [0.25, 0.5, 1.0, 2.0, 2.0]
    (hidden,) = add_jobs(pg_engine, spec, run_after=now - timedelta(seconds=120))
    clock[0] += 1.0
    assert claimed()[0] in backlog  # from the start: the hidden job lies before it
    assert starts.until_head_scan() == 1.0
    assert head_scan_after() == 1.0 and seen[-1] == hidden  # found: the interval resets
    assert starts.until_head_scan() == 0.25
    assert head_scan_after() == 0.25  # nothing hidden this time: twice as long again
    assert starts.until_head_scan() == 0.5
    # A hidden job behind one of a lower priority number (read from the head by every
    # claim, so never hidden itself) in the same claim still resets the interval.
    (urgent,) = add_jobs(pg_engine, spec, priority=-1)
    (behind,) = add_jobs(pg_engine, spec, run_after=now - timedelta(seconds=90))
    assert head_scan_after(2) == 0.5 and seen[-2:] == [urgent, behind]
    assert starts.until_head_scan() == 0.25
    assert claimed()[0] in backlog  # from the start again: it is a backlog job's place
    (urgent,) = add_jobs(pg_engine, spec, priority=-1)
    assert head_scan_after() == 0.25 and seen[-1] == urgent  # not hidden: doubles
    assert starts.until_head_scan() == 0.5
    while claimed():
        pass
    assert len(seen) == len(set(seen)) == len(backlog) + 4
    assert starts.until_head_scan() == float("inf")  # drained: from the head at once
    (late,) = add_jobs(pg_engine, spec)
    assert claimed() == [late]
    assert starts.until_head_scan() == 0.25  # a new backlog starts from the shortest


def test_claim_serves_only_its_pools_and_batch_size(engine: Engine) -> None:
    a, b = job_type("a", pool="pa"), job_type("b", pool="pb")
    store_types(engine, a, b)
    add_jobs(engine, a, 5)
    add_jobs(engine, b, 5)
    got = claim_as(engine, OWNER, 3, ["pa"])
    assert len(got) == 3 and {c.job_type for c in got} == {"a"}
    got = claim_as(engine, OWNER, 100, ["pa", "pb"])
    assert len(got) == 7


def test_a_claim_of_several_pools_takes_them_in_one_claim_order(engine: Engine) -> None:
    """Merged across pools by priority, run_after, created_at; a pool's jobs read past
    the batch stay queued for the next claim."""
    a, b = job_type("a", pool="pa"), job_type("b", pool="pb")
    store_types(engine, a, b)
    now = datetime.now(UTC)
    a_late = add_jobs(engine, a, 3, priority=5, run_after=now - timedelta(seconds=1))
    b_early = add_jobs(engine, b, 2, priority=5, run_after=now - timedelta(seconds=9))
    b_urgent = add_jobs(engine, b, 1, priority=0, run_after=now)
    a_low = add_jobs(engine, a, 2, priority=7, run_after=now - timedelta(seconds=60))
    first = [c.job_id for c in claim_as(engine, OWNER, 4, ["pa", "pb"])]
    assert first[0] in b_urgent and set(first[1:3]) == set(b_early) and first[3] in a_late
    rest = [c.job_id for c in claim_as(engine, OWNER, 10, ["pb", "pa"])]
    assert set(rest[:2]) == set(a_late) - set(first) and set(rest[2:]) == set(a_low)
    assert claim_as(engine, OWNER, 10, ["pa", "pb"]) == []


@pytest.mark.parametrize("n_pools", [MAX_MERGED_POOLS, MAX_MERGED_POOLS + 1, 600])
def test_a_claim_of_many_pools(engine: Engine, n_pools: int) -> None:
    """Up to MAX_MERGED_POOLS pools, one scan each; more (SQLite allows 500 terms in a
    compound SELECT), one scan of them all: the same jobs, in the same order."""
    a, b = job_type("a", pool="p1"), job_type("b", pool=f"p{n_pools - 1}")
    store_types(engine, a, b)
    now = datetime.now(UTC)
    later = add_jobs(engine, a, 2, run_after=now - timedelta(seconds=1))
    sooner = add_jobs(engine, b, 2, run_after=now - timedelta(seconds=5))
    pools = [f"p{i}" for i in range(n_pools)]
    got = [c.job_id for c in claim_as(engine, OWNER, 3, pools)]
    assert set(got[:2]) == set(sooner) and got[2] in later
    assert [c.job_id for c in claim_as(engine, OWNER, 3, pools)] == [
        j for j in later if j not in got
    ]


def test_complete_and_stale_generation_same_owner_is_fenced(
    engine: Engine, spec: JobTypeSpec
) -> None:
    (job_id,) = add_jobs(engine, spec)
    (old,) = claim(engine)
    expire_all(engine)
    (new,) = claim(engine)  # same owner name, next generation
    assert new.lease_generation == old.lease_generation + 1
    # The stale attempt can do nothing: complete, fail, heartbeat.
    assert finish(engine, success(old)) == set()
    fail = Finish(job_id, old.lease_generation, JobState.FAILED, AttemptOutcome.FAILED, "X", "x")
    assert finish(engine, fail) == set()
    with engine.begin() as conn:
        assert (
            renew_leases_if_held(
                conn, owner=OWNER, renewals=[Renewal(job_id, old.lease_generation)]
            )
            == {}
        )
    assert job_row(engine, job_id)["state"] == "RUNNING"
    # The current one completes; its attempt row is closed in the same transaction.
    assert finish(engine, success(new)) == {job_id}
    row = job_row(engine, job_id)
    assert row["state"] == "SUCCEEDED" and row["lease_owner"] is None
    assert row["finished_at"] is not None
    atts = attempt_rows(engine, job_id)
    assert [a["outcome"] for a in atts] == ["LEASE_EXPIRED", "SUCCEEDED"]
    # Completing twice is a lost lease, not a second success.
    assert finish(engine, success(new)) == set()


def test_a_stale_copy_in_the_batch_of_the_current_outcome_neither_lands_nor_is_reported(
    engine: Engine, spec: JobTypeSpec
) -> None:
    """One batch carrying a job's current outcome and a stale copy (an older
    generation), in either order: the job and its attempt row both take the
    current one, and only the current one is reported written."""
    for stale_first in (True, False):
        (job_id,) = add_jobs(engine, spec)
        (old,) = claim(engine)
        expire_all(engine)
        (new,) = claim(engine)
        stale = Finish(
            job_id,
            old.lease_generation,
            JobState.FAILED,
            AttemptOutcome.FAILED,
            "STALE",
            "from the stale attempt",
        )
        current = Finish(
            job_id,
            new.lease_generation,
            JobState.RETRY_WAIT,
            AttemptOutcome.RETRY,
            "GOOD",
            "from the current attempt",
            delay_seconds=60,
        )
        batch = [stale, current] if stale_first else [current, stale]
        with engine.begin() as conn:
            results = finish_if_lease_held(conn, owner=OWNER, finishes=batch)
        written = {
            (r.job_id, f.generation)
            for r, f in zip(results, batch, strict=True)
            if isinstance(r, Finished)
        }
        assert written == {(job_id, new.lease_generation)}
        row = job_row(engine, job_id)
        assert (row["state"], row["last_error_code"]) == ("RETRY_WAIT", "GOOD")
        atts = attempt_rows(engine, job_id)
        assert [(a["outcome"], a["error_code"]) for a in atts] == [
            ("LEASE_EXPIRED", "LEASE_EXPIRED"),
            ("RETRY", "GOOD"),
        ]
        with engine.begin() as conn:
            conn.execute(
                update(jobs)
                .where(jobs.c.job_id == job_id)
                .values(state="CANCELLED", run_after=FAR_FUTURE)
            )


def test_two_outcomes_for_one_lease_in_a_batch_write_the_first_to_job_and_attempt(
    engine: Engine, spec: JobTypeSpec
) -> None:
    (job_id,) = add_jobs(engine, spec)
    (c,) = claim(engine)
    first = Finish(
        job_id, c.lease_generation, JobState.FAILED, AttemptOutcome.FAILED, "FIRST", "first"
    )
    second = Finish(
        job_id,
        c.lease_generation,
        JobState.RETRY_WAIT,
        AttemptOutcome.RETRY,
        "SECOND",
        "second",
        delay_seconds=60,
    )
    with engine.begin() as conn:
        results = finish_if_lease_held(conn, owner=OWNER, finishes=[first, second])
    assert [type(r) for r in results] == [Finished, Finished]
    row = job_row(engine, job_id)
    assert (row["state"], row["last_error_code"]) == ("FAILED", "FIRST")
    assert [(a["outcome"], a["error_code"]) for a in attempt_rows(engine, job_id)] == [
        ("FAILED", "FIRST")
    ]


def test_other_owner_is_fenced(engine: Engine, spec: JobTypeSpec) -> None:
    add_jobs(engine, spec)
    (c,) = claim(engine)
    assert finish(engine, success(c), owner="someone:else") == set()


def test_retry_then_failed_when_attempts_run_out(engine: Engine, spec: JobTypeSpec) -> None:
    (job_id,) = add_jobs(engine, spec)
    for attempt in (1, 2):
        (c,) = claim(engine)
        assert c.attempt == attempt
        f = Finish(
            job_id,
            c.lease_generation,
            JobState.RETRY_WAIT,
            AttemptOutcome.RETRY,
            "Boom",
            "tb",
            delay_seconds=0.0,
        )
        assert finish(engine, f) == {job_id}
        row = job_row(engine, job_id)
        assert row["state"] == "RETRY_WAIT" and row["last_error_code"] == "Boom"
    (c,) = claim(engine)
    f = Finish(job_id, c.lease_generation, JobState.FAILED, AttemptOutcome.FAILED, "Boom3", "tb3")
    assert finish(engine, f) == {job_id}
    row = job_row(engine, job_id)
    assert row["state"] == "FAILED" and row["attempt_count"] == 3
    assert row["last_error_code"] == "Boom3" and row["last_error_detail"] == "tb3"
    assert [a["outcome"] for a in attempt_rows(engine, job_id)] == ["RETRY", "RETRY", "FAILED"]


def test_retry_delay_is_stored_as_run_after_by_db_clock(engine: Engine, spec: JobTypeSpec) -> None:
    (job_id,) = add_jobs(engine, spec)
    (c,) = claim(engine)
    f = Finish(
        job_id,
        c.lease_generation,
        JobState.RETRY_WAIT,
        AttemptOutcome.RETRY,
        "E",
        "",
        delay_seconds=120.0,
    )
    finish(engine, f)
    row = job_row(engine, job_id)
    assert 119 <= (row["run_after"] - row["updated_at"]).total_seconds() <= 121
    assert claim(engine) == []


def test_heartbeat_renews_reports_state_and_stores_progress(
    engine: Engine, spec: JobTypeSpec
) -> None:
    (job_id,) = add_jobs(engine, spec)
    (c,) = claim(engine)
    before = job_row(engine, job_id)["lease_expires_at"]
    with engine.begin() as conn:
        got = renew_leases_if_held(
            conn,
            owner=OWNER,
            renewals=[Renewal(job_id, c.lease_generation, stage="LOAD", done=3, total=10)],
        )
    assert got == {job_id: JobState.RUNNING}
    row = job_row(engine, job_id)
    assert row["lease_expires_at"] >= before
    assert (row["progress_stage"], row["progress_done"], row["progress_total"]) == ("LOAD", 3, 10)
    with engine.begin() as conn:
        assert request_cancel(conn, job_id).state == JobState.CANCEL_REQUESTED
    with engine.begin() as conn:
        renewals = [Renewal(job_id, c.lease_generation)]
        got = renew_leases_if_held(conn, owner=OWNER, renewals=renewals)
    assert got == {job_id: JobState.CANCEL_REQUESTED}
    assert job_row(engine, job_id)["progress_stage"] == "LOAD"


def test_heartbeat_never_revives_an_expired_lease(engine: Engine, spec: JobTypeSpec) -> None:
    (job_id,) = add_jobs(engine, spec)
    (c,) = claim(engine)
    with engine.begin() as conn:
        got = renew_leases_if_held(
            conn, owner=OWNER, renewals=[Renewal(job_id, c.lease_generation)], now=FAR_FUTURE
        )
    assert got == {}


def test_cancel_queued_job_is_cancelled_at_once(engine: Engine, spec: JobTypeSpec) -> None:
    (job_id,) = add_jobs(engine, spec)
    with engine.begin() as conn:
        res = request_cancel(conn, job_id)
    assert res.changed and res.state == JobState.CANCELLED
    row = job_row(engine, job_id)
    assert row["cancel_requested_at"] is not None and row["finished_at"] is not None
    assert claim(engine) == []
    with engine.begin() as conn:
        again = request_cancel(conn, job_id)
    assert not again.changed and again.state == JobState.CANCELLED
    with engine.begin() as conn:
        missing = request_cancel(conn, uuid.uuid4())
    assert not missing.changed and missing.state is None


def test_cancel_running_needs_the_workers_fenced_ack(engine: Engine, spec: JobTypeSpec) -> None:
    (job_id,) = add_jobs(engine, spec)
    (old,) = claim(engine)
    expire_all(engine)
    (c,) = claim(engine)
    with engine.begin() as conn:
        assert request_cancel(conn, job_id).state == JobState.CANCEL_REQUESTED
    ack_old = Finish(job_id, old.lease_generation, JobState.CANCELLED, AttemptOutcome.CANCELLED)
    assert finish(engine, ack_old) == set()  # stale generation, same owner
    assert job_row(engine, job_id)["state"] == "CANCEL_REQUESTED"
    ack = Finish(job_id, c.lease_generation, JobState.CANCELLED, AttemptOutcome.CANCELLED)
    assert finish(engine, ack) == {job_id}
    row = job_row(engine, job_id)
    assert row["state"] == "CANCELLED" and row["lease_owner"] is None
    assert attempt_rows(engine, job_id)[-1]["outcome"] == "CANCELLED"


def test_worker_cannot_cancel_a_job_nobody_asked_to_cancel(
    engine: Engine, spec: JobTypeSpec
) -> None:
    (job_id,) = add_jobs(engine, spec)
    (c,) = claim(engine)
    ack = Finish(job_id, c.lease_generation, JobState.CANCELLED, AttemptOutcome.CANCELLED)
    assert finish(engine, ack) == set()


def test_retry_of_a_cancel_requested_job_becomes_cancelled(
    engine: Engine, spec: JobTypeSpec
) -> None:
    (job_id,) = add_jobs(engine, spec)
    (c,) = claim(engine)
    with engine.begin() as conn:
        request_cancel(conn, job_id)
    f = Finish(
        job_id,
        c.lease_generation,
        JobState.RETRY_WAIT,
        AttemptOutcome.RETRY,
        "E",
        "",
        delay_seconds=1.0,
    )
    assert finish(engine, f) == {job_id}
    assert job_row(engine, job_id)["state"] == "CANCELLED"


def test_release_refunds_the_attempt_and_is_fenced(engine: Engine, spec: JobTypeSpec) -> None:
    (job_id,) = add_jobs(engine, spec)
    (old,) = claim(engine)
    expire_all(engine)
    (c,) = claim(engine)
    assert job_row(engine, job_id)["attempt_count"] == 2
    rel_old = Finish(
        job_id,
        old.lease_generation,
        JobState.QUEUED,
        AttemptOutcome.RELEASED,
        delay_seconds=0.0,
        refund=True,
    )
    assert finish(engine, rel_old) == set()
    rel = Finish(
        job_id,
        c.lease_generation,
        JobState.QUEUED,
        AttemptOutcome.RELEASED,
        delay_seconds=0.0,
        refund=True,
    )
    assert finish(engine, rel) == {job_id}
    row = job_row(engine, job_id)
    assert row["state"] == "QUEUED" and row["attempt_count"] == 1 and row["lease_owner"] is None
    assert attempt_rows(engine, job_id)[-1]["outcome"] == "RELEASED"


def test_sweeper_requeues_fails_and_cancels_expired_leases(engine: Engine) -> None:
    retry = job_type("retry", max_attempts=3)
    last = job_type("last", max_attempts=1)
    risky = job_type("risky", max_attempts=3, idempotent=False)
    store_types(engine, retry, last, risky)
    (r,) = add_jobs(engine, retry)
    (f,) = add_jobs(engine, last)
    (x,) = add_jobs(engine, risky)
    (cxl,) = add_jobs(engine, retry)
    claim(engine, 10)
    with engine.begin() as conn:
        request_cancel(conn, cxl)
    with engine.begin() as conn:
        assert sweep_expired_leases(conn) == []  # nothing has expired yet
    with engine.begin() as conn:
        swept = {s.job_id: s for s in sweep_expired_leases(conn, now=FAR_FUTURE)}
    assert {k: v.state for k, v in swept.items()} == {
        r: JobState.RETRY_WAIT,
        f: JobState.FAILED,
        x: JobState.RETRY_WAIT,
        cxl: JobState.CANCELLED,
    }
    for job_id in (r, f, x, cxl):
        row = job_row(engine, job_id)
        assert row["last_error_code"] == "LEASE_EXPIRED" and row["lease_owner"] is None
        assert attempt_rows(engine, job_id)[-1]["outcome"] == "LEASE_EXPIRED"
    assert job_row(engine, x)["needs_reconcile"] is True
    assert job_row(engine, r)["needs_reconcile"] is False
    assert "generation 1" in job_row(engine, r)["last_error_detail"]
    with engine.begin() as conn:
        assert sweep_expired_leases(conn, now=FAR_FUTURE) == []


def test_sweeper_rechecks_expiry_in_the_statement(engine: Engine, spec: JobTypeSpec) -> None:
    (job_id,) = add_jobs(engine, spec)
    (c,) = claim(engine)
    # The worker renews just before the sweeper runs: nothing is taken back.
    with engine.begin() as conn:
        renew_leases_if_held(conn, owner=OWNER, renewals=[Renewal(job_id, c.lease_generation)])
    with engine.begin() as conn:
        assert sweep_expired_leases(conn) == []
    assert finish(engine, success(c)) == {job_id}
    with engine.begin() as conn:
        assert sweep_expired_leases(conn, now=FAR_FUTURE) == []
    assert job_row(engine, job_id)["state"] == "SUCCEEDED"


def test_replay_gives_a_fresh_budget_and_keeps_history(engine: Engine) -> None:
    s = job_type("once", max_attempts=1)
    store_types(engine, s)
    (job_id,) = add_jobs(engine, s)
    (c,) = claim(engine)
    finish(
        engine,
        Finish(
            job_id,
            c.lease_generation,
            JobState.FAILED,
            AttemptOutcome.FAILED,
            "Bad",
            "detail",
            needs_reconcile=True,
        ),
    )
    with engine.begin() as conn:
        res = replay_failed(conn, job_id)
    assert res.changed and res.state == JobState.QUEUED
    row = job_row(engine, job_id)
    assert row["attempt_count"] == 0 and row["needs_reconcile"] is False
    (c2,) = claim(engine)
    assert c2.lease_generation == c.lease_generation + 1 and c2.attempt == 1
    assert len(attempt_rows(engine, job_id)) == 2
    with engine.begin() as conn:
        again = replay_failed(conn, job_id)
    assert not again.changed and again.state == JobState.RUNNING


def test_claim_with_injected_now(engine: Engine, spec: JobTypeSpec) -> None:
    add_jobs(engine, spec, run_after=datetime(2090, 1, 1, tzinfo=UTC))
    assert claim(engine) == []
    (c,) = claim(engine, now=datetime(2090, 1, 1, 0, 0, 1, tzinfo=UTC))
    row = job_row(engine, c.job_id)
    assert row["lease_expires_at"] == datetime(2090, 1, 1, 0, 1, 1, tzinfo=UTC)


def test_attempts_never_exceed_max(engine: Engine) -> None:
    s = job_type("two", max_attempts=2)
    store_types(engine, s)
    (job_id,) = add_jobs(engine, s)
    for _ in range(2):
        claim(engine)
        expire_all(engine)
    assert job_row(engine, job_id)["state"] == "FAILED"
    assert job_row(engine, job_id)["attempt_count"] == 2
    with engine.begin() as conn:
        conn.execute(update(jobs).values(state="RETRY_WAIT"))  # even if someone forces it
    assert claim(engine) == []


def test_lost_lease_is_a_typed_outcome(engine: Engine, spec: JobTypeSpec) -> None:
    (job_id,) = add_jobs(engine, spec)
    (old,) = claim(engine)
    expire_all(engine)
    (new,) = claim(engine)
    with engine.begin() as conn:
        stale = complete_if_lease_held(
            conn, owner=OWNER, job_id=job_id, generation=old.lease_generation
        )
        current = complete_if_lease_held(
            conn, owner=OWNER, job_id=job_id, generation=new.lease_generation
        )
    assert stale == LeaseLost(job_id, old.lease_generation)
    assert current == Finished(job_id, JobState.SUCCEEDED)


def test_closing_the_attempts_of_claimed_batches_rewrites_them_in_their_own_pages(
    pg_engine: Engine,
) -> None:
    """On PostgreSQL an attempt closed on a page with room is a heap-only update: no index
    entry, no page found elsewhere through the free space map (a disk read once the table
    outgrows the cache). Claims insert attempt rows page after page; an outcome batch closes
    them all at once, so each page must hold the new versions of its own rows."""
    spec = job_type("t")
    store_types(pg_engine, spec)
    add_jobs(pg_engine, spec, 480)
    # As an executor at the default concurrency claims: 16 at a time, under a host name
    # as long as a cloud instance's.
    owner = f"ip-10-20-30-40.eu-central-1.compute.internal:4194303:{'f' * 8}"
    claimed = [c for _ in range(30) for c in claim_as(pg_engine, owner, 16)]
    assert len(claimed) == 480
    with pg_engine.begin() as conn:
        done = finish_if_lease_held(conn, owner=owner, finishes=[success(c) for c in claimed])
        updated, in_place = conn.execute(
            text(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
                "WHERE relname = 'job_attempts'"
            )
        ).one()
    assert all(isinstance(r, Finished) for r in done)
    assert updated == 480
    # Measured: 429 of 480 at fillfactor 50, 284 at 60, 182 at 70, none at 100.
    assert in_place >= 0.85 * updated, f"{in_place} of {updated} attempts closed in place"


def _join_filter_rows(plan: dict[str, Any]) -> int:
    """Rows a plan's nodes threw away comparing pairs (``Rows Removed by Join Filter``)."""
    own = int(plan.get("Rows Removed by Join Filter", 0))
    return own + sum(_join_filter_rows(p) for p in plan.get("Plans", []))


def test_batched_fenced_writes_find_their_rows_by_key_whatever_the_statistics_say(
    pg_engine: Engine,
) -> None:
    """Statistics taken while few leases were held (a quiet moment), then thousands held
    by one executor (a burst; outcomes backed up): outcome and renewal batches must
    still find each row through the primary key. Fenced with filters on ``jobs``, the
    planner scanned every lease of the owner and compared each with every batch row
    (2,000 x 500 comparisons a statement): outcomes piled up, and executors collapsed."""
    from psycopg.sql import Literal

    from rota.core.queries.jobs_lease import _pg_renew
    from rota.core.queries.jobs_outcome import _pg_finish, _pg_succeed

    spec = job_type("t")
    store_types(pg_engine, spec)
    add_jobs(pg_engine, spec, 2100)
    owner = "ip-10-0-0-1:4242:abcdef01"
    claim_as(pg_engine, owner, 48)
    with pg_engine.connect() as conn:
        conn.execute(text("COMMIT"))
        conn.execute(text("ANALYZE jobs"))
    held = [c for _ in range(25) for c in claim_as(pg_engine, owner, 80)]
    batch = held[:500]
    ids = [c.job_id for c in batch]
    gens = [c.lease_generation for c in batch]
    n = len(batch)
    statements = {
        "succeed": (_pg_succeed(), {"ids": ids, "gens": gens}),
        "finish": (
            _pg_finish(),
            {
                "ids": ids,
                "gens": gens,
                "targets": ["FAILED"] * n,
                "outcomes": ["FAILED"] * n,
                "codes": ["E"] * n,
                "details": ["d"] * n,
                "delays": [0.0] * n,
                "refunds": [0] * n,
                "reconciles": [False] * n,
                "results": [None] * n,
                "outputs": [None] * n,
                "dropped": [0] * n,
                "stages": [None] * n,
                "dones": [None] * n,
                "totals": [None] * n,
            },
        ),
        "renew": (
            _pg_renew(),
            {
                "ids": ids,
                "gens": gens,
                "stages": [None] * n,
                "dones": [None] * n,
                "totals": [None] * n,
                "outputs": ["so far"] * n,
                "dropped": [0] * n,
            },
        ),
    }
    for name, (statement, params) in statements.items():
        with pg_engine.begin() as conn:
            # A generic plan, as psycopg's prepared statements get after five runs.
            conn.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
            values = {"owner": owner, "now": None, **params}
            sql, names = str(statement.compile(dialect=conn.dialect)), []
            for key in re.findall(r"%\((\w+)\)s", sql):
                if key not in names:
                    names.append(key)
                sql = sql.replace(f"%({key})s", f"${names.index(key) + 1}")
            conn.exec_driver_sql(f"PREPARE fenced_{name} AS {sql}")
            driver = conn.connection.driver_connection
            args = ", ".join(Literal(values[k]).as_string(driver) for k in names)
            plan = conn.exec_driver_sql(
                f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE fenced_{name}({args})"
            ).scalar_one()[0]["Plan"]
            conn.rollback()
        assert _join_filter_rows(plan) < 10 * n, (name, _join_filter_rows(plan))


def test_a_renewal_keeps_the_running_attempts_output_under_its_fence(
    engine: Engine, spec: JobTypeSpec
) -> None:
    """What a running attempt wrote so far rides on its lease renewals: kept (replacing
    the last) while the lease is held, never by another owner, an older generation or
    after the outcome, and the outcome's own output replaces it."""
    from rota.core.queries.attempt_output import attempt_output

    add_jobs(engine, spec, 1)
    (c,) = claim(engine)

    def renew(
        text: str, dropped: int = 0, owner: str = OWNER, gen: int | None = None
    ) -> set[uuid.UUID]:
        generation = c.lease_generation if gen is None else gen
        return set(
            renew_as(engine, owner, c.job_id, generation, output=text, output_dropped=dropped)
        )

    def kept() -> tuple[str | None, str, int]:
        with engine.connect() as conn:
            out = attempt_output(conn, c.job_id)
        assert out is not None
        return out.outcome, out.output, out.dropped_bytes

    assert renew("line 1\n") == {c.job_id}
    assert kept() == (None, "line 1\n", 0)
    assert renew("line 2\n", dropped=7) == {c.job_id}
    assert kept() == (None, "line 2\n", 7)
    assert renew("not mine\n", owner="host:2:other") == set()
    assert renew("stale\n", gen=c.lease_generation - 1) == set()
    assert kept() == (None, "line 2\n", 7)
    done = success(c)._replace(output="final\n", output_dropped=14)
    assert finish(engine, done) == {c.job_id}
    assert kept() == ("SUCCEEDED", "final\n", 14)
    assert renew("late\n") == set()
    assert kept() == ("SUCCEEDED", "final\n", 14)

"""The FAILED counts of /metrics and the dashboard (``rota.api.failed_counts``).

Up to the exact cap every read counts; past it the full count is taken again
only once its cost allows, and the reads between say how old their count is.
Both backends, real databases. The clock is passed in and moves only when a
test moves it; the count is the real statement, wrapped so a test sees each
run and can make it take a known time.
"""

from __future__ import annotations

import threading

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from rota.api.dashboard import dashboard_data
from rota.api.failed_counts import FailedCounts
from rota.core.queries.jobs_gauges import StateCount, failed_at_most, failed_by_type
from rota.core.tables import jobs
from tests.support import loopback
from tests.support.api_support import ManualClock, fail, failed_jobs_of_a_type, running_api
from tests.support.executor_support import add_jobs, job_type, store_types


class TimedCount:
    """``failed_by_type``, counted, and taking ``takes`` seconds of the clock."""

    def __init__(self, clock: ManualClock, takes: float) -> None:
        self.clock, self.takes, self.runs = clock, takes, 0
        self.refuse = False
        self.lock = threading.Lock()

    def __call__(self, conn: Connection) -> list[StateCount]:
        with self.lock:
            self.runs += 1
        if self.refuse:  # a statement the database really refuses, inside the count
            self.clock.now += self.takes
            conn.execute(text("SELECT count(*) FROM no_such_table"))
        counts = failed_by_type(conn)
        self.clock.now += self.takes
        return counts


def failed_total(engine: Engine, counts: FailedCounts) -> tuple[int, float]:
    with engine.connect() as conn:
        read = counts.read(conn)
    assert all(c.state == "FAILED" for c in read.counts)
    return sum(c.count for c in read.counts), read.age_seconds


def test_failed_at_most_counts_no_further_than_its_cap(engine: Engine) -> None:
    spec = failed_jobs_of_a_type(engine, 7)
    add_jobs(engine, spec, 3)  # QUEUED: not counted
    with engine.connect() as conn:
        assert failed_at_most(conn, 100) == 7
        assert failed_at_most(conn, 5) == 5


def test_up_to_the_cap_every_read_counts(engine: Engine) -> None:
    spec = failed_jobs_of_a_type(engine, 3)
    clock = ManualClock()
    count = TimedCount(clock, 10.0)
    counts = FailedCounts(clock=clock, exact_up_to=5, count=count)
    assert failed_total(engine, counts) == (3, 0.0)
    fail(engine, add_jobs(engine, spec, 2))  # 5: still within the cap
    assert failed_total(engine, counts) == (5, 0.0)
    assert count.runs == 2


def test_past_the_cap_the_count_is_kept_for_its_cost_then_taken_again(engine: Engine) -> None:
    a, b = job_type("a"), job_type("b", pool="other")
    store_types(engine, a, b)
    fail(engine, [*add_jobs(engine, a, 4), *add_jobs(engine, b, 2)])
    clock = ManualClock()
    count = TimedCount(clock, 0.5)
    counts = FailedCounts(clock=clock, exact_up_to=5, cost_factor=20.0, count=count)
    with engine.connect() as conn:
        first = counts.read(conn)
    assert first.age_seconds == 0.0
    assert sorted((c.job_type, c.pool, c.count) for c in first.counts) == [
        ("a", "default", 4),
        ("b", "other", 2),
    ]
    fail(engine, add_jobs(engine, a, 1))
    # Kept for 20 x 0.5 s from when the count began; the reads inside say how old it is.
    assert failed_total(engine, counts) == (6, 0.5)
    clock.now += 9.0
    assert failed_total(engine, counts) == (6, 9.5)
    assert count.runs == 1
    clock.now += 0.5  # 10 s after the count began: counted again
    assert failed_total(engine, counts) == (7, 0.0)
    assert count.runs == 2


def test_a_costly_count_is_kept_as_long_as_its_cost_says(engine: Engine) -> None:
    spec = failed_jobs_of_a_type(engine, 3)
    clock = ManualClock()
    count = TimedCount(clock, 30.0)  # 30 s: kept 3,000 s, so counting is 1% of the time
    counts = FailedCounts(clock=clock, exact_up_to=2, cost_factor=100.0, count=count)
    assert failed_total(engine, counts) == (3, 0.0)
    fail(engine, add_jobs(engine, spec, 1))
    clock.now += 2900.0
    assert failed_total(engine, counts) == (3, 2930.0)
    clock.now += 70.0
    assert failed_total(engine, counts) == (4, 0.0)
    assert count.runs == 2


def test_below_the_cap_again_the_count_is_fresh_and_the_kept_one_forgotten(
    engine: Engine,
) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    ids = add_jobs(engine, spec, 4)
    fail(engine, ids)
    clock = ManualClock()
    counts = FailedCounts(
        clock=clock, exact_up_to=3, cost_factor=1000.0, count=TimedCount(clock, 1.0)
    )
    assert failed_total(engine, counts) == (4, 0.0)
    with engine.begin() as conn:  # retention pruned two, say
        conn.execute(jobs.delete().where(jobs.c.job_id.in_(ids[:2])))
    assert failed_total(engine, counts) == (2, 0.0)  # the kept count of 4 is not given
    fail(engine, add_jobs(engine, spec, 2))  # past the cap again: counted, not the old 4
    assert failed_total(engine, counts) == (4, 0.0)


def test_readers_at_once_run_one_count_and_share_it(engine: Engine) -> None:
    failed_jobs_of_a_type(engine, 5)
    clock = ManualClock()
    count = TimedCount(clock, 1.0)
    slow = threading.Event()

    def slow_count(conn: Connection) -> list[StateCount]:
        slow.wait(0.5)  # widen the window in which the others arrive: never set
        return count(conn)

    counts = FailedCounts(clock=clock, exact_up_to=2, cost_factor=100.0, count=slow_count)
    start = threading.Barrier(8)
    totals: list[int] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            start.wait()
            totals.append(failed_total(engine, counts)[0])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert totals == [5] * 8  # the first count, given to every reader that waited for it
    assert count.runs == 1


def test_a_refused_count_gives_the_kept_one_and_is_retried_after_its_cost(
    engine: Engine,
) -> None:
    failed_jobs_of_a_type(engine, 3)
    clock = ManualClock()
    count = TimedCount(clock, 1.0)
    counts = FailedCounts(clock=clock, exact_up_to=2, cost_factor=10.0, count=count)
    assert failed_total(engine, counts) == (3, 0.0)
    count.refuse = True
    clock.now += 10.0  # due
    with engine.connect() as conn:
        read = counts.read(conn)
        assert (sum(c.count for c in read.counts), read.age_seconds) == (3, 12.0)
        # The caller's transaction goes on: the refused count was in a savepoint.
        assert conn.execute(text("SELECT count(*) FROM jobs")).scalar_one() == 3
    assert count.runs == 2
    count.refuse = False
    clock.now += 9.0  # 10 x the 1 s the refusal took has not passed since it failed
    assert failed_total(engine, counts) == (3, 21.0)
    assert count.runs == 2
    clock.now += 1.0
    assert failed_total(engine, counts) == (3, 0.0)
    assert count.runs == 3


def test_a_refused_first_count_is_an_error(engine: Engine) -> None:
    failed_jobs_of_a_type(engine, 3)
    clock = ManualClock()
    count = TimedCount(clock, 1.0)
    count.refuse = True
    counts = FailedCounts(clock=clock, exact_up_to=2, count=count)
    with pytest.raises(DBAPIError, match="no_such_table"):
        failed_total(engine, counts)


def test_the_dashboard_data_carries_the_counts_age(engine: Engine) -> None:
    failed_jobs_of_a_type(engine, 3)
    clock = ManualClock()
    counts = FailedCounts(
        clock=clock, exact_up_to=1, cost_factor=100.0, count=TimedCount(clock, 1.0)
    )
    with engine.connect() as conn:
        fresh = dashboard_data(conn, counts)
        clock.now += 2.0
        kept = dashboard_data(conn, counts)
    assert fresh["failed_count_age_seconds"] == 0.0
    assert kept["failed_count_age_seconds"] == 3.0
    for data in (fresh, kept):
        (row,) = data["pools"][0]["job_types"]
        assert row["failed"] == 3


def scrape(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for s in family.samples
    }


FAILED_T = ("rota_jobs", (("job_type", "t"), ("pool", "default"), ("state", "FAILED")))
AGE = ("rota_failed_count_age_seconds", ())


def test_metrics_report_the_failed_count_and_its_age(engine: Engine) -> None:
    spec = failed_jobs_of_a_type(engine, 2)
    with running_api(engine) as base, loopback.Client(base_url=base) as client:
        for expected in (2, 3):  # below the cap: counted at each scrape
            by_name = scrape(client)
            assert by_name[FAILED_T] == expected
            assert by_name[AGE] == 0.0
            fail(engine, add_jobs(engine, spec, 1))


def test_past_the_cap_metrics_carry_the_kept_count_until_a_replay_here(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    ids = add_jobs(engine, spec, 3)
    fail(engine, ids)
    clock = ManualClock()
    counts = FailedCounts(
        clock=clock, exact_up_to=1, cost_factor=1000.0, count=TimedCount(clock, 1.0)
    )
    with running_api(engine, failed_counts=counts) as base, loopback.Client(base_url=base) as c:
        assert scrape(c)[FAILED_T] == 3
        fail(engine, add_jobs(engine, spec, 1))
        clock.now += 5.0
        kept = scrape(c)
        assert (kept[FAILED_T], kept[AGE]) == (3, 6.0)  # kept: the new failure is not in it
        assert c.post(f"/jobs/{ids[0]}/replay").status_code == 200
        fresh = scrape(c)  # the replay here forgot the kept count
        assert (fresh[FAILED_T], fresh[AGE]) == (3, 0.0)

"""The FAILED counts of /metrics and the dashboard (``rota.api.failed_counts``).

Up to the exact cap every read counts; past it the full count is taken again
only once its cost allows, and the reads between say how old their count is.
Both backends, real databases; the clock is passed in and ticks at every read
of it, so a count "takes" a known time.
"""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from rota.api.dashboard import dashboard_data
from rota.api.failed_counts import FailedCounts
from rota.shared.models import jobs
from rota.shared.queries.jobs_gauges import failed_at_most
from tests.api_support import TickingClock, fail, running_api
from tests.executor_support import add_jobs, job_type, store_types


def failed_total(engine: Engine, counts: FailedCounts) -> tuple[int, float]:
    with engine.connect() as conn:
        read = counts.read(conn)
    assert all(c.state == "FAILED" for c in read.counts)
    return sum(c.count for c in read.counts), read.age_seconds


def test_failed_at_most_counts_no_further_than_its_cap(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    fail(engine, add_jobs(engine, spec, 7))
    add_jobs(engine, spec, 3)  # QUEUED: not counted
    with engine.connect() as conn:
        assert failed_at_most(conn, 100) == 7
        assert failed_at_most(conn, 5) == 5


def test_up_to_the_cap_every_read_counts(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    fail(engine, add_jobs(engine, spec, 3))
    counts = FailedCounts(clock=TickingClock(10.0), exact_up_to=5)
    assert failed_total(engine, counts) == (3, 0.0)
    fail(engine, add_jobs(engine, spec, 2))  # 5: still within the cap
    assert failed_total(engine, counts) == (5, 0.0)


def test_past_the_cap_the_count_is_kept_for_its_cost_then_taken_again(engine: Engine) -> None:
    a, b = job_type("a"), job_type("b", pool="other")
    store_types(engine, a, b)
    fail(engine, [*add_jobs(engine, a, 4), *add_jobs(engine, b, 2)])
    clock = TickingClock(0.5)  # a count reads the clock twice: it "takes" 0.5 s
    counts = FailedCounts(clock=clock, exact_up_to=5, cost_factor=20.0, longest_age=60.0)
    with engine.connect() as conn:
        first = counts.read(conn)
    assert first.age_seconds == 0.0
    assert sorted((c.job_type, c.pool, c.count) for c in first.counts) == [
        ("a", "default", 4), ("b", "other", 2),
    ]
    fail(engine, add_jobs(engine, a, 1))
    # Kept for 20 x 0.5 s from when the count began: the reads inside say how old it is.
    assert failed_total(engine, counts) == (6, 1.0)
    clock.now += 7.0
    assert failed_total(engine, counts) == (6, 8.5)
    clock.now += 1.0  # 10 s and more after the count began: counted again
    assert failed_total(engine, counts) == (7, 0.0)


def test_a_costly_count_is_taken_again_after_the_longest_age(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    fail(engine, add_jobs(engine, spec, 3))
    clock = TickingClock(100.0)  # a count "takes" 100 s: 100 x 100 s would be hours
    counts = FailedCounts(clock=clock, exact_up_to=2, cost_factor=100.0, longest_age=300.0)
    assert failed_total(engine, counts) == (3, 0.0)
    fail(engine, add_jobs(engine, spec, 1))
    assert failed_total(engine, counts)[0] == 3  # 200 s after the count began
    clock.now += 100.0
    assert failed_total(engine, counts) == (4, 0.0)  # 400 s: past the longest age


def test_below_the_cap_again_the_count_is_fresh(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    ids = add_jobs(engine, spec, 4)
    fail(engine, ids)
    counts = FailedCounts(clock=TickingClock(1.0), exact_up_to=3, cost_factor=1000.0)
    assert failed_total(engine, counts) == (4, 0.0)
    with engine.begin() as conn:  # retention pruned two, say
        conn.execute(jobs.delete().where(jobs.c.job_id.in_(ids[:2])))
    assert failed_total(engine, counts) == (2, 0.0)  # the kept count of 4 is not given


def test_the_dashboard_data_carries_the_counts_age(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    fail(engine, add_jobs(engine, spec, 3))
    clock = TickingClock(1.0)
    counts = FailedCounts(clock=clock, exact_up_to=1, cost_factor=100.0)
    with engine.connect() as conn:
        fresh = dashboard_data(conn, counts)
        kept = dashboard_data(conn, counts)
    assert fresh["failed_count_age_seconds"] == 0.0
    assert kept["failed_count_age_seconds"] == 2.0
    for data in (fresh, kept):
        (row,) = data["pools"][0]["job_types"]
        assert row["failed"] == 3


def test_metrics_report_the_failed_count_and_its_age(engine: Engine) -> None:
    spec = job_type("t")
    store_types(engine, spec)
    fail(engine, add_jobs(engine, spec, 2))
    with running_api(engine) as base, httpx.Client(base_url=base) as client:
        for expected in (2, 3):  # below the cap: counted at each scrape
            text = client.get("/metrics").text
            by_name = {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
            key = ("rota_jobs", (("job_type", "t"), ("pool", "default"), ("state", "FAILED")))
            assert by_name[key] == expected
            assert by_name[("rota_failed_count_age_seconds", ())] == 0.0
            fail(engine, add_jobs(engine, spec, 1))

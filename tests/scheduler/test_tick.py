"""Ticks driven by hand with an injected clock, on both backends."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, delete, update

from rota.core.config import MisfirePolicy, OverlapPolicy
from rota.core.tables import jobs
from rota.core.timefmt import occurrence_key
from rota.scheduler.jitter import jitter_offset
from rota.scheduler.service import SchedulerService
from tests.support.scheduler_helpers import (
    MIN,
    T0,
    apply_specs,
    jobs_of,
    schedule_row,
    skips_of,
    spec,
)


def test_an_on_time_occurrence_becomes_one_job_and_advances_the_cursor(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    apply_specs(engine, spec(payload_ref="s3://b/k", args={"a": 1}))
    service = SchedulerService(engine)
    assert service.run_once(T0 + timedelta(seconds=30)).created == 0
    with caplog.at_level(logging.INFO, logger="rota.scheduler"):
        result = service.run_once(T0 + MIN + timedelta(seconds=2))
    assert result.created == 1
    (job,) = jobs_of(engine)
    assert job["dedup_key"] == "s@2026-03-02T00:01:00Z"
    assert job["scheduled_for"] == T0 + MIN
    assert job["run_after"] == T0 + MIN
    assert (job["job_type"], job["pool"], job["max_attempts"]) == ("work", "p1", 3)
    assert (job["payload_ref"], job["args"]) == ("s3://b/k", {"a": 1})
    assert job["covers_count"] is None
    row = schedule_row(engine)
    assert row["cursor_at"] == T0 + MIN
    assert row["next_fire_at"] == T0 + 2 * MIN
    assert row["last_fire_at"] == T0 + MIN and row["last_job_id"] == job["job_id"]
    events = [r for r in caplog.records if getattr(r, "event", None) == "occurrence_created"]
    assert len(events) == 1 and events[0].fields["dedup_key"] == job["dedup_key"]  # type: ignore[attr-defined]
    # the same tick again makes nothing: the cursor is past it
    assert service.run_once(T0 + MIN + timedelta(seconds=3)).created == 0
    assert len(jobs_of(engine)) == 1


def test_catch_up_after_an_outage_runs_the_window_in_batches(engine: Engine) -> None:
    apply_specs(
        engine,
        spec(misfire=MisfirePolicy.CATCH_UP, catch_up_window=timedelta(hours=1)),
    )
    service = SchedulerService(engine, batch_jobs=25)
    result = service.run_once(T0 + timedelta(hours=3))
    made = jobs_of(engine)
    # 180 occurrences: T0+1m .. T0+3h; the window keeps [now-1h, now]
    assert [j["scheduled_for"] for j in made] == [
        T0 + timedelta(hours=2) + i * MIN for i in range(61)
    ]
    assert result.created == 61 and result.batches >= 3
    (skip,) = skips_of(engine)
    assert (skip["reason"], skip["count"]) == ("misfire", 119)
    assert (skip["first_instant"], skip["last_instant"]) == (
        T0 + MIN,
        T0 + timedelta(hours=2) - MIN,
    )
    row = schedule_row(engine)
    assert row["skipped_count"] == 119 and row["coalesced_count"] == 0
    assert row["cursor_at"] == T0 + timedelta(hours=3)


def test_skip_drops_late_occurrences(engine: Engine) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.SKIP))
    SchedulerService(engine).run_once(T0 + timedelta(minutes=10, seconds=30))
    assert [j["scheduled_for"] for j in jobs_of(engine)] == [T0 + 10 * MIN]
    (skip,) = skips_of(engine)
    assert (skip["reason"], skip["count"], skip["first_instant"], skip["last_instant"]) == (
        "misfire",
        9,
        T0 + MIN,
        T0 + 9 * MIN,
    )
    assert schedule_row(engine)["skipped_count"] == 9


def test_coalesce_makes_one_job_keyed_by_the_newest(engine: Engine) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.COALESCE))
    SchedulerService(engine).run_once(T0 + timedelta(hours=1, seconds=5))
    (job,) = jobs_of(engine)
    assert job["dedup_key"] == occurrence_key("s", T0 + timedelta(hours=1))
    assert job["scheduled_for"] == T0 + timedelta(hours=1)
    assert (job["covers_from"], job["covers_count"]) == (T0 + MIN, 60)
    (skip,) = skips_of(engine)
    assert (skip["reason"], skip["count"], skip["job_id"]) == ("coalesced", 59, job["job_id"])
    assert skip["last_instant"] == T0 + 59 * MIN
    assert schedule_row(engine)["coalesced_count"] == 59


@pytest.mark.parametrize("rule", ["every", "cron"])
@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_one_year_outage_of_a_per_minute_schedule(
    engine: Engine, policy: MisfirePolicy, rule: str
) -> None:
    kw: dict[str, Any] = {"every": MIN}
    if rule == "cron":
        kw = {"every": None, "cron": "* * * * *"}
    apply_specs(engine, spec(misfire=policy, **kw))
    now = T0 + timedelta(days=365)
    started = time.monotonic()
    result = SchedulerService(engine).run_once(now)
    elapsed = time.monotonic() - started
    total = 365 * 24 * 60  # T0+1m .. T0+365d
    row = schedule_row(engine)
    made = jobs_of(engine)
    covered = sum(j["covers_count"] or 1 for j in made)
    assert covered + row["skipped_count"] == total
    assert row["coalesced_count"] == covered - len(made)
    if policy is MisfirePolicy.CATCH_UP:
        assert len(made) == 24 * 60 + 1 and result.batches >= 3
    elif policy is MisfirePolicy.SKIP:
        assert len(made) == 2  # within grace (1m): now-1m and now
    else:
        assert len(made) == 1 and made[0]["covers_count"] == total
    assert row["cursor_at"] == now and row["next_fire_at"] == now + MIN
    assert elapsed < 15, f"a year-long outage took {elapsed:.1f}s"


def test_jitter_delays_run_after_deterministically_and_keeps_the_key(engine: Engine) -> None:
    apply_specs(engine, spec(jitter=timedelta(seconds=30), misfire=MisfirePolicy.CATCH_UP))
    SchedulerService(engine).run_once(T0 + 5 * MIN + timedelta(seconds=1))
    made = jobs_of(engine)
    assert len(made) == 5
    for job in made:
        offset = job["run_after"] - job["scheduled_for"]
        assert offset == jitter_offset("s", job["scheduled_for"], timedelta(seconds=30))
        assert timedelta(0) <= offset < timedelta(seconds=30)
        assert job["dedup_key"] == occurrence_key("s", job["scheduled_for"])
    assert len({j["run_after"] - j["scheduled_for"] for j in made}) > 1


def _finish(engine: Engine, job_id: uuid.UUID, state: str = "SUCCEEDED") -> None:
    with engine.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.job_id == job_id).values(state=state))


def test_overlap_forbid_skips_while_the_previous_run_is_unfinished(engine: Engine) -> None:
    apply_specs(engine, spec(overlap=OverlapPolicy.FORBID))
    service = SchedulerService(engine)
    service.run_once(T0 + MIN)
    (first,) = jobs_of(engine)
    service.run_once(T0 + 2 * MIN)
    assert len(jobs_of(engine)) == 1
    (skip,) = skips_of(engine)
    assert (skip["reason"], skip["first_instant"], skip["count"]) == ("overlap", T0 + 2 * MIN, 1)
    _finish(engine, first["job_id"])
    service.run_once(T0 + 3 * MIN)
    assert [j["scheduled_for"] for j in jobs_of(engine)] == [T0 + MIN, T0 + 3 * MIN]
    assert schedule_row(engine)["skipped_count"] == 1


def test_overlap_replace_cancels_the_previous_run(engine: Engine) -> None:
    apply_specs(engine, spec(overlap=OverlapPolicy.REPLACE))
    service = SchedulerService(engine)
    service.run_once(T0 + MIN)
    (queued,) = jobs_of(engine)
    assert service.run_once(T0 + 2 * MIN).cancel_requested == 1
    states = {j["scheduled_for"]: j["state"] for j in jobs_of(engine)}
    assert states == {T0 + MIN: "CANCELLED", T0 + 2 * MIN: "QUEUED"}
    # a RUNNING previous run is asked to stop, not cancelled under its worker
    running = jobs_of(engine)[1]["job_id"]
    with engine.begin() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.job_id == running)
            .values(
                state="RUNNING",
                lease_owner="w1",
                lease_expires_at=T0 + timedelta(hours=1),
                attempt_count=1,
            )
        )
    service.run_once(T0 + 3 * MIN)
    states = {j["scheduled_for"]: j["state"] for j in jobs_of(engine)}
    assert states[T0 + 2 * MIN] == "CANCEL_REQUESTED"
    assert states[T0 + 3 * MIN] == "QUEUED"
    assert queued["job_id"] != running


def test_pruning_finished_jobs_never_reopens_an_occurrence(engine: Engine) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.CATCH_UP))
    service = SchedulerService(engine)
    service.run_once(T0 + 5 * MIN)
    assert len(jobs_of(engine)) == 5
    with engine.begin() as conn:
        conn.execute(delete(jobs))
    assert service.run_once(T0 + 5 * MIN).created == 0
    assert jobs_of(engine) == []


def test_removed_job_type_falls_back_to_defaults_and_still_fires(engine: Engine) -> None:
    from rota.core.queries.job_types import delete_job_type

    apply_specs(engine, spec())
    with engine.begin() as conn:
        delete_job_type(conn, "work")
    SchedulerService(engine).run_once(T0 + MIN)
    (job,) = jobs_of(engine)
    assert job["max_attempts"] == 5  # the documented default


def test_replicas_at_the_same_instant_make_each_occurrence_once(engine: Engine) -> None:
    apply_specs(engine, *(spec(f"s{i}", misfire=MisfirePolicy.CATCH_UP) for i in range(20)))
    a, b = SchedulerService(engine, batch_schedules=3), SchedulerService(engine, batch_schedules=4)
    now = T0 + 3 * MIN
    created = a.run_once(now).created + b.run_once(now).created
    assert created == 60
    assert a.run_once(now).created + b.run_once(now).created == 0


def test_a_wall_time_dropped_by_the_dst_policy_is_recorded_never_made(engine: Engine) -> None:
    from datetime import UTC, datetime

    from rota.core.config import Ambiguous, DstPolicy, Nonexistent

    berlin = spec(
        every=None,
        cron="30 2 * * *",
        timezone="Europe/Berlin",
        misfire=MisfirePolicy.CATCH_UP,
        catch_up_window=timedelta(days=7),
        dst=DstPolicy(Nonexistent.SKIP, Ambiguous.FIRST),
    )
    apply_specs(engine, berlin, now=datetime(2026, 3, 27, 12, tzinfo=UTC))
    SchedulerService(engine).run_once(datetime(2026, 3, 30, 12, tzinfo=UTC))
    assert [j["scheduled_for"] for j in jobs_of(engine)] == [
        datetime(2026, 3, 28, 1, 30, tzinfo=UTC),  # 02:30 CET
        datetime(2026, 3, 30, 0, 30, tzinfo=UTC),  # 02:30 CEST
    ]
    (skip,) = skips_of(engine)
    assert (skip["reason"], skip["count"]) == ("dst", 1)
    assert skip["first_instant"].date() == datetime(2026, 3, 29, tzinfo=UTC).date()
    assert schedule_row(engine)["skipped_count"] == 1


def test_a_definition_that_cannot_be_evaluated_is_postponed_not_fatal(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    from rota.core.tables import schedules

    apply_specs(engine, spec("bad", misfire=MisfirePolicy.CATCH_UP), spec("good"))
    with engine.begin() as conn:
        conn.execute(
            update(schedules)
            .where(schedules.c.name == "bad")
            .values(definition={"name": "bad", "job_type": "work", "cron": "nonsense"})
        )
    with caplog.at_level(logging.ERROR, logger="rota.scheduler"):
        result = SchedulerService(engine).run_once(T0 + MIN)
    assert result.created == 1 and len(jobs_of(engine, "good")) == 1
    assert any(getattr(r, "event", None) == "schedule_failed" for r in caplog.records)
    row = schedule_row(engine, "bad")
    assert row["cursor_at"] == T0 and row["next_fire_at"] == T0 + 2 * MIN
    assert row["set_aside_reason"].startswith("RuleError: bad cron 'nonsense'")

"""Deadlines: each occurrence not SUCCEEDED by ``instant + deadline`` is recorded once, with why.

Driven tick by tick at injected instants (``run_once(now)``, ``check_deadlines(now)``)
on both backends; outcomes are written to the job rows as an executor would
(state and ``finished_at``). The real processes are in
``tests/processes/test_deadline_replicas.py``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, RowMapping, event, select, update

from rota.core.config import MisfirePolicy, OverlapPolicy
from rota.core.queries.late_occurrences import newest_late
from rota.core.queries.schedules import read_clock
from rota.core.tables import jobs, metric_inbox, schedules
from rota.operations.schedules import pause, resume
from rota.scheduler.compiled import CompiledSchedules
from rota.scheduler.deadlines import RETRY_UNREADABLE, SETTLE, record_late_occurrences
from rota.scheduler.service import SchedulerService
from tests.scheduler.test_set_aside import bypass_check
from tests.support.executor_support import wait_for
from tests.support.scheduler_helpers import MIN, T0, apply_specs, jobs_of, schedule_row, spec

SEC = timedelta(seconds=1)
DEADLINE = 30 * SEC


def finish(
    engine: Engine, instant: datetime, state: str, at: datetime, name: str = "s"
) -> uuid.UUID:
    """Write a job's outcome as an executor does: its state and when it ended."""
    with engine.begin() as conn:
        job_id = conn.execute(
            update(jobs)
            .where(jobs.c.schedule_name == name, jobs.c.scheduled_for == instant)
            .values(
                state=state,
                finished_at=at,
                attempt_count=1,
                lease_owner=None,
                lease_expires_at=None,
            )
            .returning(jobs.c.job_id)
        ).scalar_one()
    assert isinstance(job_id, uuid.UUID)
    return job_id


def start(engine: Engine, instant: datetime, name: str = "s") -> None:
    with engine.begin() as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.schedule_name == name, jobs.c.scheduled_for == instant)
            .values(
                state="RUNNING",
                attempt_count=1,
                lease_owner="w",
                lease_expires_at=instant + timedelta(hours=1),
            )
        )


def late(engine: Engine, name: str | None = None) -> Sequence[RowMapping]:
    with engine.connect() as conn:
        return list(reversed(newest_late(conn, schedule=name)))  # oldest first


def reasons(engine: Engine, name: str | None = None) -> list[tuple[datetime, str]]:
    return [(r["instant"], r["reason"]) for r in late(engine, name)]


def missed_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [
        r.fields  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "event", None) == "deadline_missed"
    ]


def _tick(service: SchedulerService, minutes: int) -> None:
    for m in range(1, minutes + 1):
        service.run_once(T0 + m * MIN)


@pytest.fixture
def five(engine: Engine) -> tuple[SchedulerService, list[datetime]]:
    """Schedule ``s``: every minute from T0, deadline 30 s; five jobs made on time."""
    apply_specs(engine, spec(deadline=DEADLINE))
    service = SchedulerService(engine)
    _tick(service, 5)
    instants = [T0 + m * MIN for m in range(1, 6)]
    assert [j["scheduled_for"] for j in jobs_of(engine)] == instants
    return service, instants


def test_the_reason_is_what_the_job_was_at_its_deadline(
    engine: Engine, five: tuple[SchedulerService, list[datetime]], caplog: pytest.LogCaptureFixture
) -> None:
    service, (a, b, c, d, e) = five
    finish(engine, a, "SUCCEEDED", a + 10 * SEC)  # on time
    failed = finish(engine, b, "FAILED", b + 5 * SEC)
    cancelled = finish(engine, c, "CANCELLED", c + 29 * SEC)
    succeeded_late = finish(engine, d, "SUCCEEDED", d + 31 * SEC)  # after its deadline
    start(engine, e)  # still running
    with caplog.at_level(logging.INFO, logger="rota.scheduler"):
        made = service.check_deadlines(e + DEADLINE + SETTLE)
    assert [(r.instant, r.reason.value) for r in made] == [
        (b, "failed"),
        (c, "cancelled"),
        (d, "not_finished"),
        (e, "not_finished"),
    ]
    rows = {r["instant"]: r for r in late(engine)}
    assert rows[b]["job_id"] == failed and rows[c]["job_id"] == cancelled
    assert rows[d]["job_id"] == succeeded_late
    assert rows[d]["finished_at"] == d + 31 * SEC  # late, and when it did finish
    assert rows[e]["finished_at"] is None
    assert rows[b]["deadline"] == b + DEADLINE
    assert rows[b]["detected_at"] == e + DEADLINE + SETTLE
    lines = missed_lines(caplog)
    assert [(x["schedule"], x["instant"], x["reason"]) for x in lines] == [
        ("s", "2026-03-02T00:02:00Z", "failed"),
        ("s", "2026-03-02T00:03:00Z", "cancelled"),
        ("s", "2026-03-02T00:04:00Z", "not_finished"),
        ("s", "2026-03-02T00:05:00Z", "not_finished"),
    ]
    # Judged once: the running job finishing now changes nothing recorded.
    finish(engine, e, "SUCCEEDED", e + 40 * SEC)
    assert service.check_deadlines(e + 2 * MIN) == []
    assert [r for _, r in reasons(engine)] == [
        "failed",
        "cancelled",
        "not_finished",
        "not_finished",
    ]
    assert late(engine)[-1]["finished_at"] == e + 40 * SEC


def test_nothing_is_judged_before_its_deadline_has_passed(
    engine: Engine, five: tuple[SchedulerService, list[datetime]]
) -> None:
    service, instants = five
    last = instants[-1]
    assert [r.instant for r in service.check_deadlines(last + DEADLINE)] == instants[:-1]
    assert [r.instant for r in service.check_deadlines(last + DEADLINE + SETTLE)] == [last]
    row = schedule_row(engine)
    assert row["deadlines_checked_through"] == last
    assert row["deadline_check_at"] == last + MIN + DEADLINE + SETTLE  # the next occurrence's


def test_two_replicas_record_each_late_occurrence_once(
    engine: Engine, five: tuple[SchedulerService, list[datetime]], caplog: pytest.LogCaptureFixture
) -> None:
    _, instants = five
    when = instants[-1] + DEADLINE + SETTLE
    replicas = [SchedulerService(engine) for _ in range(2)]
    with caplog.at_level(logging.INFO, logger="rota.scheduler"):
        made = [r.check_deadlines(when) for r in replicas]
    assert len(made[0]) == 5 and made[1] == []
    assert len(late(engine)) == 5
    assert len(missed_lines(caplog)) == 5


def test_a_conflicting_insert_is_not_counted_or_returned(
    engine: Engine, five: tuple[SchedulerService, list[datetime]]
) -> None:
    """The replica that loses the insert race records, logs and counts nothing."""
    service, instants = five
    when = instants[-1] + DEADLINE + SETTLE
    first = service.check_deadlines(when)
    assert len(first) == 5
    # Rewind the watermark: a replica judging again what another already recorded.
    with engine.begin() as conn:
        conn.execute(
            update(schedules)
            .where(schedules.c.name == "s")
            .values(deadlines_checked_through=T0, deadline_check_at=T0)
        )
    assert SchedulerService(engine).check_deadlines(when) == []
    with engine.connect() as conn:
        counted = conn.execute(
            select(metric_inbox.c.labels, metric_inbox.c.n).where(
                metric_inbox.c.metric == "rota_schedule_deadline_missed_total"
            )
        ).all()
    assert sum(n for _, n in counted) == 5
    assert {labels for labels, _ in counted} == {'["s","not_finished"]'}


def test_a_paused_schedule_misses_its_deadlines_as_paused(engine: Engine) -> None:
    apply_specs(engine, spec(deadline=DEADLINE, misfire=MisfirePolicy.SKIP))
    service = SchedulerService(engine)
    assert pause(engine, "s", now=T0 + 30 * SEC)
    for m in range(1, 4):
        service.run_once(T0 + m * MIN)
    made = service.check_deadlines(T0 + 3 * MIN + DEADLINE + SETTLE)
    assert [(r.instant, r.reason.value) for r in made] == [
        (T0 + m * MIN, "paused") for m in range(1, 4)
    ]
    # Resumed: the skip policy drops what the pause missed (ledger 'paused');
    # those are judged already, the next ones fire and are judged by their jobs.
    resume(engine, "s", now=T0 + 5 * MIN + 30 * SEC)  # 00:04 beyond grace, 00:05 within
    assert [j["scheduled_for"] for j in jobs_of(engine)] == [T0 + 5 * MIN]
    made = service.check_deadlines(T0 + 5 * MIN + DEADLINE + SETTLE)
    assert [(r.instant, r.reason.value) for r in made] == [
        (T0 + 4 * MIN, "paused"),
        (T0 + 5 * MIN, "not_finished"),
    ]


def test_a_set_aside_schedule_misses_its_deadlines_as_set_aside(engine: Engine) -> None:
    apply_specs(engine, spec(deadline=DEADLINE))
    bypass_check(engine, "s", payload_ref="bad \ud800 ref", deadline="30s")  # refused by the db
    service = SchedulerService(engine)
    service.run_once(T0 + MIN)
    assert schedule_row(engine)["set_aside_reason"] is not None
    made = service.check_deadlines(T0 + 2 * MIN + DEADLINE + SETTLE)
    assert [(r.instant, r.reason.value) for r in made] == [
        (T0 + MIN, "set_aside"),
        (T0 + 2 * MIN, "set_aside"),
    ]


def test_skipped_occurrences_are_late_with_their_skip_reason(engine: Engine) -> None:
    apply_specs(engine, spec(deadline=DEADLINE, overlap=OverlapPolicy.FORBID))
    service = SchedulerService(engine)
    _tick(service, 3)  # the first job never finishes: the next two are skipped (overlap)
    assert len(jobs_of(engine)) == 1
    made = service.check_deadlines(T0 + 3 * MIN + DEADLINE + SETTLE)
    assert [(r.instant, r.reason.value) for r in made] == [
        (T0 + MIN, "not_finished"),
        (T0 + 2 * MIN, "skipped:overlap"),
        (T0 + 3 * MIN, "skipped:overlap"),
    ]


def test_after_every_replica_was_down_the_missed_occurrences_are_recorded(
    engine: Engine,
) -> None:
    """Down for ten minutes across five deadlines: misfire skip drops them, each is late."""
    apply_specs(engine, spec(deadline=DEADLINE, misfire=MisfirePolicy.SKIP))
    service = SchedulerService(engine)
    back = T0 + 10 * MIN + 5 * SEC
    service.run_once(back)
    made = service.check_deadlines(back)
    assert [(r.instant, r.reason.value) for r in made] == [
        (T0 + m * MIN, "skipped:misfire") for m in range(1, 10)
    ]  # 00:10:00's deadline has not passed yet
    assert made[0].detected_at == back


def test_a_folded_occurrence_is_judged_by_the_job_that_covers_it(engine: Engine) -> None:
    apply_specs(engine, spec(deadline=5 * MIN))  # misfire: coalesce (the default)
    service = SchedulerService(engine)
    back = T0 + 3 * MIN + 5 * SEC  # 00:01, 00:02, 00:03 fold into one job
    service.run_once(back)
    (job,) = jobs_of(engine)
    assert job["scheduled_for"] == T0 + 3 * MIN
    finish(engine, T0 + 3 * MIN, "SUCCEEDED", T0 + 5 * MIN)
    # 00:01's deadline is 00:06: the covering job succeeded by then.
    assert service.check_deadlines(T0 + 10 * MIN) == []


def test_a_long_outage_is_judged_in_bounded_batches(engine: Engine) -> None:
    apply_specs(engine, spec(deadline=DEADLINE, misfire=MisfirePolicy.SKIP))
    service = SchedulerService(engine)
    back = T0 + 1200 * MIN + 5 * SEC  # 20 h: 1,199 deadlines passed
    service.run_once(back)
    compiled = CompiledSchedules()
    batches = []
    while True:
        with engine.begin() as conn:
            result = record_late_occurrences(conn, compiled, now=back, max_occurrences=500)
        batches.append(len(result.recorded))
        if not result.more_due:
            break
    assert batches == [500, 500, 199]
    assert len(late(engine)) == 1199


def test_a_deadline_added_later_judges_only_what_comes_after(engine: Engine) -> None:
    apply_specs(engine, spec())
    service = SchedulerService(engine)
    _tick(service, 5)  # five jobs, none finished: no deadline yet, nothing is late
    before = schedule_row(engine)["definition_hash"]
    assert before == spec().definition_hash()  # no deadline: the definition is as before
    apply_specs(engine, spec(deadline=DEADLINE), now=T0 + 5 * MIN + 10 * SEC)
    service.run_once(T0 + 6 * MIN)
    made = service.check_deadlines(T0 + 6 * MIN + DEADLINE + SETTLE)
    assert [r.instant for r in made] == [T0 + 6 * MIN]
    # Removing the deadline stops the judging.
    apply_specs(engine, spec(), now=T0 + 6 * MIN + 50 * SEC)
    service.run_once(T0 + 7 * MIN)
    assert service.check_deadlines(T0 + 9 * MIN) == []
    row = schedule_row(engine)
    assert row["deadline_check_at"] is None and row["deadlines_checked_through"] is None


def test_a_schedule_without_a_deadline_is_never_looked_at(engine: Engine) -> None:
    apply_specs(engine, spec())
    service = SchedulerService(engine)
    _tick(service, 3)
    seen: list[str] = []

    def spy(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", spy)
    try:
        assert service.check_deadlines(T0 + 10 * MIN) == []
    finally:
        event.remove(engine, "before_cursor_execute", spy)
    assert sum("late_occurrences" in s for s in seen) == 0  # one probe of the index, no more


def test_a_replica_wakes_for_the_next_deadline_before_the_next_fire(engine: Engine) -> None:
    with engine.begin() as conn:
        now = read_clock(conn)
    anchor = (now + 2 * SEC).replace(microsecond=0)  # fires in 1-2 s, then in an hour
    apply_specs(engine, spec(every=timedelta(hours=1), anchor=anchor, deadline=5 * SEC), now=None)
    service = SchedulerService(engine, max_sleep=600)
    wait_for(lambda: service.run_once().created == 1, timeout=10, what="the occurrence")
    assert service.check_deadlines() == []  # its deadline has not passed yet
    assert schedule_row(engine)["deadline_check_at"] == anchor + 5 * SEC + SETTLE
    assert 0 < service.seconds_until_due() <= 6.0  # not the hour until the next fire


def test_a_definition_that_cannot_be_evaluated_never_stops_the_others(engine: Engine) -> None:
    apply_specs(engine, spec("bad", deadline=DEADLINE), spec("good", deadline=DEADLINE))
    bypass_check(engine, "bad", jitter="999999999d", deadline="30s")  # from_json raises
    service = SchedulerService(engine)
    _tick(service, 2)
    when = T0 + 2 * MIN + DEADLINE + SETTLE
    made = service.check_deadlines(when)
    assert [(r.schedule_name, r.instant) for r in made] == [
        ("good", T0 + MIN),
        ("good", T0 + 2 * MIN),
    ]
    assert schedule_row(engine, "bad")["deadline_check_at"] == when + RETRY_UNREADABLE

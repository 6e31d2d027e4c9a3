"""Bounded work per transaction: misfire coalesce (issue 7, item 8) and backfill (item 9).

A per-second rule after a day's outage is 86,400 occurrences; `misfire:
coalesce` used to walk them all inside the locked tick transaction (a month:
about 50 s holding SQLite's only write lock). Now each transaction counts at
most WALK_LIMIT of them, carries the count on the schedule row, and the last
one makes the single covering job.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine

from rota.scheduler import misfire
from rota.scheduler.misfire import WALK_LIMIT, Coalescing, OccurrenceLike, plan_due
from rota.scheduler.rules import compile_rule
from rota.scheduler.service import SchedulerService
from rota.shared.config.model import MisfirePolicy
from tests.scheduler_helpers import T0, apply_specs, jobs_of, schedule_row, skips_of, spec

DAY = timedelta(days=1)
PER_SECOND = "FREQ=SECONDLY"  # an RRULE: no arithmetic shortcut, every occurrence is walked


def test_coalesce_counts_a_long_range_over_several_bounded_plans() -> None:
    s = spec(rrule=PER_SECOND, every=None, misfire=MisfirePolicy.COALESCE)
    rule = compile_rule(s)
    now = T0 + DAY
    occ: OccurrenceLike | None = rule.next_after(T0)
    carried, last, plans = Coalescing(), T0, []
    while True:
        plan = plan_due(rule, s, occ, now, 500, carried=carried, last_counted=last)
        plans.append(plan)
        if plan.jobs:
            break
        assert plan.coalescing.count == carried.count + WALK_LIMIT  # no more per plan
        assert plan.next is not None and plan.next.instant <= now
        carried, last, occ = plan.coalescing, plan.cursor or last, plan.next
    assert len(plans) == -(-86_400 // WALK_LIMIT)
    (job,) = plans[-1].jobs
    assert (job.instant, job.covers_count) == (now, 86_400)
    assert job.covers_from == T0 + timedelta(seconds=1)
    assert plans[-1].coalescing == Coalescing()


def test_a_days_outage_of_a_per_second_rule_is_one_job_made_in_bounded_transactions(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(misfire, "WALK_LIMIT", 5_000)  # the same shape, a shorter test
    apply_specs(engine, spec(rrule=PER_SECOND, every=None), now=T0)
    result = SchedulerService(engine).run_once(T0 + timedelta(hours=3))
    assert result.batches == -(-10_800 // 5_000)  # one transaction per 5,000 counted
    (job,) = jobs_of(engine)
    assert job["scheduled_for"] == T0 + timedelta(hours=3)
    assert (job["covers_from"], job["covers_count"]) == (T0 + timedelta(seconds=1), 10_800)
    row = schedule_row(engine)
    assert (row["coalesce_from"], row["coalesce_count"]) == (None, 0)
    assert row["coalesced_count"] == 10_799
    (ledger,) = skips_of(engine)
    assert (ledger["reason"], ledger["count"]) == ("coalesced", 10_799)

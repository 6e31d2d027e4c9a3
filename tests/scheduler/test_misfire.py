"""Misfire, overlap and jitter decisions: pure functions, no database."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from rota.core.config import MisfirePolicy, OverlapPolicy, ScheduleSpec
from rota.core.states import SkipReason
from rota.scheduler.jitter import jitter_offset
from rota.scheduler.misfire import PlannedJob, plan_due, repeat_period, scan
from rota.scheduler.overlap import decide_overlap

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MIN = timedelta(minutes=1)


@dataclass(frozen=True)
class Occ:
    instant: datetime
    skipped: bool = False


@dataclass(frozen=True)
class Grid:
    """Every ``step`` from T0; instants listed in ``dst_skipped`` are marked skipped."""

    step: timedelta
    dst_skipped: frozenset[datetime] = frozenset()

    def next_after(self, after: datetime, /) -> Occ | None:
        k = (after - T0) // self.step + 1
        t = T0 + k * self.step
        return Occ(t, t in self.dst_skipped)


def spec(misfire: MisfirePolicy, *, every: timedelta | None = None, **kw: object) -> ScheduleSpec:
    return ScheduleSpec(
        name="s",
        job_type="t",
        cron=None if every else "* * * * *",
        every=every,
        misfire=misfire,
        **kw,  # type: ignore[arg-type]
    )


def first(rule: Grid) -> Occ:
    occ = rule.next_after(T0 - timedelta(microseconds=1))
    assert occ is not None
    return occ


def test_scan_arithmetic_matches_walking() -> None:
    rule = Grid(MIN)
    end = T0 + timedelta(hours=5, seconds=30)
    walked = scan(rule, first(rule), end)
    counted = scan(rule, first(rule), end, step=MIN)
    assert walked.count == counted.count == 5 * 60 + 1
    assert walked.last == counted.last == T0 + timedelta(hours=5)
    assert walked.penultimate == counted.penultimate
    assert walked.next == counted.next == Occ(T0 + timedelta(hours=5, minutes=1))


def test_on_time_occurrence_is_made_under_every_policy() -> None:
    rule = Grid(MIN)
    for policy in MisfirePolicy:
        plan = plan_due(rule, spec(policy), first(rule), T0 + timedelta(seconds=5), 500)
        assert plan.jobs == (PlannedJob(T0),)
        assert plan.skips == ()
        assert plan.cursor == T0
        assert plan.next == Occ(T0 + MIN)


def test_catch_up_runs_the_window_oldest_first_in_batches_and_skips_older() -> None:
    rule = Grid(MIN)
    s = spec(MisfirePolicy.CATCH_UP, catch_up_window=timedelta(hours=1))
    now = T0 + timedelta(hours=3)  # 181 occurrences are due: 0..180 minutes
    plan = plan_due(rule, s, first(rule), now, 500)
    (skip,) = plan.skips
    assert (skip.reason, skip.first, skip.last, skip.count) == (
        "misfire",
        T0,
        T0 + timedelta(hours=2) - MIN,
        120,
    )
    assert [j.instant for j in plan.jobs] == [T0 + timedelta(hours=2) + i * MIN for i in range(61)]
    assert plan.cursor == now and plan.next == Occ(now + MIN)
    # a small budget: the first transaction stops part way, the next goes on
    part = plan_due(rule, s, first(rule), now, 10)
    assert len(part.jobs) == 10
    assert part.next == Occ(T0 + timedelta(hours=2) + 10 * MIN)
    assert part.cursor == T0 + timedelta(hours=2) + 9 * MIN
    rest = plan_due(rule, s, part.next, now, 500)
    assert rest.skips == () and len(rest.jobs) == 51


def test_skip_drops_late_occurrences_and_runs_on_time_ones() -> None:
    rule = Grid(MIN)
    s = spec(MisfirePolicy.SKIP, grace=timedelta(seconds=90))
    now = T0 + timedelta(minutes=10, seconds=30)
    plan = plan_due(rule, s, first(rule), now, 500)
    (skip,) = plan.skips
    assert (skip.reason, skip.first, skip.last, skip.count) == ("misfire", T0, T0 + 8 * MIN, 9)
    assert [j.instant for j in plan.jobs] == [T0 + 9 * MIN, T0 + 10 * MIN]
    paused = plan_due(rule, s, first(rule), now, 500, skip_reason=SkipReason.PAUSED)
    assert paused.skips[0].reason == "paused"


def test_coalesce_makes_one_job_keyed_by_the_newest() -> None:
    rule = Grid(MIN)
    now = T0 + timedelta(minutes=59, seconds=59)
    plan = plan_due(rule, spec(MisfirePolicy.COALESCE), first(rule), now, 500)
    (job,) = plan.jobs
    assert job.instant == T0 + 59 * MIN
    assert job.covers_from == T0 and job.covers_count == 60
    folded = job.folded()
    assert folded is not None
    assert (folded.reason, folded.first, folded.last, folded.count) == (
        "coalesced",
        T0,
        T0 + 58 * MIN,
        59,
    )
    assert plan.coalesced == 59 and plan.skipped == 0


def test_dst_skipped_occurrences_are_recorded_never_made() -> None:
    gap = T0 + 2 * MIN
    rule = Grid(MIN, frozenset({gap}))
    plan = plan_due(rule, spec(MisfirePolicy.CATCH_UP), first(rule), T0 + 4 * MIN, 500)
    assert [j.instant for j in plan.jobs] == [T0, T0 + MIN, T0 + 3 * MIN, T0 + 4 * MIN]
    assert [(s.reason, s.first, s.count) for s in plan.skips] == [("dst", gap, 1)]


def test_one_year_outage_per_minute_is_bounded_and_counted() -> None:
    year = timedelta(days=365)
    now = T0 + year
    total = 365 * 24 * 60 + 1
    for policy in MisfirePolicy:
        started = time.monotonic()
        every = spec(policy, every=MIN)
        plan = plan_due(Grid(MIN), every, first(Grid(MIN)), now, 500)
        assert time.monotonic() - started < 1.0
        made = sum(j.occurrences for j in plan.jobs)
        if policy is MisfirePolicy.CATCH_UP:
            # one day of the window is due; the first 500 are in this plan
            assert plan.skipped == total - (24 * 60 + 1) and len(plan.jobs) == 500
        elif policy is MisfirePolicy.SKIP:
            assert plan.skipped == total - 2 and made == 2  # grace 1m: two on time
        else:
            assert made == total and len(plan.jobs) == 1


def test_jitter_is_deterministic_and_bounded() -> None:
    j = timedelta(seconds=30)
    offsets = [jitter_offset("nightly", T0 + i * MIN, j) for i in range(200)]
    assert offsets == [jitter_offset("nightly", T0 + i * MIN, j) for i in range(200)]
    assert all(timedelta(0) <= o < j for o in offsets)
    assert len(set(offsets)) > 150  # spread, not constant
    assert jitter_offset("other", T0, j) != jitter_offset("nightly", T0, j)
    assert jitter_offset("nightly", T0, timedelta(0)) == timedelta(0)


def test_overlap_decisions() -> None:
    a, b, c = (PlannedJob(T0 + i * MIN) for i in range(3))
    prev = uuid.uuid4()
    allow = decide_overlap(OverlapPolicy.ALLOW, [a, b], [prev])
    assert allow.make == (a, b) and allow.cancel == ()
    forbid_busy = decide_overlap(OverlapPolicy.FORBID, [a, b], [prev])
    assert forbid_busy.make == ()
    assert [(s.reason, s.count) for s in forbid_busy.skips] == [("overlap", 2)]
    forbid_free = decide_overlap(OverlapPolicy.FORBID, [a, b, c], [])
    assert forbid_free.make == (a,) and forbid_free.skips[0].count == 2
    replace = decide_overlap(OverlapPolicy.REPLACE, [a, b, c], [prev])
    assert replace.make == (c,) and replace.cancel == (prev,)
    assert replace.skips[0].first == a.instant and replace.skips[0].last == b.instant


def test_periodic_counting_of_cron_rules_matches_walking_them() -> None:
    from rota.scheduler.rules import compile_rule

    cases = [
        ("* * * * *", timedelta(days=3, seconds=17)),
        ("*/7 * * * *", timedelta(days=5, minutes=3)),
        ("30 9 * * 1-5", timedelta(days=40)),
        ("* * * * * *", timedelta(hours=4, seconds=1)),
        ("*/13 5 * * * *", timedelta(days=2, minutes=6)),
    ]
    for cron, length in cases:
        s = ScheduleSpec(name="x", job_type="t", cron=cron)
        rule = compile_rule(s)
        start = rule.next_after(T0 - timedelta(microseconds=1))
        walked = scan(rule, start, T0 + length)
        counted = scan(rule, start, T0 + length, period=repeat_period(s))
        assert (counted.count, counted.last, counted.penultimate, counted.next) == (
            walked.count,
            walked.last,
            walked.penultimate,
            walked.next,
        ), cron
    # across both DST transitions of Berlin, every UTC minute (the fold's twice-lived
    # wall minutes run at both instants): counting by period is exact
    berlin = ScheduleSpec(name="x", job_type="t", cron="* * * * *", timezone="Europe/Berlin")
    assert repeat_period(berlin) == timedelta(minutes=1)
    rule = compile_rule(berlin)
    for day in (datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 10, 24, tzinfo=UTC)):
        start = rule.next_after(day)
        end = day + timedelta(days=2, seconds=30)
        walked = scan(rule, start, end)
        counted = scan(rule, start, end, period=timedelta(minutes=1))
        assert walked.dst_count == 0
        assert (counted.count, counted.last, counted.next) == (
            walked.count,
            walked.last,
            walked.next,
        )
    hourly = ScheduleSpec(name="x", job_type="t", cron="0 * * * *", timezone="Europe/Berlin")
    assert repeat_period(hourly) is None  # not obviously periodic: walked


def test_a_long_walk_is_cut_into_bounded_steps_with_exact_totals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import rota.scheduler.misfire as misfire

    monkeypatch.setattr(misfire, "WALK_LIMIT", 100)
    rule = Grid(MIN)  # walked: no step, no period given
    s = ScheduleSpec(name="s", job_type="t", cron="0 * * * *", timezone="Europe/Berlin")
    s = ScheduleSpec(**{**s.__dict__, "misfire": MisfirePolicy.SKIP})
    now = T0 + timedelta(minutes=450, seconds=10)
    occ: Occ | None = first(rule)
    skipped, made, steps = 0, 0, 0
    while occ is not None and occ.instant <= now:
        plan = plan_due(rule, s, occ, now, 500)
        skipped += plan.skipped
        made += len(plan.jobs)
        occ = plan.next  # type: ignore[assignment]
        steps += 1
    assert steps == 5 and skipped == 450 and made == 1

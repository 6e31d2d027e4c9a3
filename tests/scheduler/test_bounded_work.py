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

from rota.cli.main import main
from rota.core.config import MisfirePolicy
from rota.scheduler import misfire
from rota.scheduler.misfire import Coalescing, OccurrenceLike, plan_due
from rota.scheduler.rules import compile_rule
from rota.scheduler.service import SchedulerService
from tests.support.scheduler_helpers import T0, apply_specs, jobs_of, schedule_row, skips_of, spec

PER_SECOND = "FREQ=SECONDLY"  # an RRULE: no arithmetic shortcut, every occurrence is walked


def test_coalesce_counts_a_long_range_over_several_bounded_plans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The shape of a day's outage at 20,000 a plan (5 plans), in an eighth of its walk.
    limit = 2_000
    monkeypatch.setattr(misfire, "WALK_LIMIT", limit)
    s = spec(rrule=PER_SECOND, every=None, misfire=MisfirePolicy.COALESCE)
    rule = compile_rule(s)
    seconds = 10_800
    now = T0 + timedelta(seconds=seconds)
    occ: OccurrenceLike | None = rule.next_after(T0)
    carried, last, plans = Coalescing(), T0, []
    while True:
        plan = plan_due(rule, s, occ, now, 500, carried=carried, last_counted=last)
        plans.append(plan)
        if plan.jobs:
            break
        assert plan.coalescing.count == carried.count + limit  # no more per plan
        assert plan.next is not None and plan.next.instant <= now
        carried, last, occ = plan.coalescing, plan.cursor or last, plan.next
    assert len(plans) == -(-seconds // limit)
    (job,) = plans[-1].jobs
    assert (job.instant, job.covers_count) == (now, seconds)
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


# --- backfill -------------------------------------------------------------------


def backfill_cli(
    capsys: pytest.CaptureFixture[str], db_url: str, start: str, end: str, *extra: str
) -> tuple[int, str, str]:
    code = main(["backfill", "s", "--from", start, "--to", end, *extra, "--db", db_url])
    out, err = capsys.readouterr()
    return code, out, err


def test_backfill_of_a_century_of_seconds_is_counted_and_refused(
    db_url: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    apply_specs(engine, spec(every=timedelta(seconds=1)))
    code, _, err = backfill_cli(capsys, db_url, "1926-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
    assert code == 2
    assert "has 3,155,760,000 occurrences, more than the limit of 10,000" in err
    assert "nothing was created" in err
    assert jobs_of(engine) == []


def test_backfill_cap_is_raised_by_max(
    db_url: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    apply_specs(engine, spec(rrule="FREQ=MINUTELY", every=None))  # walked, not by arithmetic
    start, end = "2026-03-02T00:00:00Z", "2026-03-02T00:20:00Z"
    code, _, err = backfill_cli(capsys, db_url, start, end, "--max", "10")
    assert code == 2
    assert "has more than 11 occurrences, more than the limit of 10" in err
    assert jobs_of(engine) == []
    code, out, _ = backfill_cli(capsys, db_url, start, end, "--max", "20")
    assert code == 0
    assert "20 created, 0 already existed" in out
    code, _, err = backfill_cli(capsys, db_url, start, end, "--max", "0")
    assert code == 2 and "--max: must be between 1 and" in err


def test_backfill_refuses_a_to_in_the_future(
    db_url: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    apply_specs(engine, spec())
    code, _, err = backfill_cli(capsys, db_url, "2026-01-01T00:00:00Z", "2999-01-01T00:00:00Z")
    assert code == 2
    assert "--to 2999-01-01T00:00:00Z is later than now" in err
    assert jobs_of(engine) == []


def test_backfill_dry_run_prints_the_count_and_the_first_and_last_keys(
    db_url: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    apply_specs(engine, spec())
    code, out, _ = backfill_cli(
        capsys, db_url, "2026-03-02T00:00:00Z", "2026-03-02T00:10:00Z", "--dry-run"
    )
    assert code == 0
    assert out.splitlines() == [
        "s: 10 occurrences (dry run: nothing created)",
        "  first: s@2026-03-02T00:00:00Z",
        "  last:  s@2026-03-02T00:09:00Z",
    ]
    assert jobs_of(engine) == []

"""Pause, resume, trigger, backfill and ``rota schedules``, on both backends."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from rota.cli.main import main
from rota.core.config import MisfirePolicy
from rota.operations.schedules import UnknownSchedule, backfill, pause, resume, trigger
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


@pytest.mark.parametrize(
    ("policy", "made", "skipped", "coalesced"),
    [
        (MisfirePolicy.SKIP, [10], 9, 0),  # the late ones are skipped as 'paused'
        (MisfirePolicy.CATCH_UP, list(range(1, 11)), 0, 0),
        (MisfirePolicy.COALESCE, [10], 0, 9),
    ],
)
def test_resume_applies_the_misfire_policy_to_what_the_pause_missed(
    engine: Engine, policy: MisfirePolicy, made: list[int], skipped: int, coalesced: int
) -> None:
    apply_specs(engine, spec(misfire=policy))
    service = SchedulerService(engine)
    assert pause(engine, "s", now=T0 + timedelta(seconds=30))
    assert not pause(engine, "s")
    assert service.run_once(T0 + 10 * MIN).created == 0
    assert schedule_row(engine)["paused"]
    result = resume(engine, "s", now=T0 + 10 * MIN + timedelta(seconds=30))
    assert result.was_paused
    assert [j["scheduled_for"] for j in jobs_of(engine)] == [T0 + i * MIN for i in made]
    row = schedule_row(engine)
    assert not row["paused"]
    assert (row["skipped_count"], row["coalesced_count"]) == (skipped, coalesced)
    if skipped:
        (skip,) = skips_of(engine)
        assert (skip["reason"], skip["count"]) == ("paused", skipped)
    # and it goes on as usual
    service.run_once(T0 + 11 * MIN)
    assert jobs_of(engine)[-1]["scheduled_for"] == T0 + 11 * MIN


def test_trigger_makes_a_manual_job_with_its_own_key(engine: Engine) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.CATCH_UP))
    now = T0 + MIN  # the same second as a regular occurrence
    first = trigger(engine, "s", now=now)
    second = trigger(engine, "s", now=now + timedelta(microseconds=5))
    assert first.dedup_key == "s@manual:2026-03-02T00:01:00.000000Z"
    assert first.dedup_key != second.dedup_key
    SchedulerService(engine).run_once(now)
    keys = sorted(j["dedup_key"] for j in jobs_of(engine))
    assert keys == sorted([first.dedup_key, second.dedup_key, "s@2026-03-02T00:01:00Z"])
    row = schedule_row(engine)
    assert row["cursor_at"] == now  # moved by the tick, not by the triggers


def test_backfill_twice_creates_nothing_new_and_the_scheduler_does_not_duplicate(
    engine: Engine,
) -> None:
    apply_specs(engine, spec(misfire=MisfirePolicy.CATCH_UP))
    start, end = T0 + MIN, T0 + 5 * MIN
    one = backfill(engine, "s", start, end, batch=3)
    assert (one.created, one.existing) == (4, 0)
    two = backfill(engine, "s", start, end)
    assert (two.created, two.existing) == (0, 4)
    result = SchedulerService(engine).run_once(T0 + 5 * MIN)
    assert (result.created, result.conflicts) == (1, 4)
    instants = [j["scheduled_for"] for j in jobs_of(engine)]
    assert instants == [T0 + i * MIN for i in range(1, 6)]


def test_unknown_schedule_names_the_known_ones(engine: Engine) -> None:
    apply_specs(engine, spec("alpha"), spec("beta"))
    with pytest.raises(UnknownSchedule, match="alpha, beta"):
        pause(engine, "gamma")


def test_cli_control_commands(
    db_url: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    apply_specs(engine, spec("alpha", misfire=MisfirePolicy.SKIP))
    for command in ("pause", "resume", "trigger"):
        assert main([command, "nope", "--db", db_url]) == 2
        assert "known schedules: alpha" in capsys.readouterr().err
    assert main(["pause", "alpha", "--db", db_url]) == 0
    assert "paused" in capsys.readouterr().out
    assert main(["resume", "alpha", "--db", db_url]) == 0
    assert "resumed" in capsys.readouterr().out
    assert main(["trigger", "alpha", "--db", db_url]) == 0
    assert "alpha@manual:" in capsys.readouterr().out
    args = ["backfill", "alpha", "--from", "2026-03-02T00:00:00Z", "--to", "2026-03-02T00:10:00Z"]
    assert main([*args, "--db", db_url]) == 0
    assert "10 created, 0 already existed" in capsys.readouterr().out
    assert main([*args, "--db", db_url]) == 0
    assert "0 created, 10 already existed" in capsys.readouterr().out
    assert main(["backfill", "alpha", "--from", "yesterday", "--to", "x", "--db", db_url]) == 2


def test_rota_schedules_lists_counts_and_ranges(
    db_url: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    apply_specs(engine, spec("alpha", misfire=MisfirePolicy.SKIP), spec("beta"))
    SchedulerService(engine).run_once(T0 + 10 * MIN + timedelta(seconds=30))
    assert main(["schedules", "--json", "--db", db_url]) == 0
    items = {d["name"]: d for d in json.loads(capsys.readouterr().out)}
    alpha, beta = items["alpha"], items["beta"]
    assert alpha["rule"] == "every 1m" and alpha["timezone"] == "UTC"
    assert alpha["skipped_count"] == 9
    assert alpha["skips"]["misfire"]["latest"]["count"] == 9
    assert alpha["last_fire_at"] == "2026-03-02T00:10:00Z"
    assert beta["coalesced_count"] == 9 and beta["skips"]["coalesced"]["total"] == 9
    assert alpha["next_fire_at"] == "2026-03-02T00:11:00Z"
    assert alpha["next_fire_local"].startswith("2026-03-02T00:11:00")
    assert main(["schedules", "--db", db_url]) == 0
    out = capsys.readouterr().out
    assert "alpha  [active]  every 1m" in out and "misfire: 9 in all" in out

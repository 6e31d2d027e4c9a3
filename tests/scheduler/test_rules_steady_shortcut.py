"""The common case's shortcut gives the general walk's answers, occurrence for occurrence.

``CalendarRule.next_after`` answers most calls from the zone's table of offset
changes (``_before_next_change``) and walks wall times around a change in
general. Here every answer is compared with the general walk alone, around
every offset change of 2026 and at random instants, in zones with one-hour,
half-hour and two-hour changes, under every DST policy.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from rota.core.config import Ambiguous, DstPolicy, Nonexistent
from rota.scheduler.rules import compile_rule
from rota.scheduler.rules.calendar import CalendarRule
from rota.scheduler.rules.offsets import steady_until
from tests.support.rules_helpers import spec

ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Antarctica/Troll", "UTC"]
POLICIES = [None] + [DstPolicy(n, a) for n in Nonexistent for a in Ambiguous]
RULES = [
    {"cron": "*/15 * * * *"},
    {"cron": "30 2 * * *"},
    {"cron": "0 0,1,2,3 * * *"},
    {"cron": "*/20 * 1-3 * * *"},
    {"cron": "0 0 L * *"},
    {"rrule": "FREQ=WEEKLY;BYDAY=SU;BYHOUR=0,2;BYMINUTE=30"},
]


def _changes(zone: ZoneInfo, year: int) -> list[datetime]:
    found, t = [], datetime(year, 1, 1, tzinfo=UTC)
    while t.year == year:
        if t.astimezone(zone).utcoffset() != (t + timedelta(hours=1)).astimezone(zone).utcoffset():
            found.append(t)
        t += timedelta(hours=1)
    return found


@pytest.mark.parametrize("zone", ZONES)
def test_the_shortcut_answers_as_the_general_walk(
    zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(zone)
    z = ZoneInfo(zone)
    starts = [c + timedelta(minutes=rng.randint(-3 * 1440, 3 * 1440)) for c in _changes(z, 2026)]
    year = datetime(2026, 1, 1, tzinfo=UTC)
    starts += [year + timedelta(seconds=rng.randrange(366 * 86400)) for _ in range(5)]
    compared = 0
    for rule in RULES:
        for policy in POLICIES:
            compiled = compile_rule(spec(timezone=zone, dst=policy, **rule))
            assert isinstance(compiled, CalendarRule)
            for start in starts:
                t, answers = start, []
                for _ in range(12):
                    occ = compiled.next_after(t)
                    answers.append(occ)
                    if occ is None:
                        break
                    t = occ.instant
                with monkeypatch.context() as m:
                    m.setattr(CalendarRule, "_before_next_change", lambda *_: None)
                    for occ in answers:
                        general = compiled.next_after(start)
                        assert general == occ, (zone, rule, policy, start)
                        compared += 1
                        if occ is None:
                            break
                        start = occ.instant
    assert compared > 1000


def test_the_table_finds_each_change_to_the_second() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    # The spring gap starts at 02:00 (the last steady wall time is 01:59:59), the
    # autumn fold at 02:00 too (the first repeated wall time).
    spring = steady_until(berlin, datetime(2026, 3, 1, tzinfo=UTC), timedelta(days=400))
    assert spring == datetime(2026, 3, 29, 1, 59, 59)  # noqa: DTZ001 - a wall time
    autumn = steady_until(berlin, datetime(2026, 3, 29, 1, tzinfo=UTC), timedelta(days=400))
    assert autumn == datetime(2026, 10, 25, 1, 59, 59)  # noqa: DTZ001 - a wall time
    # Lord Howe moves by half an hour: its fold repeats 01:30-01:59.
    howe = steady_until(
        ZoneInfo("Australia/Lord_Howe"), datetime(2026, 3, 1, tzinfo=UTC), timedelta(days=400)
    )
    assert howe == datetime(2026, 4, 5, 1, 29, 59)  # noqa: DTZ001 - a wall time
    assert (
        steady_until(ZoneInfo("UTC"), datetime(2026, 3, 1, tzinfo=UTC), timedelta(days=400)) is None
    )

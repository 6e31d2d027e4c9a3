"""Properties over whole DST years, checked by brute force (plain loops, no hypothesis).

* Strictly increasing: fed back its own instant, ``next_after`` always moves
  forward, never repeats an instant and never stalls, whatever the zone, rule
  and policy.
* Real time: a rule that is not fixed-time, under its default policy, fires at
  exactly the instants whose local wall time the cron matches; checked against
  a minute-by-minute scan of real time around every transition.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from rota.core.config import Ambiguous, DstPolicy, Nonexistent
from rota.scheduler.rules import compile_rule, iter_between
from tests.support.rules_helpers import spec

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Santiago",
    "America/Havana",
    "Pacific/Chatham",
]
POLICIES = [None] + [DstPolicy(n, a) for n in Nonexistent for a in Ambiguous]
RULES = [
    {"cron": "*/15 * * * *"},
    {"cron": "30 2 * * *"},
    {"cron": "0 0,1,2,3 * * *"},
    {"cron": "45 1 * * 0"},
    {"cron": "0 */7 * * *"},
    {"cron": "17 * * * *"},
    {"rrule": "FREQ=HOURLY;INTERVAL=5;BYMINUTE=10"},
    {"rrule": "FREQ=WEEKLY;BYDAY=SU;BYHOUR=0,2;BYMINUTE=30"},
]


@pytest.mark.parametrize("zone", ZONES)
def test_successive_calls_strictly_increase(zone: str) -> None:
    z = ZoneInfo(zone)
    transitions = _transitions(z, 2026)
    calls = 0
    for rule in RULES:
        for policy in POLICIES:
            compiled = compile_rule(spec(timezone=zone, dst=policy, **rule))
            for transition in transitions:
                after = transition - timedelta(hours=3)
                for _ in range(20):
                    occ = compiled.next_after(after)
                    calls += 1
                    assert occ is not None
                    assert occ.instant > after, (rule, policy, after)
                    assert occ.local == occ.instant.astimezone(z)
                    after = occ.instant
    assert calls >= 2000


def _transitions(zone: ZoneInfo, year: int) -> list[datetime]:
    found = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    while t.year == year:
        if t.astimezone(zone).utcoffset() != (t + timedelta(hours=1)).astimezone(zone).utcoffset():
            found.append(t)
        t += timedelta(hours=1)
    return found


def _real_time_instants(
    cron: str, zone: ZoneInfo, start: datetime, end: datetime
) -> list[datetime]:
    out = []
    t = start + timedelta(minutes=1)
    while t <= end:
        wall = t.astimezone(zone).replace(tzinfo=None)
        if croniter.match(cron, wall):
            out.append(t)
        t += timedelta(minutes=1)
    return out


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("cron", ["*/15 * * * *", "0 * * * *", "*/7 0-3,23 * * *", "* 2 * * *"])
def test_wildcard_rules_fire_at_the_real_instants_whose_wall_time_matches(
    zone: str, cron: str
) -> None:
    z = ZoneInfo(zone)
    rule = compile_rule(spec(cron=cron, timezone=zone))
    transitions = _transitions(z, 2026)
    assert transitions, zone
    for transition in transitions:
        start, end = transition - timedelta(hours=6), transition + timedelta(hours=8)
        got = [o.instant for o in iter_between(rule, start, end)]
        assert got == _real_time_instants(cron, z, start, end), (zone, transition)

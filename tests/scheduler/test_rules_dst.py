"""DST vectors: gaps and folds, fixed-time and wildcard rules, under each policy.

Zones: Europe/Berlin (02:00-02:59 missing on 2026-03-29, repeated on 2026-10-25),
America/New_York (02:00-02:59 missing on 2026-03-08, 01:00-01:59 repeated on
2026-11-01), Australia/Lord_Howe (a 30-minute shift: 02:00-02:29 missing on
2026-10-04, 01:30-01:59 repeated on 2026-04-05), America/Santiago and
America/Havana (gaps and folds at midnight), Pacific/Apia (2011-12-30 skipped).
"""

from __future__ import annotations

from datetime import date, timedelta
from zoneinfo import ZoneInfo

import pytest

from rota.scheduler.rules import compile_rule, iter_between
from tests.support.rules_helpers import (
    SHIFT_BOTH,
    SHIFT_FIRST,
    SHIFT_LAST,
    SKIP_BOTH,
    SKIP_FIRST,
    at,
    instants,
    spec,
    walk,
)

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"
LORD_HOWE = "Australia/Lord_Howe"
SANTIAGO = "America/Santiago"
HAVANA = "America/Havana"


# --- Berlin: fixed-time rules ------------------------------------------------


def test_fixed_time_gap_shifts_to_the_transition_instant_by_default() -> None:
    assert walk(spec(cron="30 2 * * *", timezone=BERLIN), "2026-03-28T00:00:00Z", 3) == [
        ("2026-03-28T01:30:00Z", "2026-03-28T02:30:00+01:00", None, False),
        (
            "2026-03-29T01:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "shifted from 02:30 by the DST gap",
            False,
        ),
        ("2026-03-30T00:30:00Z", "2026-03-30T02:30:00+02:00", None, False),
    ]


def test_fixed_time_fold_runs_at_the_first_instant_by_default() -> None:
    assert walk(spec(cron="30 2 * * *", timezone=BERLIN), "2026-10-24T00:00:00Z", 3) == [
        ("2026-10-24T00:30:00Z", "2026-10-24T02:30:00+02:00", None, False),
        (
            "2026-10-25T00:30:00Z",
            "2026-10-25T02:30:00+02:00",
            "first of the repeated 02:30",
            False,
        ),
        ("2026-10-26T01:30:00Z", "2026-10-26T02:30:00+01:00", None, False),
    ]


def test_explicit_shift_first_is_the_fixed_time_default() -> None:
    default = spec(cron="30 2 * * *", timezone=BERLIN)
    explicit = spec(cron="30 2 * * *", timezone=BERLIN, dst=SHIFT_FIRST)
    for after in ("2026-03-28T00:00:00Z", "2026-10-24T00:00:00Z"):
        assert walk(explicit, after, 3) == walk(default, after, 3)


def test_fixed_time_fold_last() -> None:
    s = spec(cron="30 2 * * *", timezone=BERLIN, dst=SHIFT_LAST)
    assert walk(s, "2026-10-24T12:00:00Z", 2) == [
        (
            "2026-10-25T01:30:00Z",
            "2026-10-25T02:30:00+01:00",
            "second of the repeated 02:30",
            False,
        ),
        ("2026-10-26T01:30:00Z", "2026-10-26T02:30:00+01:00", None, False),
    ]


def test_fixed_time_fold_both() -> None:
    s = spec(cron="30 2 * * *", timezone=BERLIN, dst=SHIFT_BOTH)
    assert walk(s, "2026-10-24T12:00:00Z", 3) == [
        (
            "2026-10-25T00:30:00Z",
            "2026-10-25T02:30:00+02:00",
            "first of the repeated 02:30",
            False,
        ),
        (
            "2026-10-25T01:30:00Z",
            "2026-10-25T02:30:00+01:00",
            "second of the repeated 02:30",
            False,
        ),
        ("2026-10-26T01:30:00Z", "2026-10-26T02:30:00+01:00", None, False),
    ]


def test_explicit_skip_reports_a_skipped_occurrence_at_the_transition() -> None:
    s = spec(cron="30 2 * * *", timezone=BERLIN, dst=SKIP_FIRST)
    assert walk(s, "2026-03-28T12:00:00Z", 2) == [
        (
            "2026-03-29T01:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "skipped: 02:30 does not exist (DST gap)",
            True,
        ),
        ("2026-03-30T00:30:00Z", "2026-03-30T02:30:00+02:00", None, False),
    ]


def test_rrule_daily_is_fixed_time() -> None:
    s = spec(rrule="FREQ=DAILY;BYHOUR=2;BYMINUTE=30", timezone=BERLIN)
    assert walk(s, "2026-03-28T12:00:00Z", 1) == [
        (
            "2026-03-29T01:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "shifted from 02:30 by the DST gap",
            False,
        ),
    ]
    assert instants(s, "2026-10-24T12:00:00Z", 2) == [
        "2026-10-25T00:30:00Z",
        "2026-10-26T01:30:00Z",
    ]


@pytest.mark.parametrize("zone", [BERLIN, NEW_YORK, LORD_HOWE, SANTIAGO, HAVANA])
@pytest.mark.parametrize(
    "rule",
    [
        {"cron": "0 0 * * *"},
        {"cron": "0 1 * * *"},
        {"cron": "30 1 * * *"},
        {"cron": "0 2 * * *"},
        {"cron": "30 2 * * *"},
        {"cron": "45 23 * * *"},
        {"rrule": "FREQ=DAILY;BYHOUR=2;BYMINUTE=15"},
    ],
)
def test_daily_job_runs_exactly_once_on_every_day_of_a_dst_year(
    zone: str, rule: dict[str, str]
) -> None:
    compiled = compile_rule(spec(timezone=zone, **rule))
    occurrences = list(
        iter_between(compiled, at("2025-12-31T00:00:00Z"), at("2027-01-02T00:00:00Z"))
    )
    assert all(o.local.tzinfo == ZoneInfo(zone) and not o.skipped for o in occurrences)
    days = [o.local.date() for o in occurrences if o.local.year == 2026]
    assert len(days) == len(set(days)) == 365


# --- Berlin: rules that follow real time -------------------------------------


def test_every_15_minutes_has_no_missing_hour_and_repeats_the_repeated_one() -> None:
    rule = compile_rule(spec(cron="*/15 * * * *", timezone=BERLIN))
    spring = list(iter_between(rule, at("2026-03-29T00:00:00Z"), at("2026-03-29T02:00:00Z")))
    assert [o.local.strftime("%H:%M") for o in spring] == [
        "01:15", "01:30", "01:45", "03:00", "03:15", "03:30", "03:45", "04:00",
    ]  # fmt: skip
    assert all(o.note is None and not o.skipped for o in spring)
    fall = list(iter_between(rule, at("2026-10-24T23:45:00Z"), at("2026-10-25T02:00:00Z")))
    assert [(o.local.strftime("%H:%M%z"), o.note) for o in fall] == [
        ("02:00+0200", "first of the repeated 02:00"),
        ("02:15+0200", "first of the repeated 02:15"),
        ("02:30+0200", "first of the repeated 02:30"),
        ("02:45+0200", "first of the repeated 02:45"),
        ("02:00+0100", "second of the repeated 02:00"),
        ("02:15+0100", "second of the repeated 02:15"),
        ("02:30+0100", "second of the repeated 02:30"),
        ("02:45+0100", "second of the repeated 02:45"),
        ("03:00+0100", None),
    ]
    # In real time: one run every 15 minutes, straight through both changes.
    for day in ("2026-03-28T22:00:00Z", "2026-10-24T22:00:00Z"):
        start = at(day)
        got = [o.instant for o in iter_between(rule, start, start + timedelta(hours=6))]
        assert got == [start + timedelta(minutes=15 * k) for k in range(1, 25)]


def test_hourly_rule_follows_real_time() -> None:
    s = spec(cron="0 * * * *", timezone=BERLIN)
    assert instants(s, "2026-03-29T00:00:00Z", 2) == [
        "2026-03-29T01:00:00Z",  # 03:00 CEST; 02:00 does not exist
        "2026-03-29T02:00:00Z",
    ]
    assert walk(s, "2026-10-25T00:00:00Z", 2) == [
        (
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00+01:00",
            "second of the repeated 02:00",
            False,
        ),
        ("2026-10-25T02:00:00Z", "2026-10-25T03:00:00+01:00", None, False),
    ]


def test_wildcard_minute_in_a_fixed_hour_is_not_fixed_time() -> None:
    s = spec(cron="* 2 * * *", timezone=BERLIN)
    # 2026-03-29 has no 02:xx at all: the next run is on the 30th.
    assert instants(s, "2026-03-28T01:59:00Z", 2) == [
        "2026-03-30T00:00:00Z",
        "2026-03-30T00:01:00Z",
    ]


def test_explicit_shift_collapses_the_gap_into_one_run() -> None:
    s = spec(cron="*/15 * * * *", timezone=BERLIN, dst=SHIFT_BOTH)
    assert walk(s, "2026-03-29T00:30:00Z", 3) == [
        ("2026-03-29T00:45:00Z", "2026-03-29T01:45:00+01:00", None, False),
        (
            "2026-03-29T01:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "shifted from 02:00, 02:15, 02:30, 02:45 by the DST gap (run once)",
            False,
        ),
        ("2026-03-29T01:15:00Z", "2026-03-29T03:15:00+02:00", None, False),
    ]


def test_explicit_shift_of_a_gap_without_the_following_wall_time() -> None:
    s = spec(cron="0,30 2 * * *", timezone=BERLIN, dst=SHIFT_BOTH)
    assert walk(s, "2026-03-28T12:00:00Z", 2) == [
        (
            "2026-03-29T01:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "shifted from 02:00, 02:30 by the DST gap (run once)",
            False,
        ),
        ("2026-03-30T00:00:00Z", "2026-03-30T02:00:00+02:00", None, False),
    ]


def test_explicit_skip_on_a_wildcard_rule_reports_the_gap_once() -> None:
    s = spec(cron="*/30 * * * *", timezone=BERLIN, dst=SKIP_BOTH)
    assert walk(s, "2026-03-29T00:30:00Z", 2) == [
        # 03:00 exists and runs; the dropped 02:00 and 02:30 share its instant.
        (
            "2026-03-29T01:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "skipped: 02:00, 02:30 do not exist (DST gap)",
            False,
        ),
        ("2026-03-29T01:30:00Z", "2026-03-29T03:30:00+02:00", None, False),
    ]
    only_gap = spec(cron="15 2 * * *", timezone=BERLIN, dst=SKIP_BOTH)
    assert walk(only_gap, "2026-03-28T12:00:00Z", 1) == [
        (
            "2026-03-29T01:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "skipped: 02:15 does not exist (DST gap)",
            True,
        ),
    ]


def test_rrule_hourly_follows_real_time() -> None:
    s = spec(rrule="FREQ=HOURLY;BYMINUTE=30", timezone=BERLIN)
    assert instants(s, "2026-03-29T00:00:00Z", 2) == [
        "2026-03-29T00:30:00Z",  # 01:30 CET
        "2026-03-29T01:30:00Z",  # 03:30 CEST: no 02:30
    ]
    assert [r[2] for r in walk(s, "2026-10-25T00:00:00Z", 3)] == [
        "first of the repeated 02:30",
        "second of the repeated 02:30",
        None,
    ]


# --- New York ----------------------------------------------------------------


def test_new_york_gap_and_fold_for_fixed_time() -> None:
    assert walk(spec(cron="30 2 * * *", timezone=NEW_YORK), "2026-03-07T12:00:00Z", 2) == [
        (
            "2026-03-08T07:00:00Z",
            "2026-03-08T03:00:00-04:00",
            "shifted from 02:30 by the DST gap",
            False,
        ),
        ("2026-03-09T06:30:00Z", "2026-03-09T02:30:00-04:00", None, False),
    ]
    after = "2026-10-31T12:00:00Z"
    assert instants(spec(cron="30 1 * * *", timezone=NEW_YORK), after, 2) == [
        "2026-11-01T05:30:00Z",
        "2026-11-02T06:30:00Z",
    ]
    assert instants(spec(cron="30 1 * * *", timezone=NEW_YORK, dst=SHIFT_LAST), after, 1) == [
        "2026-11-01T06:30:00Z"
    ]
    assert instants(spec(cron="30 1 * * *", timezone=NEW_YORK, dst=SHIFT_BOTH), after, 2) == [
        "2026-11-01T05:30:00Z",
        "2026-11-01T06:30:00Z",
    ]


def test_new_york_wildcard_rule() -> None:
    s = spec(cron="30 * * * *", timezone=NEW_YORK)
    assert instants(s, "2026-03-08T06:00:00Z", 2) == [
        "2026-03-08T06:30:00Z",  # 01:30 EST
        "2026-03-08T07:30:00Z",  # 03:30 EDT
    ]
    assert instants(s, "2026-11-01T05:00:00Z", 3) == [
        "2026-11-01T05:30:00Z",  # 01:30 EDT
        "2026-11-01T06:30:00Z",  # 01:30 EST
        "2026-11-01T07:30:00Z",  # 02:30 EST
    ]


# --- Lord Howe: a 30-minute shift --------------------------------------------


def test_lord_howe_gap_of_thirty_minutes() -> None:
    assert walk(spec(cron="15 2 * * *", timezone=LORD_HOWE), "2026-10-02T12:00:00Z", 3) == [
        ("2026-10-02T15:45:00Z", "2026-10-03T02:15:00+10:30", None, False),
        (
            "2026-10-03T15:30:00Z",
            "2026-10-04T02:30:00+11:00",
            "shifted from 02:15 by the DST gap",
            False,
        ),
        ("2026-10-04T15:15:00Z", "2026-10-05T02:15:00+11:00", None, False),
    ]
    s = spec(cron="15 2 * * *", timezone=LORD_HOWE, dst=SKIP_FIRST)
    assert walk(s, "2026-10-03T12:00:00Z", 1)[0][2:] == (
        "skipped: 02:15 does not exist (DST gap)",
        True,
    )


def test_lord_howe_fold_of_thirty_minutes() -> None:
    after = "2026-04-04T12:00:00Z"
    assert walk(spec(cron="45 1 * * *", timezone=LORD_HOWE), after, 2) == [
        (
            "2026-04-04T14:45:00Z",
            "2026-04-05T01:45:00+11:00",
            "first of the repeated 01:45",
            False,
        ),
        ("2026-04-05T15:15:00Z", "2026-04-06T01:45:00+10:30", None, False),
    ]
    last = spec(cron="45 1 * * *", timezone=LORD_HOWE, dst=SHIFT_LAST)
    assert instants(last, after, 1) == ["2026-04-04T15:15:00Z"]
    both = spec(cron="45 1 * * *", timezone=LORD_HOWE, dst=SHIFT_BOTH)
    assert instants(both, after, 2) == ["2026-04-04T14:45:00Z", "2026-04-04T15:15:00Z"]


def test_lord_howe_wildcard_rule_follows_real_time() -> None:
    s = spec(cron="*/15 * * * *", timezone=LORD_HOWE)
    assert [(r[1][11:], r[2]) for r in walk(s, "2026-04-04T14:00:00Z", 6)] == [
        ("01:15:00+11:00", None),
        ("01:30:00+11:00", "first of the repeated 01:30"),
        ("01:45:00+11:00", "first of the repeated 01:45"),
        ("01:30:00+10:30", "second of the repeated 01:30"),
        ("01:45:00+10:30", "second of the repeated 01:45"),
        ("02:00:00+10:30", None),
    ]
    assert [r[1][11:] for r in walk(s, "2026-10-03T15:00:00Z", 3)] == [
        "01:45:00+10:30",
        "02:30:00+11:00",  # 02:00 and 02:15 do not exist
        "02:45:00+11:00",
    ]


# --- Gaps and folds at midnight ----------------------------------------------


def test_santiago_gap_at_midnight() -> None:
    daily = spec(cron="0 0 * * *", timezone=SANTIAGO)
    assert walk(daily, "2026-09-04T12:00:00Z", 3) == [
        ("2026-09-05T04:00:00Z", "2026-09-05T00:00:00-04:00", None, False),
        (
            "2026-09-06T04:00:00Z",
            "2026-09-06T01:00:00-03:00",
            "shifted from 00:00 by the DST gap",
            False,
        ),
        ("2026-09-07T03:00:00Z", "2026-09-07T00:00:00-03:00", None, False),
    ]
    skip = spec(cron="0 0 * * *", timezone=SANTIAGO, dst=SKIP_FIRST)
    assert walk(skip, "2026-09-05T12:00:00Z", 2) == [
        (
            "2026-09-06T04:00:00Z",
            "2026-09-06T01:00:00-03:00",
            "skipped: 00:00 does not exist (DST gap)",
            True,
        ),
        ("2026-09-07T03:00:00Z", "2026-09-07T00:00:00-03:00", None, False),
    ]
    bare_rrule = spec(rrule="FREQ=DAILY", timezone=SANTIAGO)  # 00:00, fixed-time
    assert instants(bare_rrule, "2026-09-05T12:00:00Z", 1) == ["2026-09-06T04:00:00Z"]
    hourly = spec(cron="0 * * * *", timezone=SANTIAGO)
    assert instants(hourly, "2026-09-06T03:00:00Z", 2) == [
        "2026-09-06T04:00:00Z",  # 01:00 -03: 00:00 does not exist
        "2026-09-06T05:00:00Z",
    ]


def test_santiago_fold_before_midnight() -> None:
    after = "2026-04-04T12:00:00Z"
    assert walk(spec(cron="30 23 * * *", timezone=SANTIAGO), after, 2) == [
        (
            "2026-04-05T02:30:00Z",
            "2026-04-04T23:30:00-03:00",
            "first of the repeated 23:30",
            False,
        ),
        ("2026-04-06T03:30:00Z", "2026-04-05T23:30:00-04:00", None, False),
    ]
    both = spec(cron="30 23 * * *", timezone=SANTIAGO, dst=SHIFT_BOTH)
    assert instants(both, after, 2) == ["2026-04-05T02:30:00Z", "2026-04-05T03:30:00Z"]


def test_havana_gap_and_fold_at_midnight() -> None:
    daily = spec(cron="0 0 * * *", timezone=HAVANA)
    assert walk(daily, "2026-03-07T12:00:00Z", 1) == [
        (
            "2026-03-08T05:00:00Z",
            "2026-03-08T01:00:00-04:00",
            "shifted from 00:00 by the DST gap",
            False,
        ),
    ]
    assert walk(daily, "2026-10-31T12:00:00Z", 2) == [
        (
            "2026-11-01T04:00:00Z",
            "2026-11-01T00:00:00-04:00",
            "first of the repeated 00:00",
            False,
        ),
        ("2026-11-02T05:00:00Z", "2026-11-02T00:00:00-05:00", None, False),
    ]


def test_exclude_dates_on_the_day_of_a_midnight_gap() -> None:
    s = spec(cron="0 0 * * *", timezone=SANTIAGO, exclude_dates=(date(2026, 9, 6),))
    assert instants(s, "2026-09-04T12:00:00Z", 2) == [
        "2026-09-05T04:00:00Z",
        "2026-09-07T03:00:00Z",
    ]


def test_a_whole_missing_day_shifts_to_the_end_of_the_gap() -> None:
    # Samoa skipped 2011-12-30 entirely when it moved across the date line.
    s = spec(cron="0 12 * * *", timezone="Pacific/Apia")
    assert walk(s, "2011-12-29T00:00:00Z", 3) == [
        ("2011-12-29T22:00:00Z", "2011-12-29T12:00:00-10:00", None, False),
        (
            "2011-12-30T10:00:00Z",
            "2011-12-31T00:00:00+14:00",
            "shifted from 12:00 by the DST gap",
            False,
        ),
        ("2011-12-30T22:00:00Z", "2011-12-31T12:00:00+14:00", None, False),
    ]

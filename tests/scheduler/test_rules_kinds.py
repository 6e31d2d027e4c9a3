"""Cron, RRULE and every: rules without DST effects, the public helpers, and bad rules."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from rota.core.timefmt import utc_key
from rota.scheduler.rules import (
    RuleError,
    compile_rule,
    effective_dst,
    is_fixed_time,
    iter_between,
    iter_range,
)
from rota.scheduler.rules.policy import FIXED_TIME_DEFAULT, REAL_TIME_DEFAULT
from rota.scheduler.rules.rrule_meter import RuleTooCostly
from tests.support.rules_helpers import SKIP_FIRST, at, instants, spec, walk

# --- cron --------------------------------------------------------------------


def test_six_field_cron_has_seconds_first() -> None:
    assert instants(spec(cron="*/20 * * * * *"), "2026-01-01T00:00:00Z", 3) == [
        "2026-01-01T00:00:20Z",
        "2026-01-01T00:00:40Z",
        "2026-01-01T00:01:00Z",
    ]
    assert instants(spec(cron="5 0 0 * * *"), "2026-01-01T00:00:00Z", 2) == [
        "2026-01-01T00:00:05Z",
        "2026-01-02T00:00:05Z",
    ]


def test_six_field_cron_in_a_gap_is_shifted_with_seconds_in_the_note() -> None:
    s = spec(cron="30 0 2 * * *", timezone="Europe/Berlin")
    assert walk(s, "2026-03-28T12:00:00Z", 1) == [
        (
            "2026-03-29T01:00:00Z",
            "2026-03-29T03:00:00+02:00",
            "shifted from 02:00:30 by the DST gap",
            False,
        )
    ]


def test_cron_aliases_and_names() -> None:
    assert instants(spec(cron="@daily"), "2026-01-01T12:00:00Z", 1) == ["2026-01-02T00:00:00Z"]
    assert instants(spec(cron="0 9 * * MON-FRI"), "2026-01-02T12:00:00Z", 2) == [
        "2026-01-05T09:00:00Z",  # Friday the 2nd is past 09:00; next is Monday
        "2026-01-06T09:00:00Z",
    ]


def test_cron_day_of_month_or_day_of_week_as_vixie() -> None:
    # Both restricted: either one matches (the 13th, or any Friday).
    assert instants(spec(cron="0 0 13 * 5"), "2026-02-01T00:00:00Z", 3) == [
        "2026-02-06T00:00:00Z",
        "2026-02-13T00:00:00Z",
        "2026-02-20T00:00:00Z",
    ]


def test_cron_exclude_dates() -> None:
    s = spec(cron="0 6 * * *", exclude_dates=(date(2026, 1, 2), date(2026, 1, 3)))
    assert instants(s, "2026-01-01T12:00:00Z", 2) == [
        "2026-01-04T06:00:00Z",
        "2026-01-05T06:00:00Z",
    ]


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 2 * *", "4 fields; cron needs 5"),
        ("0 0 2 * * * 2026", "7 fields"),
        ("61 * * * *", "out of range"),
        ("0 0 31 2 *", "never matches any date"),
        ("@reboot", "unknown alias"),
        ("H * * * *", "bad cron"),
        ("", "0 fields"),
    ],
)
def test_bad_cron(cron: str, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        compile_rule(spec(cron=cron))


# --- RRULE -------------------------------------------------------------------

MONTH_END = "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=2;BYMINUTE=0;BYSECOND=0"


def test_rrule_last_weekday_of_the_month_with_exclude_dates() -> None:
    s = spec(rrule=MONTH_END, timezone="America/New_York", exclude_dates=(date(2026, 12, 31),))
    assert instants(s, "2026-10-01T00:00:00Z", 4) == [
        "2026-10-30T06:00:00Z",  # Fri, EDT
        "2026-11-30T07:00:00Z",  # Mon, EST
        # December's last weekday is the 31st, excluded: no December run at all
        "2027-01-29T07:00:00Z",
        "2027-02-26T07:00:00Z",
    ]


def test_rrule_default_anchor_makes_interval_stable() -> None:
    # Anchored at 1970-01-01: 2026-01-01 is day 20454, an even day.
    every_other_day = spec(rrule="FREQ=DAILY;INTERVAL=2;BYHOUR=9")
    assert instants(every_other_day, "2026-01-01T00:00:00Z", 3) == [
        "2026-01-01T09:00:00Z",
        "2026-01-03T09:00:00Z",
        "2026-01-05T09:00:00Z",
    ]
    assert instants(every_other_day, "2026-01-02T00:00:00Z", 1) == ["2026-01-03T09:00:00Z"]
    # Weekly rules are anchored on Monday 1970-01-05; 2026-01-05 is 2922 weeks later.
    assert instants(spec(rrule="FREQ=WEEKLY;INTERVAL=2"), "2026-01-01T00:00:00Z", 3) == [
        "2026-01-05T00:00:00Z",
        "2026-01-19T00:00:00Z",
        "2026-02-02T00:00:00Z",
    ]
    assert instants(spec(rrule="FREQ=MONTHLY"), "2026-01-15T00:00:00Z", 2) == [
        "2026-02-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
    ]
    assert instants(spec(rrule="FREQ=MINUTELY;INTERVAL=7"), "2026-01-01T00:00:00Z", 2) == [
        "2026-01-01T00:07:00Z",
        "2026-01-01T00:14:00Z",
    ]


def test_rrule_with_dtstart_as_local_wall_time() -> None:
    s = spec(
        rrule="DTSTART:20260106T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2",
        timezone="Europe/Berlin",
    )
    assert instants(s, "2026-01-01T00:00:00Z", 3) == [
        "2026-01-06T08:00:00Z",
        "2026-01-20T08:00:00Z",
        "2026-02-03T08:00:00Z",
    ]


def test_rrule_count_and_until_exhaust_the_rule() -> None:
    counted = spec(rrule="DTSTART:20260101T120000\nRRULE:FREQ=DAILY;COUNT=3")
    assert instants(counted, "2025-12-01T00:00:00Z", 5) == [
        "2026-01-01T12:00:00Z",
        "2026-01-02T12:00:00Z",
        "2026-01-03T12:00:00Z",
    ]
    until = spec(rrule="FREQ=DAILY;BYHOUR=6;UNTIL=20260103T060000")
    assert instants(until, "2026-01-01T00:00:00Z", 5) == [
        "2026-01-01T06:00:00Z",
        "2026-01-02T06:00:00Z",
        "2026-01-03T06:00:00Z",
    ]
    assert compile_rule(until).next_after(at("2026-01-03T06:00:00Z")) is None


@pytest.mark.parametrize(
    ("rrule", "message"),
    [
        ("FREQ=FOO", "FREQ must be one of"),
        ("BYHOUR=2", "FREQ must be one of"),
        ("FREQ=DAILY;BYHOUR=25", "BYHOUR=25 is out of range: 0 to 23"),
        ("FREQ=DAILY;UNTIL=20260101T000000Z", "drop the Z"),
        ("DTSTART;TZID=Europe/Berlin:20260101T000000\nRRULE:FREQ=DAILY", "no TZID"),
        ("DTSTART:20260101T000000Z\nRRULE:FREQ=DAILY", "no TZID, no Z"),
        ("FREQ=DAILY\nEXDATE:20260101T000000", "exclude_dates"),
        ("FREQ=DAILY;COUNT=3", "COUNT counts from DTSTART"),
        ("RRULE:FREQ=DAILY\nRRULE:FREQ=WEEKLY", "exactly one RRULE"),
        ("FREQ=DAILY;FOO=1", "unknown part FOO"),
        ("FREQ=DAILY;BYHOUR", "not KEY=VALUE"),
        ("", "no RRULE"),
        # RFC 5545's ranges and rules (hostile-input campaign)
        ("FREQ=MINUTELY;BYSECOND=60", "BYSECOND=60 is out of range: 0 to 59 .a leap second"),
        ("FREQ=YEARLY;BYWEEKNO=54", "BYWEEKNO=54 is out of range"),
        ("FREQ=YEARLY;BYYEARDAY=367", "BYYEARDAY=367 is out of range"),
        ("FREQ=YEARLY;BYYEARDAY=0", "BYYEARDAY=0 is out of range"),
        ("FREQ=MONTHLY;BYMONTHDAY=-32", "BYMONTHDAY=-32 is out of range"),
        ("FREQ=YEARLY;BYMONTH=13", "BYMONTH=13 is out of range"),
        ("FREQ=DAILY;BYHOUR=-1", "BYHOUR=-1 is out of range"),
        ("FREQ=DAILY;BYHOUR=٣", "not a whole number"),
        ("DTSTART:20260101T000000\nRRULE:FREQ=DAILY;COUNT=-5", "COUNT must be between 1 and"),
        ("DTSTART:19700101T000000\nRRULE:FREQ=SECONDLY;COUNT=999999999", "use UNTIL"),
        ("FREQ=SECONDLY;INTERVAL=99999999999", "INTERVAL must be between 1 and"),
        ("FREQ=YEARLY;INTERVAL=101", "INTERVAL must be between 1 and 100 for FREQ=YEARLY"),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL must be between 1"),
        ("FREQ=DAILY;FREQ=WEEKLY", "FREQ is given twice"),
        ("FREQ=MONTHLY;BYWEEKNO=1", "BYWEEKNO cannot be used with FREQ=MONTHLY"),
        ("FREQ=DAILY;BYYEARDAY=1", "BYYEARDAY cannot be used with FREQ=DAILY"),
        ("FREQ=WEEKLY;BYMONTHDAY=1", "BYMONTHDAY cannot be used with FREQ=WEEKLY"),
        ("FREQ=WEEKLY;BYDAY=2MO", "a numbered weekday needs FREQ=MONTHLY"),
        ("FREQ=MONTHLY;BYDAY=6MO", "BYDAY=6MO is out of range: 1 to 5"),
        ("FREQ=DAILY;BYDAY=XX", "BYDAY=XX is not like MO"),
        ("FREQ=DAILY;BYSETPOS=1", "BYSETPOS needs another BYxxx part"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20270101", "COUNT or UNTIL, not both"),
        ("FREQ=DAILY;UNTIL=tomorrow", "UNTIL must be like"),
        ("FREQ=DAILY;WKST=XX", "WKST must be one of"),
        ("FREQ=YEARLY;BYEASTER=0", "unknown part BYEASTER"),
        ("FREQ=DAILY;BYHOUR=", "BYHOUR has no value"),
        ("FREQ=DAILY;BYHOUR=" + "9" * 5000, r"BYHOUR=9{20}\.\.\. is out of range"),
    ],
)
def test_bad_rrule(rrule: str, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        compile_rule(spec(rrule=rrule))


def test_a_rule_that_never_matches_is_exhausted_after_a_bounded_search() -> None:
    # dateutil alone scans every year up to 9999 (4 s) or every day (minutes).
    never = compile_rule(spec(rrule="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"))
    assert never.next_after(at("2026-01-01T00:00:00Z")) is None


@pytest.mark.parametrize(
    "rrule",
    [
        "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=MINUTELY;BYMONTH=4;BYMONTHDAY=31",
        "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=3;BYMINUTE=3;BYSECOND=3",
        "FREQ=SECONDLY;BYYEARDAY=366;BYHOUR=23;BYMINUTE=59;BYSECOND=59",
    ],
)
def test_a_rule_whose_next_occurrence_costs_too_much_is_refused(rrule: str) -> None:
    """Sub-daily rules that match rarely: dateutil would walk seconds for years."""
    rule = compile_rule(spec(rrule=rrule))
    with pytest.raises(RuleTooCostly, match="takes more than 200,000 steps"):
        rule.next_after(at("2026-01-01T00:00:00Z"))


def test_metering_leaves_ordinary_rules_alone() -> None:
    seconds = spec(rrule="FREQ=SECONDLY;BYHOUR=3")
    assert instants(seconds, "2026-01-01T03:30:00Z", 2) == [
        "2026-01-01T03:30:01Z",
        "2026-01-01T03:30:02Z",
    ]
    # From 04:00 dateutil would step through 23 hours of seconds: too costly.
    with pytest.raises(RuleTooCostly):
        compile_rule(seconds).next_after(at("2026-01-01T04:00:00Z"))
    # The same instants as a MINUTELY rule cost a step per minute.
    minutes = spec(rrule="FREQ=MINUTELY;BYHOUR=3;BYSECOND=0,1")
    assert instants(minutes, "2026-01-01T04:00:00Z", 2) == [
        "2026-01-02T03:00:00Z",
        "2026-01-02T03:00:01Z",
    ]
    leap = spec(rrule="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=3")
    assert instants(leap, "2026-01-01T00:00:00Z", 2) == [
        "2028-02-29T03:00:00Z",
        "2032-02-29T03:00:00Z",
    ]


# --- every -------------------------------------------------------------------


def test_every_with_anchor() -> None:
    s = spec(every=timedelta(seconds=90), anchor=at("2026-01-01T00:00:00Z"))
    assert instants(s, "2026-01-01T00:00:00Z", 2) == [
        "2026-01-01T00:01:30Z",
        "2026-01-01T00:03:00Z",
    ]
    assert instants(s, "2025-12-31T23:59:00Z", 1) == ["2026-01-01T00:00:00Z"]
    assert instants(s, "2025-12-31T23:58:29Z", 1) == ["2025-12-31T23:58:30Z"]


def test_every_defaults_to_the_unix_epoch_and_ignores_dst() -> None:
    # 2026-01-01T00:00Z is a whole number of 7-minute steps after the epoch.
    assert instants(spec(every=timedelta(minutes=7)), "2026-01-01T00:00:00Z", 1) == [
        "2026-01-01T00:07:00Z"
    ]
    hourly = spec(every=timedelta(hours=1), timezone="Europe/Berlin")
    assert walk(hourly, "2026-03-29T00:30:00Z", 2) == [
        ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00", None, False),
        ("2026-03-29T02:00:00Z", "2026-03-29T04:00:00+02:00", None, False),
    ]


@pytest.mark.parametrize("every", [timedelta(milliseconds=500), timedelta(seconds=1.5)])
def test_every_needs_whole_seconds(every: timedelta) -> None:
    with pytest.raises(RuleError, match="whole number of seconds"):
        compile_rule(spec(every=every))


def test_compile_refuses_mismatched_fields() -> None:
    with pytest.raises(RuleError, match="exactly one of cron, rrule or every"):
        compile_rule(spec(cron="0 * * * *", rrule="FREQ=DAILY"))
    with pytest.raises(RuleError, match="got none"):
        compile_rule(spec())
    with pytest.raises(RuleError) as anchor:
        compile_rule(spec(cron="0 * * * *", anchor=at("2026-01-01T00:00:00Z")))
    assert anchor.value.field == "anchor"
    with pytest.raises(RuleError) as dst:
        compile_rule(spec(every=timedelta(minutes=1), dst=SKIP_FIRST))
    assert dst.value.field == "dst"
    with pytest.raises(RuleError, match="did you mean 'Europe/Berlin'") as zone:
        compile_rule(spec(cron="0 * * * *", timezone="Europe/Berln"))
    assert zone.value.field == "timezone"


# --- helpers -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "fixed"),
    [
        ({"cron": "30 2 * * *"}, True),
        ({"cron": "0 2-4 * * *"}, True),
        ({"cron": "0,30 1,2 * * *"}, True),
        ({"cron": "*/15 * * * *"}, False),
        ({"cron": "0 * * * *"}, False),
        ({"cron": "* 2 * * *"}, False),
        ({"cron": "0 */2 * * *"}, False),
        ({"cron": "0 30 2 * * *"}, True),
        ({"cron": "0 * 2 * * *"}, False),
        ({"cron": "@daily"}, True),
        ({"cron": "@hourly"}, False),
        ({"rrule": "FREQ=YEARLY"}, True),
        ({"rrule": "FREQ=MONTHLY;BYMONTHDAY=1"}, True),
        ({"rrule": "FREQ=WEEKLY"}, True),
        ({"rrule": "FREQ=DAILY;BYHOUR=1,2,3"}, True),
        ({"rrule": "FREQ=HOURLY"}, False),
        ({"rrule": "FREQ=MINUTELY;INTERVAL=15"}, False),
        ({"every": timedelta(days=1)}, False),
    ],
)
def test_is_fixed_time(rule: dict[str, object], fixed: bool) -> None:
    assert is_fixed_time(spec(**rule)) is fixed


def test_effective_dst() -> None:
    assert effective_dst(spec(cron="30 2 * * *")) == FIXED_TIME_DEFAULT
    assert effective_dst(spec(cron="*/5 * * * *")) == REAL_TIME_DEFAULT
    assert effective_dst(spec(cron="*/5 * * * *", dst=SKIP_FIRST)) == SKIP_FIRST
    assert effective_dst(spec(every=timedelta(minutes=5))) is None


def test_iter_between_is_start_exclusive_end_inclusive() -> None:
    rule = compile_rule(spec(cron="0 * * * *"))
    got = iter_between(rule, at("2026-01-01T01:00:00Z"), at("2026-01-01T03:00:00Z"))
    assert [utc_key(o.instant) for o in got] == ["2026-01-01T02:00:00Z", "2026-01-01T03:00:00Z"]


def test_iter_range_is_start_inclusive_end_exclusive() -> None:
    rule = compile_rule(spec(cron="0 * * * *"))
    got = iter_range(rule, at("2026-01-01T01:00:00Z"), at("2026-01-01T03:00:00Z"))
    assert [utc_key(o.instant) for o in got] == ["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"]
    empty = iter_range(rule, at("2026-01-01T01:00:01Z"), at("2026-01-01T02:00:00Z"))
    assert list(empty) == []


def test_iterators_include_skipped_occurrences() -> None:
    rule = compile_rule(spec(cron="30 2 * * *", timezone="Europe/Berlin", dst=SKIP_FIRST))
    got = list(iter_range(rule, at("2026-03-28T00:00:00Z"), at("2026-03-31T00:00:00Z")))
    assert [(utc_key(o.instant), o.skipped) for o in got] == [
        ("2026-03-28T01:30:00Z", False),
        ("2026-03-29T01:00:00Z", True),
        ("2026-03-30T00:30:00Z", False),
    ]


def test_naive_after_is_refused() -> None:
    rule = compile_rule(spec(cron="0 * * * *"))
    with pytest.raises(ValueError, match="naive"):
        rule.next_after(at("2026-01-01T00:00:00Z").replace(tzinfo=None))

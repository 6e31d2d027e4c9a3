"""RRULEs as RFC 5545 (and dateutil, where it follows the RFC) reads them, in UTC.

* A weekly rule's periods are weeks starting on WKST; only the first one, from
  DTSTART to the end of its week, is partial, and BYSETPOS picks from it alone.
* A BYDAY list mixing plain and numbered weekdays is their union (RFC 5545:
  ``BYDAY=MO,TU,WE,TH,FR,1SA`` is every weekday and the first Saturday), and
  BYSETPOS and COUNT see that union.
* Every hostile part is a ``RuleError`` (``file:line`` and exit 2 at ``rota
  check``), never a traceback.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from dateutil.rrule import rrulestr
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rota.cli.main import main
from rota.scheduler.rules import RuleError, compile_rule, verify_rule
from tests.support.rules_helpers import instants, spec


def _dateutil(text: str, after: str, n: int) -> list[str]:
    rule = rrulestr(text, dtstart=datetime(1970, 1, 5))  # noqa: DTZ001 - rota's weekly anchor
    start = datetime.fromisoformat(after.removesuffix("Z"))
    return [f"{w:%Y-%m-%dT%H:%M:%S}Z" for _, w in zip(range(n), rule.xafter(start), strict=False)]


@pytest.mark.parametrize(
    ("rrule", "after", "expected"),
    [
        # DTSTART is a Wednesday; weeks start on Monday. The first week holds
        # We, Th, Fr (Thursday is its second); every later week Mo-Fr (Tuesday).
        (
            "DTSTART:20260107T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=2",
            "2026-03-04T10:00:00Z",
            ["2026-03-10T09:00:00Z", "2026-03-17T09:00:00Z", "2026-03-24T09:00:00Z"],
        ),
        (
            "DTSTART:20260107T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=2",
            "2026-01-01T00:00:00Z",
            ["2026-01-08T09:00:00Z", "2026-01-13T09:00:00Z", "2026-01-20T09:00:00Z"],
        ),
        (
            "DTSTART:20260107T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2;WKST=SU;BYDAY=SU,MO,SA;BYSETPOS=1",
            "2026-03-04T10:00:00Z",
            ["2026-03-15T09:00:00Z", "2026-03-29T09:00:00Z", "2026-04-12T09:00:00Z"],
        ),
        (
            "DTSTART:20260107T090000\nRRULE:FREQ=WEEKLY;INTERVAL=2;WKST=SU;BYDAY=SU,MO,SA;BYSETPOS=-1",
            "2026-03-04T10:00:00Z",
            ["2026-03-07T09:00:00Z", "2026-03-21T09:00:00Z", "2026-04-04T09:00:00Z"],
        ),
        # Without DTSTART the anchor is Monday 1970-01-05; WKST=SU makes its first week partial.
        (
            "FREQ=WEEKLY;WKST=SU;BYDAY=SU,MO,TU;BYSETPOS=1;BYHOUR=9",
            "2026-03-02T08:00:00Z",
            ["2026-03-08T09:00:00Z", "2026-03-15T09:00:00Z", "2026-03-22T09:00:00Z"],
        ),
        # No BYDAY: the weekday is DTSTART's.
        (
            "DTSTART:20260107T090000\nRRULE:FREQ=WEEKLY;INTERVAL=3;WKST=FR",
            "2026-03-04T10:00:00Z",
            ["2026-03-11T09:00:00Z", "2026-04-01T09:00:00Z", "2026-04-22T09:00:00Z"],
        ),
    ],
)
def test_weekly_bysetpos_picks_from_whole_weeks_after_the_first(
    rrule: str, after: str, expected: list[str]
) -> None:
    assert _dateutil(rrule, after, len(expected)) == expected  # the reference agrees
    assert instants(spec(rrule=rrule), after, len(expected)) == expected


@pytest.mark.parametrize(
    ("rrule", "after", "expected"),
    [
        # Every weekday, plus the first Saturday (Feb 7).
        (
            "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR,1SA;BYHOUR=9;BYMINUTE=0;BYSECOND=0",
            "2026-01-30T12:00:00Z",
            [
                "2026-02-02T09:00:00Z",
                "2026-02-03T09:00:00Z",
                "2026-02-04T09:00:00Z",
                "2026-02-05T09:00:00Z",
                "2026-02-06T09:00:00Z",
                "2026-02-07T09:00:00Z",
                "2026-02-09T09:00:00Z",
            ],
        ),
        # January's Fridays, plus its last Monday.
        (
            "FREQ=YEARLY;BYMONTH=1;BYDAY=FR,-1MO;BYHOUR=9",
            "2026-01-01T12:00:00Z",
            [
                "2026-01-02T09:00:00Z",
                "2026-01-09T09:00:00Z",
                "2026-01-16T09:00:00Z",
                "2026-01-23T09:00:00Z",
                "2026-01-26T09:00:00Z",
                "2026-01-30T09:00:00Z",
                "2027-01-01T09:00:00Z",
            ],
        ),
        # Every Sunday, plus the year's 20th Monday (May 18).
        (
            "FREQ=YEARLY;BYDAY=SU,20MO;BYHOUR=9",
            "2026-05-09T12:00:00Z",
            ["2026-05-10T09:00:00Z", "2026-05-17T09:00:00Z", "2026-05-18T09:00:00Z"],
        ),
        # BYSETPOS picks from the union: the later of the last Monday and the last Sunday.
        (
            "FREQ=MONTHLY;BYDAY=MO,-1SU;BYSETPOS=-1;BYHOUR=9",
            "2026-04-01T00:00:00Z",
            ["2026-04-27T09:00:00Z", "2026-05-31T09:00:00Z", "2026-06-29T09:00:00Z"],
        ),
        # COUNT counts the union: Sunday the 1st, the first Saturday, Sunday the 8th.
        (
            "DTSTART:20260201T090000\nRRULE:FREQ=MONTHLY;BYDAY=1SA,SU;COUNT=3",
            "2026-01-01T00:00:00Z",
            ["2026-02-01T09:00:00Z", "2026-02-07T09:00:00Z", "2026-02-08T09:00:00Z"],
        ),
    ],
)
def test_a_byday_list_of_plain_and_numbered_weekdays_is_their_union(
    rrule: str, after: str, expected: list[str]
) -> None:
    assert instants(spec(rrule=rrule), after, len(expected) + 1)[: len(expected)] == expected
    if "COUNT" in rrule:
        assert len(instants(spec(rrule=rrule), after, 10)) == len(expected)


@pytest.mark.parametrize(
    ("rrule", "message"),
    [
        ("FREQ=YEARLY;BYMONTH=12;BYDAY=8MO", "BYDAY=8MO is out of range: with BYMONTH"),
        ("FREQ=YEARLY;BYMONTH=1,6;BYDAY=-6FR", "BYDAY=-6FR is out of range: with BYMONTH"),
        ("FREQ=YEARLY;BYMONTH=12;BYDAY=53MO,SU", "BYDAY=53MO is out of range: with BYMONTH"),
    ],
)
def test_a_numbered_weekday_past_its_month_is_refused(rrule: str, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        compile_rule(spec(rrule=rrule))


def test_check_refuses_a_hostile_byday_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(
        "job_types:\n"
        "  work: {handler: app.jobs:work}\n"
        "schedules:\n"
        "  december:\n"
        "    job_type: work\n"
        '    rrule: "FREQ=YEARLY;BYMONTH=12;BYDAY=8MO"\n'
    )
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:6: schedule 'december', rrule:" in err
    assert "Traceback" not in err


_NUMBERS = st.sampled_from([0, 1, 2, 5, 6, 8, 20, 52, 53, 54, 99, 366, 367, 10**6])
_WEEKDAY = st.sampled_from(["MO", "TU", "WE", "TH", "FR", "SA", "SU"])
_BYDAY_ITEM = st.one_of(
    _WEEKDAY,
    st.builds(lambda s, n, d: f"{s}{n}{d}", st.sampled_from(["", "+", "-"]), _NUMBERS, _WEEKDAY),
)


def _int_list(numbers: st.SearchStrategy[int]) -> st.SearchStrategy[str]:
    item = st.builds(lambda s, n: f"{s}{n}", st.sampled_from(["", "-"]), numbers)
    return st.lists(item, min_size=1, max_size=3).map(",".join)


_PARTS = {
    "BYDAY": st.lists(_BYDAY_ITEM, min_size=1, max_size=4).map(",".join),
    "BYMONTH": _int_list(st.integers(0, 13)),
    "BYMONTHDAY": _int_list(st.sampled_from([0, 1, 15, 28, 29, 30, 31, 32])),
    "BYYEARDAY": _int_list(st.sampled_from([0, 1, 59, 60, 365, 366, 367])),
    "BYWEEKNO": _int_list(st.sampled_from([0, 1, 52, 53, 54])),
    "BYSETPOS": _int_list(_NUMBERS),
    "BYHOUR": _int_list(st.sampled_from([0, 12, 23, 24])),
    "BYMINUTE": _int_list(st.sampled_from([0, 30, 59, 60])),
    "WKST": _WEEKDAY,
    "INTERVAL": st.sampled_from(["1", "2", "7", "53", "0"]),
}


@st.composite
def _hostile_rrule(draw: st.DrawFn) -> str:
    freq = draw(st.sampled_from(["YEARLY", "YEARLY", "MONTHLY", "MONTHLY", "WEEKLY", "DAILY"]))
    names = draw(st.lists(st.sampled_from(sorted(_PARTS)), min_size=1, max_size=4, unique=True))
    body = ";".join([f"FREQ={freq}", *(f"{n}={draw(_PARTS[n])}" for n in names)])
    start = draw(st.sampled_from(["", "DTSTART:20260107T090000\n", "DTSTART:20241231T235959\n"]))
    return start + body


@settings(max_examples=150, deadline=None)
@given(_hostile_rrule())
@example("FREQ=YEARLY;BYMONTH=12;BYDAY=8MO")  # dateutil's IndexError, once a traceback
@example("DTSTART:20260107T090000\nFREQ=YEARLY;WKST=SU;BYDAY=SA,-5SU,20SU;BYMONTH=6,12,4")
def test_every_hostile_rrule_part_is_a_rule_error(rrule: str) -> None:
    with contextlib.suppress(RuleError):  # refused with a message: what the test wants
        verify_rule(spec(rrule=rrule), datetime(2026, 1, 1, tzinfo=UTC))

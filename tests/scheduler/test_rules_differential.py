"""rota against the references, in UTC: cron against cronsim, RRULE against dateutil.

Hypothesis writes the rules: cron expressions with lists, ranges (equal ones
too), steps (``*/n``, ``a-b/n``, ``a/n``), month and weekday names, both day
fields, ``L``, ``LW``, ``nL`` and ``n#k``, 5 or 6 fields; RRULEs of every
frequency with BY parts, WKST, INTERVAL, BYSETPOS, COUNT or UNTIL, always with
an explicit DTSTART. Each rule's next 20 instants after a drawn instant must be
the reference's. A BYDAY list mixing plain and numbered weekdays is compared
with the union of the two rules it splits into (RFC 5545's reading; dateutil
alone intersects them), so those lists come without BYSETPOS and COUNT, which
act on the union. The references are in ``tests.support.rules_helpers``.
Every failure the test has found is an ``@example``.

Bounded time: ``DIFFERENTIAL`` runs 200 examples per test with no deadline,
derandomized under CI (CI=true) so a run there is repeatable;
``ROTA_DIFFERENTIAL_EXAMPLES=5000`` runs a longer search by hand.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, example, given, reject, settings
from hypothesis import strategies as st

from rota.core.timefmt import utc_key
from rota.scheduler.rules import RuleError, compile_rule
from rota.scheduler.rules.calendar import SEARCH_HORIZON
from rota.scheduler.rules.rrule_meter import RuleTooCostly
from tests.support.rules_helpers import (
    ReferenceTooCostly,
    cronsim_instants,
    dateutil_instants,
    instants,
    mixed_byday,
    spec,
)

COUNT = 20
DIFFERENTIAL = settings(
    max_examples=int(os.environ.get("ROTA_DIFFERENTIAL_EXAMPLES", "200")),
    deadline=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.too_slow],
)
_AFTER = st.datetimes(
    min_value=datetime(2020, 1, 1),  # noqa: DTZ001 - Hypothesis draws naive bounds
    max_value=datetime(2030, 12, 31),  # noqa: DTZ001
).map(lambda d: d.replace(microsecond=0, tzinfo=UTC))

# --- cron --------------------------------------------------------------------

_CRON_RANGES = {"second": (0, 59), "minute": (0, 59), "hour": (0, 23), "day": (1, 31)}
_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_WEEKDAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


@st.composite
def _value(draw: st.DrawFn, lo: int, hi: int, names: list[str] | None = None) -> tuple[int, str]:
    """A value of a field and how it is written (a number, or a name in any case)."""
    number = draw(st.integers(lo, hi))
    if names and number - lo < len(names) and draw(st.booleans()):
        name = names[number - lo]
        return number, draw(st.sampled_from([name, name.lower(), name.title()]))
    return number, str(number)


@st.composite
def _item(draw: st.DrawFn, lo: int, hi: int, names: list[str] | None = None) -> str:
    """``*``, ``a``, ``a-b`` (a <= b, equal ones too), each maybe with ``/n``."""
    kind = draw(st.sampled_from(["*", "value", "range", "equal"]))
    if kind == "*":
        text = "*"
    elif kind == "value":
        text = draw(_value(lo, hi, names))[1]
    else:
        a, a_text = draw(_value(lo, hi, names))
        if kind == "equal":
            text = f"{a_text}-{a_text}"
        else:
            _, b_text = draw(_value(a, hi, names[a - lo :] if names else None))
            text = f"{a_text}-{b_text}"
    if draw(st.integers(0, 2)) == 0:
        text += f"/{draw(st.integers(1, hi - lo + 2))}"
    return text


def _field(lo: int, hi: int, names: list[str] | None = None) -> st.SearchStrategy[str]:
    return st.lists(_item(lo, hi, names), min_size=1, max_size=3).map(",".join)


_DAY_FIELD = st.one_of(
    _field(1, 31),
    st.sampled_from(["L", "LW", "1,L", "15,LW", "L,*/10"]),
)
_WEEKDAY_SPECIAL = st.builds(
    lambda d, kind, n: f"{d}L" if kind == "L" else f"{d}#{n}",
    st.integers(0, 7),
    st.sampled_from(["L", "#"]),
    st.integers(1, 5),
)
_WEEKDAY_FIELD = st.one_of(
    _field(0, 7, _WEEKDAYS),
    st.lists(st.one_of(_WEEKDAY_SPECIAL, _item(0, 7, _WEEKDAYS)), min_size=1, max_size=3).map(
        ",".join
    ),
)


@st.composite
def _cron(draw: st.DrawFn) -> str:
    fields = [
        draw(_field(*_CRON_RANGES["minute"])),
        draw(_field(*_CRON_RANGES["hour"])),
        draw(_DAY_FIELD),
        draw(_field(1, 12, _MONTHS)),
        draw(_WEEKDAY_FIELD),
    ]
    if draw(st.integers(0, 3)) == 0:
        fields.insert(0, draw(_field(*_CRON_RANGES["second"])))
    return " ".join(fields)


@DIFFERENTIAL
@given(_cron(), _AFTER)
# The cases (rota read them as croniter does): day fields starting with `*`,
# equal ranges, `a/n` in the weekday field, `#` and `L` beside a restricted day of month.
@example("0 0 */2 * 1", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 9 */1 * 1", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 0 1 * */1", datetime(2026, 1, 1, tzinfo=UTC))
@example("5-5 * * * *", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 9 * * 7-7", datetime(2026, 1, 1, tzinfo=UTC))
@example("5-5/20 * * * *", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 0 * * 7/1", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 0 * * 1/2", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 0 13 * 5#2", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 0 1 * 1#2", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 0 15 * 5L", datetime(2026, 1, 1, tzinfo=UTC))
@example("0 0 LW * *", datetime(2026, 1, 1, tzinfo=UTC))
# Found by this test: a range of names that starts past the first name (MON-fri).
@example("0 0 * * MON-fri", datetime(2026, 1, 1, tzinfo=UTC))
def test_cron_matches_cronsim(cron: str, after: datetime) -> None:
    expected = cronsim_instants(cron, after, COUNT)
    if expected is None:
        with pytest.raises(RuleError):
            compile_rule(spec(cron=cron))
        return
    got = instants(spec(cron=cron), utc_key(after), COUNT)
    if len(expected) < COUNT:  # cronsim gives up 50 years on; rota looks 100 years ahead
        assert got[: len(expected)] == expected, cron
    else:
        assert got == expected, cron


# --- RRULE -------------------------------------------------------------------

_FREQS = ["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY"]
_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


def _ints(lo: int, hi: int, signed: bool = False, size: int = 3) -> st.SearchStrategy[str]:
    number = st.integers(lo, hi)
    if signed:
        number = st.one_of(number, st.integers(-hi, -lo))
    return st.lists(number, min_size=1, max_size=size, unique=True).map(
        lambda xs: ",".join(map(str, xs))
    )


@st.composite
def _byday(draw: st.DrawFn, freq: str, weekno: bool, bymonth: bool) -> tuple[str, bool]:
    """A BYDAY list, and whether it mixes plain and numbered weekdays."""
    numbered_ok = freq in ("MONTHLY", "YEARLY") and not weekno
    most = 5 if freq == "MONTHLY" or bymonth else 53
    items = draw(st.lists(st.sampled_from(_DAYS), min_size=1, max_size=4, unique=True))
    written = []
    for day in items:
        if numbered_ok and draw(st.booleans()):
            n = draw(st.integers(1, most)) * draw(st.sampled_from([1, -1]))
            written.append(f"{n}{day}")
        else:
            written.append(day)
    mixed = any(w[0].isdigit() or w[0] == "-" for w in written) and any(
        w.isalpha() for w in written
    )
    return ",".join(written), mixed


@st.composite
def _rrule(draw: st.DrawFn) -> tuple[str, bool, datetime]:
    """RRULE text with DTSTART, whether its BYDAY list is mixed, and an instant near DTSTART."""
    freq = draw(st.sampled_from(_FREQS))
    coarse = freq in ("YEARLY", "MONTHLY", "WEEKLY", "DAILY")
    dtstart = datetime(2026, 1, 1) + timedelta(  # noqa: DTZ001 - a wall time, as in RRULE text
        seconds=draw(st.integers(-3 * 366 * 86400, 3 * 366 * 86400))
    )
    # dateutil walks from DTSTART: the instant is at most 3 years (sub-daily: 3 days) on.
    reach = 3 * 366 * 86400 if coarse else 3 * 86400
    after = dtstart.replace(tzinfo=UTC) + timedelta(seconds=draw(st.integers(-86400, reach)))
    parts = [f"FREQ={freq}"]
    weekno = freq == "YEARLY" and draw(st.integers(0, 4)) == 0
    if weekno:
        parts.append(f"BYWEEKNO={draw(_ints(1, 53, signed=True, size=2))}")
    bymonth = draw(st.integers(0, 2 if coarse else 6)) == 0
    if bymonth:
        parts.append(f"BYMONTH={draw(_ints(1, 12))}")
    mixed = False
    if draw(st.booleans()):
        byday, mixed = draw(_byday(freq, weekno, bymonth))
        parts.append(f"BYDAY={byday}")
    if freq != "WEEKLY" and draw(st.integers(0, 3 if coarse else 8)) == 0:
        parts.append(f"BYMONTHDAY={draw(_ints(1, 31, signed=True, size=2))}")
    if freq == "YEARLY" and not weekno and draw(st.integers(0, 5)) == 0:
        parts.append(f"BYYEARDAY={draw(_ints(1, 366, signed=True, size=2))}")
    if coarse or draw(st.booleans()):
        parts.append(f"BYHOUR={draw(_ints(0, 23))}")
    if coarse or draw(st.booleans()):
        parts.append(f"BYMINUTE={draw(_ints(0, 59, size=2))}")
    if draw(st.integers(0, 2)) == 0:
        parts.append(f"INTERVAL={draw(st.integers(1, 4))}")
    if draw(st.integers(0, 2)) == 0:
        parts.append(f"WKST={draw(st.sampled_from(_DAYS))}")
    if coarse and not mixed and draw(st.integers(0, 2)) == 0:
        parts.append(f"BYSETPOS={draw(_ints(1, 3, signed=True, size=2))}")
    end = draw(st.integers(0, 5))
    if end == 0 and not mixed:
        parts.append(f"COUNT={draw(st.integers(1, 40))}")
    elif end == 1:
        until = dtstart + timedelta(days=draw(st.integers(1, 4 * 366)))
        parts.append(f"UNTIL={until:%Y%m%dT%H%M%S}")
    return f"DTSTART:{dtstart:%Y%m%dT%H%M%S}\nRRULE:{';'.join(parts)}", mixed, after


@DIFFERENTIAL
@given(_rrule())
# The cases: weekly BYSETPOS with DTSTART off WKST, a mixed BYDAY list.
@example(
    (
        "DTSTART:20260107T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=2",
        False,
        datetime(2026, 3, 4, 10, tzinfo=UTC),
    )
)
@example(
    (
        "DTSTART:20260101T090000\nRRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR,1SA",
        True,
        datetime(2026, 1, 30, 12, tzinfo=UTC),
    )
)
# Found by this test: rare instants, more than 100 years of them.
@example(
    (
        "DTSTART:20260101T000000\n"
        "RRULE:FREQ=MONTHLY;BYMONTH=1;BYDAY=MO;BYMONTHDAY=1;BYHOUR=0;BYMINUTE=0",
        False,
        datetime(2026, 1, 1, tzinfo=UTC),
    )
)
def test_rrule_matches_dateutil(rule: tuple[str, bool, datetime]) -> None:
    text, mixed, after = rule
    assert mixed_byday(text) == mixed
    try:
        expected = dateutil_instants(text, after, COUNT)
    except ReferenceTooCostly:
        reject()  # too costly for the reference to find: no answer to compare with
    try:
        got = instants(spec(rrule=text), utc_key(after), COUNT)
    except RuleTooCostly:
        reject()  # bounded work: rota refuses what would take it too long
    except RuleError as exc:  # a rule with no instant at all
        assert expected == [], (text, exc)
        return
    # The reference stops at the horizon; rota looks a horizon past each instant.
    within = utc_key(after + SEARCH_HORIZON)
    assert [t for t in got if t <= within] == expected, text

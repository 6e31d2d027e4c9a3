"""RRULE (RFC 5545) via dateutil, evaluated in naive local wall time.

The text is one RRULE (``FREQ=...;...``, with or without the ``RRULE:`` prefix),
optionally preceded by a ``DTSTART:YYYYMMDDTHHMMSS`` line: a local wall time in
the schedule's zone (no ``Z``, no ``TZID``). ``UNTIL`` is a local wall time too.
Leave dates out with the schedule's ``exclude_dates``, not EXDATE.

Without DTSTART the rule is anchored at local midnight of 1970-01-01, the first
day of a year and of a month: a bare ``FREQ=DAILY`` runs at 00:00,
``FREQ=MONTHLY`` on the 1st, ``FREQ=YEARLY`` on January 1st, and INTERVAL counts
periods from there (``FREQ=DAILY;INTERVAL=2`` runs on days an even number of
days after 1970-01-01). ``FREQ=WEEKLY`` is anchored on Monday 1970-01-05
instead, the start of an ISO week, so a bare ``FREQ=WEEKLY`` runs on Mondays and
``INTERVAL=2`` counts ISO weeks from there. A fixed anchor keeps INTERVAL and
BYSETPOS stable: the same rule gives the same dates whenever it is evaluated.

dateutil iterates from DTSTART, so evaluating "the next one after 2026-05-01"
from 1970 would walk through decades of minutes. ``RRuleWalls`` moves DTSTART
forward by whole periods (INTERVAL x FREQ) to just before the wanted time; that
keeps every period aligned, and dateutil computes BYSETPOS over whole periods
before dropping what precedes DTSTART, so the result is the same. A week is
the exception: the first weekly period runs from DTSTART's day to the end of
its week (RFC 5545 and dateutil pick BYSETPOS from that partial week), every
later one is a whole week from WKST, so a moved weekly DTSTART goes back to
its week's WKST. Rules with COUNT are evaluated from their true DTSTART, since
COUNT counts from there.

A BYDAY list that mixes plain and numbered weekdays is their union, as RFC
5545 reads it (``FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR,1SA``: every weekday and
the first Saturday), not dateutil's intersection.

Every part must be in RFC 5545's range (``BYSECOND`` 0-59: a leap second
cannot be scheduled; ``BYWEEKNO`` +-1..53; ``BYYEARDAY`` +-1..366; ...) and
allowed with its FREQ (``BYWEEKNO`` only with YEARLY, no ``BYMONTHDAY`` with
WEEKLY, ...); ``COUNT`` is 1 to ``MAX_COUNT`` and ``INTERVAL`` at most 100
years' worth of periods; with BYMONTH, a YEARLY rule's numbered weekday counts
within the month (1 to 5). Parts dateutil adds to the RFC (``BYEASTER``) are refused.

Bounded work: every evaluation here is metered (``rrule_meter``), so a rule
that rarely or never matches ends its search at the horizon or raises
``RuleTooCostly`` rather than scanning to the year 9999.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dateutil.rrule import (
    DAILY,
    HOURLY,
    MINUTELY,
    MONTHLY,
    SECONDLY,
    WEEKLY,
    YEARLY,
    rrulestr,
    weekday,
)
from dateutil.rrule import rrule as DateutilRRule

from rota.scheduler.rules.occurrence import RuleError
from rota.scheduler.rules.rrule_meter import (
    MAX_STEPS,
    OverBudget,
    PastHorizon,
    RuleTooCostly,
    countable,
    metered,
)

FREQ_NAMES = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
# RFC 5545 frequencies, coarsest first (dateutil's numbering): DAILY or coarser
# is fixed-time in the DST rule.
FIXED_TIME_FREQS = frozenset({YEARLY, MONTHLY, WEEKLY, DAILY})
DEFAULT_DTSTART = datetime(1970, 1, 1)  # noqa: DTZ001 - local wall time
DEFAULT_WEEKLY_DTSTART = datetime(1970, 1, 5)  # noqa: DTZ001 - a Monday, local wall time
_DTSTART_VALUE = re.compile(r"^(\d{8})(T\d{6})?$")
MAX_COUNT = 10_000  # a longer series: use UNTIL
_WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_PARTS = (
    "FREQ", "UNTIL", "COUNT", "INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY",
    "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYMONTH", "BYSETPOS", "WKST",
)  # fmt: skip
# name -> (lowest, highest, negative values allowed)
_INT_LISTS = {
    "BYSECOND": (0, 59, False),
    "BYMINUTE": (0, 59, False),
    "BYHOUR": (0, 23, False),
    "BYMONTHDAY": (1, 31, True),
    "BYYEARDAY": (1, 366, True),
    "BYWEEKNO": (1, 53, True),
    "BYMONTH": (1, 12, False),
    "BYSETPOS": (1, 366, True),
}
# Parts RFC 5545 forbids with a frequency.
_NOT_WITH = {
    "BYWEEKNO": frozenset({MONTHLY, WEEKLY, DAILY, HOURLY, MINUTELY, SECONDLY}),
    "BYYEARDAY": frozenset({MONTHLY, WEEKLY, DAILY}),
    "BYMONTHDAY": frozenset({WEEKLY}),
}
# INTERVAL allowed per frequency: at most 100 years of periods.
_MAX_INTERVAL = {
    YEARLY: 100,
    MONTHLY: 1_200,
    WEEKLY: 5_218,
    DAILY: 36_525,
    HOURLY: 876_600,
    MINUTELY: 52_596_000,
    SECONDLY: 3_155_760_000,
}
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_BYDAY_ITEM = re.compile(r"^([+-]?[0-9]{1,2})?(MO|TU|WE|TH|FR|SA|SU)$")
_UNTIL_VALUE = re.compile(r"^[0-9]{8}(T[0-9]{6})?$")
_FIXED_STEPS = {
    WEEKLY: timedelta(weeks=1),
    DAILY: timedelta(days=1),
    HOURLY: timedelta(hours=1),
    MINUTELY: timedelta(minutes=1),
    SECONDLY: timedelta(seconds=1),
}


@dataclass(frozen=True)
class RRuleExpr:
    """A parsed RRULE with its (naive, local) DTSTART."""

    text: str
    rule: DateutilRRule
    freq: int
    interval: int
    dtstart: datetime
    has_until: bool
    has_count: bool

    def is_fixed_time(self) -> bool:
        return self.freq in FIXED_TIME_FREQS


def parse_rrule(text: str) -> RRuleExpr:
    """Parse and check RRULE text; raises ``RuleError`` saying what is wrong."""
    dtstart: datetime | None = None
    body: str | None = None
    for raw in text.strip().splitlines():
        line = raw.strip()
        if not line:
            continue
        head = line.upper()
        if head.startswith("DTSTART"):
            dtstart = _parse_dtstart(text, line)
        elif head.startswith("RRULE:") or ("=" in line and ":" not in line):
            if body is not None:
                raise RuleError(f"bad rrule {text!r}: give exactly one RRULE")
            body = line.split(":", 1)[1] if head.startswith("RRULE:") else line
        else:
            raise RuleError(
                f"bad rrule {text!r}: unsupported line {line!r}; only DTSTART and RRULE "
                "are allowed (leave dates out with exclude_dates)"
            )
    if body is None:
        raise RuleError(f"bad rrule {text!r}: no RRULE, write it like FREQ=DAILY;BYHOUR=2")
    params = _params(text, body)
    freq = _check_parts(text, params)
    if "COUNT" in params and dtstart is None:
        raise RuleError(
            f"bad rrule {text!r}: COUNT counts from DTSTART; give one "
            "(a DTSTART:YYYYMMDDTHHMMSS line before the RRULE)"
        )
    if dtstart is None:
        dtstart = DEFAULT_WEEKLY_DTSTART if freq == WEEKLY else DEFAULT_DTSTART
    try:
        rule = rrulestr("RRULE:" + body, dtstart=dtstart)
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        raise RuleError(f"bad rrule {text!r}: {exc}") from None
    if not isinstance(rule, DateutilRRule):  # one RRULE line always gives an rrule
        raise RuleError(f"bad rrule {text!r}: give exactly one RRULE")
    rule = countable(_byday_union(rule, freq, "BYMONTH" in params), freq)
    interval = int(params.get("INTERVAL", "1"))
    return RRuleExpr(
        text=text.strip(),
        rule=rule,
        freq=freq,
        interval=interval,
        dtstart=dtstart,
        has_until="UNTIL" in params,
        has_count="COUNT" in params,
    )


def _byday_union(rule: DateutilRRule, freq: int, bymonth: bool) -> DateutilRRule:
    """The rule with a BYDAY list of plain and numbered weekdays read as RFC 5545 says.

    RFC 5545 reads ``FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR,1SA`` as every weekday
    and the first Saturday; dateutil keeps only days that are both. Every plain
    weekday is written as all its numbered ones (``MO``: ``1MO`` to ``5MO`` in
    a month, to ``53MO`` in a year), which dateutil unites as the RFC does, so
    BYSETPOS and COUNT see the union too.
    """
    plain = rule._byweekday  # type: ignore[attr-defined]  # dateutil's own fields
    numbered = rule._bynweekday  # type: ignore[attr-defined]
    if not plain or not numbered or freq not in (MONTHLY, YEARLY):
        return rule
    most = 5 if freq == MONTHLY or bymonth else 53
    union = [weekday(w, n) for w in sorted(plain) for n in range(1, most + 1)]
    union += [weekday(w, n) for w, n in sorted(numbered)]
    return rule.replace(byweekday=union)


def _parse_dtstart(text: str, line: str) -> datetime:
    name, _, value = line.partition(":")
    if ";" in name or not _DTSTART_VALUE.match(value.strip()):
        raise RuleError(
            f"bad rrule {text!r}: DTSTART must be a local wall time like "
            "DTSTART:20260105T090000 (no TZID, no Z: the schedule's timezone applies)"
        )
    value = value.strip()
    fmt = "%Y%m%dT%H%M%S" if "T" in value else "%Y%m%d"
    try:
        return datetime.strptime(value, fmt)  # noqa: DTZ007 - local wall time
    except ValueError as exc:
        raise RuleError(f"bad rrule {text!r}: DTSTART {value}: {exc}") from None


def _params(text: str, body: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for part in body.strip().strip(";").split(";"):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise RuleError(f"bad rrule {text!r}: {part!r} is not KEY=VALUE")
        name = key.strip().upper()
        if name in params:
            raise RuleError(f"bad rrule {text!r}: {name} is given twice")
        params[name] = value.strip()
    return params


def _check_parts(text: str, params: dict[str, str]) -> int:
    """Every part known to RFC 5545, in its range, allowed with FREQ; returns FREQ."""
    bad = f"bad rrule {_cut(text, 200)!r}:"
    for name in params:
        if name not in _PARTS:
            raise RuleError(f"{bad} unknown part {name} (RFC 5545 parts: {', '.join(_PARTS)})")
    freq_name = params.get("FREQ", "").upper()
    if freq_name not in FREQ_NAMES:
        raise RuleError(f"{bad} FREQ must be one of {', '.join(FREQ_NAMES)}")
    freq = FREQ_NAMES.index(freq_name)
    for name, value in params.items():
        if not value:
            raise RuleError(f"{bad} {name} has no value")
        if freq in _NOT_WITH.get(name, ()):
            raise RuleError(f"{bad} {name} cannot be used with FREQ={freq_name} (RFC 5545)")
        if name in _INT_LISTS:
            _check_int_list(bad, name, value)
    _check_extent(bad, params, freq, freq_name)
    if "WKST" in params and params["WKST"].upper() not in _WEEKDAYS:
        raise RuleError(f"{bad} WKST must be one of {', '.join(_WEEKDAYS)}")
    if "BYDAY" in params:
        _check_byday(bad, params["BYDAY"], freq, "BYWEEKNO" in params, "BYMONTH" in params)
    if "BYSETPOS" in params and not any(n.startswith("BY") and n != "BYSETPOS" for n in params):
        raise RuleError(f"{bad} BYSETPOS needs another BYxxx part to select from (RFC 5545)")
    return freq


def _check_extent(bad: str, params: dict[str, str], freq: int, freq_name: str) -> None:
    """How long and how often the series runs: COUNT or UNTIL, and INTERVAL, in range."""
    if "COUNT" in params and "UNTIL" in params:
        raise RuleError(f"{bad} give COUNT or UNTIL, not both")
    if "COUNT" in params:
        count = _whole(bad, "COUNT", params["COUNT"])
        if not 1 <= count <= MAX_COUNT:
            raise RuleError(
                f"{bad} COUNT must be between 1 and {MAX_COUNT:,} (a longer series: use UNTIL)"
            )
    if "INTERVAL" in params:
        interval = _whole(bad, "INTERVAL", params["INTERVAL"])
        if not 1 <= interval <= _MAX_INTERVAL[freq]:
            raise RuleError(
                f"{bad} INTERVAL must be between 1 and {_MAX_INTERVAL[freq]:,} "
                f"for FREQ={freq_name} (at most 100 years)"
            )
    if "UNTIL" in params:
        if params["UNTIL"].upper().endswith("Z"):
            raise RuleError(
                f"{bad} UNTIL is a local wall time in the schedule's timezone; drop the Z"
            )
        if not _UNTIL_VALUE.match(params["UNTIL"]):
            raise RuleError(f"{bad} UNTIL must be like 20261231 or 20261231T235959")


def _cut(value: str, limit: int = 20) -> str:
    return value if len(value) <= limit else value[:limit] + "..."


def _whole(bad: str, name: str, value: str) -> int:
    if not _INTEGER.match(value):
        raise RuleError(f"{bad} {name}={_cut(value)} is not a whole number")
    if len(value) > 18:  # far out of every range; int() of it is pointless work
        return -(10**18) if value.startswith("-") else 10**18
    return int(value)


def _check_int_list(bad: str, name: str, value: str) -> None:
    lo, hi, signed = _INT_LISTS[name]
    for item in value.split(","):
        number = _whole(bad, name, item.strip())
        if not lo <= abs(number) <= hi or (number < 0 and not signed):
            span = f"{lo} to {hi}" + (f" or -{hi} to -{lo}" if signed else "")
            leap = " (a leap second cannot be scheduled)" if name == "BYSECOND" else ""
            raise RuleError(f"{bad} {name}={_cut(item.strip())} is out of range: {span}{leap}")


def _check_byday(bad: str, value: str, freq: int, weekno: bool, bymonth: bool) -> None:
    for item in value.split(","):
        m = _BYDAY_ITEM.match(item.strip().upper())
        if m is None:
            raise RuleError(f"{bad} BYDAY={item.strip()} is not like MO, 1MO or -1FR")
        if m.group(1) is None:
            continue
        n = int(m.group(1))
        if freq not in (MONTHLY, YEARLY) or weekno:
            raise RuleError(
                f"{bad} BYDAY={item.strip()}: a numbered weekday needs FREQ=MONTHLY or "
                "FREQ=YEARLY without BYWEEKNO (RFC 5545)"
            )
        if freq == YEARLY and bymonth and not 1 <= abs(n) <= 5:
            # RFC 5545: with BYMONTH a YEARLY rule's numbered weekday counts within the month.
            raise RuleError(
                f"{bad} BYDAY={item.strip()} is out of range: with BYMONTH a numbered weekday "
                "counts within the month, 1 to 5 or -1 to -5"
            )
        limit = 5 if freq == MONTHLY else 53
        if not 1 <= abs(n) <= limit:
            raise RuleError(f"{bad} BYDAY={item.strip()} is out of range: 1 to {limit} or negative")


@dataclass(frozen=True)
class RRuleWalls:
    """The wall times an RRULE names."""

    expr: RRuleExpr

    def first_from(self, start: datetime, horizon: datetime) -> datetime | None:
        return next(iter(self.walls_from(start, horizon)), None)

    def walls_from(self, start: datetime, horizon: datetime) -> Iterator[datetime]:
        expr = self.expr
        if expr.has_count:  # COUNT counts from the true DTSTART
            rule = metered(expr.rule, horizon)
        elif expr.has_until:
            rule = metered(expr.rule, horizon, **_aligned(expr, start))
        else:
            rule = metered(expr.rule, horizon, until=horizon, **_aligned(expr, start))
        try:
            for wall in rule.xafter(start, inc=True):
                if wall > horizon:
                    return
                yield wall
        except PastHorizon:
            return
        except OverBudget:
            raise RuleTooCostly(
                f"rrule {expr.text!r}: finding the occurrence after {start:%Y-%m-%dT%H:%M:%S} "
                f"takes more than {MAX_STEPS:,} steps; write it with a coarser FREQ "
                "(FREQ=DAILY;BYHOUR=... rather than FREQ=SECONDLY;BYHOUR=...)"
            ) from None
        except (ValueError, OverflowError, IndexError) as exc:
            # dateutil: an empty rule, the year 9999, or an offset past its masks of
            # a year that the checks above do not foresee: a message, not a traceback.
            raise RuleError(f"rrule {expr.text!r}: {exc}") from None


def _aligned(expr: RRuleExpr, start: datetime) -> dict[str, Any]:
    """The changes that start dateutil's walk at the period of ``start``, same results.

    A weekly rule's first period runs from DTSTART to the end of its week, and
    BYSETPOS picks from that partial week; every later period is a whole week
    from WKST. So a DTSTART moved past its first week goes back to its week's
    WKST, and the weekday dateutil would take from DTSTART is given explicitly.
    """
    aligned = _aligned_dtstart(expr, start)
    if expr.freq != WEEKLY or aligned == expr.dtstart:
        return {"dtstart": aligned}
    wkst, weekdays = expr.rule._wkst, expr.rule._byweekday  # type: ignore[attr-defined]
    changes: dict[str, Any] = {"dtstart": aligned - timedelta(days=(aligned.weekday() - wkst) % 7)}
    if weekdays is not None:  # always, for WEEKLY: BYDAY or DTSTART's weekday
        changes["byweekday"] = tuple(weekdays)
    return changes


def _aligned_dtstart(expr: RRuleExpr, start: datetime) -> datetime:
    """The latest DTSTART + k * INTERVAL periods (k >= 0) not after ``start``.

    It must keep what dateutil derives from DTSTART when a BY part is absent
    (time of day, weekday, day of month, month), so months and years move only
    when the day of month exists in every month (<= 28) or year (not Feb 29).
    """
    d0, n = expr.dtstart, expr.interval
    if start <= d0:
        return d0
    step = _FIXED_STEPS.get(expr.freq)
    if step is not None:
        return d0 + ((start - d0) // (step * n)) * (step * n)
    if expr.freq == MONTHLY and d0.day <= 28:
        months = (start.year - d0.year) * 12 + (start.month - d0.month)
        candidate = _add_months(d0, months // n * n)
        return candidate if candidate <= start else _add_months(d0, (months // n - 1) * n)
    if expr.freq == YEARLY and (d0.month, d0.day) != (2, 29):
        years = (start.year - d0.year) // n * n
        candidate = d0.replace(year=d0.year + years)
        return candidate if candidate <= start else d0.replace(year=d0.year + years - n)
    return d0


def _add_months(d: datetime, months: int) -> datetime:
    index = d.month - 1 + months
    return d.replace(year=d.year + index // 12, month=index % 12 + 1)

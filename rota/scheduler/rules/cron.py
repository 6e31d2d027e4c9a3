"""Cron expressions: 5 fields, or 6 with seconds first, evaluated in naive wall time.

The fields mean what they mean to Vixie cron and cronie (and to cronsim, which
follows them); ``rota check`` refuses what they refuse.

* A field is a comma-separated list of ``*``, a value, a range ``a-b``
  (``a <= b``; ``5-5`` is just 5) and steps: ``*/n``, ``a-b/n``, and ``a/n``,
  from ``a`` to the end of the field. Months and weekdays may be named
  (``JAN``-``DEC``, ``SUN``-``SAT``, any case).
* Day of week is 0-7, and both 0 and 7 are Sunday (``1/2`` is Mon, Wed, Fri, Sun).
* Day of month and day of week: a day matches when it matches both, unless both
  fields are restricted, then either one. A field starting with ``*`` counts as
  unrestricted even with a step: ``0 0 */2 * 1`` is Mondays that are odd days,
  ``0 0 13 * 5`` the 13th and every Friday.
* ``L`` (the last day of the month) and ``LW`` (its last weekday) in day of
  month; ``5L`` (the last Friday) and ``5#2`` (the second Friday) in day of
  week. They restrict their field like any value, so beside a restricted day of
  month they join the union (``0 0 13 * 5#2``: the 13th, or the second Friday).
* ``?`` stands for ``*`` in the day fields, ``15W`` for the weekday nearest the
  15th (never leaving the month) and ``L5`` for ``5L``: forms from other cron
  dialects that Vixie cron has no other meaning for.

Refused: random or hashed values (``R``, ``H``): every scheduler replica must
compute the same instants for the occurrence keys to agree. Also ranges that
run backwards (``5-1``, ``SAT-SUN``), values out of a field's range, and
expressions that can never match (``0 0 30 2 *``).

The aliases ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/
``@midnight`` and ``@hourly`` stand for their usual 5-field expressions.

Walking: the matching days of a month are computed once per month and kept
(``DayRule.days_of``); times of day come from the sorted hour, minute and
second values, so the next wall time costs a few microseconds.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from rota.scheduler.rules.occurrence import RuleError

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELD_NAMES = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
_RANGES = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_SECOND, _MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY = range(6)
_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_LONGEST_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DIGITS = re.compile(r"^[0-9]+$", re.ASCII)
_NONDETERMINISTIC = re.compile(r"^[RH](\(.*|/.*)?$")
_BIG = 10**9  # past every field: a step this long keeps the first value only
_NEAREST = re.compile(r"^([0-9]+)W$|^W([0-9]+)$", re.ASCII)
# Months kept per expression (see DayRule.days_of): ten years' worth.
_KEPT_MONTHS = 120


class _FieldError(ValueError):
    """A field that does not parse; the message says what is wrong with it."""


@dataclass(frozen=True, eq=False)
class DayRule:
    """Which days of a month match the two day fields.

    ``both``: a day must match both fields (one of them starts with ``*``);
    otherwise either. Day-of-month parts: plain ``days``, ``last`` (L),
    ``last_weekday`` (LW), ``nearest`` (nW). Day-of-week parts, with Sunday 0:
    plain ``weekdays``, ``nth`` ((weekday, n): the nth in the month) and
    ``last_of`` (nL: the last in the month).
    """

    both: bool
    days: frozenset[int]
    last: bool = False
    last_weekday: bool = False
    nearest: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    nth: frozenset[tuple[int, int]] = frozenset()
    last_of: frozenset[int] = frozenset()
    _kept: dict[tuple[int, int], tuple[int, ...]] = field(default_factory=dict, repr=False)

    def days_of(self, year: int, month: int) -> tuple[int, ...]:
        """The matching days of ``year``-``month``, ascending (computed once, then kept)."""
        key = (year, month)
        kept = self._kept.get(key)
        if kept is None:
            if len(self._kept) >= _KEPT_MONTHS:
                self._kept.clear()
            kept = self._kept[key] = self._compute(year, month)
        return kept

    def _compute(self, year: int, month: int) -> tuple[int, ...]:
        first_weekday, length = calendar.monthrange(year, month)  # Monday = 0
        by_date = self._month_days(year, month, length)
        by_weekday = set()
        for day in range(1, length + 1):
            weekday = (first_weekday + day) % 7  # cron's numbering: Sunday = 0
            if (
                weekday in self.weekdays
                or (weekday, (day + 6) // 7) in self.nth
                or (weekday in self.last_of and day + 7 > length)
            ):
                by_weekday.add(day)
        matched = by_date & by_weekday if self.both else by_date | by_weekday
        return tuple(sorted(matched))

    def _month_days(self, year: int, month: int, length: int) -> set[int]:
        found = {d for d in self.days if d <= length}
        if self.last:
            found.add(length)
        if self.last_weekday:
            found.add(_nearest_weekday(year, month, length, length))
        for day in self.nearest:
            found.add(_nearest_weekday(year, month, min(day, length), length))
        return found


def _nearest_weekday(year: int, month: int, day: int, length: int) -> int:
    """The weekday (Mon-Fri) nearest ``day``, within its month."""
    weekday = calendar.weekday(year, month, day)  # Monday = 0
    if weekday == 5:  # Saturday: the Friday before, or the Monday after the 1st
        return day - 1 if day > 1 else day + 2
    if weekday == 6:  # Sunday: the Monday after, or the Friday before the last day
        return day + 1 if day < length else day - 2
    return day


@dataclass(frozen=True)
class CronExpr:
    """A parsed cron expression; ``fields`` are in the order they were written."""

    text: str
    fields: tuple[str, ...]
    seconds: tuple[int, ...]  # ascending, like minutes and hours
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: frozenset[int]
    day_rule: DayRule

    @property
    def has_seconds(self) -> bool:
        return len(self.fields) == 6

    @property
    def minute_field(self) -> str:
        return self.fields[1 if self.has_seconds else 0]

    @property
    def hour_field(self) -> str:
        return self.fields[2 if self.has_seconds else 1]

    @property
    def first_time(self) -> tuple[int, int, int]:
        """The first time of day the expression names."""
        return self.hours[0], self.minutes[0], self.seconds[0]

    def is_fixed_time(self) -> bool:
        """Vixie cron's rule: fixed-time when neither minute nor hour starts with ``*``."""
        return not self.minute_field.startswith("*") and not self.hour_field.startswith("*")


def parse_cron(text: str) -> CronExpr:
    """Parse and check a cron expression; raises ``RuleError`` saying what is wrong.

    Parsed once per distinct text: schedules sharing an expression share the
    result (and the matching days it keeps), which keeps many schedules small.
    """
    return _parse_cron(text)


@lru_cache(maxsize=4096)
def _parse_cron(text: str) -> CronExpr:
    stripped = text.strip()
    expanded = ALIASES.get(stripped.lower(), stripped)
    if expanded.startswith("@"):
        names = ", ".join(sorted(ALIASES))
        raise RuleError(f"bad cron {text!r}: unknown alias (known: {names})")
    fields = tuple(expanded.split())
    if len(fields) not in (5, 6):
        raise RuleError(
            f"bad cron {text!r}: {len(fields)} fields; cron needs 5 "
            "(minute hour day-of-month month day-of-week) or 6 with seconds first"
        )
    six = fields if len(fields) == 6 else ("0", *fields)
    upper = tuple(f.upper() for f in six)
    for index, value in enumerate(upper):
        if any(_NONDETERMINISTIC.match(item) for item in value.split(",")):
            raise RuleError(
                f"bad cron {text!r}: {_FIELD_NAMES[index]} {six[index]!r} is not deterministic "
                "(R and H pick values at random: each scheduler replica would fire at "
                "instants of its own); write the values"
            )
    try:
        values = [_values(i, upper[i]) for i in (_SECOND, _MINUTE, _HOUR, _MONTH)]
        day_rule = _day_rule(upper[_DAY], upper[_WEEKDAY])
    except _FieldError as exc:
        raise RuleError(f"bad cron {text!r}: {exc}") from None
    seconds, minutes, hours, months = values
    if day_rule.both and not (day_rule.last or day_rule.last_weekday or day_rule.nearest):
        longest = max(_LONGEST_MONTH[m] for m in months)
        if min(day_rule.days) > longest:
            raise RuleError(f"bad cron {text!r}: it never matches any date")
    return CronExpr(
        text=stripped,
        fields=fields,
        seconds=tuple(sorted(seconds)),
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        months=frozenset(months),
        day_rule=day_rule,
    )


def _values(index: int, value: str) -> set[int]:
    """The plain values of a field (no L, W or #)."""
    found: set[int] = set()
    for item in value.split(","):
        found |= _item(index, item)
    return found


def _item(index: int, item: str) -> set[int]:
    """One list item: ``*``, ``a``, ``a-b``, each with an optional ``/step``."""
    lo, hi = _RANGES[index]
    term, slash, step_text = item.partition("/")
    step = _step(index, item, step_text) if slash else 1
    if term == "*":
        start, end = lo, hi
    elif "-" in term:
        first, _, last = term.partition("-")
        start, end = _number(index, first), _number(index, last)
        if end < start:
            raise _FieldError(
                f"{_FIELD_NAMES[index]} range {item!r} runs backwards (write it as two ranges)"
            )
    else:
        start = _number(index, term)
        end = hi if slash else start  # `a/n`: from a to the end of the field
    return set(range(start, end + 1, step))


def _step(index: int, item: str, text: str) -> int:
    step = _small_int(text)
    if step is None or step == 0:
        raise _FieldError(f"{_FIELD_NAMES[index]} {item!r}: the step must be a whole number >= 1")
    return step


def _small_int(text: str) -> int | None:
    """Digits as a number (at most ``_BIG``: larger is past every field), else None."""
    if not _DIGITS.match(text):
        return None
    significant = text.lstrip("0")
    return int(significant or "0") if len(significant) < len(str(_BIG)) else _BIG


def _number(index: int, text: str) -> int:
    """A value of the field: digits, or a month or weekday name."""
    names = _MONTH_NAMES if index == _MONTH else _WEEKDAY_NAMES if index == _WEEKDAY else ()
    lo, hi = _RANGES[index]
    if text in names:
        return names.index(text) + lo
    number = _small_int(text)
    if number is None:
        hint = (
            " or a name like MON" if index == _WEEKDAY else " or a name like JAN" if names else ""
        )
        raise _FieldError(f"{_FIELD_NAMES[index]} {text!r} is not a number{hint}")
    if not lo <= number <= hi:
        raise _FieldError(f"{_FIELD_NAMES[index]} {text} is out of range ({lo}-{hi})")
    return number


def _day_rule(days_field: str, weekdays_field: str) -> DayRule:
    """The two day fields; Vixie cron's rule decides between both and either."""
    days_field = "*" if days_field == "?" else days_field
    weekdays_field = "*" if weekdays_field == "?" else weekdays_field
    both = days_field.startswith("*") or weekdays_field.startswith("*")
    days: set[int] = set()
    nearest: set[int] = set()
    last = last_weekday = False
    for item in days_field.split(","):
        term, slash, step = item.partition("/")
        if term in ("L", "LW"):
            if slash:  # a step from the last day keeps just the last day
                _step(_DAY, item, step)
            last, last_weekday = last or term == "L", last_weekday or term == "LW"
        elif match := _NEAREST.match(item):
            nearest.add(_number(_DAY, match.group(1) or match.group(2)))
        else:
            days |= _item(_DAY, item)
    weekdays: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last_of: set[int] = set()
    for item in weekdays_field.split(","):
        if "L" in item:
            number = item[:-1] if item.endswith("L") else item[1:]
            if not number or "L" in number:
                raise _FieldError(f"day-of-week {item!r}: write the last Friday as 5L")
            last_of.add(_number(_WEEKDAY, number) % 7)
        elif "#" in item:
            weekday, _, n = item.partition("#")
            count = _small_int(n)
            if count is None or not 1 <= count <= 5:
                raise _FieldError(f"day-of-week {item!r}: the n of d#n is 1 to 5")
            nth.add((_number(_WEEKDAY, weekday) % 7, count))
        else:
            weekdays |= {w % 7 for w in _item(_WEEKDAY, item)}
    return DayRule(
        both=both,
        days=frozenset(days),
        last=last,
        last_weekday=last_weekday,
        nearest=frozenset(nearest),
        weekdays=frozenset(weekdays),
        nth=frozenset(nth),
        last_of=frozenset(last_of),
    )


@dataclass(frozen=True)
class CronWalls:
    """The wall times a cron expression names."""

    expr: CronExpr

    def first_from(self, start: datetime, horizon: datetime) -> datetime | None:
        """The first of ``walls_from(start, horizon)``, computed directly (no iterators)."""
        expr = self.expr
        if start.microsecond:
            start = start.replace(microsecond=0)
        year, month, day = start.year, start.month, start.day
        last = (horizon.year, horizon.month)
        while (year, month) <= last:
            if month in expr.months:
                days = expr.day_rule.days_of(year, month)
                for d in days[bisect_left(days, day) :]:
                    if d == start.day and (year, month) == (start.year, start.month):
                        t = _first_time(expr, start.hour, start.minute, start.second)
                        if t is None:
                            continue
                    else:
                        t = expr.first_time
                    wall = datetime(year, month, d, *t)  # noqa: DTZ001 - wall time
                    return wall if wall <= horizon else None
            year, month, day = year + month // 12, month % 12 + 1, 1
        return None

    def walls_from(self, start: datetime, horizon: datetime) -> Iterator[datetime]:
        """Matching wall times ``w`` with ``floor(start) <= w <= horizon``, ascending."""
        expr = self.expr
        start = start.replace(microsecond=0)
        year, month, day = start.year, start.month, start.day
        floor = (start.hour, start.minute, start.second)
        last = (horizon.year, horizon.month)
        while (year, month) <= last:
            if month in expr.months:
                days = expr.day_rule.days_of(year, month)
                for d in days[bisect_left(days, day) :]:
                    for h, m, s in _times(expr, floor if d == day else (0, 0, 0)):
                        wall = datetime(year, month, d, h, m, s)  # noqa: DTZ001 - wall time
                        if wall > horizon:
                            return
                        yield wall
                    floor = (0, 0, 0)  # only the start day starts late
            year, month, day, floor = year + month // 12, month % 12 + 1, 1, (0, 0, 0)


def _first_time(expr: CronExpr, h0: int, m0: int, s0: int) -> tuple[int, int, int] | None:
    """The first time of day at or after ``h0:m0:s0``, or None."""
    hours, minutes, seconds = expr.hours, expr.minutes, expr.seconds
    i = bisect_left(hours, h0)
    if i == len(hours):
        return None
    if hours[i] > h0:
        return hours[i], minutes[0], seconds[0]
    j = bisect_left(minutes, m0)
    if j < len(minutes):
        if minutes[j] > m0:
            return h0, minutes[j], seconds[0]
        k = bisect_left(seconds, s0)
        if k < len(seconds):
            return h0, m0, seconds[k]
        if j + 1 < len(minutes):
            return h0, minutes[j + 1], seconds[0]
    if i + 1 < len(hours):
        return hours[i + 1], minutes[0], seconds[0]
    return None


def _times(expr: CronExpr, floor: tuple[int, int, int]) -> Iterator[tuple[int, int, int]]:
    """Times of day at or after ``floor`` (hour, minute, second), ascending."""
    h0, m0, s0 = floor
    hours, minutes, seconds = expr.hours, expr.minutes, expr.seconds
    for h in hours[bisect_left(hours, h0) :]:
        at_h0 = h == h0
        for m in minutes[bisect_left(minutes, m0) :] if at_h0 else minutes:
            if at_h0 and m == m0:
                for sec in seconds[bisect_left(seconds, s0) :]:
                    yield h, m, sec
            else:
                for sec in seconds:
                    yield h, m, sec

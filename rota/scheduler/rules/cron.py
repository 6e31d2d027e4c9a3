"""Cron expressions: 5 fields, or 6 with seconds first, evaluated in naive wall time.

croniter parses and expands the fields; it is only ever given naive wall
times, so its own DST handling never comes into play
(``scheduler.rules.walltime`` decides what a wall time means). croniter's
6-field order puts seconds last, so 6-field expressions are read with
``second_at_beginning=True``.

Walking the wall times: an expression whose expanded fields are plain numbers
(no ``L``, ``W`` or ``#``) is walked here, from croniter's expansion, with
croniter's semantics (a day matches its month and, when both day fields are
restricted, either of them); it costs a few microseconds per wall time where
croniter's ``get_next`` costs tens. Any other expression is walked by croniter.

The aliases ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/
``@midnight`` and ``@hourly`` stand for their usual 5-field expressions.
"""

from __future__ import annotations

import copy
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import cached_property, lru_cache
from typing import Any

from croniter import CroniterBadDateError, CroniterError, croniter

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
_PROBE_START = datetime(2000, 1, 1)  # noqa: DTZ001 - a naive wall time on purpose
_ONE_SECOND = timedelta(seconds=1)
_ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class CronExpr:
    """A parsed cron expression; ``fields`` are in the order they were written."""

    text: str
    fields: tuple[str, ...]
    plain: PlainFields | None = None  # set by parse_cron when the fields allow

    @property
    def has_seconds(self) -> bool:
        return len(self.fields) == 6

    @property
    def minute_field(self) -> str:
        return self.fields[1 if self.has_seconds else 0]

    @property
    def hour_field(self) -> str:
        return self.fields[2 if self.has_seconds else 1]

    def is_fixed_time(self) -> bool:
        """Vixie cron's rule: fixed-time when neither minute nor hour starts with ``*``."""
        return not self.minute_field.startswith("*") and not self.hour_field.startswith("*")

    def iterator(self, start: datetime) -> croniter:
        """A croniter whose ``get_next`` gives wall times strictly after naive ``start``.

        The expression is expanded once (``_template``); each iterator is a
        shallow copy of it moved to ``start``, which costs a fraction of parsing.
        """
        it = copy.copy(self._template)
        it.set_current(start, force=True)
        return it

    @property
    def plain_fields(self) -> PlainFields | None:
        """The expanded fields when they are plain numbers (no L, W, #), else None."""
        return self.plain

    @cached_property
    def _template(self) -> croniter:
        return croniter(
            " ".join(self.fields),
            _PROBE_START,
            ret_type=datetime,
            second_at_beginning=self.has_seconds,
        )


def parse_cron(text: str) -> CronExpr:
    """Parse and check a cron expression; raises ``RuleError`` saying what is wrong.

    Parsed once per distinct text: schedules sharing an expression share the
    (immutable) result, which keeps the compiled rules of many schedules small.
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
    try:
        probe = croniter(
            " ".join(fields), _PROBE_START, ret_type=datetime, second_at_beginning=len(fields) == 6
        )
        probe.get_next(datetime)
    except CroniterBadDateError:
        raise RuleError(f"bad cron {text!r}: it never matches any date") from None
    except (CroniterError, ValueError, KeyError, TypeError) as exc:
        raise RuleError(f"bad cron {text!r}: {exc}") from None
    return CronExpr(text=stripped, fields=fields, plain=_plain_fields(probe))


def _plain_fields(it: croniter) -> PlainFields | None:
    """croniter's expanded fields when they are plain numbers (no L, W, #), else None."""
    if it.nth_weekday_of_month or it.nearest_weekday:
        return None
    expanded = it.expanded
    if len(expanded) not in (5, 6):
        return None
    for values in expanded:
        if values != ["*"] and not all(type(v) is int for v in values):
            return None

    def every(values: list[Any], lo: int, hi: int) -> tuple[int, ...]:
        if values == ["*"]:
            return tuple(range(lo, hi + 1))
        return tuple(sorted(set(values)))

    def restricted(values: list[Any], mod: int = 0) -> frozenset[int] | None:
        if values == ["*"]:
            return None
        return frozenset(v % mod if mod else v for v in values)

    return PlainFields(
        seconds=every(expanded[5], 0, 59) if len(expanded) == 6 else (0,),
        minutes=every(expanded[0], 0, 59),
        hours=every(expanded[1], 0, 23),
        days=restricted(expanded[2]),
        months=restricted(expanded[3]),
        weekdays=restricted(expanded[4], 7),
    )


@dataclass(frozen=True)
class PlainFields:
    """Expanded cron fields of plain numbers; ``None``: the field is ``*``."""

    seconds: tuple[int, ...]  # ascending
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int] | None  # day of month
    months: frozenset[int] | None
    weekdays: frozenset[int] | None  # cron numbering: Sunday = 0

    def day_matches(self, day: date) -> bool:
        """croniter's rule: both day fields restricted means either one (a union)."""
        days, weekdays = self.days, self.weekdays
        if days is None:
            return weekdays is None or (day.weekday() + 1) % 7 in weekdays
        if weekdays is None:
            return day.day in days
        return day.day in days or (day.weekday() + 1) % 7 in weekdays

    def walls_from(self, start: datetime, horizon: datetime) -> Iterator[datetime]:
        """Matching wall times ``w`` with ``floor(start) <= w <= horizon``, ascending."""
        start = start.replace(microsecond=0)
        day = start.date()
        last_day = horizon.date()
        first = True
        while day <= last_day:
            if self.months is not None and day.month not in self.months:
                day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
                first = False
                continue
            if self.day_matches(day):
                floor = (start.hour, start.minute, start.second) if first else (0, 0, 0)
                for h, m, sec in self._times(floor):
                    wall = datetime(day.year, day.month, day.day, h, m, sec)  # noqa: DTZ001
                    if wall > horizon:
                        return
                    yield wall
            first = False
            day += _ONE_DAY

    def first_from(self, start: datetime, horizon: datetime) -> datetime | None:
        """The first of ``walls_from(start, horizon)``, computed directly (no iterators)."""
        start = start.replace(microsecond=0)
        day = start.date()
        if (self.months is None or day.month in self.months) and self.day_matches(day):
            first = self._first_time(start.hour, start.minute, start.second)
            if first is not None:
                wall = datetime(day.year, day.month, day.day, *first)  # noqa: DTZ001
                return wall if wall <= horizon else None
        last_day = horizon.date()
        day += _ONE_DAY
        while day <= last_day:
            if self.months is not None and day.month not in self.months:
                day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
                continue
            if self.day_matches(day):
                wall = datetime(  # noqa: DTZ001
                    day.year, day.month, day.day, self.hours[0], self.minutes[0], self.seconds[0]
                )
                return wall if wall <= horizon else None
            day += _ONE_DAY
        return None

    def _first_time(self, h0: int, m0: int, s0: int) -> tuple[int, int, int] | None:
        """The first time of day at or after ``h0:m0:s0``, or None."""
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
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

    def _times(self, floor: tuple[int, int, int]) -> Iterator[tuple[int, int, int]]:
        """Times of day at or after ``floor`` (hour, minute, second), ascending."""
        h0, m0, s0 = floor
        hours, minutes, seconds = self.hours, self.minutes, self.seconds
        for h in hours[bisect_left(hours, h0) :]:
            at_h0 = h == h0
            for m in minutes[bisect_left(minutes, m0) :] if at_h0 else minutes:
                if at_h0 and m == m0:
                    for sec in seconds[bisect_left(seconds, s0) :]:
                        yield h, m, sec
                else:
                    for sec in seconds:
                        yield h, m, sec


@dataclass(frozen=True)
class CronWalls:
    """The wall times a cron expression names."""

    expr: CronExpr

    def first_from(self, start: datetime, horizon: datetime) -> datetime | None:
        plain = self.expr.plain_fields
        if plain is not None:
            return plain.first_from(start, horizon)
        return next(iter(self.walls_from(start, horizon)), None)

    def walls_from(self, start: datetime, horizon: datetime) -> Iterator[datetime]:
        plain = self.expr.plain_fields
        if plain is not None:
            yield from plain.walls_from(start, horizon)
            return
        it = self.expr.iterator(start - _ONE_SECOND)
        while True:
            try:
                wall: datetime = it.get_next(datetime)
            except CroniterBadDateError:  # no match within croniter's own horizon
                return
            if wall > horizon:
                return
            yield wall

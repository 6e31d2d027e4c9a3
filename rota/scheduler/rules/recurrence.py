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
before dropping what precedes DTSTART, so the result is the same. Rules with
COUNT are evaluated from their true DTSTART, since COUNT counts from there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from dateutil.rrule import DAILY, HOURLY, MINUTELY, MONTHLY, SECONDLY, WEEKLY, YEARLY, rrulestr
from dateutil.rrule import rrule as DateutilRRule

from rota.scheduler.rules.occurrence import RuleError

FREQ_NAMES = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
# RFC 5545 frequencies, coarsest first (dateutil's numbering): DAILY or coarser
# is fixed-time in the DST rule.
FIXED_TIME_FREQS = frozenset({YEARLY, MONTHLY, WEEKLY, DAILY})
DEFAULT_DTSTART = datetime(1970, 1, 1)  # noqa: DTZ001 - local wall time
DEFAULT_WEEKLY_DTSTART = datetime(1970, 1, 5)  # noqa: DTZ001 - a Monday, local wall time
_DTSTART_VALUE = re.compile(r"^(\d{8})(T\d{6})?$")
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
    freq_name = params.get("FREQ", "").upper()
    if freq_name not in FREQ_NAMES:
        raise RuleError(f"bad rrule {text!r}: FREQ must be one of {', '.join(FREQ_NAMES)}")
    freq = FREQ_NAMES.index(freq_name)
    if params.get("UNTIL", "").upper().endswith("Z"):
        raise RuleError(
            f"bad rrule {text!r}: UNTIL is a local wall time in the schedule's timezone; drop the Z"
        )
    if "COUNT" in params and dtstart is None:
        raise RuleError(
            f"bad rrule {text!r}: COUNT counts from DTSTART; give one "
            "(a DTSTART:YYYYMMDDTHHMMSS line before the RRULE)"
        )
    if dtstart is None:
        dtstart = DEFAULT_WEEKLY_DTSTART if freq == WEEKLY else DEFAULT_DTSTART
    try:
        rule = rrulestr("RRULE:" + body, dtstart=dtstart)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise RuleError(f"bad rrule {text!r}: {exc}") from None
    if not isinstance(rule, DateutilRRule):  # one RRULE line always gives an rrule
        raise RuleError(f"bad rrule {text!r}: give exactly one RRULE")
    interval = int(params.get("INTERVAL", "1"))
    if interval < 1:
        raise RuleError(f"bad rrule {text!r}: INTERVAL must be at least 1")
    return RRuleExpr(
        text=text.strip(),
        rule=rule,
        freq=freq,
        interval=interval,
        dtstart=dtstart,
        has_until="UNTIL" in params,
        has_count="COUNT" in params,
    )


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
        params[key.strip().upper()] = value.strip()
    return params


@dataclass(frozen=True)
class RRuleWalls:
    """The wall times an RRULE names."""

    expr: RRuleExpr

    def first_from(self, start: datetime, horizon: datetime) -> datetime | None:
        return next(iter(self.walls_from(start, horizon)), None)

    def walls_from(self, start: datetime, horizon: datetime) -> Iterator[datetime]:
        expr = self.expr
        if expr.has_count:  # COUNT counts from the true DTSTART
            rule = expr.rule
        elif expr.has_until:
            rule = expr.rule.replace(dtstart=_aligned_dtstart(expr, start))
        else:  # bound dateutil's own search, or a rule that never matches runs to 9999
            rule = expr.rule.replace(dtstart=_aligned_dtstart(expr, start), until=horizon)
        for wall in rule.xafter(start, inc=True):
            if wall > horizon:
                return
            yield wall


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

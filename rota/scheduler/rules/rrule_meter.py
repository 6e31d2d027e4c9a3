"""Bounded work for RRULEs: dateutil's evaluation, metered.

dateutil checks its ``until`` only when a wall time matches, so a rule that
rarely or never matches (``BYMONTH=2;BYMONTHDAY=30``) makes it scan period
after period up to the year 9999. Every evaluation of a rule made by
``metered`` is counted: the days dateutil scans (a year's period counts its
days) and its sub-daily steps; scanning past the horizon ends the search
(``PastHorizon``: nothing there), and more than ``MAX_STEPS`` ends it with
``OverBudget``, which the caller reports as ``RuleTooCostly``. The meter hooks
dateutil's per-period helper (``dateutil.rrule._iterinfo``, replaced when this
module is imported) and its sub-daily stepper; it counts only for rules made
by ``metered``, and no other rrule in the process is metered.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import dateutil.rrule
from dateutil.rrule import MINUTELY, SECONDLY
from dateutil.rrule import rrule as DateutilRRule

from rota.scheduler.rules.occurrence import RuleError

# Work allowed for one search, in steps of about a microsecond and a half:
# each period dateutil builds costs PERIOD_COST plus one per day it filters (a
# year 386, a month 51, a week 27, a day 21), a sub-daily step 1 (plus 2 a call).
# So a century of monthly periods is about 61,000; of daily ones, 767,000.
MAX_STEPS = 200_000
PERIOD_COST = 20


class RuleTooCostly(RuleError):
    """Finding a rule's next occurrence would take more than ``MAX_STEPS`` steps."""


class PastHorizon(Exception):
    """The search went past its horizon: nothing more is wanted."""


class OverBudget(Exception):
    """The search spent its ``MAX_STEPS``."""


class _Meter:
    """The work left to one search, and the month past which nothing is wanted."""

    __slots__ = ("last_month", "steps_left")

    def __init__(self, horizon: datetime) -> None:
        self.last_month = (horizon.year, horizon.month)
        self.steps_left = MAX_STEPS

    def spend(self, cost: int, year: int | None = None, month: int | None = None) -> None:
        if year is not None and month is not None and (year, month) > self.last_month:
            raise PastHorizon
        self.steps_left -= cost
        if self.steps_left < 0:
            raise OverBudget


class _MeteredRRule(DateutilRRule):
    """An rrule whose sub-daily stepper counts its steps (see the module docstring)."""

    _rota_meter: _Meter

    def _rrule__mod_distance(self, value: int, byxxx: Any, base: int) -> Any:
        carried, reached = _BASE_MOD_DISTANCE(self, value, byxxx, base)
        step = self._interval  # type: ignore[attr-defined]  # dateutil's own field
        walked = base if reached is None else (carried * base + reached - value) // step
        self._rota_meter.spend(2 + walked)
        return carried, reached


_BASE_MOD_DISTANCE = DateutilRRule._rrule__mod_distance  # type: ignore[attr-defined]  # private, metered
_BaseIterinfo: Any = dateutil.rrule._iterinfo  # private; metered


class _MeteredIterinfo(_BaseIterinfo):  # type: ignore[misc]  # dateutil's helper has no types
    """dateutil's per-period helper; each period's day set is counted for metered rules."""

    def _spend(self, cost: int, year: int, month: int) -> None:
        meter = getattr(self.rrule, "_rota_meter", None)
        if meter is not None:
            meter.spend(cost, year, month)

    def ydayset(self, year: int, month: int, day: int) -> Any:
        self._spend(PERIOD_COST + 366, year, month)
        return super().ydayset(year, month, day)

    def mdayset(self, year: int, month: int, day: int) -> Any:
        self._spend(PERIOD_COST + 31, year, month)
        return super().mdayset(year, month, day)

    def wdayset(self, year: int, month: int, day: int) -> Any:
        self._spend(PERIOD_COST + 7, year, month)
        return super().wdayset(year, month, day)

    def ddayset(self, year: int, month: int, day: int) -> Any:
        self._spend(PERIOD_COST + 1, year, month)
        return super().ddayset(year, month, day)


setattr(dateutil.rrule, "_iterinfo", _MeteredIterinfo)  # noqa: B010 - see the docstring


def metered(rule: DateutilRRule, horizon: datetime, **changes: Any) -> _MeteredRRule:
    """A copy of ``rule`` (with ``changes``) whose evaluation is metered up to ``horizon``."""
    copy = rule.replace(**changes)
    copy.__class__ = _MeteredRRule
    assert isinstance(copy, _MeteredRRule)
    copy._rota_meter = _Meter(horizon)
    return copy


def countable(rule: DateutilRRule, freq: int) -> DateutilRRule:
    """The same rule with the sub-daily unit listed when dateutil would walk it unmetered.

    ``FREQ=SECONDLY;BYHOUR=3`` makes dateutil step second by second through
    the other 23 hours without calling anything the meter sees; listing every
    second (``BYSECOND=0,...,59``, the same set) makes it step through the
    metered stepper instead. The same for minutes of a MINUTELY rule.
    """
    if freq == SECONDLY and rule._bysecond is None and (rule._byhour or rule._byminute):  # type: ignore[attr-defined]
        return rule.replace(bysecond=tuple(range(60)))
    if freq == MINUTELY and rule._byminute is None and rule._byhour:  # type: ignore[attr-defined]
        return rule.replace(byminute=tuple(range(60)))
    return rule

"""Where a zone's UTC offset changes: found once per zone and year, then looked up.

Offsets change at most a few times a year and every offset lasts far longer
than an hour, so sampling a zone at every whole Unix hour sees every change; a
binary search over seconds then finds each change exactly (tz transitions fall
on whole seconds). A year's changes cost about 9,000 samples once; after that,
"how far does the offset hold" is a bisection (``steady_until``).

``offset_spread`` (largest minus smallest offset over a window, in hourly
samples) answers from the same samples: 0 straight from the table when no
change falls between its first and last sample, else from the samples.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

_HOUR_S = 3600
_ONE_SECOND = timedelta(seconds=1)
_NAIVE_EPOCH = datetime(1970, 1, 1)  # noqa: DTZ001 - wall times are naive
_LAST_YEAR = 9998  # the year after it is not a datetime: its table cannot be made


def steady_until(zone: ZoneInfo, after: datetime, within: timedelta) -> datetime | None:
    """The last wall time that maps to one instant with ``after``'s offset, or None.

    That is the second before the wall time where the zone's first offset
    change after ``after`` begins its gap or fold. None when the offset holds
    from ``after`` to ``after + within``. Raises ``LookupError`` past the year
    9998, where there is no table: the caller must not assume the offset holds.
    """
    ts = math.floor(after.timestamp())  # whole seconds: changes fall on them
    end = ts + int(within.total_seconds())
    year = after.astimezone(UTC).year
    while True:
        if year > _LAST_YEAR:
            raise LookupError(year)
        changes, limits = _changes_in_year(zone, year)
        i = bisect_right(changes, ts)
        if i < len(changes):
            return limits[i] if changes[i] <= end else None
        year += 1
        if _year_start(year) >= end:
            return None


def offset_spread(zone: ZoneInfo, start: datetime, end: datetime) -> timedelta:
    """Largest minus smallest UTC offset of ``zone`` between two instants (hourly samples).

    The window is widened to whole hours (a wider window can only make the
    spread larger, which the callers treat as a wider search) so that the
    answer can be kept: every schedule of a zone asks about the same hours.
    """
    first = int(start.timestamp()) // _HOUR_S
    last = -(-int(end.timestamp()) // _HOUR_S)  # ceil
    if _no_change_between_hours(zone, first, last):
        return timedelta(0)
    return _spread_of_hours(zone, first, last)


def _no_change_between_hours(zone: ZoneInfo, first_hour: int, last_hour: int) -> bool:
    """Whether the samples at ``first_hour`` .. ``last_hour`` (Unix hours) all agree.

    A change recorded in the table lies after one sample and at or before the
    next, so the samples agree exactly when no change is in (first, last].
    """
    lo, hi = first_hour * _HOUR_S, last_hour * _HOUR_S
    year = datetime.fromtimestamp(lo, UTC).year
    while True:
        if year > _LAST_YEAR:
            return False  # no table: let the samples answer
        changes, _ = _changes_in_year(zone, year)
        i = bisect_right(changes, lo)
        if i < len(changes):
            return changes[i] > hi
        year += 1
        if _year_start(year) >= hi:
            return True


@lru_cache(maxsize=4096)
def _spread_of_hours(zone: ZoneInfo, first_hour: int, last_hour: int) -> timedelta:
    """The spread over the whole hours ``first_hour`` .. ``last_hour`` (Unix hours), inclusive."""
    offsets: set[timedelta] = set()
    for hour in range(first_hour, last_hour + 1):
        offsets.add(_offset(hour * _HOUR_S, zone))
    return max(offsets) - min(offsets)


@lru_cache(maxsize=4096)
def _changes_in_year(zone: ZoneInfo, year: int) -> tuple[tuple[int, ...], tuple[datetime, ...]]:
    """Where the offset changes after the UTC year's start and up to the next year's.

    The instants (Unix seconds, ascending), and for each the last wall time
    before its gap (the old offset's wall time of the change) or its fold (the
    new offset's), less a second. The samples are the whole Unix hours from the
    year's start to the next year's; each change found between two samples is
    searched down to its second.
    """
    start, end = _year_start(year), _year_start(year + 1)
    changes: list[int] = []
    limits: list[datetime] = []
    before = _offset(start, zone)
    for sample in range(start + _HOUR_S, end + 1, _HOUR_S):
        offset = _offset(sample, zone)
        if offset != before:
            changed = _first_second_with(offset, sample - _HOUR_S, sample, zone)
            changes.append(changed)
            wall = _NAIVE_EPOCH + timedelta(seconds=changed) + min(before, offset)
            limits.append(wall - _ONE_SECOND)
            before = offset
    return tuple(changes), tuple(limits)


def _first_second_with(offset: timedelta, lo: int, hi: int, zone: ZoneInfo) -> int:
    """The first second in (lo, hi] with ``offset``, which ``hi`` has and ``lo`` has not."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(mid, zone) == offset:
            hi = mid
        else:
            lo = mid
    return hi


@lru_cache(maxsize=1024)
def _year_start(year: int) -> int:
    return int(datetime(year, 1, 1, tzinfo=UTC).timestamp())


def _offset(timestamp: int, zone: ZoneInfo) -> timedelta:
    offset = datetime.fromtimestamp(timestamp, zone).utcoffset()
    assert offset is not None
    return offset

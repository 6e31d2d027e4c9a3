"""Calendar rules: wall times from a source (cron, RRULE), resolved by the DST policy.

``CalendarRule.next_after`` never trusts the order of wall times to be the order
of instants: around a fold the second 02:00 (01:00Z in Berlin) comes after the
first 02:45 (00:45Z). So it reads wall times from a little before the wall time
of ``after`` (as far back as the zone's offset can drop nearby), resolves each
one, keeps the smallest instant strictly later than ``after``, and stops once no
later wall time can resolve to anything smaller. Every result is strictly later
than ``after`` by construction; fed back its own instant, it always progresses.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Protocol
from zoneinfo import ZoneInfo

from rota.core.timefmt import as_utc
from rota.scheduler.rules.occurrence import Occurrence
from rota.scheduler.rules.walltime import Candidate, WallPolicy, merge, resolve_wall

# Give up looking for the next occurrence this far past `after` (in wall time):
# a rule whose every wall time is excluded or falls in a gap is exhausted.
# `rota check` refuses a rule that cannot fire within this horizon.
SEARCH_HORIZON = timedelta(days=36_525)  # 100 years
_DAY = timedelta(days=1)
_SAMPLE_STEP = timedelta(hours=1)
_SECOND = timedelta(seconds=1)
_HOUR_S = 3600


class WallSource(Protocol):
    """Naive local wall times named by a rule, ascending."""

    def walls_from(self, start: datetime, horizon: datetime) -> Iterator[datetime]:
        """Wall times ``w`` with ``start <= w <= horizon``, ascending, each once."""
        ...

    def first_from(self, start: datetime, horizon: datetime) -> datetime | None:
        """The first of ``walls_from(start, horizon)``, or None."""
        ...


@dataclass(frozen=True)
class CalendarRule:
    """A rule evaluated in local wall time of ``zone``, resolved by ``policy``."""

    walls: WallSource
    zone: ZoneInfo
    policy: WallPolicy
    exclude_dates: frozenset[date] = frozenset()

    def next_after(self, after: datetime) -> Occurrence | None:
        after = as_utc(after)
        wall_after = after.astimezone(self.zone).replace(tzinfo=None, fold=0)
        # An instant later than `after` can have an earlier wall time only by as
        # much as the offset drops after `after`.
        spread = offset_spread(self.zone, after, after + 2 * _DAY)
        if spread:
            start = (wall_after - spread).replace(microsecond=0)
        else:
            # The offset holds from `after` on: a wall time not after `after`'s
            # own resolves to an instant not after `after`. Wall times are whole
            # seconds, so the first one that can be later is the next second.
            start = wall_after.replace(microsecond=0) + _SECOND
            steady = self._steady_next(after, start, wall_after + 2 * _DAY)
            if steady is not None:
                return steady
        horizon = start + SEARCH_HORIZON
        best: list[Candidate] = []
        stop_at: datetime | None = None
        walls = self.walls.walls_from(start, horizon)
        while (wall := next(walls, None)) is not None:
            if stop_at is not None and wall > stop_at:
                break
            if wall.date() in self.exclude_dates:
                next_day = datetime.combine(wall.date() + _DAY, time())
                walls = self.walls.walls_from(next_day, horizon)
                continue
            for cand in resolve_wall(wall, self.zone, self.policy):
                if cand.instant <= after:
                    continue
                if not best or cand.instant < best[0].instant:
                    best = [cand]
                elif cand.instant == best[0].instant:
                    best.append(cand)
            if best and stop_at is None:
                # Later wall times resolve to instants at least this spread past
                # the best one's wall time; until then one could still be smaller,
                # or equal (gap wall times that collapse onto one transition).
                near = best[0].instant
                stop_at = wall + offset_spread(self.zone, near - _DAY, near + _DAY)
            if stop_at is not None and wall >= stop_at:
                break
        return merge(best, self.zone) if best else None

    def _steady_next(self, after: datetime, start: datetime, until: datetime) -> Occurrence | None:
        """The common case, when the offset holds over the two days after ``after``.

        Then wall times map to instants one to one and in order over those two
        days, so the first wall time from ``start`` (up to ``until``, two days
        on) is the answer if it exists exactly once and is not excluded. None:
        take the general walk.
        """
        wall = self.walls.first_from(start, until)
        if wall is None or wall.date() in self.exclude_dates:
            return None
        early = wall.replace(tzinfo=self.zone, fold=0)
        if early.utcoffset() != wall.replace(tzinfo=self.zone, fold=1).utcoffset():
            return None  # in a gap or a fold: the policy decides
        instant = early.astimezone(UTC)
        if instant <= after:
            return None
        return Occurrence(instant=instant, local=instant.astimezone(self.zone), note=None)


def offset_spread(zone: ZoneInfo, start: datetime, end: datetime) -> timedelta:
    """Largest minus smallest UTC offset of ``zone`` between two instants (hourly samples).

    Offsets change at most a few times a year and every change lasts far longer
    than an hour, so hourly samples see every offset in the window. The window
    is widened to whole hours (a wider window can only make the spread larger,
    which the callers treat as a wider search) so that the answer can be kept:
    every schedule of a zone asks about the same hours.
    """
    first = int(start.timestamp()) // _HOUR_S
    last = -(-int(end.timestamp()) // _HOUR_S)  # ceil
    return _spread_of_hours(zone, first, last)


@lru_cache(maxsize=4096)
def _spread_of_hours(zone: ZoneInfo, first_hour: int, last_hour: int) -> timedelta:
    """The spread over the whole hours ``first_hour`` .. ``last_hour`` (Unix hours), inclusive."""
    offsets: set[timedelta] = set()
    for hour in range(first_hour, last_hour + 1):
        offset = datetime.fromtimestamp(hour * _HOUR_S, zone).utcoffset()
        assert offset is not None
        offsets.add(offset)
    return max(offsets) - min(offsets)

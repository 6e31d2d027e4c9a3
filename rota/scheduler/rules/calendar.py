"""Calendar rules: wall times from a source (cron, RRULE), resolved by the DST policy.

``CalendarRule.next_after`` never trusts the order of wall times to be the order
of instants: around a fold the second 02:00 (01:00Z in Berlin) comes after the
first 02:45 (00:45Z). So it reads wall times from a little before the wall time
of ``after`` (as far back as the zone's offset can drop nearby), resolves each
one, keeps the smallest instant strictly later than ``after``, and stops once no
later wall time can resolve to anything smaller. Every result is strictly later
than ``after`` by construction; fed back its own instant, it always progresses.

Most calls never need that walk: until the zone's offset next changes, wall
times map to instants one to one, in order, with the offset ``after`` has. So
the first wall time after ``after``'s own is the answer when it comes before
the wall time where that change's gap or fold begins (``offsets.steady_until``,
from a table of each zone's changes made once per year) and is not itself a
repeated wall time. That costs one table lookup, the wall source's
``first_from`` and one offset, where the walk resolves wall times one by one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from rota.core.timefmt import as_utc
from rota.scheduler.rules.occurrence import Occurrence
from rota.scheduler.rules.offsets import offset_spread, steady_until
from rota.scheduler.rules.walltime import Candidate, WallPolicy, merge, resolve_wall

# Give up looking for the next occurrence this far past `after` (in wall time):
# a rule whose every wall time is excluded or falls in a gap is exhausted.
# `rota check` refuses a rule that cannot fire within this horizon.
SEARCH_HORIZON = timedelta(days=36_525)  # 100 years
_DAY = timedelta(days=1)
_SECOND = timedelta(seconds=1)
# How far ahead the common case looks for the next wall time (see _before_next_change).
_STEADY_SPAN = timedelta(days=400)


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
        local_after = after.astimezone(self.zone)
        wall_after = local_after.replace(tzinfo=None, fold=0)
        steady = self._before_next_change(after, local_after, wall_after)
        if steady is not None:
            return steady
        # An instant later than `after` can have an earlier wall time only by as
        # much as the offset drops after `after`.
        spread = offset_spread(self.zone, after, after + 2 * _DAY)
        if spread:
            start = (wall_after - spread).replace(microsecond=0)
        else:
            # A wall time not after `after`'s own resolves to an instant not
            # after `after`; wall times are whole seconds.
            start = wall_after.replace(microsecond=0) + _SECOND
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

    def _before_next_change(
        self, after: datetime, local_after: datetime, wall_after: datetime
    ) -> Occurrence | None:
        """The common case: the next wall time comes before the zone's offset next changes.

        Until the next change (or for ``_STEADY_SPAN`` if there is none), wall
        times map to instants one to one and in order with ``after``'s offset;
        only from the wall time where that change's gap or fold starts can
        policy or repetition intervene. So the first wall time after ``after``'s
        own is the answer if it comes before that point, is not excluded and is
        not repeated (``after`` may be in the second pass of the last fold).
        None: take the general walk.
        """
        try:
            limit = steady_until(self.zone, after, _STEADY_SPAN)
        except LookupError:  # near the year 9999: no table, no shortcut
            return None
        if limit is None:
            limit = _add_or_last(wall_after, _STEADY_SPAN)
        start = wall_after.replace(microsecond=0) + _SECOND
        if start > limit:
            return None
        wall = self.walls.first_from(start, limit)
        if wall is None or wall.date() in self.exclude_dates:
            return None
        offset = local_after.utcoffset()
        local = wall.replace(tzinfo=self.zone)
        if offset is None or local.utcoffset() != offset:
            # Repeated: `after` is in the second pass of a fold, and the wall's
            # first instant has the offset before it. The policy decides.
            return None
        instant = (wall - offset).replace(tzinfo=UTC)
        return Occurrence(instant=instant, local=local, note=None)


def _add_or_last(wall: datetime, span: timedelta) -> datetime:
    """``wall + span``, or the last wall time there is when that is past the year 9999."""
    try:
        return wall + span
    except OverflowError:
        return datetime.max  # noqa: DTZ901 - a naive wall time

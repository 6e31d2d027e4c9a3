"""Walking a rule over a window of instants.

``iter_between(rule, start, end)`` yields occurrences with ``start < instant <= end``:
the scheduler's tick, "everything after the last instant handled, up to now".
``iter_range(rule, start, stop)`` yields ``start <= instant < stop``: a backfill of
``[from, to)``. Both include skipped occurrences (``Occurrence.skipped``), in
order, each instant once.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from rota.core.timefmt import as_utc
from rota.scheduler.rules.occurrence import Occurrence, Rule

_TICK = timedelta(microseconds=1)


def iter_between(rule: Rule, start: datetime, end: datetime) -> Iterator[Occurrence]:
    """Occurrences with ``start < instant <= end``, ascending."""
    end = as_utc(end)
    occ = rule.next_after(start)
    while occ is not None and occ.instant <= end:
        yield occ
        occ = rule.next_after(occ.instant)


def iter_range(rule: Rule, start: datetime, stop: datetime) -> Iterator[Occurrence]:
    """Occurrences with ``start <= instant < stop``, ascending (backfill's ``[from, to)``)."""
    # Instants have microsecond resolution: "after start - 1us" is "at or after start".
    stop = as_utc(stop)
    for occ in iter_between(rule, as_utc(start) - _TICK, stop):
        if occ.instant >= stop:
            return
        yield occ

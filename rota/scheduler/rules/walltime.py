"""Wall times to instants: the DST rule, precisely.

Calendar rules (cron and RRULE) name wall-clock times in the schedule's zone.
Each wall time is turned into instants here, and only here. A wall time is

* *normal*: it exists exactly once, one instant;
* in a *gap* (spring forward: Berlin 2026-03-29 02:00-02:59 does not exist);
* in a *fold* (fall back: Berlin 2026-10-25 02:00-02:59 happens twice, first
  at +02:00, then at +01:00).

What happens in a gap or a fold is the rule's ``WallPolicy``:

``nonexistent: shift``
    The wall time runs at the transition instant itself, the first instant
    after the gap (02:30 -> 03:00 CEST = 01:00Z). Every gap wall time of one
    gap maps to that same instant, so several of them (``*/15`` gives 02:00,
    02:15, 02:30, 02:45) become one run; if the rule also names the wall time
    right after the gap (03:00) that is the same instant and still one run.
``nonexistent: skip``
    The wall time does not run. With ``report_skipped`` (an explicit
    ``dst: {nonexistent: skip}``) it is reported as a skipped occurrence at the
    transition instant, so the scheduler can count it; without (the real-time
    default of a non-fixed rule) it simply does not exist.
``ambiguous: first`` / ``last`` / ``both``
    A repeated wall time runs at the earlier instant (fold=0), the later one
    (fold=1), or both.

Which policy a rule gets when the file gives no ``dst:`` block is decided in
``scheduler.rules.policy``: fixed-time rules shift and take the first, other
rules follow real time (gap wall times do not exist, repeated ones run twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from zoneinfo import ZoneInfo

from rota.core.config import Ambiguous, Nonexistent
from rota.scheduler.rules.occurrence import Occurrence

# Notes list every wall time up to this many; beyond, the first and the last.
_NOTE_LIST_LIMIT = 5


@dataclass(frozen=True)
class WallPolicy:
    """How gap and fold wall times resolve; see the module docstring."""

    nonexistent: Nonexistent
    ambiguous: Ambiguous
    report_skipped: bool


class WallKind(Enum):
    NORMAL = "normal"
    SHIFTED = "shifted"
    SKIPPED = "skipped"
    FIRST = "first"
    SECOND = "second"


@dataclass(frozen=True)
class Candidate:
    """One instant a wall time resolved to, and how it got there."""

    instant: datetime  # aware UTC
    wall: datetime  # naive local wall time the rule named
    kind: WallKind


def resolve_wall(wall: datetime, zone: ZoneInfo, policy: WallPolicy) -> list[Candidate]:
    """The instants (zero, one or two) at which the naive ``wall`` time runs."""
    early = wall.replace(tzinfo=zone, fold=0)
    late = wall.replace(tzinfo=zone, fold=1)
    early_offset, late_offset = early.utcoffset(), late.utcoffset()
    if early_offset == late_offset:
        return [Candidate(early.astimezone(UTC), wall, WallKind.NORMAL)]
    assert early_offset is not None and late_offset is not None
    if early_offset > late_offset:  # a fold: fold=0 is the earlier of the two instants
        first = Candidate(early.astimezone(UTC), wall, WallKind.FIRST)
        second = Candidate(late.astimezone(UTC), wall, WallKind.SECOND)
        if policy.ambiguous is Ambiguous.FIRST:
            return [first]
        if policy.ambiguous is Ambiguous.LAST:
            return [second]
        return [first, second]
    # A gap: fold=0 reads the wall with the offset before the transition (the
    # later instant), fold=1 with the offset after it (the earlier instant).
    transition = gap_transition(late.astimezone(UTC), early.astimezone(UTC), zone)
    if policy.nonexistent is Nonexistent.SHIFT:
        return [Candidate(transition, wall, WallKind.SHIFTED)]
    if policy.report_skipped:
        return [Candidate(transition, wall, WallKind.SKIPPED)]
    return []


def gap_transition(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first instant with the new offset, searched between two UTC instants.

    ``before`` carries the old offset and ``after`` the new one; tz transitions
    fall on whole seconds, so a binary search over seconds finds it exactly.
    """
    lo, hi = int(before.timestamp()), int(after.timestamp())
    old = _offset(lo, zone)
    if _offset(hi, zone) == old:  # not a gap after all; never expected
        return after
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset(mid, zone) == old:
            lo = mid
        else:
            hi = mid
    return datetime.fromtimestamp(hi, UTC)


def _offset(timestamp: int, zone: ZoneInfo) -> timedelta | None:
    return datetime.fromtimestamp(timestamp, zone).utcoffset()


def merge(candidates: Sequence[Candidate], zone: ZoneInfo) -> Occurrence:
    """One occurrence from every candidate that resolved to the same instant.

    Only gap wall times share an instant (they all land on the transition): the
    result runs if any of them runs, and its note names the wall times involved.
    """
    instant = candidates[0].instant
    if len(candidates) == 1 and candidates[0].kind is WallKind.NORMAL:  # nothing to say
        return Occurrence(instant=instant, local=instant.astimezone(zone), note=None)
    by_kind: dict[WallKind, list[datetime]] = {}
    for c in candidates:
        by_kind.setdefault(c.kind, []).append(c.wall)
    notes: list[str] = []
    if walls := by_kind.get(WallKind.SHIFTED):
        if len(walls) == 1:
            notes.append(f"shifted from {_clock(walls[0])} by the DST gap")
        else:
            notes.append(f"shifted from {_clock_list(walls)} by the DST gap (run once)")
    if walls := by_kind.get(WallKind.SKIPPED):
        verb = "does" if len(walls) == 1 else "do"
        notes.append(f"skipped: {_clock_list(walls)} {verb} not exist (DST gap)")
    if walls := by_kind.get(WallKind.FIRST):
        notes.append(f"first of the repeated {_clock(walls[0])}")
    if walls := by_kind.get(WallKind.SECOND):
        notes.append(f"second of the repeated {_clock(walls[0])}")
    skipped = all(c.kind is WallKind.SKIPPED for c in candidates)
    return Occurrence(
        instant=instant,
        local=instant.astimezone(zone),
        note="; ".join(notes) or None,
        skipped=skipped,
    )


def _clock(wall: datetime) -> str:
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")


def _clock_list(walls: Sequence[datetime]) -> str:
    if len(walls) <= _NOTE_LIST_LIMIT:
        return ", ".join(_clock(w) for w in walls)
    return f"{_clock(walls[0])} .. {_clock(walls[-1])} ({len(walls)} wall times)"
